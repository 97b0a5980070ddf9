"""Injected compile anomaly, not a miscompilation: logs XLA's circular-simplification warning.

This fault exists to test the `compile_anomaly` verdict (docs/detection.md, "Compile
anomalies"). It stands for XLA's logger: it imitates the algebraic simplifier giving up on a
rewrite loop by writing the line XLA's LOG(WARNING) writes, word for word, to fd 2 during the
compile, and returns the module unchanged, so the numbers stay right.

Fires when: the module holds a bf16 value (XLA was seen to log the warning on random bf16
programs). Every module passes through unchanged.
"""

import os

from xla_sentinel.xla import hlo, hlo_proto

NAME = "circular_simplification_log"
FIRES_ON = "any bf16 value: XLA's circular-simplification warning on fd 2, the module unchanged"

# absl's prefix (severity, date, time, thread, file:line) and the message that XLA's
# algebraic simplifier logs (core/anomalies.py names its source file).
LINE = (b"W0000 00:00:1700000000.000000   12345 algebraic_simplifier.cc:8521] Algebraic simplifier "
        b"is likely stuck in a circular simplification loop and ran for 50 runs on computation "
        b"main\n")


def transform(proto: bytes) -> bytes | None:
    module = hlo.parse(hlo_proto.text_from_proto(proto))
    if any(instr.dtype == "bf16" for _, instr in module.instructions()):
        os.write(2, LINE)
    return None
