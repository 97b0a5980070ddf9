"""Injected fault: off-by-one in concatenate.

Imitates a concatenate emitter that computes the offset of its second operand one
element too far (an off-by-one in the boundary bookkeeping, a classic class of
concatenate/pad bugs): the first element of the second operand along the concatenated
dimension is replaced by a repeat of the first operand's last element, and the rest of
the second operand is unchanged.

Fires when: a `concatenate` has at least two operands, the first is not empty and the
second is at least 2 long along the concatenated dimension, anywhere outside YNNPACK
fusions.
"""

from xla_sentinel.xla import hlo, hlo_proto

NAME = "concat_off_by_one"
FIRES_ON = "concatenate whose second operand is >= 2 long along the concatenated dimension"


def _slice(module: hlo.HloModule, source: hlo.Instruction, dim: int, start: int,
           stop: int) -> hlo.Instruction:
    shape = source.array_shape
    bounds = [f"[{start}:{stop}]" if d == dim else f"[0:{n}]" for d, n in enumerate(shape.dims)]
    dims = [stop - start if d == dim else n for d, n in enumerate(shape.dims)]
    return hlo.make_instruction(module.fresh_name("fault_slice"), shape.with_dims(dims),
                                "slice", [source.name], [("slice", "{" + ", ".join(bounds) + "}")])


def _edit(module: hlo.HloModule) -> bool:
    changed = False
    for comp in module.editable_computations():
        for instr in list(comp):
            if instr.opcode != "concatenate" or len(instr.operands) < 2:
                continue
            dim = int(instr.required_attr("dimensions").strip("{}"))
            first, second = (comp.get(name) for name in instr.operands[:2])
            if first.array_shape.dims[dim] < 1 or second.array_shape.dims[dim] < 2:
                continue
            last = first.array_shape.dims[dim]
            repeated = _slice(module, first, dim, last - 1, last)
            rest = _slice(module, second, dim, 1, second.array_shape.dims[dim])
            comp.insert_before(instr, [repeated, rest])
            operands = [first.name, repeated.name, rest.name, *instr.operands[2:]]
            instr.set_operands(operands)
            changed = True
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
