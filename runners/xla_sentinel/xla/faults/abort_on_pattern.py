"""Injected crash, not a miscompilation: kills the compiling process on a pattern.

This fault exists to test crash containment (a target whose compiler aborts must become
a `crash` finding while the campaign goes on). It imitates a compiler CHECK failure:
the whole process dies with SIGABRT via `os.abort()` during compilation.

Fires when: the module contains an `atan2` instruction. Every other module passes
through unchanged.
"""

import os

from xla_sentinel.xla import hlo, hlo_proto

NAME = "abort_on_pattern"
FIRES_ON = "any atan2 instruction: the process aborts (SIGABRT) during compilation"


def transform(proto: bytes) -> bytes | None:
    module = hlo.parse(hlo_proto.text_from_proto(proto))
    if any(instr.opcode == "atan2" for _, instr in module.instructions()):
        os.abort()
    return None
