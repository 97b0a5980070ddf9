"""Invariants of a replayed module read from its own dataflow: the common numerical
patterns in StableHLO, so that a production trace gets its invariants without declaring
them (docs/detection.md, "Invariants").

Over a module's info (@main's ops, their operands, results and first text line: the
program worker's Info reply, xla/cuts.Parsed.info), an output is recognized as
- softmax: `divide(E, broadcast(reduce_add(E)))` with E = `exponential(...)`: rows sum to
  one over the reduced axis, in [0, 1]; no NaN from finite input only where E is
  `exponential(subtract(x, broadcast(reduce_max(x))))`, the max-subtracted form;
- log-sum-exp: `add(log(reduce_add(exponential(subtract(x, m)))), m')`: finite, and
  between max(x) and max(x) + log(n) where x is an argument of @main;
- log of exp: `log(exponential(x))`: where finite, within the logs of the dtype's smallest
  subnormal and largest finite value (folding it to x past the overflow point is not);
- sigmoid: `logistic(x)` or `divide(1, add(1, exponential(negate(x))))`: in [0, 1];
- layer norm: `multiply(subtract(x, mean), broadcast(rsqrt(add(var, eps))))`: finite, each
  row of mean 0 and mean square at most 1; with a scale and shift after it, finite.
Broadcasts and reshapes are looked through. Pure: no jax, no MLIR.
"""

from __future__ import annotations

import re
from typing import Any

from xla_sentinel.judge.invariants import Invariant, range_of_log_exp

_THROUGH = ("stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.convert")
_DIMS = re.compile(r"across dimensions = \[([\d, ]*)\]")
_ONE = re.compile(r"dense<1\.0*e\+00>")


