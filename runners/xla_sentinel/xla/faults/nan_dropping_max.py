"""Injected fault: NaN propagation lost in max/min.

XLA's maximum/minimum propagate NaN. This imitates an emitter that lowers them to the
x86 `maxps`/`minps` idiom `a > b ? a : b` (a real, recurring class of NaN bugs): when
the first operand is NaN the second is returned, so the NaN silently disappears.

Fires when: an elementwise floating-point `maximum` or `minimum` appears outside the
computations applied by reduce, reduce-window, scatter, sort or map (`to_apply`) and
outside YNNPACK fusions. Output changes only where the first operand is
NaN and the second is not.
"""

from xla_sentinel.xla import hlo, hlo_proto

NAME = "nan_dropping_max"
FIRES_ON = "elementwise float maximum/minimum (visible only on NaN in the first operand)"

_DIRECTION = {"maximum": "GT", "minimum": "LT"}


def _edit(module: hlo.HloModule) -> bool:
    roles = module.roles()
    changed = False
    for comp in module.editable_computations():
        if "apply" in roles[comp.name]:
            continue
        for instr in list(comp):
            if instr.opcode not in _DIRECTION or instr.dtype not in hlo.FLOAT_TYPES:
                continue
            first, second = instr.operands
            compare = hlo.make_instruction(
                module.fresh_name("fault_pick"), instr.array_shape.with_dtype("pred"), "compare",
                [first, second], [("direction", _DIRECTION[instr.opcode])])
            comp.insert_before(instr, [compare])
            instr.opcode = "select"
            instr.set_operands([compare.name, first, second])
            changed = True
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
