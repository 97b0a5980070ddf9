"""Mutations of a recorded trace: one real module widened into many programs.

Kinds (`MUTATION_KINDS`): `dtype` (every tensor of the trace's float type retyped to
another float type, literals rewritten, inputs cast), `special_values` (NaN, Inf, the
largest finite value, subnormals and signed zeros planted in one float argument),
`swap_op` (an elementwise op swapped for another of the same signature), `round_trip`
(an op's float result sent through a narrower type and back), `perturb_constant` (a
float constant scaled by 1 + r, r up to 1e-2). Each mutant is a pure function of (module,
inputs, kind, seed); a kind with no site in the module returns None. Text only: the
caller parses the result (traces.load) so an invalid mutant never reaches a target.
"""

from __future__ import annotations

import re
from typing import Any

import ml_dtypes
import numpy as np

from .campaign import MUTATION_KINDS
from .dtypes import NP_DTYPES
from .program import MLIR_TYPES

FLOAT_TYPES = ("f32", "bf16", "f16")

# Elementwise ops that are interchangeable: same operand and result types, same arity.
SWAP_BINARY = ("add", "subtract", "multiply", "maximum", "minimum")
SWAP_UNARY_FLOAT = ("sine", "cosine", "tanh", "negate", "abs")

# A single-result op line: `%name = stablehlo.op operands : type` (or `-> type`).
_DEF = re.compile(r"^(\s*)(%[\w$.-]+) = (\"?stablehlo\.[a-z_]+\"?)(.*)$")
_RESULT_TYPE = re.compile(r"(?::|->)\s*tensor<((?:\d+x)*)(f32|bf16|f16)>\s*$")
_SPLAT_CONST = re.compile(r"(stablehlo\.constant dense<)(-?\d+\.\d+(?:[eE][+-]?\d+)?)(>\s*:\s*tensor<(?:\d+x)*(?:f32|bf16|f16)>)")


class Mutant:
    """A mutated module and its inputs; `describe` says what was changed, for provenance."""

    def __init__(self, module: str, inputs: list[np.ndarray], input_dtypes: list[str], describe: str) -> None:
        self.module = module
        self.inputs = inputs
        self.input_dtypes = input_dtypes
        self.describe = describe


def mutate(module: str, inputs: list[np.ndarray], dtypes: list[str], kind: str, seed: int) -> Mutant | None:
    """One mutant of the given kind, or None when the module has no site for it."""
    rng = np.random.default_rng([seed, MUTATION_KINDS.index(kind), 0x307A])
    return _KINDS[kind](module, list(inputs), list(dtypes), rng)


def _dtype(module: str, inputs: list[np.ndarray], dtypes: list[str], rng: np.random.Generator) -> Mutant | None:
    present = [t for t in FLOAT_TYPES if re.search(rf"[x<]{t}>", module)]
    if not present or "bitcast_convert" in module:  # a bit cast depends on the width
        return None
    src = present[int(rng.integers(len(present)))]
    dst = [t for t in FLOAT_TYPES if t != src][int(rng.integers(len(FLOAT_TYPES) - 1))]
    out = retype_floats(module, src, dst)
    name_src, name_dst = MLIR_TYPES[src], MLIR_TYPES[dst]
    with np.errstate(over="ignore"):
        new_inputs = [x.astype(NP_DTYPES[name_dst]) if d == name_src else x for x, d in zip(inputs, dtypes, strict=True)]
    new_dtypes = [name_dst if d == name_src else d for d in dtypes]
    return Mutant(out, new_inputs, new_dtypes, f"dtype {src}->{dst}")


def retype_floats(module: str, src: str, dst: str) -> str:
    """Every `src` float tensor type of the module as `dst`; hex literals (bit patterns of
    their type, such as 0xFF800000 for -inf) re-encoded so they keep their values."""
    src_np, dst_np = NP_DTYPES[MLIR_TYPES[src]], NP_DTYPES[MLIR_TYPES[dst]]
    dense = re.compile(rf"dense<([^<>]*)>(\s*:\s*tensor<(?:\d+x)*){src}>")

    def reencode(m: re.Match[str]) -> str:
        body = re.sub(r'"0x([0-9A-Fa-f]+)"|0x([0-9A-Fa-f]+)', lambda h: _hex(h, src_np, dst_np), m.group(1))
        return f"dense<{body}>{m.group(2)}{dst}>"

    out = dense.sub(reencode, module)
    return re.sub(rf"(?<=[x<]){src}(?=>)", dst, out)


def _hex(m: re.Match[str], src: np.dtype, dst: np.dtype) -> str:
    quoted, bare = m.groups()
    digits = quoted or bare
    if len(digits) % (2 * src.itemsize):
        return m.group(0)
    if bare is not None:
        value = np.array([int(bare, 16)], dtype=f"<u{src.itemsize}").view(src)
        with np.errstate(over="ignore"):
            bits = value.astype(dst).view(f"<u{dst.itemsize}")[0]
        return f"0x{int(bits):0{2 * dst.itemsize}X}"
    with np.errstate(over="ignore"):
        data = np.frombuffer(bytes.fromhex(quoted), dtype=src).astype(dst)
    return '"0x' + data.tobytes().hex().upper() + '"'


