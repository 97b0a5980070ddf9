"""Declared invariants (judge/invariants.py): each checker fires on damage that is legal
element by element yet wrong for the computation, with evidence naming the invariant, the
row or element, the value and the bound, and stays silent on legal rounding at each dtype.
Pure numpy, plus jax-lowered StableHLO for the pattern recognizer
(judge/invariant_patterns.py) and a generated graph for the template declarations."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from xla_sentinel.core.dtypes import NP_DTYPES
from xla_sentinel.core.graph import Graph, Node, Value
from xla_sentinel.judge import invariants
from xla_sentinel.judge.assess import invariant_violations, program_invariants
from xla_sentinel.judge.invariant_patterns import recognized
from xla_sentinel.judge.invariants import Invariant, InvariantError, check
from xla_sentinel.judge.oracle import OutputInfo
from xla_sentinel.ops.entries.templates import np_layer_norm, np_softmax
from xla_sentinel.xla.cuts import Parsed

FLOAT_DTYPES = ("f32", "f16", "bf16")


def _own(x: np.ndarray, dtype: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(x).astype(NP_DTYPES[dtype])


def _softmax_own_precision(x: np.ndarray, dtype: str) -> np.ndarray:
    """A softmax rounded at every step in `dtype`, its sum accumulated one term at a time
    (the worst legal order): what a configuration without excess precision may return."""
    x = _own(x, dtype)
    m = x.max(-1, keepdims=True)
    e = _own(np.exp(_own(x - m, dtype).astype(np.float64)), dtype)
    s = np.zeros(x.shape[:-1] + (1,), NP_DTYPES[dtype])
    for j in range(x.shape[-1]):
        s = _own(s + e[..., j:j + 1], dtype)
    return _own(e.astype(np.float64) / s.astype(np.float64), dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_legal_softmax_rounding_never_fires(dtype: str) -> None:
    rng = np.random.default_rng(5)
    for _ in range(150):
        n = int(rng.integers(1, 400))
        x = _own(rng.normal(size=(4, n)) * rng.choice([0.1, 1.0, 4.0, 30.0]), dtype)
        got = _softmax_own_precision(x, dtype)
        ref = np_softmax(x.astype(np.float64), -1)
        for decl in ({"kind": "sum", "axis": 1}, {"kind": "range", "low": 0.0, "high": 1.0},
                     {"kind": "finite"}):
            assert check(Invariant.from_json({**decl, "output": 0}), [got], [ref], dtype) is None, (dtype, n, decl)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_without_its_max_shift_is_nan_from_finite_logits(dtype: str) -> None:
    big = float(np.log(float(ml_dtypes.finfo(NP_DTYPES[dtype]).max))) * 1.5
    x = _own(np.random.default_rng(2).normal(size=(3, 16)) * big, dtype)
    with np.errstate(all="ignore"):
        e = _own(np.exp(x.astype(np.float64)), dtype).astype(np.float64)
        got = _own(e / e.sum(-1, keepdims=True), dtype)
    ref = np_softmax(x.astype(np.float64), -1)

    v = check(Invariant(kind="finite", output=0, source="softmax"), [got], [ref], dtype)

    assert v is not None
    ev = v.evidence()
    assert ev["invariant"] == "finite" and ev["declared_by"] == "softmax" and ev["count"] >= 1
    first = ev["violations"][0]
    assert first["value"] == "nan" and np.isfinite(first["want"]) and first["bound"] == 0.0
    assert len(first["index"]) == 2


def test_a_row_that_does_not_sum_to_one_is_named_with_its_sum_and_bound() -> None:
    x = np.random.default_rng(1).normal(size=(5, 64))
    ref = np_softmax(x, -1)
    got = ref.astype(np.float32)
    got[3, :-1] *= 1.0 + 1e-3  # a reduction that dropped its last term: 0.1% over
    got[3, -1] = got[3, -1]

    v = check(Invariant(kind="sum", output=0, axis=1), [got], [ref], "f32")

    assert v is not None and v.count == 1
    row = v.worst[0]
    assert row["row"] == [3] and row["want"] == 1.0
    assert abs(row["value"] - 1.0) > row["bound"] > 0
    # The bound is the dtype's worst-case legal miss: n + 10 roundings, times SAFETY.
    assert row["bound"] == pytest.approx(invariants.SAFETY * 74 * 2.0**-24, rel=1e-3)


def test_probability_above_one_and_below_zero() -> None:
    ref = np.array([0.2, 0.9999999, 0.0, 0.5])
    got = np.array([0.2, 1.0 + 2**-23, -1e-3, 1.25], np.float32)  # one ulp over 1 is legal

    v = check(Invariant(kind="range", output=0, low=0.0, high=1.0), [got], [ref], "f32")

    assert v is not None and v.count == 2
    assert sorted(w["index"][0] for w in v.worst) == [2, 3]
    assert {w["want"] for w in v.worst} == {0.0, 1.0}


def test_range_is_judged_only_where_the_float64_reference_is_finite() -> None:
    got = np.array([np.nan, 2.0], np.float32)
    ref = np.array([np.nan, np.inf])
    assert check(Invariant(kind="range", output=0, low=0.0, high=1.0), [got], [ref], "f32") is None


def test_log_of_exp_folded_past_the_overflow_point() -> None:
    low, high = invariants.range_of_log_exp("f32")
    assert high == pytest.approx(88.72, abs=0.01) and low == pytest.approx(-103.28, abs=0.01)
    x = np.array([1.0, 80.0, 100.0, -120.0])
    inv = Invariant(kind="range", output=0, low=low, high=high, allow_inf=True)
    with np.errstate(divide="ignore", over="ignore"):
        literal = np.log(np.exp(x.astype(np.float32)))  # what the program says: inf and -inf
    assert check(inv, [literal.astype(np.float32)], [x], "f32") is None
    v = check(inv, [x.astype(np.float32)], [x], "f32")  # folded to x
    assert v is not None and sorted(w["index"][0] for w in v.worst) == [2, 3]


def test_sign_allows_what_float64_already_misses() -> None:
    ref = np.array([4.0, 0.0, 1e-9])
    got = np.array([4.0, -1e-7, -1e-3], np.float32)
    v = check(Invariant(kind="sign", output=0), [got], [ref], "f32")
    assert v is not None and v.count == 1 and v.worst[0]["index"] == [2]
    assert check(Invariant(kind="sign", output=0), [got[:2]], [ref[:2]], "f32") is None
    neg = check(Invariant(kind="sign", output=0, sign=-1), [-got[:2]], [-ref[:2]], "f32")
    assert neg is None


def test_monotonic_rows_with_rounding_and_a_step_back() -> None:
    rng = np.random.default_rng(4)
    ref = np.cumsum(np.abs(rng.normal(size=(3, 200))), axis=1)
    legal = np.cumsum(np.abs(rng.normal(size=(3, 200))).astype(np.float32), axis=1, dtype=np.float32)
    assert check(Invariant(kind="monotonic", output=0, axis=1), [legal], [ref], "f32") is None
    broken = ref.astype(np.float32)
    broken[1, 50] = broken[1, 48]
    v = check(Invariant(kind="monotonic", output=0, axis=1), [broken], [ref], "f32")
    assert v is not None and v.worst[0]["index"] == [1, 50]
    down = check(Invariant(kind="monotonic", output=0, axis=1, decreasing=True), [-legal], [-ref], "f32")
    assert down is None


def test_idempotent_pairs_of_outputs() -> None:
    x = np.random.default_rng(6).normal(size=50)
    once = np.clip(x, -1, 1)
    inv = Invariant(kind="idempotent", output=0, other=1)
    assert check(inv, [once.astype(np.float32), np.clip(once, -1, 1).astype(np.float32)], [once, once], "f32") is None
    twice = np.clip(once, -1, 1).astype(np.float32)
    twice[7] = 0.5 if once[7] != 0.5 else 0.25
    v = check(inv, [once.astype(np.float32), twice], [once, once], "f32")
    assert v is not None and v.worst[0]["index"] == [7]


def test_normalized_layer_norm_rows() -> None:
    x = np.random.default_rng(7).normal(size=(6, 48)) * 3 + 10
    ones, zeros = np.ones(48), np.zeros(48)
    ref = np_layer_norm(x, ones, zeros)
    x32 = x.astype(np.float32)
    mean = x32.mean(-1, keepdims=True, dtype=np.float32)
    c = x32 - mean
    got = c / np.sqrt((c * c).mean(-1, keepdims=True, dtype=np.float32) + np.float32(1e-5))
    inv = Invariant(kind="normalized", output=0, axis=1)
    assert check(inv, [got.astype(np.float32)], [ref], "f32") is None
    shifted = got.astype(np.float32).copy()
    shifted[2] += 0.01  # the mean not subtracted quite: row mean 0.01
    v = check(inv, [shifted], [ref], "f32")
    assert v is not None and v.worst[0]["row"] == [2]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_logsumexp_between_max_and_max_plus_log_n(dtype: str) -> None:
    x = _own(np.random.default_rng(8).normal(size=(4, 100)) * 20, dtype)
    x64 = x.astype(np.float64)
    m = x64.max(-1)
    ref = m + np.log(np.exp(x64 - m[:, None]).sum(-1))
    e = _own(np.exp(_own(x64 - m[:, None], dtype).astype(np.float64)), dtype)
    s = np.zeros(4, NP_DTYPES[dtype])
    for j in range(100):
        s = _own(s + e[:, j], dtype)
    got = _own(_own(np.log(s.astype(np.float64)), dtype).astype(np.float64) + m, dtype)
    inv = Invariant(kind="logsumexp", output=0, axis=1, other=0)
    assert check(inv, [got], [ref], dtype, inputs=[x]) is None
    wrong = got.astype(np.float64)
    wrong[1] = m[1] - 8.0  # below the row's max by more than any legal rounding: impossible
    v = check(inv, [_own(wrong, dtype)], [ref], dtype, inputs=[x])
    assert v is not None and v.worst[0]["row"] == [1] and v.worst[0]["want"] == pytest.approx(m[1])


def test_noise_samples_widen_the_bound_and_are_asked_only_when_needed() -> None:
    ref = np.array([[0.25, 0.25, 0.5]])
    got = np.array([[0.25, 0.25, 0.5 + 1e-4]], np.float32)
    inv = Invariant(kind="sum", output=0, axis=1)
    asked: list[int] = []

    def noise(miss: float) -> list[list[np.ndarray]]:
        asked.append(1)
        return [[ref + np.array([[0.0, 0.0, miss]])]]

    assert check(inv, [ref.astype(np.float32)], [ref], "f32", noise=lambda: noise(0.0)) is None
    assert asked == []  # within the analytic bound: no noise model
    v = check(inv, [got], [ref], "f32", noise=lambda: noise(1e-9))
    assert v is not None and v.noise and asked == [1]
    assert check(inv, [got], [ref], "f32", noise=lambda: noise(1e-4)) is None


def test_declarations_are_validated() -> None:
    with pytest.raises(InvariantError, match="kind 'sums'"):
        Invariant.from_json({"kind": "sums", "output": 0})
    with pytest.raises(InvariantError, match="sum: needs an axis"):
        Invariant.from_json({"kind": "sum", "output": 0})
    with pytest.raises(InvariantError, match="unknown field"):
        Invariant.from_json({"kind": "finite", "output": 0, "rows": 3})
    with pytest.raises(InvariantError, match="must be a list"):
        invariants.from_provenance({"invariants": {"kind": "finite"}})
    decl = invariants.from_provenance({"invariants": [{"kind": "sum", "output": 1, "axis": -1}]})
    assert decl == [Invariant(kind="sum", output=1, axis=-1, source="meta.json")]
    assert Invariant.from_json(decl[0].to_json()) == decl[0]


def _graph(op: str, attrs: dict, shape: tuple[int, ...] = (4, 8)) -> Graph:
    values = [Value(shape, "f32", input=0), Value(shape, "f32", tainted=True, node=0),
              Value(shape, "f32", tainted=True, node=1)]
    nodes = [Node(op, [0], attrs), Node("exp", [1])]
    return Graph(values=values, nodes=nodes, outputs=[2, 1])


def test_templates_declare_their_invariants_on_their_outputs_only() -> None:
    decl = invariants.declared(_graph("softmax", {"axis": 1}))
    # Output 1 is the softmax; output 0 (an exp of it) declares nothing.
    assert {(d.kind, d.output, d.axis) for d in decl} == {("sum", 1, 1), ("range", 1, None), ("finite", 1, None)}
    assert all(d.source == "softmax (node 0)" for d in decl)
    assert [d.kind for d in invariants.declared(_graph("layer_norm", {}))] == ["finite"]
    assert [d.kind for d in invariants.declared(_graph("logistic", {}))] == ["range"]
    assert invariants.declared(_graph("tanh", {})) == []


def _info(fn, *args) -> dict:
    return Parsed(jax.jit(fn).lower(*args).as_text()).info()


def test_stablehlo_patterns_are_recognized_from_the_modules_dataflow() -> None:
    x = np.zeros((4, 8), np.float32)

    def layer_norm(v):
        c = v - jnp.mean(v, axis=-1, keepdims=True)
        return c * jax.lax.rsqrt(jnp.mean(c * c, axis=-1, keepdims=True) + 1e-5)

    info = _info(lambda v: (jax.nn.softmax(v, axis=-1), jax.nn.logsumexp(v, axis=-1), jnp.log(jnp.exp(v)),
                            jax.nn.sigmoid(v), layer_norm(v), layer_norm(v) * 2.0 + 1.0, v * 2.0), x)
    found = recognized(info)
    by_output: dict[int, set[str]] = {}
    for d in found:
        by_output.setdefault(d.output, set()).add(d.kind)
    assert by_output == {0: {"sum", "range", "finite"}, 1: {"finite", "logsumexp"}, 2: {"range"},
                         3: {"range"}, 4: {"normalized", "finite"}, 5: {"finite"}}
    softmax_sum = next(d for d in found if d.kind == "sum")
    assert softmax_sum.axis == 1 and softmax_sum.source.startswith("stablehlo softmax")
    lse = next(d for d in found if d.kind == "logsumexp")
    assert lse.other == 0 and lse.axis == 1
    log_exp = next(d for d in found if d.output == 2)
    assert log_exp.allow_inf and log_exp.high == pytest.approx(88.72, abs=0.01)


def test_a_softmax_without_the_max_shift_gets_no_finite_invariant() -> None:
    def naive(v):
        e = jnp.exp(v)
        return e / jnp.sum(e, axis=0, keepdims=True)

    found = recognized(_info(naive, np.zeros((5, 3), np.float32)))
    assert {d.kind for d in found} == {"sum", "range"}
    assert next(d for d in found if d.kind == "sum").axis == 0


def _program(graph: Graph | None = None, provenance: dict | None = None):
    from xla_sentinel.core.program import Program
    return Program("p", "module", [], [], provenance or {}, graph)


def test_program_invariants_join_declarations_and_meta_json() -> None:
    prov = {"invariants": [{"kind": "sign", "output": 0}]}
    found = program_invariants(_program(_graph("softmax", {"axis": 0}), prov), None)
    assert {d.kind for d in found} == {"sum", "range", "finite", "sign"}
    # A malformed declaration is an error (the trace is refused where it is read,
    # tests/detection/test_invariant_declarations.py), never silently left out.
    with pytest.raises(InvariantError, match=r"invariants\[0\].*kind 'nope'"):
        program_invariants(_program(None, {"invariants": [{"kind": "nope", "output": 0}]}), None)


def test_every_configuration_is_checked_and_the_literal_excuses_its_own_overflow() -> None:
    x = np.random.default_rng(9).normal(size=(2, 8)) * 3
    ref = [np_softmax(x, -1)]
    good = [ref[0].astype(np.float32)]
    nan_row = good[0].copy()
    nan_row[1] = np.nan
    decl = [Invariant(kind="sum", output=0, axis=1), Invariant(kind="finite", output=0)]
    infos = [OutputInfo("f32")]

    def never() -> None:
        raise AssertionError("not asked")

    results = {"default": nan_row, "O0": good, "eager": good}
    broken = invariant_violations(decl, {k: [v] if isinstance(v, np.ndarray) else v for k, v in results.items()},
                                  ref, infos, [x], "eager", lambda: None, lambda: [False])
    assert set(broken) == {"default"}
    output, ev = broken["default"]
    assert output == 0 and ev["invariant"] == "finite" and ev["dtype"] == "f32"
    assert ev["violations"][0]["index"][0] == 1
    # The literal evaluation makes the same row non-finite: what the program says.
    broken = invariant_violations(decl, {"default": [nan_row], "eager": [nan_row]}, ref, infos, [x], "eager",
                                  never, never)
    assert broken == {}
    # An output that may overflow legally (evaluate.overflow_prone) is excused too.
    broken = invariant_violations(decl, {"default": [nan_row], "eager": good}, ref, infos, [x], "eager",
                                  lambda: None, lambda: [True])
    assert broken == {}
    # An own-precision reference is a configuration like the others, judged against the
    # noise model's samples.
    wrong = good[0].copy()
    wrong[0] *= 2
    broken = invariant_violations(decl, {"default": good, "eager": [wrong]}, ref, infos, [x], "eager",
                                  lambda: [good], lambda: [False])
    assert set(broken) == {"eager"} and broken["eager"][1]["invariant"] == "sum"


def test_what_the_literal_evaluation_misses_by_is_legal_for_the_others() -> None:
    """A layer norm of rows centred far from zero misses `normalized` by the rounding of
    its mean, which a bound on the outputs alone cannot see: the literal evaluation (the
    program rounded op by op as written) misses it too, so its miss widens the other
    configurations' bounds. Without noise samples (a replayed module) nothing judges the
    literal evaluation itself."""
    x = np.random.default_rng(3).normal(size=(6, 32)) + 3000
    ref = [np_layer_norm(x, np.ones(32), np.zeros(32))]
    x32 = x.astype(np.float32)
    c = x32 - x32.mean(-1, keepdims=True, dtype=np.float32)
    rounded = c / np.sqrt((c * c).mean(-1, keepdims=True, dtype=np.float32) + np.float32(1e-5))
    decl = [Invariant(kind="normalized", output=0, axis=1)]
    infos = [OutputInfo("f32")]
    inv = decl[0]
    assert check(inv, [rounded], ref, "f32") is not None  # the analytic bound alone fires

    broken = invariant_violations(decl, {"default": [rounded], "eager_module": [rounded]}, ref, infos, [x32],
                                  "eager_module", lambda: None, lambda: [False])
    assert broken == {}
    # Damage beyond it is still named: the row's scale off by a tenth.
    scaled = rounded.copy()
    scaled[4] *= 1.1
    broken = invariant_violations(decl, {"default": [scaled], "eager_module": [rounded]}, ref, infos, [x32],
                                  "eager_module", lambda: None, lambda: [False])
    assert set(broken) == {"default"} and broken["default"][1]["violations"][0]["row"] == [4]


def test_a_sample_widens_the_rows_it_shares_with_the_judged_configuration() -> None:
    """Rows are matched by index: an excused row on one side (undetermined, or not finite
    in the literal evaluation) used to drop the whole sample, which then widened nothing."""
    ref = np.array([[0.25, 0.25, 0.5], [0.5, 0.25, 0.25]])
    got = (ref + np.array([[0.0, 0.0, 0.0], [1e-4, 0.0, 0.0]])).astype(np.float32)
    sample = [ref + np.array([[0.0, 0.0, 0.0], [1e-4, 0.0, 0.0]])]
    inv = Invariant(kind="sum", output=0, axis=1)
    excused = np.array([[True, False, False], [False, False, False]])

    assert check(inv, [got], [ref], "f32", excused=excused) is not None
    assert check(inv, [got], [ref], "f32", noise=lambda: [sample], excused=excused) is None
    # A sample that is not finite in a row excuses that row: legal rounding can overflow it.
    overflowing = [np.where([[False] * 3, [True, False, False]], np.inf, ref)]
    assert check(inv, [got], [ref], "f32", noise=lambda: [overflowing]) is None
