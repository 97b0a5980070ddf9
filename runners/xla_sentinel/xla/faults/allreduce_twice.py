"""Injected fault: a reduction applied twice.

Imitates a collective optimization that keeps the original reduction when it moves one
(an all-reduce code-motion or combiner bug, as in while-loop all-reduce motion): every
operand of an all-reduce is first reduced over the same groups by a copy of it, so the
result is the reduction of already-reduced values: a sum over a group of n devices comes
out n times too large, while max and min are unchanged (idempotent).

Fires when: the partitioned (per-device) module holds an all-reduce.
"""

import re

from xla_sentinel.xla import hlo, hlo_proto

NAME = "allreduce_twice"
FIRES_ON = "all-reduce of a partitioned module (a sum over n devices comes out n times too large)"


def _edit(module: hlo.HloModule) -> bool:
    channels = [int(c) for c in re.findall(r"channel_id=(\d+)", module.to_text())]
    fresh = max(channels, default=0) + 1
    changed = False
    for comp in module.editable_computations():
        for instr in list(comp):
            if instr.opcode != "all-reduce":
                continue
            copies = []
            for operand in instr.operands:
                twin = hlo.make_instruction(module.fresh_name("fault_all_reduce"),
                                            comp.get(operand).shape_text, "all-reduce", [operand],
                                            [(k, v) for k, v in instr.attrs if k != "metadata"])
                if twin.attr("channel_id") is not None:
                    twin.set_attr("channel_id", str(fresh))
                    fresh += 1
                copies.append(twin)
            comp.insert_before(instr, copies)
            instr.set_operands([c.name for c in copies])
            changed = True
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