class _Flow:
    """@main's values: the op that defines each, and @main's arguments by position."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.args = {a["vid"]: i for i, a in enumerate(info["args"])}
        self.defs: dict[str, dict[str, Any]] = {}
        self.dtypes: dict[str, str | None] = {a["vid"]: a["dtype"] for a in info["args"]}
        self.shapes: dict[str, list[int] | None] = {a["vid"]: a["shape"] for a in info["args"]}
        for op in info["ops"]:
            for r in op["results"]:
                self.defs[r["vid"]] = op
                self.dtypes[r["vid"]] = r["dtype"]
                self.shapes[r["vid"]] = r["shape"]

    def op(self, vid: str, name: str | None = None) -> dict[str, Any] | None:
        """The op that defines `vid` (looked through broadcasts and reshapes when it is not
        `name`), if it is `name` (any, without one)."""
        seen = 0
        while seen < 8:
            op = self.defs.get(vid)
            if op is None:
                return None
            if name is not None and op["name"] == name:
                return op
            if op["name"] not in _THROUGH or not op["operands"]:
                return op if name is None else None
            vid = op["operands"][0]
            seen += 1
        return None

    def source(self, vid: str) -> str:
        """`vid` with broadcasts and reshapes looked through."""
        for _ in range(8):
            op = self.defs.get(vid)
            if op is None or op["name"] not in _THROUGH or not op["operands"]:
                return vid
            vid = op["operands"][0]
        return vid

    def reduce(self, vid: str, reducer: str) -> tuple[str, list[int]] | None:
        """(reduced value, dimensions) when `vid` is a reduce with `reducer` (add, maximum)."""
        op = self.op(vid, "stablehlo.reduce")
        if op is None or f"applies stablehlo.{reducer}" not in op["text"]:
            return None
        dims = _DIMS.search(op["text"])
        if dims is None:
            return None
        return op["operands"][0], [int(d) for d in dims.group(1).split(",") if d.strip()]

    def is_one(self, vid: str) -> bool:
        op = self.op(vid, "stablehlo.constant")
        return op is not None and _ONE.search(op["text"]) is not None

    def holds_max(self, vid: str, x: str) -> bool:
        """Whether `vid` is a max-reduction of x, looked through the maximum and select that
        guard it (jax's logsumexp keeps -inf rows finite that way)."""
        stack, seen = [vid], 0
        while stack and seen < 16:
            v = stack.pop()
            seen += 1
            found = self.reduce(v, "maximum")
            if found is not None:
                if self.source(found[0]) == self.source(x):
                    return True
                continue
            op = self.op(v)
            if op is not None and op["name"] in ("stablehlo.maximum", "stablehlo.select",
                                                 "stablehlo.optimization_barrier"):
                stack.extend(op["operands"])
        return False


def _single(dims: list[int]) -> int | None:
    return dims[0] if len(dims) == 1 else None


def _softmax(flow: _Flow, vid: str) -> list[dict[str, Any]]:
    div = flow.defs.get(vid)
    if div is None or div["name"] != "stablehlo.divide":
        return []
    e, s = div["operands"][:2]
    exp = flow.op(e, "stablehlo.exponential")
    summed = flow.reduce(s, "add")
    if exp is None or summed is None or flow.source(summed[0]) != flow.source(e):
        return []
    axis = _single(summed[1])
    out: list[dict[str, Any]] = [{"kind": "range", "low": 0.0, "high": 1.0}]
    if axis is not None:
        out.insert(0, {"kind": "sum", "axis": axis})
    sub = flow.op(exp["operands"][0], "stablehlo.subtract")
    if sub is not None and flow.holds_max(sub["operands"][1], sub["operands"][0]):
        out.append({"kind": "finite"})
    return out


def _logsumexp(flow: _Flow, vid: str) -> list[dict[str, Any]]:
    add = flow.defs.get(vid)
    if add is None or add["name"] != "stablehlo.add":
        return []
    for lg, m in (add["operands"][:2], add["operands"][1::-1][:2]):
        log = flow.op(lg, "stablehlo.log")
        if log is None:
            continue
        inner = log["operands"][0]
        absolute = flow.op(inner, "stablehlo.abs")
        summed = flow.reduce(absolute["operands"][0] if absolute else inner, "add")
        if summed is None:
            continue
        exp = flow.op(summed[0], "stablehlo.exponential")
        sub = flow.op(exp["operands"][0], "stablehlo.subtract") if exp else None
        if sub is None:
            continue
        x = flow.source(sub["operands"][0])
        if not flow.holds_max(m, x):
            continue
        out: list[dict[str, Any]] = [{"kind": "finite"}]
        axis = _single(summed[1])
        if axis is not None and x in flow.args:
            out.append({"kind": "logsumexp", "axis": axis, "other": flow.args[x]})
        return out
    return []


def _log_exp(flow: _Flow, vid: str) -> list[dict[str, Any]]:
    log = flow.defs.get(vid)
    dtype = flow.dtypes.get(vid)
    if log is None or log["name"] != "stablehlo.log" or dtype is None:
        return []
    if flow.op(log["operands"][0], "stablehlo.exponential") is None:
        return []
    low, high = range_of_log_exp(dtype)
    return [{"kind": "range", "low": low, "high": high, "allow_inf": True}]


def _sigmoid(flow: _Flow, vid: str) -> list[dict[str, Any]]:
    op = flow.defs.get(vid)
    if op is None:
        return []
    if op["name"] == "stablehlo.logistic":
        return [{"kind": "range", "low": 0.0, "high": 1.0}]
    if op["name"] != "stablehlo.divide" or not flow.is_one(op["operands"][0]):
        return []
    add = flow.op(op["operands"][1], "stablehlo.add")
    if add is None:
        return []
    for one, e in (add["operands"][:2], add["operands"][1::-1][:2]):
        exp = flow.op(e, "stablehlo.exponential")
        if flow.is_one(one) and exp is not None and flow.op(exp["operands"][0], "stablehlo.negate"):
            return [{"kind": "range", "low": 0.0, "high": 1.0}]
    return []


def _normalized_axis(flow: _Flow, vid: str) -> int | None:
    """The axis of `multiply(subtract(x, mean), broadcast(rsqrt(add(var, eps))))`, None
    when `vid` is not that (or normalizes over several axes)."""
    mul = flow.defs.get(vid)
    if mul is None or mul["name"] != "stablehlo.multiply":
        return None
    for c, r in (mul["operands"][:2], mul["operands"][1::-1][:2]):
        rsqrt = flow.op(r, "stablehlo.rsqrt")
        sub = flow.op(c, "stablehlo.subtract")
        if rsqrt is None or sub is None or flow.op(rsqrt["operands"][0], "stablehlo.add") is None:
            continue
        # The mean subtracted is a sum over the normalized axis, divided or multiplied by 1/n.
        mean = flow.op(sub["operands"][1])
        for _ in range(3):
            if mean is None:
                break
            summed = flow.reduce(mean["results"][0]["vid"], "add")
            if summed is not None:
                return _single(summed[1])
            mean = flow.op(mean["operands"][0]) if mean["name"] in ("stablehlo.divide",
                                                                    "stablehlo.multiply") else None
    return None


def _layer_norm(flow: _Flow, vid: str) -> list[dict[str, Any]]:
    axis = _normalized_axis(flow, vid)
    if axis is not None:
        return [{"kind": "normalized", "axis": axis}, {"kind": "finite"}]
    # Scale and shift: add(multiply(normalized, broadcast(g)), broadcast(b)).
    add = flow.defs.get(vid)
    if add is None or add["name"] != "stablehlo.add":
        return []
    for m in add["operands"][:2]:
        mul = flow.op(m, "stablehlo.multiply")
        if mul is not None and any(_normalized_axis(flow, v) is not None for v in mul["operands"][:2]):
            return [{"kind": "finite"}]
    return []


PATTERNS = {"softmax": _softmax, "logsumexp": _logsumexp, "log_exp": _log_exp, "sigmoid": _sigmoid,
            "layer_norm": _layer_norm}


def recognized(info: dict[str, Any]) -> list[Invariant]:
    """The invariants of a module's float outputs that its dataflow shows (PATTERNS)."""
    flow = _Flow(info)
    out: list[Invariant] = []
    for i, vid in enumerate(info["returns"]):
        if flow.dtypes.get(vid) not in ("f32", "f16", "bf16", "f64"):
            continue
        for name, match in PATTERNS.items():
            try:
                decl = match(flow, vid)
            except (KeyError, IndexError, ValueError):
                decl = []  # an op of a form the pattern does not know: not that pattern
            if decl:
                out.extend(Invariant.from_json({**d, "output": i}, source=f"stablehlo {name} ({vid})")
                           for d in decl)
                break
    return out
