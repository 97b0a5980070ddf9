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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

from xla_sentinel.core.dtypes import (
    DISCRETE_FACTOR,
    FLOATS,
    NP_DTYPES,
    TOLERANCE_K,
    UNIT_ROUNDOFF,
    subnormal,
)
from xla_sentinel.core.graph import Graph, Node
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
    verdict: str
    output: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)


def _classes(a: np.ndarray) -> np.ndarray:
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
    tiny = float(ml_dtypes.finfo(NP_DTYPES[dtype]).tiny) * np.sqrt(mask.sum())
    denominator = max(float(np.linalg.norm(r64[mask] / scale)), tiny / scale)
    # tiny / scale underflows to 0 for a huge output against an all-zero reference.
    return diff / denominator if denominator > 0.0 else float("inf")


def ulp_distance(a: np.ndarray, b: np.ndarray, dtype: str) -> int:
    """Max distance in units in the last place of `dtype` between finite elements."""
    dt = NP_DTYPES[dtype]
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[dt.itemsize]
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
    return np.where(np.abs(x) < float(ml_dtypes.finfo(NP_DTYPES[dtype]).tiny), 0.0, x)


def same_values(a: np.ndarray, b: np.ndarray, dtype: str) -> bool:
    """Equal element for element as numbers: NaN equals NaN, -0 equals +0, and a subnormal
    equals zero. XLA:CPU flushes subnormals in some code paths and not in others: a clean-run
    bf16 broadcast kept 2.9e-39 at O0 and gave 0 op by op."""
    if dtype not in FLOATS:
        return np.array_equal(a, b)
    return np.array_equal(_flushed(a, dtype), _flushed(b, dtype), equal_nan=True)


def has_subnormals(arrays: list[np.ndarray]) -> bool:
    """Does any float array hold a subnormal? Flushed or not, it may then change a normal
    result further on (x > 0, x * 2^100), so such inputs get no bitwise judgement."""
    floats = {NP_DTYPES[d] for d in FLOATS}
    return any(subnormal(a).any() for a in map(np.asarray, arrays) if a.dtype in floats)


def references_agree(a: list[np.ndarray], b: list[np.ndarray], infos: list[OutputInfo]) -> bool:
    for x, y, info in zip(a, b, infos, strict=True):
        if info.dtype in FLOATS:
            if not np.array_equal(_classes(x), _classes(y)):
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
                  literal: np.ndarray | None = None) -> dict | None:
    want = _classes(_cast_ref(ref, dtype))
    got = _classes(c)
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
        bad &= ~((got > 0) & (want == 0) & (_classes(literal) == got))
    if not bad.any():
        return None
    confirmed = np.zeros_like(bad)
    for o in others:
        confirmed |= bad & (_classes(o) == want)
    if not confirmed.any():
        return None
    where = tuple(int(i) for i in np.argwhere(confirmed)[0])  # argwhere: 0-d outputs too
    names = ["finite", "nan", "+inf", "-inf"]
    return {"elements": int(confirmed.sum()), "where": list(where),
            "actual_class": names[got[where]], "expected_class": names[want[where]],
            "actual": float(np.asarray(c, np.float64)[where]),
            "expected": float(np.asarray(ref, np.float64)[where])}


