"""Injected fault: wrong compare direction feeding a select.

Imitates a simplifier or emitter that canonicalizes a non-strict comparison into a
strict one (GE -> GT, LE -> LT) when it feeds a select, as in a mis-applied
`select(a >= b, a, b)` -> max rewrite: the result differs only where the two compared
values are exactly equal (ties).

Fires when: a `compare` with direction GE or LE (any element type: integer ties are
common, float ties rarer) is the predicate (operand 0) of a `select`, anywhere outside
YNNPACK fusions.
"""

from xla_sentinel.xla import hlo, hlo_proto

NAME = "select_ge_to_gt"
FIRES_ON = "compare GE/LE used as a select predicate (visible only on ties)"

_STRICT = {"GE": "GT", "LE": "LT"}


def _edit(module: hlo.HloModule) -> bool:
    changed = False
    for comp in module.editable_computations():
        for select in comp:
            if select.opcode != "select":
                continue
            compare = comp.get(select.operands[0])
            direction = compare.attr("direction")
            if compare.opcode != "compare" or direction not in _STRICT:
                continue
            compare.set_attr("direction", _STRICT[direction])
            changed = True
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
