"""Test plugin: a miscompile that shows in xla-sentinel's worker processes and not in a
standalone reproducer, as a real bug that depends on the process (its thread pool, what
else it compiled) can: fusion_bf16_rounding's corruption wherever xla_sentinel is loaded,
nothing in repro.py, which needs only jax and numpy. The bundle gate must refuse the
bundle (test_bundle_gate.py)."""

import sys


def transform(proto: bytes) -> bytes | None:
    if "xla_sentinel" not in sys.modules:
        return None
    from xla_sentinel.xla.faults import fusion_bf16_rounding

    return fusion_bf16_rounding.transform(proto)
