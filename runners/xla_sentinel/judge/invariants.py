"""Declared invariants: what a computation's outputs must satisfy whatever legal rounding
does, and the pure checkers that judge them (docs/detection.md, "Invariants").

Some damage is legal element by element yet wrong for the computation: a softmax row that
does not sum to one, NaN out of a softmax of finite logits (an FMA contraction of
`x - max(x)` makes it positive, then exp overflows), a probability above one, `log(exp(x))`
beyond the overflow point. The oracle compares numbers with numbers; an invariant says what
the numbers must be whatever the others say, so it also catches damage that every
configuration shares.

An `Invariant` names one output and a property of it. Where one comes from:
- a generated program's template (ops/entries/templates.py `INVARIANTS`) or op
  (`OP_INVARIANTS`) whose result is an output (`declared`);
- a replayed module's own dataflow (judge/invariant_patterns.py `recognized`);
- a trace's meta.json, `"invariants": [{"kind": "sum", "output": 0, "axis": -1}, ...]`
  (`from_provenance`).

What an invariant may miss by is derived, per row or element, from the float64 reference
and the dtype: the invariant is judged only where the float64 reference is finite, the
reference's own distance from the ideal is added, and the rest is the worst-case legal
rounding of the dtype (`SAFETY` times terms x unit roundoff, an approximated function's
`APPROX_ULPS`); where a value is over that, the noise model's samples (the float64 program
with every op perturbed by a rounding of its dtype) widen the bound to `SAFETY` times their
own miss. So legal rounding never fires. Pure numpy, no jax.
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import ml_dtypes
import numpy as np

from xla_sentinel.core.dtypes import NP_DTYPES, UNIT_ROUNDOFF
from xla_sentinel.core.errors import UserError
from xla_sentinel.core.graph import Graph
from xla_sentinel.core.names import FLOATS
from xla_sentinel.core.program import ProgramError, param_specs, result_dtypes
from xla_sentinel.ops.entries.templates import INVARIANTS as TEMPLATE_INVARIANTS

# The kinds of invariant, each judged by its checker below.
KINDS = ("sum", "range", "sign", "finite", "monotonic", "idempotent", "normalized", "logsumexp")
# Multiple of the worst-case legal miss an invariant is allowed.
SAFETY = 2.0
# A transcendental function (exp, log, rsqrt) may be this many ulps off (XLA:CPU's are
# 1 to 2, docs/architecture.md "own precision").
APPROX_ULPS = 4
# How many violating rows or elements the evidence names (the worst).
NAMED = 8

# Ops of the generator's table that are not templates and declare invariants: the
# logistic function is a probability.
OP_INVARIANTS: dict[str, Callable[[dict[str, Any], tuple[int, ...]], list[dict[str, Any]]]] = {
    "logistic": lambda attrs, shape: [{"kind": "range", "low": 0.0, "high": 1.0}],
}


class InvariantError(UserError, ValueError):
    """A declared invariant is malformed; the message names the field."""


@dataclass(frozen=True)
class Invariant:
    """One property of one output. `axis` is the reduced axis (sum, monotonic, normalized,
    logsumexp); `low`/`high` the range, `allow_inf` whether infinities are in it; `value`
    what each row sums to; `sign` +1 for >= 0, -1 for <= 0; `decreasing` the direction of
    a monotonic output; `other` the output that applies the function once more
    (idempotent) or the argument a logsumexp reduces; `source` where it was declared."""

    kind: str
    output: int
    axis: int | None = None
    low: float | None = None
    high: float | None = None
    allow_inf: bool = False
    value: float = 1.0
    sign: int = 1
    decreasing: bool = False
    other: int | None = None
    source: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvariantError(f"invariant kind {self.kind!r}: must be one of {', '.join(KINDS)}")
        if isinstance(self.output, bool) or not isinstance(self.output, int) or self.output < 0:
            raise InvariantError(f"invariant {self.kind}: output must be an output index, got {self.output!r}")
        if self.kind in ("sum", "monotonic", "normalized", "logsumexp") and self.axis is None:
            raise InvariantError(f"invariant {self.kind}: needs an axis")
        if self.kind in ("idempotent", "logsumexp") and self.other is None:
            raise InvariantError(f"invariant {self.kind}: needs other (an output or argument index)")
        if self.kind == "range" and self.low is None and self.high is None:
            raise InvariantError("invariant range: needs low or high")
        # Types as JSON gives them (bool is an int to Python, never an index or a bound).
        for name in ("axis", "other"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise InvariantError(f"invariant {self.kind}: {name} must be an integer, got {v!r}")
        for name in ("low", "high", "value"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise InvariantError(f"invariant {self.kind}: {name} must be a number, got {v!r}")
        for name in ("allow_inf", "decreasing"):
            if not isinstance(getattr(self, name), bool):
                raise InvariantError(f"invariant {self.kind}: {name} must be true or false, "
                                     f"got {getattr(self, name)!r}")
        if self.sign not in (1, -1) or isinstance(self.sign, bool):
            raise InvariantError(f"invariant {self.kind}: sign must be 1 or -1, got {self.sign!r}")

    def to_json(self) -> dict[str, Any]:
        default = Invariant(kind="finite", output=0)
        return {k: v for k, v in asdict(self).items()
                if k in ("kind", "output") or v != getattr(default, k)}

    @classmethod
    def from_json(cls, d: dict[str, Any], source: str = "") -> Invariant:
        if not isinstance(d, dict):
            raise InvariantError(f"an invariant must be an object, got {type(d).__name__}")
        known = set(cls.__dataclass_fields__)
        unknown = set(d) - known
        if unknown:
            raise InvariantError(f"invariant: unknown field(s) {', '.join(sorted(unknown))}")
        missing = [k for k in ("kind", "output") if k not in d]
        if missing:
            raise InvariantError(f"invariant: needs {' and '.join(missing)}")
        fields = dict(d)
        fields.setdefault("source", source)
        try:
            return cls(**fields)
        except TypeError as e:
            raise InvariantError(f"invariant: {e}") from None


def declared(graph: Graph) -> list[Invariant]:
    """The invariants a generated program's outputs carry: those of the template or op
    (templates.INVARIANTS, OP_INVARIANTS) that computes each output."""
    out: list[Invariant] = []
    for i, vid in enumerate(graph.outputs):
        v = graph.values[vid]
        if v.node is None or v.dtype not in FLOATS:
            continue
        node = graph.nodes[v.node]
        declare = TEMPLATE_INVARIANTS.get(node.op) or OP_INVARIANTS.get(node.op)
        if declare is None:
            continue
        for d in declare(node.attrs, v.shape):
            out.append(Invariant.from_json({**d, "output": i}, source=f"{node.op} (node {v.node})"))
    return out


def from_provenance(provenance: dict[str, Any]) -> list[Invariant]:
    """A trace's own declarations (meta.json `invariants`); InvariantError when malformed,
    naming the entry (`invariants[1] {...}`) and what is wrong with it."""
    decl = provenance.get("invariants")
    if decl is None:
        return []
    if not isinstance(decl, list):
        raise InvariantError(f"invariants: must be a list, got {type(decl).__name__}")
    found = []
    for k, d in enumerate(decl):
        try:
            found.append(Invariant.from_json(d, source="meta.json"))
        except InvariantError as e:
            raise InvariantError(f"invariants[{k}] {_entry(d)}: {e}") from None
    return found


def for_module(provenance: dict[str, Any], module: str) -> list[Invariant]:
    """A trace's declarations checked against its module: each names an output the module
    returns, of a float type, an axis within that output's rank, and an `other` that
    exists (an output for idempotent, an argument for logsumexp). A declaration that fits
    no output would judge nothing; it is an error (InvariantError naming the entry) where
    the trace is read, so a bad meta.json is refused, never silently ignored."""
    found = from_provenance(provenance)
    if not found:
        return found
    try:
        outputs = _result_specs(module)
        args = param_specs(module)
    except ProgramError as e:
        raise InvariantError(f"invariants: the module's signature is unreadable ({e})") from None
    for k, inv in enumerate(found):
        problem = _misfit(inv, outputs, args)
        if problem:
            raise InvariantError(f"invariants[{k}] {_entry(provenance['invariants'][k])}: {problem}")
    return found


def _misfit(inv: Invariant, outputs: list[dict[str, Any]], args: list[dict[str, Any]]) -> str:
    """What keeps a declaration from judging the module's outputs, or ""."""
    if inv.output >= len(outputs):
        return f"output {inv.output}: the module returns {len(outputs)} output(s)"
    out = outputs[inv.output]
    if out["dtype"] not in FLOATS:
        return f"output {inv.output} is {out['dtype']}: invariants judge float outputs"
    rank = len(out["shape"])
    if inv.kind == "idempotent" and (inv.other is None or not 0 <= inv.other < len(outputs)):
        return f"other {inv.other}: the module returns {len(outputs)} output(s)"
    if inv.kind == "logsumexp":
        if inv.other is None or not 0 <= inv.other < len(args):
            return f"other {inv.other}: the module takes {len(args)} argument(s)"
        rank = len(args[inv.other]["shape"])
    if inv.axis is not None:
        if not -rank <= inv.axis < rank:
            return f"axis {inv.axis!r}: out of range for a rank-{rank} " + \
                ("argument" if inv.kind == "logsumexp" else "output")
    elif inv.kind in ("sum", "monotonic", "normalized") and rank == 0:
        return f"output {inv.output} is a scalar: {inv.kind} needs an axis"
    return ""


