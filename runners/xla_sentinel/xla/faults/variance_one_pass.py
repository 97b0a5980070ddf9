"""Injected fault: a two-pass variance reassociated into one pass.

Imitates a simplifier that reorders the reduction `sum((x - mean)^2)` into
`sum(x * x) - n * mean^2`, exact in real arithmetic (the textbook one-pass formula), the
class of rewrites that move a subtraction out of a reduction: in floating point the two
large terms cancel, so on rows whose mean is large against their spread the variance loses
its digits and can come out negative. A layer norm's rsqrt then gives NaN or a huge scale
from finite inputs: its rows are no longer normalized, though rows with a small mean are
right to rounding (docs/detection.md, "Invariants").

Fires when: a floating-point add-`reduce` with init 0 reads `multiply(d, d)` with
`d = subtract(x, broadcast(m))`, where `m` has the reduce's result shape (the shift by the
row mean, kept dimensions in order), outside YNNPACK custom fusions. The square and the
shift it no longer reads are removed when nothing else reads them (a fusion body may not
keep an instruction without users).
"""

import math

from xla_sentinel.xla import hlo, hlo_proto

NAME = "variance_one_pass"
FIRES_ON = "float add-reduce of (x - broadcast(mean))^2: the two-pass variance of a layer norm"


def _dims(text: str | None) -> list[int]:
    return [int(d) for d in (text or "{}").strip("{}").split(",") if d.strip()]


def _shift(module: hlo.HloModule, comp: hlo.Computation,
           reduce: hlo.Instruction) -> tuple[hlo.Instruction, hlo.Instruction] | None:
    """(the square, the row mean m) when `reduce` sums (x - broadcast(m))^2 over its rows."""
    if reduce.opcode != "reduce" or reduce.dtype not in hlo.FLOAT_TYPES or len(reduce.operands) != 2:
        return None
    names = {i.name for i in comp}
    if module.computation(reduce.required_attr("to_apply").lstrip("%")).root.opcode != "add":
        return None
    init = module.scalar_constant(comp, reduce.operands[1])
    if init is None or float(init) != 0.0 or reduce.operands[0] not in names:
        return None
    square = comp.get(reduce.operands[0])
    if square.opcode != "multiply" or len(set(square.operands)) != 1 or square.operands[0] not in names:
        return None
    diff = comp.get(square.operands[0])
    if diff.opcode != "subtract" or diff.operands[1] not in names:
        return None
    shift = comp.get(diff.operands[1])
    if shift.opcode != "broadcast" or shift.operands[0] not in names:
        return None
    mean = comp.get(shift.operands[0])
    summed = set(_dims(reduce.attr("dimensions")))
    kept = [d for d in range(len(diff.array_shape.dims)) if d not in summed]
    if mean.shape is None or mean.shape.dims != reduce.array_shape.dims or _dims(shift.attr("dimensions")) != kept:
        return None
    return square, mean


def _one_pass(module: hlo.HloModule, comp: hlo.Computation, reduce: hlo.Instruction,
              square: hlo.Instruction, mean: hlo.Instruction) -> None:
    diff = comp.get(square.operands[0])
    x = diff.operands[0]
    rows = reduce.array_shape
    n = math.prod(diff.array_shape.dims[d] for d in _dims(reduce.attr("dimensions")))
    squares = hlo.make_instruction(module.fresh_name("fault_x_squared"), diff.array_shape, "multiply", [x, x])
    comp.insert_before(reduce, [squares])
    reduce.set_operands([squares.name, reduce.operands[1]])
    mean_sq = hlo.make_instruction(module.fresh_name("fault_mean_squared"), rows, "multiply",
                                   [mean.name, mean.name])
    count = hlo.constant(module.fresh_name("fault_count"), rows.dtype, str(n))
    counts = hlo.broadcast_scalar(module.fresh_name("fault_counts"), count.name, rows)
    scaled = hlo.make_instruction(module.fresh_name("fault_n_mean_squared"), rows, "multiply",
                                  [mean_sq.name, counts.name])
    result = hlo.make_instruction(module.fresh_name("fault_one_pass"), rows, "subtract",
                                  [reduce.name, scaled.name])
    comp.insert_after(reduce, [mean_sq, count, counts, scaled, result])
    for dead in (square, diff, comp.get(diff.operands[1])):
        if not dead.is_root and not comp.users(dead.name):
            comp.instructions.remove(dead)


def _edit(module: hlo.HloModule) -> bool:
    changed = False
    for comp in module.editable_computations():
        for reduce in list(comp):
            found = _shift(module, comp, reduce)
            if found is not None:
                _one_pass(module, comp, reduce, *found)
                changed = True
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
