"""Stage 2b, shrink: the smallest shape on which the reduced case still fails.

Only for elementwise cases (every value the kept ops read or write has one shape, no
regions): there a box of the inputs gives the same box of the outputs, so a case is
shrunk by slicing inputs and float64 expectations and rewriting the one shape in the
module text. Each dimension is halved towards the worst element (for a crash, towards
the origin) while the case fails deterministically.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from xla_sentinel.bisect.context import Context
from xla_sentinel.bisect.lab import Case
from xla_sentinel.core.model import Verdict

NAME = "shrink"


def _common_shape(ctx: Context, case: Case) -> list[int] | None:
    shapes: set[tuple[int, ...]] = set()
    for i in case.ops:
        op = ctx.ops[i]
        if op["regions"]:
            return None
        shapes.update(tuple(ctx.shape(v) or ()) for v in op["operands"])
        shapes.update(tuple(r["shape"] or ()) for r in op["results"])
    if len(shapes) != 1:
        return None
    (shape,) = shapes
    return list(shape) if shape else None


def _boxed(case: Case, old: list[int], box: list[tuple[int, int]]) -> Case:
    sl = tuple(slice(a, b) for a, b in box)
    new = [b - a for a, b in box]
    text = case.module.replace(f"tensor<{'x'.join(map(str, old))}x",
                               f"tensor<{'x'.join(map(str, new))}x")
    return replace(case, module=text, inputs=[x[sl] for x in case.inputs],
                   expected=[y[sl] for y in case.expected])


def run(ctx: Context) -> dict[str, Any]:
    case = ctx.reduced
    assert case is not None
    if ctx.verdict is Verdict.HANG:
        # Every trial that still hangs waits out the probe timeout, twice: not worth it.
        return {"skipped": "a hang (each trial would wait out the probe timeout)"}
    shape = _common_shape(ctx, case)
    if shape is None:
        return {"skipped": "not an elementwise case of one shape"}
    check = ctx.check(case)
    # A compiler failure has no worst element: shrink towards the origin.
    where = [0] * len(shape) if ctx.compiler_failure else check.evidence.get("where")
    if where is None and check.evidence.get("judged_by") == "invariant" and check.evidence.get("violations"):
        # An elementwise invariant (range, sign, finite) names its worst element.
        where = check.evidence["violations"][0].get("index")
    if not check.fails or where is None or len(where) != len(shape):
        return {"skipped": "no single worst element to shrink towards"}
    box = [(0, d) for d in shape]
    tests = 0
    progress = True
    while progress:
        progress = False
        for d, (a, b) in enumerate(box):
            if b - a < 2:
                continue
            mid = (a + b) // 2
            half = (a, mid) if where[d] < mid else (mid, b)
            trial_box = [*box[:d], half, *box[d + 1:]]
            trial = _boxed(case, shape, trial_box)
            tests += 1
            result = ctx.check(trial, repeat=True)
            if result.fails and result.deterministic:
                box, progress = trial_box, True
    final = _boxed(case, shape, box)
    ctx.reduced = final
    return {"shape_before": shape, "shape_after": [b - a for a, b in box],
            "box": [list(x) for x in box], "tests": tests}
