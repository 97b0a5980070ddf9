"""Injected fault: wrong result only for odd dimensions.

Imitates a vectorized loop whose remainder (tail) iteration is mis-emitted, a real
class of bugs that only shows for sizes that are not a multiple of the vector width:
inside a loop fusion, an f32 `multiply` over an array whose minor-most dimension is odd
leaves the last element of every row unmultiplied (it returns the first operand there).

Fires when: an f32 `multiply` sits in a kLoop fusion body and its minor-most dimension
(by layout) is odd and at least 3. Only the last element along that dimension changes.
"""

from xla_sentinel.xla import hlo, hlo_proto

NAME = "odd_tail_multiply"
FIRES_ON = "f32 multiply in a kLoop fusion whose minor-most dimension is odd and >= 3"


def _edit(module: hlo.HloModule) -> bool:
    kinds = module.fusion_body_kinds()
    changed = False
    for comp in module.editable_computations():
        if kinds.get(comp.name) != "kLoop":
            continue
        for instr in list(comp):
            shape = instr.shape
            if instr.opcode != "multiply" or shape is None or shape.dtype != "f32" or not shape.dims:
                continue
            minor = shape.layout[0] if shape.layout else len(shape.dims) - 1
            extent = shape.dims[minor]
            if extent < 3 or extent % 2 == 0:
                continue
            index_shape = shape.with_dtype("s32")
            iota = hlo.make_instruction(module.fresh_name("fault_iota"), index_shape, "iota",
                                        attrs=[("iota_dimension", str(minor))], literal="")
            last = hlo.constant(module.fresh_name("fault_last"), "s32", str(extent - 1))
            lasts = hlo.broadcast_scalar(module.fresh_name("fault_lasts"), last.name, index_shape)
            tail = hlo.make_instruction(module.fresh_name("fault_tail"), shape.with_dtype("pred"),
                                        "compare", [iota.name, lasts.name], [("direction", "EQ")])
            wrong = hlo.make_instruction(module.fresh_name("fault_wrong_tail"), shape, "select",
                                         [tail.name, instr.operands[0], instr.name])
            comp.insert_after(instr, [iota, last, lasts, tail, wrong])
            changed = True
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
