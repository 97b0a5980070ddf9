"""XLA settings the bisector compares against and searches over (no jax here)."""

from __future__ import annotations

from typing import Any

from ..targets import REFERENCE_OPTIONS

# The legal configuration every case is also run under, at its own precision and without
# plugins: the references' settings, which avoid the fusion path a known 0.10.2
# miscompile takes.
LEGAL: dict[str, Any] = REFERENCE_OPTIONS

# Flags a user can set as a workaround, each tried alone on top of the target's options.
CURING_FLAGS: tuple[tuple[str, Any], ...] = (
    ("xla_cpu_use_fusion_emitters", False),
    ("xla_cpu_experimental_ynn_fusion_type", ""),
    ("xla_backend_optimization_level", 0),
    ("xla_cpu_enable_fast_math", False),
)
