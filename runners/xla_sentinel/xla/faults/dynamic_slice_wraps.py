"""Injected fault: index clamp dropped in dynamic slicing.

HLO clamps a dynamic-slice start index so the whole window stays inside the operand.
This imitates an emitter that drops that clamp (the class of out-of-bounds dynamic
indexing bugs): a start index past the last valid window wraps around (index modulo
the number of valid starts) instead of clamping to the last window.

Fires when: a `dynamic-slice` outside YNNPACK fusions has a dimension where the operand
is larger than the slice. In-range start indices give the same result as correct code;
only start indices past `dim - size` change the output.
"""

from xla_sentinel.xla import hlo, hlo_proto

NAME = "dynamic_slice_wraps"
FIRES_ON = "dynamic-slice (visible only for start indices past the last valid window)"


def _edit(module: hlo.HloModule) -> bool:
    changed = False
    for comp in module.editable_computations():
        for instr in list(comp):
            if instr.opcode != "dynamic-slice":
                continue
            operand = comp.get(instr.operands[0]).array_shape
            sizes = [int(s) for s in instr.required_attr("dynamic_slice_sizes").strip("{}").split(",") if s]
            indices = instr.operands[1:]
            for dim, (extent, size) in enumerate(zip(operand.dims, sizes, strict=True)):
                if extent <= size:
                    continue
                index = comp.get(indices[dim])
                starts = hlo.constant(module.fresh_name("fault_starts"), index.array_shape.dtype,
                                      str(extent - size + 1))
                wrapped = hlo.make_instruction(module.fresh_name("fault_wrapped"), index.array_shape,
                                               "remainder", [index.name, starts.name])
                comp.insert_before(instr, [starts, wrapped])
                indices[dim] = wrapped.name
                changed = True
            instr.set_operands([instr.operands[0], *indices])
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