def judge(
    target: str,
    results: dict[str, list[np.ndarray]],
    ref64: list[np.ndarray],
    infos: list[OutputInfo],
    noise: Callable[[], list[list[np.ndarray]] | None],
    discrete: bool = False,
    k_overrides: dict[str, float] | None = None,
    literal: str = "eager",
    overflow_prone: Callable[[], list[bool] | None] | None = None,
    exact: str | None = None,
    undetermined: list[np.ndarray] | None = None,
) -> Judgement:
    """Judge one configuration's outputs against the reference and the other configurations.

    `results` maps every configuration that produced outputs (targets and own-precision
    references) to its outputs; `noise` returns the noise model's samples (each a list of
    outputs) and is called at most once, only when needed. `literal` names the op-by-op
    evaluation at the program's own precision, if present: a result within k*u of it is
    what the program literally says, and never a miscompile of the program as a whole.
    `overflow_prone` returns, per output, whether it depends on a value beyond its dtype's
    range in float64 (evaluate.overflow_prone); a non-finite result there is no verdict.
    A `bitwise` output is compared first, value for value (NaN equals NaN, -0 equals +0),
    with `exact` (default: the literal evaluation); that one is the judge there, so a bug
    that every target under test shares is still caught. Elements in `undetermined`
    (the program leaves them open: without_undetermined) are judged in no configuration.
    """
    if undetermined is not None:
        results = {name: without_undetermined(v, undetermined) for name, v in results.items()}
        ref64 = without_undetermined(ref64, undetermined)
        noise_all = noise

        def noise() -> list[list[np.ndarray]] | None:
            samples = noise_all()
            return None if samples is None else [without_undetermined(s, undetermined) for s in samples]
    k_overrides = k_overrides or {}
    exact = exact or literal
    mine = results[target]
    others = [v for name, v in results.items() if name != target]
    noise_cache: list[list[list[np.ndarray]] | None] = []

    def noise_out() -> list[list[np.ndarray]] | None:
        if not noise_cache:
            noise_cache.append(noise())
        return noise_cache[0]

    # Largest error/threshold ratio among passing float outputs: how near a miss was.
    margin = 0.0
    for i, info in enumerate(infos):
        c, ref = mine[i], ref64[i]
        if np.shape(c) != np.shape(ref):
            return Judgement("mismatch", i, {"reason": "shape", "actual_shape": list(np.shape(c)),
                                             "expected_shape": list(np.shape(ref))})
        if info.bitwise and exact in results and exact != target \
                and not same_values(c, results[exact][i], info.dtype):
            ev = error_stats(c, results[exact][i], info.dtype)
            ev.update(reason="bitwise", dtype=info.dtype, against=exact)
            # NaN where the exact value has none, or the reverse, is a nan_mismatch here as
            # it is for outputs judged by their error (a max all-reduce dropping a NaN,
            # s34-i1659): one bug, one verdict, whichever way its output is judged.
            return Judgement("nan_mismatch" if _nan_differs(c, results[exact][i]) else "mismatch", i, ev)
        if info.dtype not in FLOATS:
            if np.array_equal(c, ref):
                continue
            if info.tainted:
                agreeing = [o[i] for o in others if np.array_equal(o[i], ref)]
                n = noise_out()
                if len(agreeing) < len(others) or not agreeing or n is None \
                        or not all(np.array_equal(sample[i], ref) for sample in n):
                    continue  # a legal flip of a float-dependent integer
            ev = error_stats(c, ref, info.dtype)
            ev.update(reason="integer", dtype=info.dtype, tainted=info.tainted)
            return Judgement("mismatch", i, ev)
        nan = _nan_mismatch(c, [o[i] for o in others], ref, info.dtype,
                            results[literal][i] if literal in results and literal != target else None)
        if nan is not None and overflow_prone is not None and (prone := overflow_prone()) and prone[i]:
            nan = None  # its finite elements are still judged below
        if nan is not None:
            nan["dtype"] = info.dtype
            return Judgement("nan_mismatch", i, nan)
        e_c = normwise_error(c, ref, info.dtype)
        e_others = {name: normwise_error(v[i], ref, info.dtype)
                    for name, v in results.items() if name != target}
        best = min(e_others.values(), default=0.0)
        u = UNIT_ROUNDOFF[info.dtype]
        k = k_overrides.get(info.dtype, TOLERANCE_K[info.dtype]) * (DISCRETE_FACTOR if discrete else 1.0)
        lit = results[literal][i] if literal in results and literal != target else None
        if e_c <= k * max(best, u):
            margin = max(margin, e_c / (k * max(best, u)))
        else:
            n = noise_out()
            e_noise = max((normwise_error(sample[i], ref, "f64") for sample in n), default=0.0) \
                if n is not None else 0.0
            threshold = k * max(best, e_noise, u)
            margin = max(margin, e_c / threshold)
            if e_c > threshold and lit is not None and normwise_error(c, lit, info.dtype) <= k * u:
                # Rounding each op to its dtype, as written, is legal even where a configuration
                # with excess precision lands closer to float64 (a clean-run f16 program: atan2
                # rounded to f16 hit an e5m2 tie of reduce_precision, 1 ulp became 12%).
                continue
            if e_c > threshold:
                ev = error_stats(c, ref, info.dtype)
                ev.update(dtype=info.dtype, error=e_c, threshold=threshold, k=k, noise=e_noise,
                          others={n_: float(e) for n_, e in e_others.items()})
                return Judgement("mismatch", i, ev)
        # Normwise right: a few wrong elements in a large output still show one by one.
        wrong = componentwise(c, ref, [o[i] for o in others], lit, info.dtype, k, best, u, i,
                              noise_out, discrete)
        if wrong is not None:
            ev = error_stats(c, ref, info.dtype)
            ev.update(wrong, dtype=info.dtype, error=e_c, k=k,
                      others={n_: float(e) for n_, e in e_others.items()})
            return Judgement("mismatch", i, ev)
    return Judgement("pass", evidence={"margin": margin})


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


