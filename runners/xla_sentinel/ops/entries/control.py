"""Control-flow entries: cond, while and fori loops and scan, over small bounded bodies
named in BODY_NAMES; the numpy forms run the same bodies in a Python loop."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from xla_sentinel.ops.numpy_forms import np_is_float, np_logistic
from xla_sentinel.ops.spec import ALL, Attrs, Ctx, OpDef, Plan, Val, needs_rank

# Bodies of control flow are small, bounded elementwise maps, so loops cannot blow up.
# Planners draw from this order; lax_builders.BODIES holds each in lax.
BODY_NAMES = ("tanh", "sin", "halve", "neg", "abs", "logistic", "square")
# The bodies an integer value keeps (others become neg, or square where unsigned).
INT_BODIES = ("neg", "abs", "square")
NP_BODIES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tanh": np.tanh, "sin": np.sin, "halve": lambda v: v * v.dtype.type(0.5), "neg": np.negative,
    "abs": np.abs, "logistic": np_logistic, "square": lambda v: v * v,
}
assert tuple(NP_BODIES) == BODY_NAMES


def np_body(name: str, v: np.ndarray) -> np.ndarray:
    """The body `name` applied to `v` in numpy (lax_builders.body in lax): a bool value is
    negated; an integer one gets an integer body."""
    if v.dtype == np.bool_:
        negated: np.ndarray = np.logical_not(v)
        return negated
    if not np_is_float(v) and name not in INT_BODIES:
        name = "neg" if v.dtype.kind == "i" else "square"
    if name == "neg" and v.dtype.kind == "u":
        name = "square"
    with np.errstate(all="ignore"):
        return NP_BODIES[name](v).astype(v.dtype)


def plan_bodies(ctx: Ctx, k: int) -> list[str]:
    """k body names, drawn."""
    return [str(b) for b in ctx.rng.choice(list(BODY_NAMES), size=k)]


def _plan_cond(ctx: Ctx, x: Val) -> Plan:
    return [ctx.operand((), "bool"), x], {"branches": plan_bodies(ctx, 2)}


def _plan_loop(ctx: Ctx, x: Val) -> Plan:
    return [x], {"body": plan_bodies(ctx, 1)[0], "trips": int(ctx.rng.integers(1, 5))}


def _loop_numpy(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    for _ in range(attrs["trips"]):
        x = np_body(attrs["body"], x)
    return x


def _scan_numpy(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    carry, out = x[0], []
    for xt in x:
        new = np_body(attrs["body"], carry)
        with np.errstate(over="ignore"):
            carry = np.logical_xor(new, xt) if x.dtype == np.bool_ else (new + xt).astype(x.dtype)
        out.append(carry)
    return np.stack(out)


ENTRIES: list[OpDef] = [
    # lax.cond(p, true_fn, false_fn): the first branch where p holds.
    OpDef(name="cond", category="control", dtypes=ALL, plan=_plan_cond,
          numpy=lambda a, p, x: np_body(a["branches"][0 if p else 1], x)),
    OpDef(name="while_loop", category="control", dtypes=ALL, plan=_plan_loop, numpy=_loop_numpy),
    OpDef(name="fori_loop", category="control", dtypes=ALL, plan=_plan_loop, numpy=_loop_numpy),
    OpDef(name="scan", category="control", dtypes=ALL, plan=needs_rank(1, _plan_loop), numpy=_scan_numpy),
]
