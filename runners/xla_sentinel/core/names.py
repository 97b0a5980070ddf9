"""The dtype names the engine, the campaign schema and the operator share: the one list.

Plain strings, no numpy, so that the schema (and the operator, which validates specs)
reads them without the numerical stack; core/dtypes.py gives each its numpy type.
"""

from __future__ import annotations

# Every dtype a program's values may have, in the schema's order.
DTYPES = ("f32", "bf16", "f16", "f64", "s32", "s8", "u8", "u32", "bool")
FLOATS = ("f32", "bf16", "f16", "f64")
INTS = ("s32", "s8", "u8", "u32")
# The floats a float64 reference promotes: every float but float64 itself.
NARROW_FLOATS = tuple(d for d in FLOATS if d != "f64")
# The element type StableHLO spells for each (signless integers, i1 for bool).
MLIR_NAMES = {"f32": "f32", "bf16": "bf16", "f16": "f16", "f64": "f64", "s32": "i32", "s8": "i8",
              "u8": "ui8", "u32": "ui32", "bool": "i1"}
