"""Injected fault: a bug only inside control-flow bodies.

Imitates a pass that treats computations nested in control flow differently from the
entry computation and gets it wrong there (e.g. constant materialization or
simplification run per nested computation): every f32 scalar constant inside a while
body or a conditional branch (and the fusions they call) is rounded to bf16 precision.
The same constant in straight-line code is untouched.

Fires when: an f32 scalar constant that bf16 cannot represent exactly sits in a while
body, a conditional branch, or a computation they call. While conditions are left
alone, so trip counts do not change.
"""

import math
import struct

from xla_sentinel import hlo

NAME = "loop_constant_bf16"
FIRES_ON = "f32 constant not exact in bf16 inside a while body or conditional branch"


def _round_to_bf16(value: float) -> float:
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _edit(module: hlo.HloModule) -> bool:
    inside = module.control_flow_computations(seed_roles=("while_body", "branch"))
    changed = False
    for comp in module.computations:
        if comp.name not in inside:
            continue
        for instr in comp:
            if instr.opcode != "constant" or instr.shape_text != "f32[]":
                continue
            try:
                value = float(instr.operand_text)
            except ValueError:
                continue
            if not math.isfinite(value):
                continue
            rounded = _round_to_bf16(value)
            if rounded != struct.unpack("<f", struct.pack("<f", value))[0]:
                instr.operand_text = repr(rounded)
                changed = True
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo.rewrite_proto(proto, _edit)
