"""Which releases take this jaxlib's modules, and why not (docs/versions.md, "Crossing").

    .venv/bin/python tests/versions/crossing.py --versions 0.10.1 0.9.2 ... -- TRACE_FOLDER...

For each release with an environment (`make version-envs`) and each trace folder (module
and inputs, as `make workload-traces` writes them): serialize the module as a VHLO portable
artifact at the StableHLO version that release reads (a worker of the current jaxlib),
then deserialize, compile and run it there (a worker under that release's interpreter),
and compare with the current jaxlib's outputs. Prints one line per release and the first
reason each module failed. Not a test (it needs the environments); its figures are in
docs/versions.md.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from xla_sentinel.core import versions
from xla_sentinel.core.program import Program
from xla_sentinel.worker.client import Worker, WorkerDied, WorkerHung
from xla_sentinel.worker.protocol import RequestFailed, Run, ToPortable, WhichVersions


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--versions", nargs="+", required=True)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("traces", nargs="+", type=Path)
    args = p.parse_args(argv)
    programs = [(t.parent.name or t.name, Program.load(t)) for t in args.traces]
    current = Worker("crossing-current")
    try:
        mine = {name: current.call(Run(prog.module, prog.inputs, {}), args.timeout).outputs
                for name, prog in programs}
        for v in args.versions:
            env = versions.environment(v)
            worker = Worker(f"crossing-{v}", python=env.python)
            outcome: Counter[str] = Counter()
            why: dict[str, str] = {}
            try:
                info = worker.call(WhichVersions(), args.timeout)
                for name, prog in programs:
                    try:
                        art = current.call(ToPortable(prog.module, info.stablehlo_current), args.timeout)
                    except RequestFailed as e:
                        outcome["not_serializable"] += 1
                        why.setdefault(name, e.error)
                        continue
                    try:
                        outs = worker.call(Run(art.data, prog.inputs, {}), args.timeout).outputs
                    except RequestFailed as e:
                        kind = "not_readable" if e.error.startswith("NotPortable:") else "compile_error"
                        outcome[kind] += 1
                        why.setdefault(name, e.error)
                        continue
                    except (WorkerDied, WorkerHung) as e:
                        outcome["crash"] += 1
                        why.setdefault(name, f"{e} {getattr(e, 'log_tail', '')[-300:]}")
                        continue
                    same = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(outs, mine[name], strict=True))
                    outcome["bitwise_equal" if same else "ran_differs"] += 1
            finally:
                worker.close()
            print(f"jaxlib {v} (StableHLO {info.stablehlo_current}): "
                  + ", ".join(f"{k} {n}" for k, n in sorted(outcome.items())))
            for name, reason in why.items():
                print(f"  {name}: {' '.join(reason.split())[:400]}")
            sys.stdout.flush()
    finally:
        current.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
