"""Injected fault: integer sign handling in shifts.

Imitates a lowering that forgets a type is signed and emits a logical shift for an
arithmetic one (the class of bugs where signedness is lost between HLO and LLVM IR):
`shift-right-arithmetic` becomes `shift-right-logical`, so negative values lose their
sign extension and become large positive numbers.

Fires when: a `shift-right-arithmetic` instruction on a signed integer type appears
anywhere outside YNNPACK fusions. Results change only for negative inputs.
"""

from xla_sentinel.xla import hlo, hlo_proto

NAME = "shift_right_logical"
FIRES_ON = "shift-right-arithmetic on signed integers (visible only on negative values)"


def _edit(module: hlo.HloModule) -> bool:
    changed = False
    for comp in module.editable_computations():
        for instr in comp:
            if instr.opcode == "shift-right-arithmetic" and instr.dtype in hlo.SIGNED_INT_TYPES:
                instr.opcode = "shift-right-logical"
                changed = True
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