# @main's result types (as core.program.result_dtypes finds them), for their ranks.
_MAIN_RESULTS = re.compile(r"func\.func (?:public )?@main\(.*?\)\s*->\s*(\(.*?\)|tensor<[^>]*>)\s*(?:attributes|\{)",
                           re.S)


def _result_specs(module: str) -> list[dict[str, Any]]:
    """Element type and shape of each of @main's results."""
    dtypes = result_dtypes(module)
    m = _MAIN_RESULTS.search(module)
    dims = re.findall(r"tensor<((?:[\d?]+x)*)[a-z]+\d*>", m.group(1)) if m else []
    if len(dims) != len(dtypes):
        raise ProgramError("the results of @main are unreadable")
    return [{"dtype": d, "shape": [int(n) if n != "?" else -1 for n in s.split("x") if n]}
            for d, s in zip(dtypes, dims, strict=True)]


def _entry(d: Any) -> str:
    """A declaration as written, short enough for one error line."""
    text = json.dumps(d, default=str, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


@dataclass
class Violation:
    """Where one configuration's output misses an invariant by more than its bound."""

    invariant: Invariant
    count: int  # violating rows (sum, normalized, logsumexp) or elements
    worst: list[dict[str, Any]]  # the worst NAMED: index, value, want, bound
    noise: bool = False  # the noise model's samples were asked

    def evidence(self) -> dict[str, Any]:
        inv = self.invariant
        return {"reason": "invariant", "invariant": inv.kind, "declared_by": inv.source,
                "declaration": inv.to_json(), "output": inv.output, "count": self.count,
                "violations": self.worst, "noise_model": self.noise}


# --- the checkers ----------------------------------------------------------------------
# Each returns, per candidate (row or element), what the configuration's value is, what
# the invariant wants, how far off it is and the legal bound; a noise sample's miss is
# measured by the same function.

@dataclass
class _Misses:
    index: np.ndarray  # (m, ndim) of the rows or elements judged
    value: np.ndarray  # the configuration's statistic there
    want: np.ndarray  # what the invariant wants (a bound side or the ideal)
    miss: np.ndarray  # how far beyond what is wanted (<= 0: holds)
    bound: np.ndarray  # the legal miss


def _u(dtype: str) -> float:
    return UNIT_ROUNDOFF.get(dtype, 0.0)


def _rows(x: np.ndarray, axis: int) -> np.ndarray:
    """x with `axis` last, as (rows..., n)."""
    return np.moveaxis(np.asarray(x, np.float64), axis % max(x.ndim, 1), -1)


def _row_index(shape: tuple[int, ...]) -> np.ndarray:
    return np.argwhere(np.ones(shape, bool)) if shape else np.zeros((1, 0), int)


def _sum(inv: Invariant, got: np.ndarray, ref: np.ndarray, dtype: str) -> _Misses:
    g, r = _rows(got, inv.axis or 0), _rows(ref, inv.axis or 0)
    n = g.shape[-1]
    judged = np.isfinite(r).all(-1) & np.isfinite(g).all(-1)
    with np.errstate(all="ignore"):
        total = g.sum(-1)
        ref_total = r.sum(-1)
        magnitude = np.maximum(np.abs(r).sum(-1), abs(inv.value))
    # A row of n terms: n - 1 roundings of the accumulation, each term's own (exp, divide,
    # the output's), and numerator and denominator exps computed apart.
    bound = SAFETY * (n + 2 * APPROX_ULPS + 2) * _u(dtype) * magnitude + np.abs(ref_total - inv.value)
    return _select(judged, total, np.full(total.shape, inv.value), np.abs(total - inv.value), bound)


def _range(inv: Invariant, got: np.ndarray, ref: np.ndarray, dtype: str) -> _Misses:
    g, r = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    judged = np.isfinite(r) & ~np.isnan(g)
    if inv.allow_inf:
        judged &= np.isfinite(g)
    low = -np.inf if inv.low is None else inv.low
    high = np.inf if inv.high is None else inv.high
    with np.errstate(all="ignore"):
        miss = np.maximum(low - g, g - high)
        want = np.where(g < low, low, high)
    scale = max(abs(low) if np.isfinite(low) else 0.0, abs(high) if np.isfinite(high) else 0.0, 1.0)
    bound = np.full(g.shape, SAFETY * (2 * APPROX_ULPS + 2) * _u(dtype) * scale)
    return _select(judged, g, want, np.where(np.isnan(miss), np.inf, miss), bound)


def _sign(inv: Invariant, got: np.ndarray, ref: np.ndarray, dtype: str) -> _Misses:
    g, r = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    judged = np.isfinite(r) & np.isfinite(g)
    largest = float(np.abs(r[np.isfinite(r)]).max()) if np.isfinite(r).any() else 0.0
    # Of the float64 reference's own sign, only what the float64 evaluation already misses.
    ref_miss = np.maximum(-inv.sign * np.where(np.isfinite(r), r, 0.0), 0.0)
    bound = SAFETY * (2 * APPROX_ULPS + 2) * _u(dtype) * largest + ref_miss
    return _select(judged, g, np.zeros(g.shape), -inv.sign * g, np.broadcast_to(bound, g.shape))


def _finite(inv: Invariant, got: np.ndarray, ref: np.ndarray, dtype: str) -> _Misses:
    g, r = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    judged = np.isfinite(r)
    miss = np.where(np.isfinite(g), 0.0, np.inf)
    return _select(judged, g, r, miss, np.zeros(g.shape))


def _monotonic(inv: Invariant, got: np.ndarray, ref: np.ndarray, dtype: str) -> _Misses:
    g, r = _rows(got, inv.axis or 0), _rows(ref, inv.axis or 0)
    direction = -1.0 if inv.decreasing else 1.0
    with np.errstate(all="ignore"):
        step = direction * np.diff(g, axis=-1)
        ref_step = direction * np.diff(r, axis=-1)
        scale = np.maximum(np.abs(r[..., 1:]), np.abs(r[..., :-1]))
    judged = np.isfinite(step) & np.isfinite(ref_step)
    bound = SAFETY * 2 * _u(dtype) * scale + np.maximum(-ref_step, 0.0)

    def at_later(a: np.ndarray, fill: float | bool) -> np.ndarray:
        # Each step is named by the element that steps back (the later one), in got's axes.
        a = np.concatenate([np.full(a.shape[:-1] + (1,), fill, a.dtype), a], axis=-1)
        return np.moveaxis(a, -1, (inv.axis or 0) % np.ndim(got))

    return _select(at_later(judged, False), at_later(step, 0.0), np.zeros(np.shape(got)),
                   at_later(-step, 0.0), at_later(bound, 0.0))


def _idempotent(inv: Invariant, got: np.ndarray, again: np.ndarray, ref: np.ndarray, ref_again: np.ndarray,
                dtype: str) -> _Misses:
    g, a = np.asarray(got, np.float64), np.asarray(again, np.float64)
    r, ra = np.asarray(ref, np.float64), np.asarray(ref_again, np.float64)
    judged = np.isfinite(g) & np.isfinite(a) & np.isfinite(r) & np.isfinite(ra)
    with np.errstate(all="ignore"):
        miss = np.abs(a - g)
        bound = SAFETY * (APPROX_ULPS + 1) * _u(dtype) * np.maximum(np.abs(g), np.abs(a)) + np.abs(ra - r)
    return _select(judged, a, g, miss, bound)


def _normalized(inv: Invariant, got: np.ndarray, ref: np.ndarray, dtype: str) -> _Misses:
    """A layer norm without scale or shift: each row's mean is 0 and its mean square
    var / (var + eps) at most 1. The statistic is the larger miss of the two."""
    g, r = _rows(got, inv.axis or 0), _rows(ref, inv.axis or 0)
    n = g.shape[-1]
    judged = np.isfinite(r).all(-1) & np.isfinite(g).all(-1)
    with np.errstate(all="ignore"):
        mean, square = g.mean(-1), (g * g).mean(-1)
        ref_mean, ref_square = r.mean(-1), (r * r).mean(-1)
        largest = np.abs(g).max(-1, initial=0.0)
        miss = np.maximum(np.abs(mean), square - 1.0)
        legal = SAFETY * (n + 2 * APPROX_ULPS + 4) * _u(dtype)
        bound = np.maximum(legal * largest + np.abs(ref_mean), legal * np.maximum(largest * largest, 1.0)
                           + np.maximum(ref_square - 1.0, 0.0))
    return _select(judged, np.where(np.abs(mean) >= square - 1.0, mean, square), np.zeros(mean.shape),
                   miss, bound)


def _logsumexp(inv: Invariant, got: np.ndarray, x: np.ndarray, dtype: str) -> _Misses:
    """max(x) <= logsumexp(x) <= max(x) + log(n) over the axis of argument x."""
    xr = _rows(x, inv.axis or 0)
    n = xr.shape[-1]
    g = np.asarray(got, np.float64).reshape(xr.shape[:-1])
    judged = np.isfinite(xr).all(-1) & np.isfinite(g)
    with np.errstate(all="ignore"):
        top = xr.max(-1, initial=-np.inf)
        high = top + math.log(max(n, 1))
        miss = np.maximum(top - g, g - high)
        want = np.where(g < top, top, high)
        # The sum's n roundings and the exp's move log(sum) by their relative size; the
        # shift by max(x) and the final add round relative to the result.
        bound = SAFETY * _u(dtype) * ((n + 2 * APPROX_ULPS + 2)
                                      + 4 * np.maximum(np.abs(top), max(math.log(max(n, 1)), 1.0)))
    return _select(judged, g, want, miss, bound)


def _select(judged: np.ndarray, value: np.ndarray, want: np.ndarray, miss: np.ndarray,
            bound: np.ndarray) -> _Misses:
    judged = np.asarray(judged, bool)
    index = _row_index(judged.shape)[judged.reshape(-1)] if judged.ndim else \
        (np.zeros((1, 0), int) if bool(judged) else np.zeros((0, 0), int))
    pick = judged.reshape(-1) if judged.ndim else np.array([bool(judged)])

    def flat(a: np.ndarray) -> np.ndarray:
        picked: np.ndarray = np.broadcast_to(np.asarray(a, np.float64), judged.shape).reshape(-1)[pick]
        return picked

    return _Misses(index, flat(value), flat(want), flat(miss), flat(bound))


def _misses(inv: Invariant, outputs: Sequence[np.ndarray], ref: Sequence[np.ndarray], dtype: str,
            inputs: Sequence[np.ndarray] | None) -> _Misses | None:
    i = inv.output
    got, want = outputs[i], ref[i]
    if np.shape(got) != np.shape(want):
        return None  # the oracle's shape rule judges that
    if inv.axis is not None and inv.kind != "logsumexp" and not -np.ndim(got) <= inv.axis < max(np.ndim(got), 1):
        return None  # a declaration for another shape judges nothing
    if inv.kind == "idempotent":
        j = inv.other or 0
        if j >= len(outputs) or np.shape(outputs[j]) != np.shape(got):
            return None
        return _idempotent(inv, got, outputs[j], want, ref[j], dtype)
    if inv.kind == "logsumexp":
        if inputs is None or (inv.other or 0) >= len(inputs):
            return None
        x = np.asarray(inputs[inv.other or 0])
        if x.ndim == 0 or x.size != np.size(got) * x.shape[(inv.axis or 0) % x.ndim]:
            return None
        return _logsumexp(inv, got, x.astype(np.float64), dtype)
    if inv.kind in ("sum", "monotonic", "normalized") and np.ndim(got) == 0:
        return None
    checker = {"sum": _sum, "range": _range, "sign": _sign, "finite": _finite,
               "monotonic": _monotonic, "normalized": _normalized}[inv.kind]
    return checker(inv, got, want, dtype)


def _aligned(m: _Misses, sm: _Misses) -> np.ndarray:
    """A sample's miss at each row or element `m` judges; inf where the sample judges none
    there (not finite in it: legal rounding may take that row anywhere). Rows are matched by
    index, so a row judged on one side only (excused, or not finite) leaves the others'
    widening in place; matching by shape had dropped the whole sample then."""
    if sm.index.shape == m.index.shape and np.array_equal(sm.index, m.index):
        return np.where(np.isfinite(sm.miss), sm.miss, np.inf)
    at = {tuple(k): v for k, v in zip(sm.index.tolist(), sm.miss.tolist(), strict=True)}
    return np.array([at.get(tuple(k), math.inf) for k in m.index.tolist()], np.float64) \
        .reshape(m.miss.shape)


def check(inv: Invariant, outputs: Sequence[np.ndarray], ref: Sequence[np.ndarray], dtype: str, *,
          inputs: Sequence[np.ndarray] | None = None,
          noise: Callable[[], list[list[np.ndarray]] | None] | None = None,
          excused: np.ndarray | None = None) -> Violation | None:
    """Judge one invariant on one configuration's outputs against the float64 reference
    `ref` (the outputs' dtype `dtype`; `inputs` the program's arguments, for logsumexp).
    `noise` returns the noise model's samples, asked only where the analytic bound is
    missed; a sample's own miss, times SAFETY, then widens the bound. `excused` marks
    output elements judged by no invariant (undetermined, or what the program's literal
    evaluation makes non-finite too); a row holding one is not judged."""
    if dtype not in FLOATS or inv.output >= len(outputs) or inv.output >= len(ref):
        return None
    got = np.asarray(outputs[inv.output])
    mask = excused if excused is not None else np.zeros((), bool)
    blank = bool(mask.any()) and np.shape(mask) == got.shape
    if blank:
        got = np.where(mask, np.nan, got.astype(np.float64))
        ref = [*ref]
        ref[inv.output] = np.where(mask, np.nan, np.asarray(ref[inv.output], np.float64))
    m = _misses(inv, [*outputs[:inv.output], got, *outputs[inv.output + 1:]], ref, dtype, inputs)
    if m is None:
        return None
    over = m.miss > m.bound
    if not over.any():
        return None
    asked = False
    if noise is not None and inv.kind != "finite":
        samples = noise()
        asked = True
        for s in samples or []:
            if blank and inv.output < len(s) and np.shape(s[inv.output]) == got.shape:
                s = [*s[:inv.output], np.where(mask, np.nan, np.asarray(s[inv.output], np.float64)),
                     *s[inv.output + 1:]]
            sm = _misses(inv, s, ref, dtype, inputs)
            if sm is not None:
                m.bound = np.maximum(m.bound, SAFETY * _aligned(m, sm))
        over = m.miss > m.bound
        if not over.any():
            return None
    flagged = np.flatnonzero(over)
    ratio = np.where(m.bound[flagged] > 0, m.miss[flagged] / np.maximum(m.bound[flagged], 1e-300), np.inf)
    worst = flagged[np.argsort(-ratio, kind="stable")[:NAMED]]
    where = "row" if inv.kind in ("sum", "normalized", "logsumexp") else "index"
    return Violation(inv, int(over.sum()), [
        {where: [int(k) for k in m.index[w]], "value": _plain(m.value[w]), "want": _plain(m.want[w]),
         "bound": _plain(m.bound[w])} for w in worst], asked)


def check_beside_legal(inv: Invariant, outputs: Sequence[np.ndarray], ref: Sequence[np.ndarray],
                       dtype: str, legal: Sequence[np.ndarray] | None, *,
                       inputs: Sequence[np.ndarray] | None = None) -> Violation | None:
    """`check` where the case's legal compile (`legal`: the same module under the float64
    jit's settings, no plugins) stands in for the literal evaluation, its non-finite
    elements excused, and for the noise model's samples: how the bisector (bisect/lab.py)
    and the release probes (bisect/versions.py) judge an invariant finding, so what legal
    rounding does on the case never counts."""
    if legal is None:
        return check(inv, outputs, ref, dtype, inputs=inputs)
    i = inv.output
    excused = ~np.isfinite(np.asarray(legal[i], np.float64)) \
        if i < len(legal) and i < len(outputs) and np.shape(legal[i]) == np.shape(outputs[i]) else None
    return check(inv, outputs, ref, dtype, inputs=inputs, noise=lambda: [list(legal)], excused=excused)


def _plain(x: float) -> float | str:
    """A JSON-safe float (finding.json): non-finite values as their names."""
    x = float(x)
    return x if math.isfinite(x) else str(x)


def range_of_log_exp(dtype: str) -> tuple[float, float]:
    """What log(exp(x)) can be in `dtype` where it is finite: exp(x) lies between the
    smallest subnormal and the largest finite value, so the log does too."""
    info = ml_dtypes.finfo(NP_DTYPES[dtype])  # type: ignore[no-untyped-call]  # no hints
    return math.log(float(info.smallest_subnormal)), math.log(float(info.max))


# What a repro bundle's repro.py needs to judge an invariant the way the campaign does
# (bisect/bundle.py): the declaration and the checkers, nothing of the project.
_STANDALONE = ("InvariantError", "Invariant", "Violation", "_Misses", "_u", "_rows", "_row_index", "_sum",
               "_range", "_sign", "_finite", "_monotonic", "_idempotent", "_normalized", "_logsumexp",
               "_select", "_misses", "_aligned", "check", "check_beside_legal", "_plain")


def standalone_source() -> str:
    """This module's declaration and checkers as Python source that needs only numpy (and
    `from __future__ import annotations` at the top of the file it goes into)."""
    here = globals()
    head = ["import math", "from collections.abc import Callable, Sequence",
            "from dataclasses import asdict, dataclass", "from typing import Any", "",
            "import numpy as np", "",
            # InvariantError's engine base (core/errors.py) stays behind: repro.py needs only numpy.
            "class UserError(Exception):", "    pass", "",
            f"KINDS = {KINDS!r}", f"SAFETY = {SAFETY!r}", f"APPROX_ULPS = {APPROX_ULPS!r}", f"NAMED = {NAMED!r}",
            f"FLOATS = {tuple(sorted(FLOATS))!r}", f"UNIT_ROUNDOFF = {dict(UNIT_ROUNDOFF)!r}"]
    return "\n".join(head) + "\n\n\n" + "\n\n".join(inspect.getsource(here[name]) for name in _STANDALONE)
