"""The oracle: tell a legal floating-point difference from a miscompile.

Floats are judged normwise against a float64 reference (docs/architecture.md): configuration C is
wrong when e_C > k * max(min over the other configurations of e_L, noise, u), where e is
||a - ref|| / ||ref|| over finite elements, noise is the error of the float64 program
with every op perturbed by one rounding, and u the unit roundoff. Using the minimum over
the others (not the maximum) matters: a real bug is often shared by several
configurations. An output that IEEE 754 determines bitwise (exact.py: movement, selection,
compares, conversions, one correctly rounded op per path) must instead equal the literal
op-by-op evaluation value for value: a conversion that truncates is one ulp off, below
k*u. Non-finite patterns are compared apart: C is flagged where it is finite
and the reference is not, or the other way round, and another configuration agrees with
the reference. Integer outputs computed without floats are compared exactly; those
that depend on floats must differ from every agreeing configuration and from the noise
model before they count. A float output that passes normwise is judged element by element
too (`componentwise`): the norm dilutes a few wrong elements in a large output. Pure numpy.

Each rule is a function of one output (Output, of a Case: what `judge` is given), answering a
judgement or None ("not mine"); RULES is their order, and adding a rule is one function and
one entry there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import ml_dtypes
import numpy as np

from xla_sentinel.core.dtypes import (
    DISCRETE_FACTOR,
    NP_DTYPES,
    TOLERANCE_K,
    UNIT_ROUNDOFF,
    subnormal,
)
from xla_sentinel.core.graph import Graph, Node
from xla_sentinel.core.model import Verdict
from xla_sentinel.core.names import FLOATS
from xla_sentinel.judge.noise import NoiseModel, Samples
from xla_sentinel.ops.entries.templates import NEAR_TIES, NOISY_FORMS
from xla_sentinel.ops.table import OPS

# Two float64 references that differ by more than this (normwise) mean the program is
# too ill-conditioned, or a reference is itself hit by a bug: no float verdict then.
REFERENCE_AGREEMENT = 1e-6


@dataclass
class OutputInfo:
    dtype: str
    tainted: bool = True
    # IEEE 754 fixes it bitwise (exact.py): it must equal the literal op-by-op result.
    bitwise: bool = False


@dataclass
class Judgement:
    verdict: Verdict
    output: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)


def nan_classes(a: np.ndarray) -> np.ndarray:
    """0 finite, 1 NaN, 2 +Inf, 3 -Inf, elementwise."""
    a = np.asarray(a, dtype=np.float64)
    c = np.zeros(a.shape, np.int8)
    c[np.isnan(a)] = 1
    c[np.isposinf(a)] = 2
    c[np.isneginf(a)] = 3
    return c


def _cast_ref(ref: np.ndarray, dtype: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(ref).astype(NP_DTYPES[dtype]).astype(np.float64)


def _smallest_normal(dtype: str) -> float:
    # ml_dtypes.finfo (numpy's knows no bfloat16) carries no type hints.
    return float(ml_dtypes.finfo(NP_DTYPES[dtype]).tiny)  # type: ignore[no-untyped-call]


def normwise_error(a: np.ndarray, ref: np.ndarray, dtype: str) -> float:
    """||a - ref|| / ||ref|| over elements finite in both (ref taken in float64)."""
    a64 = np.asarray(a, dtype=np.float64)
    r64 = np.asarray(ref, dtype=np.float64)
    mask = np.isfinite(a64) & np.isfinite(_cast_ref(r64, dtype)) & np.isfinite(r64)
    if not mask.any():
        return 0.0
    # Both norms are taken of values divided by the largest magnitude: squaring f64 values
    # beyond 1e154 overflows, and inf / inf made the error NaN, which no threshold flags.
    scale = float(max(np.abs(a64[mask]).max(), np.abs(r64[mask]).max()))
    if scale == 0.0:
        return 0.0
    diff = float(np.linalg.norm(a64[mask] / scale - r64[mask] / scale))
    tiny = _smallest_normal(dtype) * np.sqrt(mask.sum())
    denominator = max(float(np.linalg.norm(r64[mask] / scale)), tiny / scale)
    # tiny / scale underflows to 0 for a huge output against an all-zero reference.
    return diff / denominator if denominator > 0.0 else float("inf")


def ulp_distance(a: np.ndarray, b: np.ndarray, dtype: str) -> int:
    """Max distance in units in the last place of `dtype` between finite elements."""
    dt = NP_DTYPES[dtype]
    widths: dict[int, type[np.signedinteger[Any]]] = {2: np.int16, 4: np.int32, 8: np.int64}
    bits = widths[dt.itemsize]
    x = np.asarray(a).astype(dt)
    y = np.asarray(b).astype(dt)
    mask = np.isfinite(x.astype(np.float64)) & np.isfinite(y.astype(np.float64))
    if not mask.any():
        return 0

    def ordered(v: np.ndarray) -> np.ndarray:
        i = v.view(bits).astype(np.int64)
        return np.where(i < 0, np.iinfo(bits).min - i, i)

    return int(np.max(np.abs(ordered(x[mask]) - ordered(y[mask]))))


def _nan_differs(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether one of two outputs holds NaN where the other does not."""
    with np.errstate(invalid="ignore"):
        return bool(np.any(np.isnan(np.asarray(a, np.float64)) != np.isnan(np.asarray(b, np.float64))))


