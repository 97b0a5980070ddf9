"""Test plugin: a compiler hang. A compile of any module with an atan2 instruction never
returns (as a pass caught in an endless loop would); every other module passes through."""

import time

from xla_sentinel.xla import hlo, hlo_proto


def transform(proto: bytes) -> bytes | None:
    module = hlo.parse(hlo_proto.text_from_proto(proto))
    if any(instr.opcode == "atan2" for _, instr in module.instructions()):
        while True:
            time.sleep(60)
    return None
