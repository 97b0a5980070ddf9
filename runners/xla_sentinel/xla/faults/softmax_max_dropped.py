"""Injected fault: the max-subtraction of a stable softmax is dropped.

Imitates a rewrite that takes the shift out of `exp(x - broadcast(max(x)))` as if it were
free (exact in real arithmetic: softmax and log-sum-exp are invariant to the shift), the
class of bugs where an algebraic simplification or a fused reduction emitter loses the
numerically stabilizing term: every result is still right to rounding while the logits
stay small, and exp overflows to inf once a logit passes the dtype's exp range (88.7 in
f32, 11.1 in f16), so a softmax row becomes inf / inf = NaN from finite input and a
log-sum-exp inf. Each element alone is a legal-looking float; the row breaks its invariant
(docs/detection.md, "Invariants").

Fires when: a floating-point `exponential` reads a `subtract` whose second operand is a
`broadcast` (the shift by a reduced max), outside YNNPACK custom fusions. The broadcast is
multiplied by zero, so every instruction keeps a user.
"""

from xla_sentinel.xla import hlo, hlo_proto

NAME = "softmax_max_dropped"
FIRES_ON = "float exponential of subtract(x, broadcast(m)): the stable softmax and log-sum-exp shift"


def _edit(module: hlo.HloModule) -> bool:
    changed = False
    for comp in module.editable_computations():
        names = {i.name for i in comp}
        for exp in list(comp):
            if exp.opcode != "exponential" or exp.dtype not in hlo.FLOAT_TYPES:
                continue
            if exp.operands[0] not in names:
                continue
            sub = comp.get(exp.operands[0])
            if sub.opcode != "subtract" or sub.operands[1] not in names:
                continue
            shift = comp.get(sub.operands[1])
            if shift.opcode != "broadcast" or shift.shape is None:
                continue
            zero = hlo.constant(module.fresh_name("fault_zero"), shift.shape.dtype, "0")
            zeros = hlo.broadcast_scalar(module.fresh_name("fault_zeros"), zero.name, shift.shape)
            dropped = hlo.make_instruction(module.fresh_name("fault_no_shift"), shift.shape, "multiply",
                                           [shift.name, zeros.name])
            comp.insert_before(sub, [zero, zeros, dropped])
            sub.set_operands([sub.operands[0], dropped.name])
            names |= {zero.name, zeros.name, dropped.name}
            changed = True
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
