"""The pipeline on real workloads: replay each recorded trace of the real-bug corpus
(tests/bisect/data/corpus/, recorded by tests/bisect/corpus.py with `xla-sentinel record`)
in a campaign of its own with bisection on, as `xla-sentinel replay` does, and print per
trace whether the finding its table names was flagged, and whether its bisection named
the right culprit op, the right cure and the known bug; then the seconds the campaign
took (replay, judging and every bisection).

    python bench/replay_pipeline.py [--traces a,b] [--default-references] [--out DIR] [--json FILE]

The table (tests/bisect/data/corpus/corpus.yaml) gives per trace the targets, the
verdict on one target, the op, the cure (null: none exists) and the known bug (null:
no entry). "cure" counts right where the bisector names the table's cure (one of them,
for a list), or names none where the table has none; "known" likewise. A trace's
`references` in the table replace the campaign's default references, unless
--default-references (no trace names any since issue 36: every one is replayed under
the defaults); a trace's `inject` (attention_probs: an invariant no real bug breaks) is
the injected fault of xla/faults/ it is replayed under, always.

Figures (docs/detection.md, "Real traces through the pipeline"): with default
references, 10 traces, flagged 6/10, op 7/10, cure 7/10, known 7/10 on the tree before
issue 36's last steps; after, see the doc.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "bisect"))
import corpus  # noqa: E402  (the table and the replayer the corpus test uses)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", help="comma-separated names (default: the whole corpus)")
    parser.add_argument("--default-references", action="store_true",
                        help="the campaign's default references for every trace")
    parser.add_argument("--out", type=Path, help="keep the campaigns here (default: a temporary folder)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = parser.parse_args()
    table = corpus.table()
    names = args.traces.split(",") if args.traces else list(table)
    out = args.out or Path(tempfile.mkdtemp(prefix="replay-pipeline-"))
    rows = []
    yes = {True: "yes", False: "no"}
    print(f"{'trace':18} {'flagged':8} {'op':4} {'cure':5} {'known':6} {'s':>6}  culprit / cure / known bug")
    for name in names:
        row = corpus.replay(name, table[name], out / name, default_references=args.default_references)
        rows.append(row)
        print(f"{name:18} {yes[row['flagged']]:8} {yes[row['op_ok']]:4} {yes[row['cure_ok']]:5} "
              f"{yes[row['known_ok']]:6} {row['seconds']:6.1f}  {row['culprit_op']} / {row['culprit_pass']} / "
              f"{row['known_bug']} ({row['status']}; {', '.join(row['findings'])})", flush=True)
    n = len(rows)
    print(f"flagged {sum(r['flagged'] for r in rows)}/{n}, op {sum(r['op_ok'] for r in rows)}/{n}, "
          f"cure {sum(r['cure_ok'] for r in rows)}/{n}, known {sum(r['known_ok'] for r in rows)}/{n}; "
          f"{sum(r['seconds'] for r in rows) / max(n, 1):.1f} s per trace")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
