"""Test plugin: a nondeterministic miscompile. Every other compile in a process gets
fusion_bf16_rounding's corruption, so the same module gives two different answers."""

from xla_sentinel.xla.faults import fusion_bf16_rounding

_compiles = 0


def transform(proto: bytes) -> bytes | None:
    global _compiles
    _compiles += 1
    return fusion_bf16_rounding.transform(proto) if _compiles % 2 else None
