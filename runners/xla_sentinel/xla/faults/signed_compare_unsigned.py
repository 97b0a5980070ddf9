"""Injected fault: signed compare emitted as unsigned.

Imitates a lowering that loses the signedness of an integer comparison (the class of
bugs where `icmp slt` becomes `icmp ult`): an ordered compare of signed integer arrays
reinterprets both sides as unsigned, so every negative value compares as larger than
every non-negative one.

Fires when: a `compare` with direction LT, LE, GT or GE on signed integer arrays of
rank >= 1 appears anywhere outside YNNPACK fusions (scalar index arithmetic, e.g. loop counters
and dynamic-slice index normalization, is left alone). Results change only when the two
sides have different signs.
"""

from xla_sentinel.xla import hlo, hlo_proto

NAME = "signed_compare_unsigned"
FIRES_ON = "ordered compare of signed integer arrays (visible only on mixed signs)"

_ORDERED = ("LT", "LE", "GT", "GE")


def _edit(module: hlo.HloModule) -> bool:
    changed = False
    for comp in module.editable_computations():
        for instr in list(comp):
            if instr.opcode != "compare" or instr.attr("direction") not in _ORDERED:
                continue
            operands = [comp.get(name) for name in instr.operands]
            shape = operands[0].shape
            if shape is None or shape.dtype not in hlo.SIGNED_INT_TYPES or not shape.dims:
                continue
            unsigned = "u" + shape.dtype[1:]
            casts = [hlo.make_instruction(module.fresh_name("fault_unsigned"),
                                          o.array_shape.with_dtype(unsigned), "bitcast-convert",
                                          [o.name]) for o in operands]
            comp.insert_before(instr, casts)
            instr.set_operands(c.name for c in casts)
            instr.drop_attr("type")
            changed = True
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
