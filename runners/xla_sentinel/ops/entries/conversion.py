"""Conversion entries: value conversion between dtypes, bitcasts and reduce_precision,
all bitwise-exact (their numpy forms spell out lax's rounding and saturation)."""

from __future__ import annotations

from xla_sentinel.core.names import FLOATS
from xla_sentinel.ops.numpy_forms import np_bitcast, np_convert, np_reduce_precision
from xla_sentinel.ops.spec import ALL, EXACT, Ctx, OpDef, Plan, Val

# The dtypes a value may be bitcast to: those of its width.
BITCAST_PAIRS = {"f32": ("s32", "u32"), "s32": ("f32", "u32"), "u32": ("f32", "s32"),
                 "s8": ("u8",), "u8": ("s8",), "f16": ("bf16",), "bf16": ("f16",)}


def _plan_convert(ctx: Ctx, x: Val) -> Plan:
    return [x], {"dtype": str(ctx.rng.choice([d for d in ALL if d != x.dtype]))}


def _plan_bitcast(ctx: Ctx, x: Val) -> Plan:
    return [x], {"dtype": str(ctx.rng.choice(BITCAST_PAIRS[x.dtype]))}


def _plan_reduce_precision(ctx: Ctx, x: Val) -> Plan:
    e, m = [(5, 10), (8, 7), (4, 3), (5, 2), (8, 23)][int(ctx.rng.integers(5))]
    return [x], {"exponent_bits": e, "mantissa_bits": m}


ENTRIES: list[OpDef] = [
    OpDef(name="convert", category="conversion", dtypes=ALL, plan=_plan_convert, discrete=True, tags=EXACT,
          numpy=lambda a, x: np_convert(x, a["dtype"]), stablehlo=("stablehlo.convert",)),
    OpDef(name="bitcast_convert", category="conversion", dtypes=tuple(BITCAST_PAIRS), plan=_plan_bitcast,
          discrete=True, own_dtypes=True, tags=EXACT, numpy=lambda a, x: np_bitcast(x, a["dtype"]),
          stablehlo=("stablehlo.bitcast_convert",)),
    # Discrete: rounding to 2 or 3 mantissa bits turns a legal 1-ulp difference of its input
    # (f16 rounding vs excess precision) into a whole quantization step, like `round` does.
    OpDef(name="reduce_precision", category="conversion", dtypes=FLOATS, plan=_plan_reduce_precision,
          discrete=True, tags=EXACT,
          numpy=lambda a, x: np_reduce_precision(x, a["exponent_bits"], a["mantissa_bits"]).astype(x.dtype),
          stablehlo=("stablehlo.reduce_precision",)),
]
