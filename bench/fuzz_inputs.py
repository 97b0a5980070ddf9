"""Fuzz every input format xla-sentinel reads, longer than the test suite does.

For each kind (tests/inputs/filefuzz.py): cases tried, rejected with a clear error,
accepted, silently accepted (must be 0), worker aborts (contained: the campaign reports
the file and goes on), crashes (must be 0), hangs (must be 0).

    .venv/bin/python bench/fuzz_inputs.py [--cases N] [--seed S] [--timeout S]

Exit 1 when any crash, hang or silent acceptance was seen; the first few are printed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from inputs import filefuzz  # noqa: E402
from xla_sentinel.worker.client import Worker  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200, help="cases per input kind")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case before it is a hang")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    bad: list[str] = []
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        seeds = filefuzz.write_seeds(root / "seeds")
        worker = Worker("fuzz-inputs", log_path=root / "worker.log")
        try:
            for kind in filefuzz.KINDS:
                counts: Counter = Counter()
                t0 = time.monotonic()
                for i in range(args.cases):
                    case = filefuzz.make_case(kind, seeds, root / "work" / kind, rng)
                    outcome, message = filefuzz.read(case, worker, args.timeout)
                    counts[outcome] += 1
                    if outcome in ("crash", "hang", "silent", "abort") and len(bad) < 20:
                        bad.append(f"{kind} #{i} {case.mutation}: {outcome}: {message.splitlines()[0] if message else ''}")
                rows.append((kind, args.cases, counts, time.monotonic() - t0))
        finally:
            worker.close()
    print(f"{'kind':<18}{'tried':>7}{'rejected':>10}{'accepted':>10}{'silent':>8}{'aborts':>8}{'crashes':>9}"
          f"{'hangs':>7}{'s':>7}")
    for kind, tried, c, secs in rows:
        print(f"{kind:<18}{tried:>7}{c['rejected']:>10}{c['accepted']:>10}{c['silent']:>8}{c['abort']:>8}"
              f"{c['crash']:>9}{c['hang']:>7}{secs:>7.1f}")
    for line in bad:
        print(line)
    return 1 if any(line.split(": ")[1] in ("crash", "hang", "silent") for line in bad) else 0


if __name__ == "__main__":
    sys.exit(main())