def _special_values(module: str, inputs: list[np.ndarray], dtypes: list[str], rng: np.random.Generator) -> Mutant | None:
    floats = [i for i, d in enumerate(dtypes) if d in ("f32", "bf16", "f16") and inputs[i].size]
    if not floats:
        return None
    i = floats[int(rng.integers(len(floats)))]
    x = inputs[i].copy()
    info = ml_dtypes.finfo(x.dtype)
    pool = np.array([np.nan, np.inf, -np.inf, float(info.max), -float(info.max), float(info.tiny) / 4,
                     -float(info.tiny) / 2, -0.0, 0.0], dtype=np.float64)
    flat = x.reshape(-1)
    k = max(1, int(round(0.05 * flat.size)))
    where = rng.choice(flat.size, size=min(k, flat.size), replace=False)
    flat[where] = pool[rng.integers(len(pool), size=len(where))].astype(x.dtype)
    inputs[i] = flat.reshape(x.shape)
    return Mutant(module, inputs, dtypes, f"special values in arg{i} ({len(where)} elements)")


def _sites(lines: list[str], ops: tuple[str, ...], float_only: bool) -> list[tuple[int, str]]:
    out = []
    for n, line in enumerate(lines):
        m = _DEF.match(line)
        if m and m.group(3).strip('"').removeprefix("stablehlo.") in ops:
            if float_only and not _RESULT_TYPE.search(line):
                continue
            out.append((n, m.group(3).strip('"').removeprefix("stablehlo.")))
    return out


def _swap_op(module: str, inputs: list[np.ndarray], dtypes: list[str], rng: np.random.Generator) -> Mutant | None:
    lines = module.split("\n")
    sites = [(n, op, SWAP_BINARY) for n, op in _sites(lines, SWAP_BINARY, float_only=False)]
    sites += [(n, op, SWAP_UNARY_FLOAT) for n, op in _sites(lines, SWAP_UNARY_FLOAT, float_only=True)]
    if not sites:
        return None
    n, op, group = sites[int(rng.integers(len(sites)))]
    other = [o for o in group if o != op][int(rng.integers(len(group) - 1))]
    lines[n] = lines[n].replace(f"stablehlo.{op} ", f"stablehlo.{other} ", 1)
    return Mutant("\n".join(lines), inputs, dtypes, f"swap_op line {n + 1}: {op} -> {other}")


def _round_trip(module: str, inputs: list[np.ndarray], dtypes: list[str], rng: np.random.Generator) -> Mutant | None:
    lines = module.split("\n")
    sites = [n for n, line in enumerate(lines)
             if (m := _DEF.match(line)) and ":" not in m.group(2) and _RESULT_TYPE.search(line)
             and "stablehlo.constant" not in line and not line.rstrip().endswith(("{", "("))]
    if not sites:
        return None
    n = sites[int(rng.integers(len(sites)))]
    indent, name = _DEF.match(lines[n]).group(1, 2)  # type: ignore[union-attr]
    dims, elem = _RESULT_TYPE.search(lines[n]).groups()  # type: ignore[union-attr]
    via = "f16" if elem == "bf16" else "bf16"
    wide, narrow = f"tensor<{dims}{elem}>", f"tensor<{dims}{via}>"
    first, second = f"%rt_a{n}", f"%rt_b{n}"
    lines[n] = lines[n].replace(f"{name} = ", f"{first} = ", 1)
    lines[n + 1:n + 1] = [f"{indent}{second} = stablehlo.convert {first} : ({wide}) -> {narrow}",
                          f"{indent}{name} = stablehlo.convert {second} : ({narrow}) -> {wide}"]
    return Mutant("\n".join(lines), inputs, dtypes, f"round_trip line {n + 1} through {via}")


def _perturb_constant(module: str, inputs: list[np.ndarray], dtypes: list[str], rng: np.random.Generator) -> Mutant | None:
    sites = [m for m in _SPLAT_CONST.finditer(module) if float(m.group(2)) != 0.0]
    if not sites:
        return None
    m = sites[int(rng.integers(len(sites)))]
    value = float(m.group(2)) * (1 + float(rng.uniform(-1e-2, 1e-2)))
    text = module[:m.start(2)] + f"{value:.9e}" + module[m.end(2):]
    return Mutant(text, inputs, dtypes, f"perturb_constant {m.group(2)} -> {value:.9e}")


_KINDS: dict[str, Any] = {"dtype": _dtype, "special_values": _special_values, "swap_op": _swap_op,
                          "round_trip": _round_trip, "perturb_constant": _perturb_constant}