def componentwise(c: np.ndarray, ref: np.ndarray, others: list[np.ndarray], literal: np.ndarray | None,
                  dtype: str, k: float, best: float, u: float, output: int,
                  noise: Callable[[], list[list[np.ndarray]] | None],
                  discrete: bool = False) -> dict[str, Any] | None:
    """The elements of a float output that are wrong although the output passes normwise,
    or None. The normwise error dilutes a few wrong elements by the square root of the
    output's size (one element 0.8% off among 32,769 moves it by about 4e-5), so each
    element is also judged on its own. Element j is wrong when its error |c_j - ref_j|
    exceeds both
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
    a64 = np.asarray(c, np.float64)
    r64 = np.asarray(ref, np.float64)
    mask = np.isfinite(a64) & np.isfinite(r64) & np.isfinite(_cast_ref(r64, dtype))
    if a64.shape != r64.shape or not mask.any():
        return None
    err = np.where(mask, _element_errors(a64, r64), 0.0)
    largest = float(np.abs(r64[mask]).max())
    floor = k * max(best, u) * largest
    spread = np.full(r64.shape, np.inf)
    for o in others:
        if np.shape(o) == r64.shape:
            spread = np.minimum(spread, _element_errors(o, r64))
    over = mask & (err > floor) & (err > k * spread)
    if literal is not None and np.shape(literal) == r64.shape:
        lit = np.asarray(literal, np.float64)
        finite = np.isfinite(lit)
        scale = float(np.abs(lit[finite]).max()) if finite.any() else 0.0
        over &= ~(_element_errors(a64, lit) <= k * u * scale)
    if not over.any():
        return None
    samples = noise()
    e_noise = 0.0
    if samples is None:
        if discrete:
            return None
    else:
        outs = [np.asarray(s[output]) for s in samples]
        e_noise = max((normwise_error(y, r64, "f64") for y in outs), default=0.0)
        floor = k * max(best, e_noise, u) * largest
        for y in outs:
            spread = np.maximum(spread, _element_errors(y, r64))
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
VERSION_JUDGED = ("mismatch", "nan_mismatch")


@dataclass(frozen=True)
class VersionPeer:
    """A target of another jaxlib in the same configuration as the one judged: its name,
    its jaxlib, and whether the oracle passed it on this program."""

    target: str
    jaxlib: str
    passed: bool


def version_regression(verdict: str, evidence: dict[str, Any], current: str,
                       peers: list[VersionPeer]) -> tuple[str, dict[str, Any]]:
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
    return "version_regression", ev
