"""What an op-table entry is: `OpDef`, the values its planner sees (`Val`, `Ctx`), the
dtype groups and tags entries share, and `registry`, which assembles entries into a table.
Imports no jax: the coordinator and the numpy references read entries without it."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from xla_sentinel.core.dtypes import NP_DTYPES
from xla_sentinel.core.names import FLOATS, INTS
from xla_sentinel.spec.campaign import SHAPE_FAMILIES

ALL = FLOATS + INTS + ("bool",)
NUMERIC = FLOATS + INTS
SIGNED = tuple(d for d in INTS if NP_DTYPES[d].kind == "i")
INT_BITS = {d: 8 * NP_DTYPES[d].itemsize for d in INTS}

# Tags (OpDef.tags says what each means), as the entries spell them.
EXACT, SELECTS, ROUNDED = frozenset({"exact"}), frozenset({"selects"}), frozenset({"rounded"})
APPROX, SUMS, PRODUCTS = frozenset({"approx"}), frozenset({"sums"}), frozenset({"products"})
INDEX = frozenset({"index"})


@dataclass(frozen=True)
class Val:
    """A value in a program under construction: its index, abstract type and taint."""

    id: int
    shape: tuple[int, ...]
    dtype: str
    # True when the value depends on float arithmetic, so that even integer results can
    # legally differ between configurations (a float rounding flips a floor or compare).
    tainted: bool = False

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


class Ctx(Protocol):
    """What an op's planner may ask of the generator."""

    rng: np.random.Generator
    max_rank: int
    max_dim: int

    def operand(self, shape: Sequence[int], dtype: str) -> Val: ...
    def dim(self) -> int: ...


# An op's attributes, as its planner draws them (JSON-serializable values).
Attrs = dict[str, Any]
Plan = tuple[list[Val], Attrs]
Planner = Callable[[Ctx, Val], Plan | None]


@dataclass(frozen=True, kw_only=True)
class OpDef:
    """One op the generator knows: which operand dtypes it accepts, how to choose operands
    and attributes (`plan`), what it computes in numpy (`numpy`), and what the oracle and
    the bisector may assume of it. Its jax.lax form is the builder of the same name in
    ops/lax_builders.py; shapes follow from jax itself (the generator evaluates the builder
    abstractly, so a plan that jax rejects is never emitted)."""

    name: str
    category: str
    dtypes: tuple[str, ...]
    plan: Planner
    # The input domain that keeps float64 references finite (lax_builders.guard and
    # numpy_forms.np_guard map a float operand into it); an elementwise entry's numpy form
    # holds the guard of each operand.
    guard: str | None = None
    # Rank-discrete output (compare, floor, argmax): legal rounding differences can flip it.
    discrete: bool = False
    # Evaluate in the program's own dtypes inside the float64 reference (bitcasts,
    # nextafter): promoting their operands would change what they mean.
    own_dtypes: bool = False
    # "index": takes indices; "approx": a transcendental function, not correctly rounded
    # (XLA may be an ulp off); "sums": adds up terms (its partial sums and products can
    # leave the dtype's range although the result does not, and its rounding error grows
    # with the number of terms); "products": multiplies terms (the error grows likewise).
    # For the bitwise oracle (exact.py): "exact": the result is fixed bitwise by the
    # operands (compares, rounding to integers, conversions); "selects": its elements are
    # operand elements moved, chosen or negated, so it commutes with rounding (movement,
    # select, max, min, abs); "rounded": one correctly rounded operation on floats (+ - *).
    tags: frozenset[str] = field(default_factory=frozenset)
    # numpy(attrs, *args): what the builder computes, in float64 numpy with lax semantics
    # (ops/numpy_forms.py); None where the op has no numpy form.
    numpy: Callable[..., Any] | None = None
    # The program shape from real bugs this op belongs to (campaign.SHAPE_FAMILIES): drawn only
    # when the campaign's `generator.shapes` names it, or when `generator.ops` names the op.
    family: str | None = None
    # The StableHLO ops this entry lowers to that carry its meaning. With one op, the
    # entry's bitwise tags hold for that op wherever it appears (a replayed module, a
    # bisector's cut); `discrete` holds for each op named. Ops with regions whose body
    # decides their meaning (reduce, scatter, sort) are named by no entry.
    stablehlo: tuple[str, ...] = ()


def registry(*groups: Iterable[OpDef]) -> dict[str, OpDef]:
    """The entries of `groups` by name, in the order given (the generator's draw order);
    a name may appear once, a family only if SHAPE_FAMILIES knows it."""
    ops: dict[str, OpDef] = {}
    for op in (op for group in groups for op in group):
        assert op.name not in ops, op.name
        assert op.family is None or op.family in SHAPE_FAMILIES, op.family
        ops[op.name] = op
    return ops


# --- planners shared by the entries ------------------------------------------------------

def same(n: int) -> Planner:
    """n operands of the primary operand's shape and dtype."""
    def plan(ctx: Ctx, x: Val) -> Plan:
        return [x] + [ctx.operand(x.shape, x.dtype) for _ in range(n - 1)], {}
    return plan


def axis(ctx: Ctx, x: Val) -> int:
    """One axis of `x`, drawn."""
    return int(ctx.rng.integers(x.rank))


def needs_rank(k: int, plan: Planner) -> Planner:
    """`plan`, for primary operands of rank `k` or more only."""
    def wrapped(ctx: Ctx, x: Val) -> Plan | None:
        return plan(ctx, x) if x.rank >= k else None
    return wrapped