def error_stats(a: np.ndarray, ref: np.ndarray, dtype: str) -> dict[str, Any]:
    """Evidence for a report: max abs/rel error, ULPs, and where the worst element is."""
    a64 = np.asarray(a, dtype=np.float64)
    r64 = np.asarray(ref, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        absdiff = np.abs(a64 - r64)
    absdiff = np.where(np.isfinite(absdiff), absdiff, 0.0)
    stats: dict[str, Any] = {"max_abs": float(absdiff.max()) if absdiff.size else 0.0}
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(np.abs(r64) > 0, absdiff / np.abs(r64), 0.0)
    stats["max_rel"] = float(np.nanmax(rel)) if rel.size else 0.0
    if absdiff.size:
        # An element is wrong where the values differ, NaN against a number or an infinity
        # included (their difference is no finite error, so absdiff holds 0 there).
        wrong = ~((a64 == r64) | (np.isnan(a64) & np.isnan(r64)))
        worst = int(np.argmax(absdiff)) if absdiff.max() > 0 or not wrong.any() else int(np.argmax(wrong))
        where = np.unravel_index(worst, absdiff.shape)
        stats["where"] = [int(i) for i in where]
        stats["actual"] = float(a64[where])
        stats["expected"] = float(r64[where])
        stats["wrong_elements"] = int(np.count_nonzero(wrong))
        stats["elements"] = int(absdiff.size)
    if dtype in FLOATS:
        stats["max_ulp"] = ulp_distance(a, _cast_ref(r64, dtype), dtype)
    return stats


def _flushed(a: np.ndarray, dtype: str) -> np.ndarray:
    x = np.asarray(a).astype(np.float64)
    return np.where(np.abs(x) < _smallest_normal(dtype), 0.0, x)


def same_elements(a: np.ndarray, b: np.ndarray, dtype: str) -> np.ndarray:
    """Elementwise, equal as numbers: NaN equals NaN (whatever its sign and payload), -0
    equals +0, and a subnormal equals zero. XLA:CPU flushes subnormals in some code paths and
    not in others: a clean-run bf16 broadcast kept 2.9e-39 at O0 and gave 0 op by op."""
    if dtype not in FLOATS:
        same: np.ndarray = np.asarray(a) == np.asarray(b)
        return same
    x, y = _flushed(a, dtype), _flushed(b, dtype)
    both: np.ndarray = (x == y) | (np.isnan(x) & np.isnan(y))
    return both


def same_values(a: np.ndarray, b: np.ndarray, dtype: str) -> bool:
    """Equal element for element as numbers (same_elements), and of one shape."""
    return np.shape(a) == np.shape(b) and bool(same_elements(a, b, dtype).all())


def has_subnormals(arrays: list[np.ndarray]) -> bool:
    """Does any float array hold a subnormal? Flushed or not, it may then change a normal
    result further on (x > 0, x * 2^100), so such inputs get no bitwise judgement."""
    floats = {NP_DTYPES[d] for d in FLOATS}
    return any(subnormal(a).any() for a in map(np.asarray, arrays) if a.dtype in floats)


def references_agree(a: list[np.ndarray], b: list[np.ndarray], infos: list[OutputInfo]) -> bool:
    for x, y, info in zip(a, b, infos, strict=True):
        if info.dtype in FLOATS:
            if not np.array_equal(nan_classes(x), nan_classes(y)):
                return False
            if normwise_error(x, y, "f64") > REFERENCE_AGREEMENT:
                return False
        elif not np.array_equal(x, y):
            return False
    return True


def without_undetermined(outputs: list[np.ndarray], undetermined: list[np.ndarray] | None) -> list[np.ndarray]:
    """Outputs with the elements the program leaves open blanked alike in every
    configuration (floats NaN, integers 0), so that no rule judges them: `undetermined`
    marks, per output, the elements that depend on the sign of a NaN IEEE 754 does not fix
    (npref.Evaluation.undetermined; s24-i827: top_k of tanh(log(|NaN| + 0.5)); XLA:CPU's
    fused log makes -NaN, which its top_k ranks last, numpy keeps +NaN, ranked first), or on
    a choice within rounding of a tie (near_tie_undetermined). An output of another shape
    keeps its values: its shape is judged."""
    if undetermined is None:
        return outputs
    out = []
    for x, m in zip(outputs, undetermined, strict=True):
        x = np.asarray(x)
        if m.any() and x.shape == m.shape:
            x = x.copy()
            x[m] = np.nan if x.dtype.kind == "f" or x.dtype in {NP_DTYPES[d] for d in FLOATS} else 0
        out.append(x)
    return out


def _numpy_walk(graph: Graph, inputs: Sequence[np.ndarray],
                at_near_ties: Callable[[int, Node, list[np.ndarray], np.ndarray], np.ndarray],
                ) -> list[np.ndarray]:
    """The graph in float64 by its ops' numpy forms (the forms npref evaluates), with each
    result of a NEAR_TIES op replaced by `at_near_ties(value, node, operands, result)`."""
    floats = {NP_DTYPES[d] for d in FLOATS}

    def load(v: int, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        return x.astype(np.float64) if x.dtype in floats else x

    def apply(v: int, node: Node, xs: list[np.ndarray]) -> np.ndarray:
        op = OPS[node.op]
        if op.own_dtypes:  # bit casts and nextafter read their operands in their own dtypes
            xs = [np.asarray(x).astype(NP_DTYPES[graph.values[a].dtype]) for x, a in zip(xs, node.args, strict=True)]
        if op.numpy is None:
            raise TypeError(f"{node.op} has no numpy form")
        out = np.asarray(op.numpy(node.attrs, *xs))
        if out.dtype in floats:
            out = out.astype(np.float64)
        return at_near_ties(v, node, xs, out) if node.op in NEAR_TIES else out

    with np.errstate(all="ignore"):
        return [np.asarray(o) for o in graph.run(list(inputs), apply, load)]


def near_tie_undetermined(graph: Graph, inputs: Sequence[np.ndarray]) -> list[np.ndarray] | None:
    """Per output, the elements that depend on a row of an op whose float64 choice is within
    rounding of a tie in the program's dtype (templates.NEAR_TIES: topk_routing's experts,
    s31-i184; top_k's indices), or None where there is no such row. Legal rounding decides
    such a row either way, and the noise model's samples flip it; judged with the others,
    the flips made the samples' normwise error of s31-i184's gates 0.10 to 0.15 and the
    output's threshold past 100 %, so a wrong gate in any other row passed (and one flip
    of top_k's indices passes the whole integer output). Left undetermined
    (without_undetermined), they leave the other rows judged tightly.

    Found as npref finds the elements a NaN's open sign decides: the graph evaluated again
    with those rows made NaN (integers inverted: what depends on them at all) and with each
    near tie of a template resolved the other way (its directed noisy form, NOISY_FORMS:
    what a compare or an integer further on makes of the flip); an output element that
    differs is marked. Each row's rounding bound uses the unit roundoff of the op's operand
    dtype, the program's, as the noise model does. A walk that a numpy form refuses (a NaN
    made an index) adds no marks."""
    if not any(n.op in NEAR_TIES for n in graph.nodes):
        return None
    rows: dict[int, np.ndarray] = {}

    def record(v: int, node: Node, xs: list[np.ndarray], out: np.ndarray) -> np.ndarray:
        operand = graph.values[node.args[0]]
        u = UNIT_ROUNDOFF.get(operand.dtype)  # an integer operand ranks exactly
        rows[v] = np.zeros(np.shape(out)[:-1], bool) if u is None else np.asarray(
            NEAR_TIES[node.op](node.attrs, xs, u, operand.bitwise is True), bool)
        return out

    try:
        plain = _numpy_walk(graph, inputs, record)
    except Exception:  # a numpy form that refuses the inputs: no marks, as before
        return None
    if not any(r.any() for r in rows.values()):
        return None

    def poisoned(v: int, node: Node, xs: list[np.ndarray], out: np.ndarray) -> np.ndarray:
        # A float row NaN; an integer row (top_k's indices) inverted, unlike what it held.
        out = out.copy()
        out[rows[v]] = np.nan if out.dtype.kind == "f" else np.invert(out[rows[v]])
        return out

    def flipped(sign: float) -> Callable[[int, Node, list[np.ndarray], np.ndarray], np.ndarray]:
        def at(v: int, node: Node, xs: list[np.ndarray], out: np.ndarray) -> np.ndarray:
            if node.op not in NOISY_FORMS:
                return out
            u = UNIT_ROUNDOFF[graph.values[v].dtype]
            return np.asarray(NOISY_FORMS[node.op](node.attrs, xs, u, sign, None), np.float64)
        return at

    marks = [np.zeros(np.shape(x), bool) for x in plain]
    for at in (poisoned, flipped(1.0), flipped(-1.0)):
        try:
            other = _numpy_walk(graph, inputs, at)
        except Exception:  # see above: this walk adds no marks
            continue
        for m, x, y in zip(marks, plain, other, strict=True):
            if np.shape(x) == np.shape(y):
                m |= ~_same_elements(x, y)
    return marks if any(m.any() for m in marks) else None


def _same_elements(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: equal values, any NaN equal to any NaN."""
    a, b = np.asarray(a), np.asarray(b)
    eq = np.asarray(a == b)
    if a.dtype.kind == "f" and b.dtype.kind == "f":
        eq |= np.isnan(a) & np.isnan(b)
    return eq


def either_undetermined(*masks: list[np.ndarray] | None) -> list[np.ndarray] | None:
    """Per output, the elements left undetermined by any of `masks` (None: none)."""
    given = [m for m in masks if m is not None]
    if not given:
        return None
    out = [np.asarray(m, bool).copy() for m in given[0]]
    for more in given[1:]:
        for o, m in zip(out, more, strict=True):
            if np.shape(m) == o.shape:
                o |= m
    return out


def _nan_mismatch(c: np.ndarray, others: list[np.ndarray], ref: np.ndarray, dtype: str,
                  literal: np.ndarray | None = None) -> dict[str, Any] | None:
    want = nan_classes(_cast_ref(ref, dtype))
    got = nan_classes(c)
    # Non-finite against non-finite (NaN against -inf, say) is no verdict: once a value
    # overflows, whether inf - inf cancels depends legally on accumulation order and FMA
    # (a clean-run dot: O0 rounds 2.8 * 1.7e38 to +inf and adds -inf; FMA targets do not).
    bad = (got != want) & ~((got > 0) & (want > 0))
    if literal is not None:
        # A NaN or inf where float64 is finite, which the program's own precision makes
        # op by op too, is what the program says: f16 (1 + 23/1024)^2 rounds up to
        # 1 + 47/1024, times 62656 is 65532 (inf, so b - b is NaN), where float64 has
        # 65502 (finite, in range, so no overflow rule applies). Only a configuration with
        # excess precision stays finite there. A finite result where float64 is not (a
        # dropped NaN) is never excused this way.
        bad &= ~((got > 0) & (want == 0) & (nan_classes(literal) == got))
    if not bad.any():
        return None
    confirmed = np.zeros_like(bad)
    for o in others:
        confirmed |= bad & (nan_classes(o) == want)
    if not confirmed.any():
        return None
    where = tuple(int(i) for i in np.argwhere(confirmed)[0])  # argwhere: 0-d outputs too
    names = ["finite", "nan", "+inf", "-inf"]
    return {"elements": int(confirmed.sum()), "where": list(where),
            "actual_class": names[got[where]], "expected_class": names[want[where]],
            "actual": float(np.asarray(c, np.float64)[where]),
            "expected": float(np.asarray(ref, np.float64)[where])}


@dataclass(frozen=True)
class Case:
    """One configuration to judge and everything it is judged against (what `judge` is
    given, as one record). `results` maps every configuration that produced outputs
    (targets and own-precision references) to its outputs, `target` names the one judged,
    `ref64` is the float64 truth. `literal` names the op-by-op evaluation at the program's
    own precision, `exact` the configuration a bitwise output must equal (default: the
    literal one). Elements in `undetermined` (the program leaves them open:
    without_undetermined) are judged in no configuration."""

    target: str
    results: Mapping[str, list[np.ndarray]]
    ref64: list[np.ndarray]
    infos: list[OutputInfo]
    noise: NoiseModel
    discrete: bool = False
    k_overrides: Mapping[str, float] = field(default_factory=dict)
    literal: str = "eager"
    exact: str | None = None
    undetermined: list[np.ndarray] | None = None

    def settled(self) -> Case:
        """This case with its undetermined elements blanked alike in every configuration,
        the truth and the noise samples, so that no rule judges them."""
        marks = self.undetermined
        if marks is None:
            return self
        return replace(self, results={n: without_undetermined(v, marks) for n, v in self.results.items()},
                       ref64=without_undetermined(self.ref64, marks),
                       noise=self.noise.mapped(lambda s: without_undetermined(s, marks)), undetermined=None)


@dataclass(frozen=True)
class Output:
    """One output of a settled Case: the record every rule reads. What several rules
    measure (the normwise errors, the noise model's, the threshold) is measured once."""

    case: Case
    index: int

    @property
    def info(self) -> OutputInfo:
        return self.case.infos[self.index]

    @property
    def floats(self) -> bool:
        return self.info.dtype in FLOATS

    @property
    def actual(self) -> np.ndarray:
        return self.case.results[self.case.target][self.index]

    @property
    def expected(self) -> np.ndarray:
        return self.case.ref64[self.index]

    @property
    def others(self) -> dict[str, np.ndarray]:
        """This output in every configuration but the one judged."""
        return {name: v[self.index] for name, v in self.case.results.items() if name != self.case.target}

    def beside(self, name: str) -> np.ndarray | None:
        """This output in configuration `name`; None where it is absent or the one judged."""
        results = self.case.results
        return results[name][self.index] if name in results and name != self.case.target else None

    @property
    def literal(self) -> np.ndarray | None:
        return self.beside(self.case.literal)

    def samples(self) -> list[np.ndarray] | None:
        """This output in each noise sample; the first call draws the noise model."""
        samples = self.case.noise.samples()
        return None if samples is None else [s[self.index] for s in samples]

    @property
    def k(self) -> float:
        dtype = self.info.dtype
        return self.case.k_overrides.get(dtype, TOLERANCE_K[dtype]) * (DISCRETE_FACTOR if self.case.discrete else 1.0)

    @property
    def u(self) -> float:
        return UNIT_ROUNDOFF[self.info.dtype]

    @cached_property
    def error(self) -> float:
        """e_C: the normwise error of the configuration judged."""
        return normwise_error(self.actual, self.expected, self.info.dtype)

    @cached_property
    def errors_of_others(self) -> dict[str, float]:
        return {name: float(normwise_error(v, self.expected, self.info.dtype)) for name, v in self.others.items()}

    @property
    def best(self) -> float:
        """The least normwise error among the other configurations."""
        return min(self.errors_of_others.values(), default=0.0)

    @cached_property
    def noise_error(self) -> float:
        """The largest normwise error among the noise samples, 0 without them."""
        samples = self.samples()
        if samples is None:
            return 0.0
        return max((normwise_error(s, self.expected, "f64") for s in samples), default=0.0)

    @property
    def threshold(self) -> float:
        """k * max(best, u), and once the error exceeds that, k * max(best, noise, u): the
        noise model is drawn only for an output that needs it."""
        legal = self.k * max(self.best, self.u)
        if self.error <= legal:
            return legal
        return self.k * max(self.best, self.noise_error, self.u)

    @property
    def margin(self) -> float:
        """The error over its threshold: how near a miss a passing output was."""
        return self.error / self.threshold


def _passes(out: Output) -> Judgement:
    """The output passes, and no later rule is asked."""
    return Judgement(Verdict.PASS, out.index)


def shape(out: Output) -> Judgement | None:
    """Another shape than float64's."""
    got, want = np.shape(out.actual), np.shape(out.expected)
    if got == want:
        return None
    return Judgement(Verdict.MISMATCH, out.index,
                     {"reason": "shape", "actual_shape": list(got), "expected_shape": list(want)})


def bitwise(out: Output) -> Judgement | None:
    """An output IEEE 754 fixes bitwise (OutputInfo.bitwise) against the exact
    configuration, value for value (same_values): that one is the judge there, so a bug
    that every target under test shares is still caught."""
    against = out.case.exact or out.case.literal
    exact = out.beside(against)
    if not out.info.bitwise or exact is None or same_values(out.actual, exact, out.info.dtype):
        return None
    ev = error_stats(out.actual, exact, out.info.dtype)
    ev.update(reason="bitwise", dtype=out.info.dtype, against=against)
    # NaN where the exact value has none, or the reverse, is a nan_mismatch here as it is
    # for outputs judged by their error (a max all-reduce dropping a NaN, s34-i1659): one
    # bug, one verdict, whichever way its output is judged.
    return Judgement(Verdict.NAN_MISMATCH if _nan_differs(out.actual, exact) else Verdict.MISMATCH, out.index, ev)


def integer(out: Output) -> Judgement | None:
    """Every integer output: one computed without floats must equal float64's; one that
    depends on floats (tainted) is wrong only where every other configuration and every
    noise sample agree with float64 and it does not."""
    if out.floats:
        return None
    if np.array_equal(out.actual, out.expected) or (out.info.tainted and _legal_flip(out)):
        return _passes(out)
    ev = error_stats(out.actual, out.expected, out.info.dtype)
    ev.update(reason="integer", dtype=out.info.dtype, tainted=out.info.tainted)
    return Judgement(Verdict.MISMATCH, out.index, ev)


def _legal_flip(out: Output) -> bool:
    """Whether a float-dependent integer's difference may be a legal flip."""
    others = list(out.others.values())
    agreeing = [o for o in others if np.array_equal(o, out.expected)]
    samples = out.samples()
    return len(agreeing) < len(others) or not agreeing or samples is None \
        or not all(np.array_equal(s, out.expected) for s in samples)


def nan_pattern(out: Output) -> Judgement | None:
    """A NaN or inf where float64 has a number, or the reverse, that another configuration
    gets right (_nan_mismatch). An output that depends on a value beyond its dtype's range
    in float64 (the noise model's overflow) gets none: its finite elements are still
    judged by the rules after this one."""
    if not out.floats:
        return None
    found = _nan_mismatch(out.actual, list(out.others.values()), out.expected, out.info.dtype, out.literal)
    if found is None:
        return None
    prone = out.case.noise.overflow()
    if prone and prone[out.index]:
        return None
    found["dtype"] = out.info.dtype
    return Judgement(Verdict.NAN_MISMATCH, out.index, found)


def as_written(out: Output) -> Judgement | None:
    """A float output past its normwise threshold that is within k*u of the literal op-by-op
    evaluation passes, element by element too: rounding each op to its dtype, as written,
    is legal even where a configuration with excess precision lands closer to float64 (a
    clean-run f16 program: atan2 rounded to f16 hit an e5m2 tie of reduce_precision, 1 ulp
    became 12%)."""
    literal = out.literal
    if not out.floats or literal is None or out.error <= out.threshold:
        return None
    if normwise_error(out.actual, literal, out.info.dtype) > out.k * out.u:
        return None
    return _passes(out)


def normwise(out: Output) -> Judgement | None:
    """e_C > k * max(min over the others of e_L, noise, u) (the module docstring)."""
    if not out.floats or out.error <= out.threshold:
        return None
    ev = error_stats(out.actual, out.expected, out.info.dtype)
    ev.update(dtype=out.info.dtype, error=out.error, threshold=out.threshold, k=out.k, noise=out.noise_error,
              others=dict(out.errors_of_others))
    return Judgement(Verdict.MISMATCH, out.index, ev)


def componentwise(out: Output) -> Judgement | None:
    """A float output right normwise with elements wrong one by one (_wrong_elements): the
    norm dilutes a few wrong elements in a large output."""
    if not out.floats:
        return None
    wrong = _wrong_elements(out)
    if wrong is None:
        return None
    ev = error_stats(out.actual, out.expected, out.info.dtype)
    ev.update(wrong, dtype=out.info.dtype, error=out.error, k=out.k, others=dict(out.errors_of_others))
    return Judgement(Verdict.MISMATCH, out.index, ev)


Rule = Callable[[Output], Judgement | None]

# The rules, in the order they are asked about each output: the first that answers decides
# it (a verdict, or a pass that asks no later rule); one that answers None passes it on.
# An output no rule flags passes.
RULES: tuple[Rule, ...] = (shape, bitwise, integer, nan_pattern, as_written, normwise, componentwise)


def decide(out: Output, rules: Sequence[Rule] = RULES) -> Judgement:
    """The first judgement of `rules` on one output; a pass where none answers."""
    for rule in rules:
        if (j := rule(out)) is not None:
            return j
    return _passes(out)


def judge_case(case: Case, rules: Sequence[Rule] = RULES) -> Judgement:
    """Judge one configuration (Case) output by output: the first output a rule flags is
    the verdict. A pass carries the largest error/threshold ratio among the float outputs
    (`margin`: how near a miss was, which steers guided generation)."""
    settled = case.settled()
    outputs = [Output(settled, i) for i in range(len(settled.infos))]
    for out in outputs:
        if (j := decide(out, rules)).verdict != Verdict.PASS:
            return j
    return Judgement(Verdict.PASS, evidence={"margin": max([0.0, *(o.margin for o in outputs if o.floats)])})


def judge(
    target: str,
    results: Mapping[str, list[np.ndarray]],
    ref64: list[np.ndarray],
    infos: list[OutputInfo],
    noise: Callable[[], Samples | None],
    discrete: bool = False,
    k_overrides: Mapping[str, float] | None = None,
    literal: str = "eager",
    overflow_prone: Callable[[], list[bool] | None] | None = None,
    exact: str | None = None,
    undetermined: list[np.ndarray] | None = None,
) -> Judgement:
    """Judge one configuration's outputs against the reference and the other configurations
    (judge_case over the Case these make; its docstring says what each one is).

    `noise` returns the noise model's samples (each a list of outputs), `overflow_prone`,
    per output, whether it depends on a value beyond its dtype's range in float64
    (evaluate.overflow_prone); both are called at most once, together, and only when a
    rule needs either (NoiseModel.of)."""
    return judge_case(Case(target, results, ref64, infos, NoiseModel.of(noise, overflow_prone), discrete,
                           k_overrides or {}, literal, exact, undetermined))


# How many of the elements a componentwise verdict flags its evidence names (the worst).
NAMED_ELEMENTS = 8


def _element_errors(x: np.ndarray, r64: np.ndarray) -> np.ndarray:
    """|x - ref| per element, inf where either is not finite: another configuration that is
    not finite there shows no legal spread (the least over them passes over it), and a
    noise sample that overflows there excuses the element."""
    x64 = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(x64 - r64)
    return np.where(np.isfinite(d), d, np.inf)


def _least_spread(others: Sequence[np.ndarray], r64: np.ndarray) -> np.ndarray:
    """Per element, the least error any other configuration of the same shape makes."""
    spread = np.full(r64.shape, np.inf)
    for o in others:
        if np.shape(o) == r64.shape:
            spread = np.minimum(spread, _element_errors(o, r64))
    return spread


def _widened(spread: np.ndarray, samples: Sequence[np.ndarray], r64: np.ndarray) -> np.ndarray:
    """`spread`, widened to the most error any noise sample makes per element."""
    for y in samples:
        spread = np.maximum(spread, _element_errors(y, r64))
    return spread


def _as_written_elements(a64: np.ndarray, literal: np.ndarray | None, ku: float) -> np.ndarray:
    """The elements within k*u (of its largest finite magnitude) of the literal op-by-op
    evaluation; none where there is no literal evaluation of this shape."""
    if literal is None or np.shape(literal) != a64.shape:
        return np.zeros(a64.shape, bool)
    lit = np.asarray(literal, np.float64)
    finite = np.isfinite(lit)
    scale = float(np.abs(lit[finite]).max()) if finite.any() else 0.0
    return _element_errors(a64, lit) <= ku * scale


def _wrong_elements(out: Output) -> dict[str, Any] | None:
    """The elements of a float output that are wrong although the output passes normwise,
    as the componentwise verdict's evidence, or None. The normwise error dilutes a few
    wrong elements by the square root of the output's size (one element 0.8% off among
    32,769 moves it by about 4e-5), so each element is also judged on its own. Element j is
    wrong when its error |c_j - ref_j| exceeds both
    - its own legal spread, k times the least error any other configuration makes there
      and the most any noise-model sample makes there (a sample perturbs every op by one
      rounding, so an element that cancels or sits near a discrete tie spreads in them), and
    - the output's legal normwise error, k * max(best other, noise, u), taken against the
      output's largest finite magnitude: what a configuration may legally be off by on its
      largest element, so that a configuration whose rounding happens to fall on one
      element, where the others happen to be exact, is never flagged;
    and it is not within k*u (of the largest magnitude) of the literal op-by-op evaluation
    (rounding each op as written is legal, as in the normwise rule). The noise model is
    asked only when some element fails the first two bounds without it; a discrete program
    without one (a replayed module) gets no componentwise verdict: a legal tie flip moves
    one element by its whole value, which only the samples show. Elements not finite in
    the configuration or the reference are the NaN rule's (_nan_mismatch)."""
    a64 = np.asarray(out.actual, np.float64)
    r64 = np.asarray(out.expected, np.float64)
    k, u = out.k, out.u
    mask = np.isfinite(a64) & np.isfinite(r64) & np.isfinite(_cast_ref(r64, out.info.dtype))
    if a64.shape != r64.shape:
        return None
    # A subnormal against zero is XLA's to choose, as in the bitwise rule (same_elements):
    # clean run s41-i2626, min(x, x) of f32 subnormals bit cast from s32, kept them on every
    # target where float64 and the op-by-op evaluation flushed them (an error of 16 of the
    # smallest subnormals, flagged against a largest magnitude of 0).
    mask &= ~same_elements(a64, r64, out.info.dtype)
    if not mask.any():
        return None
    err = np.where(mask, _element_errors(a64, r64), 0.0)
    largest = float(np.abs(r64[mask]).max())
    floor = k * max(out.best, u) * largest
    spread = _least_spread(list(out.others.values()), r64)
    over = mask & (err > floor) & (err > k * spread) & ~_as_written_elements(a64, out.literal, k * u)
    if not over.any():
        return None
    samples = out.samples()
    if samples is None and out.case.discrete:
        return None
    e_noise = 0.0
    if samples is not None:
        e_noise = out.noise_error
        floor = k * max(out.best, e_noise, u) * largest
        spread = _widened(spread, samples, r64)
        over &= (err > floor) & (err > k * spread)
        if not over.any():
            return None
    bound = np.maximum(floor, k * spread)
    flagged = np.argwhere(over)
    worst = flagged[np.argsort(-err[over], kind="stable")[:NAMED_ELEMENTS]]
    return {"reason": "componentwise", "flagged_elements": int(over.sum()), "noise": e_noise,
            "threshold": floor / largest if largest else 0.0,
            "wrong": [{"index": [int(j) for j in w], "got": float(a64[tuple(w)]),
                       "want": float(r64[tuple(w)]), "bound": float(bound[tuple(w)])}
                      for w in worst]}


# Verdicts a version regression is judged on: wrong numbers. A crash or compile error that
# an older release does not show keeps its verdict (its error text is its signature);
# bisecting over releases finds where either began (bisect/versions.py).
VERSION_JUDGED = (Verdict.MISMATCH, Verdict.NAN_MISMATCH)


@dataclass(frozen=True)
class VersionPeer:
    """A target of another jaxlib in the same configuration as the one judged: its name,
    its jaxlib, and whether the oracle passed it on this program."""

    target: str
    jaxlib: str
    passed: bool


def version_regression(verdict: Verdict, evidence: dict[str, Any], current: str,
                       peers: list[VersionPeer]) -> tuple[Verdict, dict[str, Any]]:
    """A current-jaxlib target's verdict, seen across versions (docs/versions.md).

    Wrong numbers where an older jaxlib in the same configuration is right against float64
    are a `version_regression`: the evidence keeps the verdict it was judged as and names
    the newest older release that was right (`lastGood`). A newer release that is right
    says the bug is fixed there (`fixed_on`), without changing the verdict."""
    from xla_sentinel.core.versions import parse_version

    if verdict not in VERSION_JUDGED:
        return verdict, evidence
    now = parse_version(current)
    good = [p for p in peers if p.passed]
    older = sorted((p for p in good if parse_version(p.jaxlib) < now),
                   key=lambda p: parse_version(p.jaxlib))
    newer = sorted((p for p in good if parse_version(p.jaxlib) > now),
                   key=lambda p: parse_version(p.jaxlib))
    ev = dict(evidence)
    if newer:
        ev["fixed_on"] = {"target": newer[0].target, "jaxlib": newer[0].jaxlib}
    if not older:
        return verdict, ev
    ev.update(judged_as=verdict, jaxlib=current,
              lastGood={"target": older[-1].target, "jaxlib": older[-1].jaxlib})
    return Verdict.VERSION_REGRESSION, ev
