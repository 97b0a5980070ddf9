"""XLA option sets beside the target presets (spec/campaign.py PRESETS): the legal
configuration the references and the bisector compile under, and the cures the bisector
searches over. No jax here: the coordinator and the workers both read them."""

from __future__ import annotations

from typing import Any

from xla_sentinel.spec.campaign import PRESETS

# The legal configuration the references compile under: the float64 jit reference, the
# replayed module's op-by-op stand-in and the bisector's legal run. Not default jit: a real
# XLA:CPU miscompile in 0.10.2 corrupts default-jit results in f64 too
# (docs/architecture.md, "References").
REFERENCE_OPTIONS: dict[str, Any] = {"xla_backend_optimization_level": 0,
                                     "xla_cpu_use_fusion_emitters": False}


# The legal configuration every case is also run under, at its own precision and without
# plugins, and the settings of the bisector's float64 values (serve.every_value): the
# references' settings, which avoid the fusion path a known 0.10.2 miscompile takes, and
# without YNNPACK fusions, whose max/min reduction drops NaN from 4,096 elements on in
# every other configuration (bench/repros/reduce_max_drops_nan.py): float64 values that
# drop the NaN would make the target that drops it look right.
LEGAL: dict[str, Any] = {**REFERENCE_OPTIONS, "xla_cpu_experimental_ynn_fusion_type": ""}

# Cures a user can set, tried one by one on top of the target's options before any pass
# is searched (passes.py): the campaign's target presets, most specific first, so a bug
# cured by turning the fusion emitters off is named by that flag and not by the blunter
# O0 or a disabled `fusion` pass.
CURING_PRESETS = ("no_fusion_emitters", "no_ynn", "no_fusion", "no_algsimp_fusion", "O0")
CURING_OPTIONS: tuple[dict[str, Any], ...] = tuple(PRESETS[name] for name in CURING_PRESETS)
# Options a target may turn on that a user can turn back off (the fast_math preset): tried
# only where the target set them, since XLA's default is already this value.
REVERTIBLE: dict[str, Any] = {"xla_cpu_enable_fast_math": False}


def cures_to_try(base: dict[str, Any]) -> list[dict[str, Any]]:
    """The cures that change something on top of the target's options `base`, in order."""
    presets = [o for o in CURING_OPTIONS if any(base.get(k) != v for k, v in o.items())]
    return presets + [{k: v} for k, v in REVERTIBLE.items() if k in base and base[k] != v]


def flag_name(options: dict[str, Any]) -> str:
    """A cure as the bisector names it: `name=value` per option (`xla_cpu_use_fusion_emitters=False`)."""
    return ",".join(f"{k}={v}" for k, v in options.items())
