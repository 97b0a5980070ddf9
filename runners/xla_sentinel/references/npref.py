"""A float64 reference that shares no code with XLA: StableHLO modules evaluated in numpy.

The module is parsed with jaxlib's MLIR bindings and walked op by op. Float values are
held in float64 (an f32, bf16 or f16 tensor is computed exactly as far as float64 goes);
a `convert` to a narrower float still rounds (ml_dtypes), and ops that mean their bits
(bitcast_convert, next_after) see their operands in their own dtype, as in the `f64_eager`
reference. Ops that map to an entry of the op table use that entry's numpy form; the
others (broadcast_in_dim, reshape, reduce with a body, while, call, ...) are defined here.
An op without a numpy form (NO_NUMPY_FORM, or a body this module does not recognize) is
evaluated alone by XLA in float64, and counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xla_sentinel.core.dtypes import NP_DTYPES
from xla_sentinel.ops import numpy_forms as nf
from xla_sentinel.ops.table import OPS

MLIR_DTYPES = {"f64": "f64", "f32": "f32", "bf16": "bf16", "f16": "f16", "i64": "s64", "i32": "s32",
               "i8": "s8", "ui8": "u8", "ui32": "u32", "i1": "bool", "i16": "s16", "ui16": "u16",
               "ui64": "u64"}
EXTRA_DTYPES: dict[str, np.dtype] = {"s64": np.dtype(np.int64), "s16": np.dtype(np.int16),
                                     "u16": np.dtype(np.uint16), "u64": np.dtype(np.uint64)}

# Ops evaluated by XLA (float64, alone) because they have no numpy form here: opaque
# library calls, random numbers, and linear algebra or transforms nothing generates.
NO_NUMPY_FORM = {
    "stablehlo.custom_call": "an opaque call into a library",
    "stablehlo.rng": "XLA's random numbers", "stablehlo.rng_bit_generator": "XLA's random numbers",
    "stablehlo.fft": "not written here", "stablehlo.cholesky": "not written here",
    "stablehlo.triangular_solve": "not written here",
    "chlo.bessel_i1e": "no numpy form (scipy's i1e is another algorithm)",
}

# StableHLO/CHLO elementwise ops and the op-table entry whose kernel they are.
ELEMENTWISE = {
    "stablehlo.exponential": "exp", "stablehlo.log": "log", "stablehlo.log_plus_one": "log1p",
    "stablehlo.exponential_minus_one": "expm1", "stablehlo.tanh": "tanh",
    "stablehlo.logistic": "logistic", "stablehlo.sqrt": "sqrt", "stablehlo.rsqrt": "rsqrt",
    "stablehlo.cbrt": "cbrt", "stablehlo.sine": "sin", "stablehlo.cosine": "cos",
    "stablehlo.tan": "tan", "chlo.tan": "tan", "chlo.erf": "erf", "chlo.erf_inv": "erf_inv",
    "chlo.lgamma": "lgamma", "chlo.digamma": "digamma", "chlo.atanh": "atanh", "chlo.sinh": "sinh",
    "stablehlo.floor": "floor", "stablehlo.ceil": "ceil", "stablehlo.sign": "sign",
    "stablehlo.round_nearest_even": "round", "stablehlo.round_nearest_afz": "round_away",
    "stablehlo.is_finite": "is_finite", "stablehlo.abs": "abs", "stablehlo.negate": "neg",
    "stablehlo.not": "not", "stablehlo.popcnt": "population_count",
    "stablehlo.count_leading_zeros": "clz", "stablehlo.add": "add", "stablehlo.subtract": "sub",
    "stablehlo.multiply": "mul", "stablehlo.maximum": "max", "stablehlo.minimum": "min",
    "stablehlo.divide": "div", "stablehlo.remainder": "rem", "stablehlo.power": "pow",
    "stablehlo.atan2": "atan2", "stablehlo.and": "and", "stablehlo.or": "or", "stablehlo.xor": "xor",
    "stablehlo.shift_left": "shift_left", "stablehlo.shift_right_logical": "shift_right_logical",
    "stablehlo.shift_right_arithmetic": "shift_right_arithmetic",
}
# numpy forms of CHLO ops the generator does not emit but traces may hold.
EXTRA_ELEMENTWISE: dict[str, Callable[..., np.ndarray]] = {
    "chlo.cosh": np.cosh, "chlo.asin": np.arcsin, "chlo.acos": np.arccos, "chlo.atan": np.arctan,
    "chlo.asinh": np.arcsinh, "chlo.acosh": np.arccosh, "chlo.square": lambda x: x * x,
    "chlo.is_inf": np.isinf, "chlo.is_pos_inf": np.isposinf, "chlo.is_neg_inf": np.isneginf,
}
# Single-op bodies of reduce, reduce_window and scatter.
BODY_KINDS = {"stablehlo.add": "add", "stablehlo.maximum": "max", "stablehlo.minimum": "min",
              "stablehlo.multiply": "mul", "stablehlo.and": "and", "stablehlo.or": "or"}
# Results that XLA:CPU does not flush (bit manipulation, not float arithmetic).
UNFLUSHED = frozenset({"stablehlo.bitcast_convert", "chlo.next_after"})
# Converts XLA:CPU computes with a float instruction in f32's range, under DAZ and FTZ
# (measured, jaxlib 0.10.2, jit and op by op alike): an f32 or bf16 subnormal converted to
# f64 is a zero of its sign, and so is an f64 value below f32's smallest normal number
# converted to f32 or bf16 (before rounding: -0.999 times that number gives -0). Between f32 and bf16 the bits move and a subnormal stays; f16
# is computed in f32, where its subnormals are normal. The promoted module converts the
# result of every op that means its bits (UNFLUSHED) to f64: without the flush here numpy
# carried a subnormal that every XLA evaluation reads as zero (s26-i242: floor(sinh(
# nextafter(0f, -1f))) was -1 in numpy, -0 in f64_jit, f64_eager and every target).
F32_RANGE_CONVERTS = ({"f32", "f64"}, {"bf16", "f64"})

# The sign of a NaN is the program's only where an op copies its operand's bits or is
# defined on the sign bit (negate, abs); every other op returns a NaN whose sign IEEE 754
# leaves open (6.3), and implementations differ: XLA:CPU's fused f32 log of +NaN is -NaN
# (0xFFFFFFFF), numpy's and XLA's f64 log keep +NaN. Ops that return their region's
# results (call, while, case, if) keep what those ops made.
SIGN_KEEPING = frozenset({
    "stablehlo.constant", "stablehlo.iota", "stablehlo.broadcast_in_dim", "stablehlo.reshape",
    "stablehlo.transpose", "stablehlo.reverse", "stablehlo.concatenate", "stablehlo.slice",
    "stablehlo.pad", "stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice",
    "stablehlo.gather", "stablehlo.select", "stablehlo.sort", "chlo.top_k",
    "stablehlo.optimization_barrier", "stablehlo.negate", "stablehlo.abs", "stablehlo.convert",
    "stablehlo.bitcast_convert", "func.call", "stablehlo.while", "stablehlo.case",
    "stablehlo.if",
})
# Ops whose result depends on a NaN operand's sign: top_k and sort order floats by IEEE
# totalOrder (XLA's top_k is a stable sort on the bits: -NaN ranks below -inf), a
# TOTALORDER compare likewise, a bitcast reads the sign bit.
SIGN_OBSERVERS = frozenset({"chlo.top_k", "stablehlo.sort", "stablehlo.bitcast_convert"})
# Where open NaN marks travel element for element (`_Evaluator._carried`): ops whose
# result element depends only on the operand elements at the same index, and ops that
# move elements, whose own numpy form applied to the marks moves them alike (data
# operands first; the others, start indices, must carry no marks).
SAME_INDEX = frozenset({*ELEMENTWISE, *EXTRA_ELEMENTWISE, "stablehlo.compare", "stablehlo.select",
                        "stablehlo.clamp", "stablehlo.convert", "stablehlo.reduce_precision",
                        "chlo.next_after"})
MOVING = {"stablehlo.broadcast_in_dim": 1, "stablehlo.reshape": 1, "stablehlo.transpose": 1,
          "stablehlo.reverse": 1, "stablehlo.slice": 1, "stablehlo.concatenate": None,
          "stablehlo.pad": 2, "stablehlo.dynamic_slice": 1, "stablehlo.dynamic_update_slice": 2,
          "stablehlo.gather": 1}


@dataclass
class Evaluation:
    """A module's outputs (floats as float64) and which ops fell back to XLA, how often."""

    outputs: list[np.ndarray]
    fallbacks: Counter[str] = field(default_factory=Counter)
    ops: int = 0
    # Per output, the elements that depend on the sign of a NaN IEEE 754 leaves open
    # (nan_sign_undetermined); None where no such NaN reached an op that sees its sign.
    undetermined: list[np.ndarray] | None = None


class Unsupported(Exception):
    """An op this module has no numpy form for: evaluated by XLA instead."""


def _flush_below_f32(x: np.ndarray) -> np.ndarray:
    """x with every nonzero element below f32's smallest normal number a zero of its sign."""
    x = np.asarray(x)
    wide = x.astype(np.float64)  # exact for every float dtype here
    tiny = float(np.finfo(np.float32).tiny)
    return np.where(np.abs(wide) < tiny, np.copysign(0.0, wide), wide).astype(x.dtype)


def _np_dtype(name: str) -> np.dtype:
    return NP_DTYPES.get(name) or EXTRA_DTYPES[name]


# How an op without a numpy form is evaluated: given a module of that op alone with its
# floats promoted to float64, and its operands, the op's results. The worker passes XLA's
# (compiled under the legal reference options, the `f64_eager` way); this module never
# compiles anything itself, so it shares no code with XLA.
Fallback = Callable[[str, list[np.ndarray]], list[np.ndarray]]


def evaluate_module(module: str, inputs: Sequence[np.ndarray], fallback: Fallback | None = None) -> Evaluation:
    """Evaluate @main of StableHLO text on `inputs` (in the module's parameter dtypes); an op
    without a numpy form goes to `fallback` (counted in Evaluation.fallbacks), or raises
    Unsupported where there is none."""
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir

    with mlir.make_ir_context() as ctx, np.errstate(all="ignore"):
        parsed = ir.Module.parse(module)

        def run(nan_sign: float = 0.0) -> tuple[_Evaluator, list[np.ndarray]]:
            ev = _Evaluator(ctx, parsed, nan_sign, fallback)
            main = ev.functions["main"]
            args = [ev.held(np.asarray(x)) for x in inputs]
            return ev, [np.asarray(o) for o in ev.run_block(main.regions[0].blocks[0], args)]

        ev, outputs = run()
        result = Evaluation(outputs, ev.fallbacks, ev.count)
        if ev.sign_observed:
            # The module again with every NaN of open sign made +NaN, then -NaN: the
            # elements that differ among the three evaluations depend on that sign.
            runs = [outputs, run(1.0)[1], run(-1.0)[1]]
            masks = [~_same(a, b) | ~_same(a, c) | ~_same(b, c) for a, b, c in zip(*runs, strict=True)]
            # Two NaNs of one row may take different signs, which no uniform sign
            # reproduces: marked where the ranking op saw them and carried to the outputs.
            terminator = list(ev.functions["main"].regions[0].blocks[0].operations)[-1]
            for m, v in zip(masks, terminator.operands, strict=True):
                if (opened := ev.open.get(v)) is not None:
                    m |= opened
            if any(m.any() for m in masks):
                result.undetermined = masks
        return result


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: equal values (any NaN equals any NaN)."""
    eq = np.asarray(a == b)
    if nf.np_is_float(a):
        eq |= np.isnan(a) & np.isnan(b)
    return eq


class _Evaluator:
    def __init__(self, ctx: Any, module: Any, nan_sign: float = 0.0,
                 fallback: Fallback | None = None) -> None:
        from jaxlib.mlir import ir

        self.ir = ir
        self.ctx = ctx
        self.fallback = fallback
        # 0: numpy's own NaN signs; +1 or -1: every NaN of open sign (SIGN_KEEPING) takes it.
        self.nan_sign = nan_sign
        self.sign_observed = False  # a NaN reached one of SIGN_OBSERVERS
        self.functions = {str(f.attributes["sym_name"]).strip('"'): f for f in module.body.operations}
        self.fallbacks: Counter[str] = Counter()
        self.count = 0
        self.env: dict[Any, np.ndarray] = {}
        # Per value, the elements that depend on how two NaNs of open sign rank against
        # each other (absent: none); `opened` counts the ranking ops that made such marks.
        self.open: dict[Any, np.ndarray] = {}
        self.opened = 0

    # --- values --------------------------------------------------------------------------

    def dtype_of(self, value: Any) -> str:
        return MLIR_DTYPES[str(self.ir.RankedTensorType(value.type).element_type)]

    def shape_of(self, value: Any) -> list[int]:
        return list(self.ir.RankedTensorType(value.type).shape)

    @staticmethod
    def held(x: np.ndarray) -> np.ndarray:
        """A value as this reference holds it: floats in float64, subnormals of the
        hardware formats read as zero (XLA:CPU's DAZ)."""
        if nf.np_is_float(x):
            return nf.flush_subnormals(x).astype(np.float64)
        return x

    def own(self, x: np.ndarray, value: Any) -> np.ndarray:
        """A held value in its module dtype (for ops that mean their bits)."""
        return np.asarray(x).astype(_np_dtype(self.dtype_of(value)))

    # --- blocks --------------------------------------------------------------------------

    def run_block(self, block: Any, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        # One environment for the whole module: SSA values are unique, and a region may
        # use values of the blocks around it (a case branch, a loop body).
        self.env.update(zip(block.arguments, args, strict=True))
        return self._run_ops(block, self.env)

    def _run_ops(self, block: Any, env: dict[Any, np.ndarray]) -> list[np.ndarray]:
        for op in block.operations:
            o = op.operation
            name = o.name
            if name in ("stablehlo.return", "func.return"):
                return [env[v] for v in o.operands]
            args = [env[v] for v in o.operands]
            self.count += 1
            if not self.sign_observed and self._observes_sign(o, name):
                self.sign_observed = any(nf.np_is_float(a) and bool(np.isnan(a).any()) for a in args)
            opened = self.opened
            # Marks are made in the first evaluation only: the +NaN/-NaN runs only differ.
            marking = self.sign_observed and not self.nan_sign
            if marking and name == "func.call":
                self._enter_call(o)
            try:
                if name in NO_NUMPY_FORM:
                    raise Unsupported(name)
                outs = self._apply(o, name, args)
            except Unsupported:
                outs = self._fallback(o, args)
                self.fallbacks[name] += 1
            if marking:
                self._mark_open(o, name, args, outs, self.opened != opened)
            for r, x in zip(o.results, outs, strict=True):
                x = np.asarray(x)
                if self.nan_sign and name not in SIGN_KEEPING and nf.np_is_float(x):
                    x = np.where(np.isnan(x), np.copysign(np.nan, self.nan_sign), x)
                if nf.np_is_float(x) and name not in UNFLUSHED:
                    x = nf.flush_subnormals(x.astype(np.float64))
                env[r] = x.astype(np.float64) if nf.np_is_float(x) else x
        raise ValueError("block without a terminator")

    # --- NaNs whose signs rank them ---------------------------------------------------------

    def _mark_open(self, o: Any, name: str, args: list[np.ndarray], outs: list[np.ndarray], inner: bool) -> None:
        """Set `open` for the results of `o`: rows a ranking op orders two NaNs in (their
        signs are open, so any of them may come first), and the elements that depend on
        marked operands. `inner`: a ranking op inside `o`'s regions made marks."""
        ins = [self.open.get(v) for v in o.operands]
        made = self._ranked_nans(o, name, args)
        if made is not None:
            self.opened += 1
        if made is None and not inner and all(m is None for m in ins):
            for r in o.results:
                self.open.pop(r, None)
            return
        shapes = [np.shape(x) for x in outs]
        block = self._ran_block(o, name, args)
        masks: list[np.ndarray | None]
        if block is not None and name != "func.call" and ins[0] is not None and ins[0].any():
            masks = [np.ones(sh, bool) for sh in shapes]  # which branch ran is open
        elif block is not None:
            # What the callee or the branch taken returned, marks and all.
            masks = [self.open.get(v) for v in list(block.operations)[-1].operands]
        elif inner:
            masks = [np.ones(sh, bool) for sh in shapes]
        else:
            masks = self._carried(o, name, args, ins, shapes, made)
        for r, m in zip(o.results, masks, strict=True):
            if m is not None and m.any():
                self.open[r] = m
            else:
                self.open.pop(r, None)

    def _callee(self, o: Any) -> Any:
        return self.functions[str(o.attributes["callee"]).lstrip("@").strip('"')].regions[0].blocks[0]

    def _enter_call(self, o: Any) -> None:
        """The call's operand marks onto the callee's arguments (ops read marks by value)."""
        for a, v in zip(self._callee(o).arguments, o.operands, strict=True):
            if (m := self.open.get(v)) is not None:
                self.open[a] = m
            else:
                self.open.pop(a, None)

    def _ran_block(self, o: Any, name: str, args: list[np.ndarray]) -> Any:
        """The block a call or a conditional ran (its ops carried the marks), else None."""
        if name == "func.call":
            return self._callee(o)
        if name == "stablehlo.case":
            n, index = len(o.regions), int(args[0])
            return o.regions[index if 0 <= index < n else n - 1].blocks[0]
        if name == "stablehlo.if":
            return o.regions[0 if bool(args[0]) else 1].blocks[0]
        return None

    def _ranked_nans(self, o: Any, name: str, args: list[np.ndarray]) -> np.ndarray | None:
        """Where this op ranks two or more NaNs against each other: the rows (kept along
        the ranking axis) of top_k and sort, the elements of a TOTALORDER compare. One
        NaN's rank the uniform signs of `evaluate_module` already cover."""
        xs = [np.asarray(a) for a in args]
        if name in ("chlo.top_k", "stablehlo.sort") and nf.np_is_float(xs[0]):
            # The first operand is the key (what `_sort_key` accepts, and top_k's only one).
            rows = np.isnan(xs[0]).sum(axis=self._rank_axis(o, name), keepdims=True) >= 2
        elif name == "stablehlo.compare" and self._observes_sign(o, name) and nf.np_is_float(xs[0]):
            rows = np.isnan(xs[0]) & np.isnan(xs[1])
        else:
            return None
        return rows if rows.any() else None

    def _rank_axis(self, o: Any, name: str) -> int:
        return -1 if name == "chlo.top_k" else int(self.ir.IntegerAttr(o.attributes["dimension"]).value)

    def _carried(self, o: Any, name: str, args: list[np.ndarray], ins: list[np.ndarray | None],
                 shapes: list[tuple[int, ...]],
                 made: np.ndarray | None) -> list[np.ndarray | None]:
        def mark(i: int) -> np.ndarray:
            m = ins[i]
            return np.zeros(np.shape(args[i]), bool) if m is None else m

        if name in SAME_INDEX:
            union = np.logical_or.reduce([np.broadcast_to(mark(i), shapes[0]) for i in range(len(args))])
            if made is not None:
                union = union | np.broadcast_to(made, shapes[0])
            return [union]
        if name in ("chlo.top_k", "stablehlo.sort"):
            # The ranked values themselves are exact under the two uniform signs: with p of
            # a row's m NaNs positive, slot j holds a NaN or the (j - p)-th value in order,
            # monotone in p, so p = 0 and p = m bound it. Which element went where (top_k's
            # indices, what sort carries along) is not: any NaN may rank first.
            axis = self._rank_axis(o, name)
            rows = np.logical_or.reduce([mark(i).any(axis=axis, keepdims=True) for i in range(len(args))])
            return [np.broadcast_to(rows | made if made is not None and k > 0 else rows, sh).copy()
                    for k, sh in enumerate(shapes)]
        if name == "stablehlo.reduce" and len(args) % 2 == 0:
            axes = tuple(self._ints(o, "dimensions"))
            n = len(args) // 2
            union = np.logical_or.reduce([mark(i).any(axis=axes) for i in range(n)])
            union = union | np.logical_or.reduce([mark(i).any() for i in range(n, len(args))])
            return [np.broadcast_to(union, sh).copy() for sh in shapes]
        if name == "stablehlo.optimization_barrier":
            return list(ins)
        if name in MOVING and (data := MOVING[name] or len(args)) \
                and all(m is None or not m.any() for m in ins[data:]):
            moved = getattr(self, "op_" + name.replace(".", "_"))(o, [mark(i) for i in range(data)] + args[data:])
            return [np.asarray(moved).astype(bool)]
        return [np.ones(sh, bool) for sh in shapes]  # anything else: every element

    def _observes_sign(self, o: Any, name: str) -> bool:
        if name == "stablehlo.compare":
            return "compare_type" in o.attributes and "TOTALORDER" in str(o.attributes["compare_type"])
        return name in SIGN_OBSERVERS

    # --- ops -----------------------------------------------------------------------------

    def _attr(self, o: Any, key: str) -> Any:
        return o.attributes[key]

    def _ints(self, o: Any, key: str) -> list[int]:
        a = o.attributes[key]
        try:
            return [int(v) for v in self.ir.DenseI64ArrayAttr(a)]
        except (TypeError, ValueError):
            return [int(v) for v in np.asarray(self.ir.DenseIntElementsAttr(a)).reshape(-1)]

    def _apply(self, o: Any, name: str, args: list[np.ndarray]) -> list[np.ndarray]:
        if name in ELEMENTWISE:
            form = OPS[ELEMENTWISE[name]].numpy
            assert isinstance(form, nf.Elementwise), name
            return [form.kernel(*args)]
        if name in EXTRA_ELEMENTWISE:
            return [EXTRA_ELEMENTWISE[name](*args)]
        handler = getattr(self, "op_" + name.replace(".", "_"), None)
        if handler is None:
            raise Unsupported(name)
        out = handler(o, args)
        return out if isinstance(out, list) else [out]

    def op_stablehlo_constant(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        return self.held(_constant(self.ir, o.attributes["value"]))

    def op_stablehlo_compare(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        from jaxlib.mlir.dialects import stablehlo

        direction = stablehlo.ComparisonDirectionAttr(o.attributes["comparison_direction"]).value.lower()
        x, y = args
        if "compare_type" in o.attributes and "TOTALORDER" in str(o.attributes["compare_type"]):
            x, y = nf.total_order_key(x), nf.total_order_key(y)
        compared: np.ndarray = nf.COMPARES[direction](x, y)
        return compared

    def op_stablehlo_select(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        return np.where(*args)

    def op_stablehlo_clamp(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        return nf.np_clamp(args[0], args[1], args[2])

    def op_stablehlo_convert(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        source, target = self.dtype_of(o.operands[0]), self.dtype_of(o.results[0])
        if target not in NP_DTYPES and target not in EXTRA_DTYPES:
            raise Unsupported("convert to " + target)
        # Between f64 and f32 (or bf16) XLA:CPU converts with a float instruction under
        # DAZ and FTZ (F32_RANGE_CONVERTS): an operand below f32's smallest normal number
        # is a zero of its sign (FTZ decides before rounding: -0.999 * tiny gives -0).
        if {source, target} in F32_RANGE_CONVERTS:
            return nf.np_convert(_flush_below_f32(args[0]), target)
        return nf.np_convert(args[0], _np_dtype(target))

    def op_stablehlo_bitcast_convert(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        src = self.own(args[0], o.operands[0])
        dst = _np_dtype(self.dtype_of(o.results[0]))
        if src.dtype.itemsize != dst.itemsize:
            raise Unsupported("bitcast between widths")
        return src.view(dst)

    def op_chlo_next_after(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        return nf.np_nextafter(self.own(args[0], o.operands[0]), self.own(args[1], o.operands[1]))

    def op_stablehlo_reduce_precision(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        return nf.np_reduce_precision(args[0], int(self.ir.IntegerAttr(o.attributes["exponent_bits"]).value),
                                     int(self.ir.IntegerAttr(o.attributes["mantissa_bits"]).value))

    def op_stablehlo_iota(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        shape = self.shape_of(o.results[0])
        dim = int(self.ir.IntegerAttr(o.attributes["iota_dimension"]).value)
        it = np.arange(shape[dim]).reshape([-1 if d == dim else 1 for d in range(len(shape))])
        dtype = self.dtype_of(o.results[0])
        # Exact in float64: iota's values are what the op means, as in f64_eager.
        return np.broadcast_to(it, shape).astype(np.float64 if dtype in ("f32", "bf16", "f16") else _np_dtype(dtype))

    def op_stablehlo_broadcast_in_dim(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        return nf.np_broadcast_in_dim(args[0], self.shape_of(o.results[0]),
                                     self._ints(o, "broadcast_dimensions"))

    def op_stablehlo_reshape(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        return np.reshape(args[0], self.shape_of(o.results[0]))

    def op_stablehlo_transpose(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        return np.transpose(args[0], self._ints(o, "permutation"))

    def op_stablehlo_reverse(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        return np.flip(args[0], tuple(self._ints(o, "dimensions")))

    def op_stablehlo_concatenate(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(args, int(self.ir.IntegerAttr(o.attributes["dimension"]).value))

    def op_stablehlo_slice(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        start, limit, stride = (self._ints(o, k) for k in ("start_indices", "limit_indices", "strides"))
        return args[0][tuple(slice(*t) for t in zip(start, limit, stride, strict=True))]

    def op_stablehlo_pad(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        config = zip(self._ints(o, "edge_padding_low"), self._ints(o, "edge_padding_high"),
                     self._ints(o, "interior_padding"), strict=True)
        return nf.np_pad(args[0], args[1], list(config))

    def op_stablehlo_dynamic_slice(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        return nf.np_dynamic_slice(args[0], args[1:], self._ints(o, "slice_sizes"))

    def op_stablehlo_dynamic_update_slice(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        return nf.np_dynamic_update_slice(args[0], args[1], args[2:])

    def op_stablehlo_optimization_barrier(self, o: Any, args: list[np.ndarray]) -> list[np.ndarray]:
        return list(args)

    def op_stablehlo_dot_general(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        from jaxlib.mlir.dialects import stablehlo

        d = stablehlo.DotDimensionNumbers(o.attributes["dot_dimension_numbers"])
        return nf.np_dot_general(args[0], args[1], list(d.lhs_contracting_dimensions),
                                list(d.rhs_contracting_dimensions), list(d.lhs_batching_dimensions),
                                list(d.rhs_batching_dimensions))

    def op_stablehlo_convolution(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        from jaxlib.mlir.dialects import stablehlo

        d = stablehlo.ConvDimensionNumbers(o.attributes["dimension_numbers"])
        groups = [int(self.ir.IntegerAttr(o.attributes[k]).value) for k in ("feature_group_count", "batch_group_count")]
        reversed_ = "window_reversal" in o.attributes and "true" in str(o.attributes["window_reversal"])
        if groups != [1, 1] or reversed_:
            raise Unsupported("grouped or reversed convolution")
        x = np.transpose(args[0], [d.input_batch_dimension, d.input_feature_dimension, *d.input_spatial_dimensions])
        w = np.transpose(args[1], [d.kernel_output_feature_dimension, d.kernel_input_feature_dimension,
                                   *d.kernel_spatial_dimensions])
        n = x.ndim - 2
        ones = [1] * n
        strides = self._ints(o, "window_strides") if "window_strides" in o.attributes else ones
        flat = self._ints(o, "padding") if "padding" in o.attributes else [0] * 2 * n
        lhs_d = self._ints(o, "lhs_dilation") if "lhs_dilation" in o.attributes else ones
        rhs_d = self._ints(o, "rhs_dilation") if "rhs_dilation" in o.attributes else ones
        out = nf.np_conv(x, w, strides, list(zip(flat[::2], flat[1::2], strict=True)), lhs_d, rhs_d)
        layout = [d.output_batch_dimension, d.output_feature_dimension, *d.output_spatial_dimensions]
        return np.transpose(out, np.argsort(layout))

    def _body_kind(self, region: Any) -> str | None:
        """The op of a body that applies one binary op to its two arguments, or "replace"
        for one that returns its second argument."""
        block = region.blocks[0]
        body = list(block.operations)
        args = list(block.arguments)
        if len(body) == 1 and len(args) == 2 and body[0].operation.operands[0] == args[1]:
            return "replace"
        if len(body) != 2 or body[0].operation.name not in BODY_KINDS:
            return None
        if set(body[0].operation.operands) != set(args) or body[1].operation.operands[0] != body[0].operation.results[0]:
            return None
        return BODY_KINDS[body[0].operation.name]

    def op_stablehlo_reduce(self, o: Any, args: list[np.ndarray]) -> list[np.ndarray]:
        axes = self._ints(o, "dimensions")
        n = len(args) // 2
        xs, inits = args[:n], args[n:]
        kind = self._body_kind(o.regions[0]) if n == 1 else None
        if kind is not None and kind != "replace":
            out = nf.np_reduce(xs[0], kind, axes)
            return [nf.REDUCERS[kind](np.asarray(inits[0]), out).astype(out.dtype)]
        return self._tree_reduce(o.regions[0].blocks[0], xs, inits, axes)

    def _tree_reduce(self, block: Any, xs: list[np.ndarray], inits: list[np.ndarray], axes: list[int]) -> list[np.ndarray]:
        """Any reduction body, applied pairwise over the reduced elements in order (the
        schedule is XLA's to choose; the body is meant to be associative), then to init."""
        kept = [d for d in range(xs[0].ndim) if d not in axes]
        flat = [np.transpose(x, kept + axes).reshape(*[x.shape[d] for d in kept], -1) for x in xs]
        while flat[0].shape[-1] > 1:
            m = flat[0].shape[-1]
            half = m // 2
            pairs = self.run_block(block, [x[..., 0:2 * half:2] for x in flat] + [x[..., 1:2 * half:2] for x in flat])
            flat = [np.concatenate([p, x[..., 2 * half:]], -1) if m % 2 else p for p, x in zip(pairs, flat, strict=True)]
        if flat[0].shape[-1] == 0:
            return [np.broadcast_to(i, x.shape[:-1]).copy() for i, x in zip(inits, flat, strict=True)]
        tops = [x[..., 0] for x in flat]
        return self.run_block(block, [np.broadcast_to(i, t.shape) for i, t in zip(inits, tops, strict=True)] + tops)

    def op_stablehlo_reduce_window(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        kind = self._body_kind(o.regions[0])
        if len(args) != 2 or kind in (None, "replace"):
            raise Unsupported("reduce_window with a body other than one binary op")
        x, init = args
        rank = x.ndim
        window = self._ints(o, "window_dimensions")
        strides = self._ints(o, "window_strides") if "window_strides" in o.attributes else [1] * rank
        flat = self._ints(o, "padding") if "padding" in o.attributes else [0] * 2 * rank
        base = self._ints(o, "base_dilations") if "base_dilations" in o.attributes else None
        wdil = self._ints(o, "window_dilations") if "window_dilations" in o.attributes else None
        return nf.np_reduce_window(x, init, kind, window, strides, list(zip(flat[::2], flat[1::2], strict=True)),
                                  base, wdil)

    def op_stablehlo_gather(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        from jaxlib.mlir.dialects import stablehlo

        d = stablehlo.GatherDimensionNumbers(o.attributes["dimension_numbers"])
        if list(d.operand_batching_dims):
            raise Unsupported("batched gather")
        return np_gather(args[0], args[1], list(d.offset_dims), list(d.collapsed_slice_dims),
                         list(d.start_index_map), d.index_vector_dim, self._ints(o, "slice_sizes"))

    def op_stablehlo_scatter(self, o: Any, args: list[np.ndarray]) -> np.ndarray:
        from jaxlib.mlir.dialects import stablehlo

        d = stablehlo.ScatterDimensionNumbers(o.attributes["scatter_dimension_numbers"])
        kind = self._body_kind(o.regions[0])
        if len(args) != 3 or kind is None or list(d.input_batching_dims):
            raise Unsupported("scatter with a general body")
        return np_scatter(args[0], args[1], args[2], list(d.update_window_dims), list(d.inserted_window_dims),
                          list(d.scattered_dims_to_operand_dims), d.index_vector_dim, kind)

    def op_stablehlo_sort(self, o: Any, args: list[np.ndarray]) -> list[np.ndarray]:
        dim = int(self.ir.IntegerAttr(o.attributes["dimension"]).value)
        key = self._sort_key(o.regions[0].blocks[0], args)
        order = np.argsort(key, axis=dim, kind="stable")
        return [np.take_along_axis(x, order, dim) for x in args]

    def _sort_key(self, block: Any, args: list[np.ndarray]) -> np.ndarray:
        """A comparator `compare(LT or GT, f(a0), f(b0))` over the first operand only (what
        lax.sort emits: f canonicalizes -0 and NaN) becomes an int64 key of f(a0)."""
        ops = list(block.operations)
        ret = ops[-1].operation.operands[0]
        cmp = ret.owner
        if cmp.name != "stablehlo.compare":
            raise Unsupported("sort comparator")
        from jaxlib.mlir.dialects import stablehlo

        direction = stablehlo.ComparisonDirectionAttr(cmp.attributes["comparison_direction"]).value
        total = "TOTALORDER" in str(cmp.attributes["compare_type"]) if "compare_type" in cmp.attributes else False
        if direction not in ("LT", "GT") or (nf.np_is_float(args[0]) and not total):
            raise Unsupported("sort comparator")
        # Evaluate the comparator's two sides with a0 and b0 both bound to the operand:
        # equal results show both sides apply the same f, and give f(operand).
        env = self.env
        env.update(zip(block.arguments, [args[i // 2] for i in range(2 * len(args))], strict=True))
        opened = self.opened  # the comparator, run on one operand against itself, ranks nothing
        self._run_ops(block, env)
        self.opened = opened
        lhs, rhs = env_value(env, cmp.operands[0]), env_value(env, cmp.operands[1])
        uses = {str(a.get_name()) for a in block.arguments[2:]} & {
            str(v.get_name()) for op in ops for v in op.operation.operands}
        if uses or not np.array_equal(lhs, rhs, equal_nan=True):
            raise Unsupported("sort comparator")
        key = nf.total_order_key(lhs)
        return key if direction == "LT" else -key

    def op_chlo_top_k(self, o: Any, args: list[np.ndarray]) -> list[np.ndarray]:
        values, idx = nf.np_top_k(args[0], int(self.ir.IntegerAttr(o.attributes["k"]).value))
        return [values, idx.astype(_np_dtype(self.dtype_of(o.results[1])))]

    def op_stablehlo_while(self, o: Any, args: list[np.ndarray]) -> list[np.ndarray]:
        cond, body = o.regions[0].blocks[0], o.regions[1].blocks[0]
        state = list(args)
        while bool(self.run_block(cond, state)[0]):
            state = self.run_block(body, state)
        return state

    def op_stablehlo_case(self, o: Any, args: list[np.ndarray]) -> list[np.ndarray]:
        index = int(args[0])
        n = len(o.regions)
        # Out of range runs the last branch (StableHLO's rule).
        branch = o.regions[index if 0 <= index < n else n - 1]
        return self.run_block(branch.blocks[0], [])

    def op_stablehlo_if(self, o: Any, args: list[np.ndarray]) -> list[np.ndarray]:
        return self.run_block(o.regions[0 if bool(args[0]) else 1].blocks[0], [])

    def op_func_call(self, o: Any, args: list[np.ndarray]) -> list[np.ndarray]:
        callee = str(o.attributes["callee"]).lstrip("@").strip('"')
        return self.run_block(self.functions[callee].regions[0].blocks[0], args)

    # --- fallback ------------------------------------------------------------------------

    def _fallback(self, o: Any, args: list[np.ndarray]) -> list[np.ndarray]:
        """The op alone, with its floats in float64, evaluated by the fallback."""
        from jaxlib.mlir.dialects import func

        from xla_sentinel.core.program import promote_floats

        if self.fallback is None:
            raise Unsupported(f"{o.name}: no numpy form, and no fallback evaluator was given")

        ir = self.ir
        with ir.Location.unknown(self.ctx):
            m = ir.Module.create()
            with ir.InsertionPoint(m.body):
                f = func.FuncOp("main", ir.FunctionType.get([v.type for v in o.operands],
                                                             [r.type for r in o.results]))
                f.attributes["sym_visibility"] = ir.StringAttr.get("public")
                # jaxlib's func.py subclasses the generated FuncOp under the same name to add
                # add_entry_block; mypy keeps the first definition, which lacks it.
                block = f.add_entry_block()  # type: ignore[attr-defined]
                with ir.InsertionPoint(block):
                    clone = o.clone()
                    for i, a in enumerate(block.arguments):
                        clone.operands[i] = a
                    func.ReturnOp(list(clone.results))
        text = promote_floats(str(m))
        if text is None:
            raise ValueError(f"{o.name}: no float64 form for XLA either")
        return self.fallback(text, [np.ascontiguousarray(a) for a in args])


def env_value(env: dict[Any, np.ndarray], value: Any) -> np.ndarray:
    return env[value]


def _constant(ir: Any, attr: Any) -> np.ndarray:
    t = ir.RankedTensorType(attr.type)
    dtype = MLIR_DTYPES[str(t.element_type)]
    shape = list(t.shape)
    if dtype != "bf16":
        return np.broadcast_to(np.array(ir.DenseElementsAttr(attr)), shape).astype(_np_dtype(dtype))
    # The bindings give no buffer for bf16: read the printed literal (decimal, or hex bits).
    text = str(attr)
    body = text[text.index("<") + 1:text.rindex("> :")]
    if body.startswith('"0x'):
        raw = bytes.fromhex(body[3:-1])
        bits: np.ndarray = np.frombuffer(raw, np.uint16).view(nf.BF16)
        return bits.reshape(shape)
    tokens = [t for t in body.replace("[", " ").replace("]", " ").replace(",", " ").split() if t]
    vals = [np.uint16(int(t, 16)).view(nf.BF16) if t.startswith("0x") else nf.BF16.type(float(t)) for t in tokens]
    return np.broadcast_to(np.array(vals, nf.BF16).reshape(-1 if len(vals) > 1 else ()), shape)


def np_gather(x: np.ndarray, idx: np.ndarray, offset_dims: list[int], collapsed: list[int],
              start_index_map: list[int], index_vector_dim: int, slice_sizes: list[int]) -> np.ndarray:
    """StableHLO gather: each start index clamped so its slice fits (like dynamic_slice)."""
    if index_vector_dim == idx.ndim:
        idx = idx[..., None]
    idx = np.moveaxis(idx, index_vector_dim, -1).astype(np.int64)
    batch = idx.shape[:-1]
    starts = np.zeros((*batch, x.ndim), np.int64)
    for k, d in enumerate(start_index_map):
        starts[..., d] = idx[..., k]
    starts = np.clip(starts, 0, np.array(x.shape) - np.array(slice_sizes))
    grid = np.indices(slice_sizes)  # (rank, *slice_sizes)
    nb = len(batch)
    full = [starts[(..., d) + (None,) * x.ndim] + grid[d].reshape((1,) * nb + grid[d].shape)
            for d in range(x.ndim)]
    out = x[tuple(full)]  # (*batch, *slice_sizes)
    out = out.reshape(*batch, *[s for d, s in enumerate(slice_sizes) if d not in collapsed])
    rank = out.ndim
    batch_pos = [d for d in range(rank) if d not in offset_dims]
    order = [0] * rank
    for i, d in enumerate(batch_pos):
        order[d] = i
    for i, d in enumerate(offset_dims):
        order[d] = nb + i
    return np.transpose(out, order)


def np_scatter(x: np.ndarray, idx: np.ndarray, updates: np.ndarray, window_dims: list[int],
               inserted: list[int], to_operand: list[int], index_vector_dim: int, kind: str) -> np.ndarray:
    """StableHLO scatter: an update window that does not fit in the operand is skipped
    (XLA:CPU's choice; jax's FILL_OR_DROP relies on it)."""
    if index_vector_dim == idx.ndim:
        idx = idx[..., None]
    idx = np.moveaxis(idx, index_vector_dim, -1).astype(np.int64).reshape(-1, len(to_operand))
    scatter_dims = [d for d in range(updates.ndim) if d not in window_dims]
    upd = np.transpose(updates, scatter_dims + window_dims).reshape(idx.shape[0], *[updates.shape[d] for d in window_dims])
    win_sizes = iter(upd.shape[1:])
    window = [1 if d in inserted else next(win_sizes) for d in range(x.ndim)]
    upd = upd.reshape(idx.shape[0], *window)
    out = x.copy()
    for n in range(idx.shape[0]):
        start = [0] * x.ndim
        for k, d in enumerate(to_operand):
            start[d] = int(idx[n, k])
        if any(s < 0 or s + w > dim for s, w, dim in zip(start, window, x.shape, strict=True)):
            continue
        region = tuple(slice(s, s + w) for s, w in zip(start, window, strict=True))
        out[region] = upd[n] if kind == "replace" else nf.REDUCERS[kind](out[region], upd[n])
    return out
