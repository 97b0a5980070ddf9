"""Mutations of a recorded trace: one real module widened into many programs.

Kinds (`MUTATION_KINDS`): `dtype` (every tensor of the trace's float type retyped to
another float type, literals rewritten, inputs cast), `special_values` (NaN, Inf, the
largest finite value, subnormals and signed zeros planted in one float argument),
`swap_op` (an elementwise op swapped for another of the same signature), `round_trip`
(an op's float result sent through a narrower type and back), `perturb_constant` (a
float constant scaled by 1 + r, r up to 1e-2), `batch` (a size the arguments share as
their leading dimension retyped to another in every tensor type, inputs resampled from
the recorded rows), `donation` (input-output aliasing attributes of `main` removed, or
added where an argument's type matches a result), `sharding` (an unpartitioned module
spread over 2 or 4 devices by GSPMD argument shardings). Each mutant is a pure function of
(module, inputs, kind, seed); a kind with no site in the module returns None. Text only:
the caller parses the result (traces.load) so an invalid mutant never reaches a target;
`batch` alone verifies its candidates itself, because whether a retyping is consistent
is only known by verifying it, and a refused size should let another be tried.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from xla_sentinel.core.dtypes import NP_DTYPES
from xla_sentinel.core.names import NARROW_FLOATS
from xla_sentinel.core.program import MLIR_TYPES
from xla_sentinel.ops.numpy_forms import float_info
from xla_sentinel.spec.campaign import MUTATION_KINDS

FLOAT_TYPES = NARROW_FLOATS

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


# A mutation kind: (module, inputs, their dtypes, rng) -> its mutant, None without a site.
Mutation = Callable[[str, list[np.ndarray], list[str], np.random.Generator], Mutant | None]


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
    floats = [i for i, d in enumerate(dtypes) if d in FLOAT_TYPES and inputs[i].size]
    if not floats:
        return None
    i = floats[int(rng.integers(len(floats)))]
    x = inputs[i].copy()
    info = float_info(x.dtype)
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


# A tensor type's shape and element: `tensor<16x32xf32>` -> ("16x32x", "f32").
_TENSOR = re.compile(r"tensor<((?:\d+x)*)([a-z][a-z0-9]*)>")
# `stablehlo.slice %x [0:8, 0:4] : (tensor<8x6xf32>)`: the ranges and the operand's shape.
_SLICE = re.compile(r"(stablehlo\.slice %[\w$.#-]+ )\[([^\]]*)\]( : \(tensor<((?:\d+x)*)[a-z][a-z0-9]*>\))")
_MAIN = re.compile(r"func\.func public @main\((.*?)\)\s*->\s*\((.*?)\)\s*(?:attributes\s*\{[^\n]*\}\s*)?\{\s*$",
                   re.MULTILINE)
_MAIN_SINGLE = re.compile(r"func\.func public @main\((.*?)\)\s*->\s*(tensor<[^>]*>)", re.MULTILINE)
_DONOR_ATTR = re.compile(r"\s*(?:tf\.aliasing_output = \d+ : i32|jax\.buffer_donor = true)")


def _split_top(text: str) -> list[str]:
    """Comma-separated items of a signature, commas inside <>, {}, () and quotes kept."""
    out, depth, quoted, start = [], 0, False, 0
    for i, c in enumerate(text):
        if c == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and c in "<{(":
            depth += 1
        elif not quoted and c in ">})":
            depth -= 1
        elif not quoted and depth == 0 and c == ",":
            out.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        out.append(text[start:].strip())
    return out


def _batch(module: str, inputs: list[np.ndarray], dtypes: list[str], rng: np.random.Generator) -> Mutant | None:
    """Another size for a dimension the arguments share as their leading one: every tensor
    type's dimension of that size retyped, inputs resampled along it from the recorded
    rows. A size that also appears in a non-leading argument dimension is not a batch
    (a square weight, say) and is not a candidate; a retyped module that does not verify
    (a reshape, slice, or literal constant that carries the size) is refused, since the
    mutant must verify before a target sees it."""
    from xla_sentinel.xla.compiler import verify_module

    leading = [x.shape[0] for x in inputs if x.ndim >= 1]
    inner = {d for x in inputs for d in x.shape[1:]}
    sizes = sorted({b for b in leading if b > 1 and b not in inner})
    pairs = [(b, n) for b in sizes for n in sorted({1, b // 2, b - 1, b + 1, 2 * b} - {0, b})]
    for b, new in [pairs[i] for i in rng.permutation(len(pairs))]:
        text = resize_dimension(module, b, new)
        try:
            verify_module(text)
        except Exception:  # the MLIR parser's own error: a site that carries the size
            continue
        rows = rng.integers(b, size=new)
        new_inputs = [x[rows] if x.ndim >= 1 and x.shape[0] == b else x for x in inputs]
        return Mutant(text, new_inputs, dtypes, f"batch {b}->{new}")
    return None


def resize_dimension(module: str, old: int, new: int) -> str:
    """Every tensor dimension of size `old` as `new`, and whole-dimension slices with it."""
    return _TENSOR.sub(lambda m: _resize(m, old, new), _SLICE.sub(lambda m: _slice_whole(m, old, new), module))


def _slice_whole(m: re.Match[str], old: int, new: int) -> str:
    """A slice that takes the whole of a dimension of the old size takes the whole of the
    new one (its limit is an attribute, not a type); other slices are left to the verifier."""
    dims = [int(d) for d in m.group(4).split("x")[:-1]]
    ranges = [r.strip() for r in m.group(2).split(",")]
    if len(dims) != len(ranges):
        return m.group(0)
    fixed = [f"0:{new}" if d == old and r == f"0:{old}" else r for d, r in zip(dims, ranges, strict=True)]
    return f"{m.group(1)}[{', '.join(fixed)}]{m.group(3)}"


def _resize(m: re.Match[str], old: int, new: int) -> str:
    dims = [int(d) for d in m.group(1).split("x")[:-1]]
    return "tensor<" + "".join(f"{new if d == old else d}x" for d in dims) + m.group(2) + ">"


def _without_donation(arg: str) -> str:
    """`%argN: type {attrs}` less its donation attributes (and less `{}` when none is left)."""
    if not arg.endswith("}") or " {" not in arg:
        return arg
    head, attrs = arg.split(" {", 1)
    kept = [a for a in _split_top(attrs[:-1]) if not _DONOR_ATTR.fullmatch(a)]
    return f"{head} {{{', '.join(kept)}}}" if kept else head


def _donation(module: str, inputs: list[np.ndarray], dtypes: list[str], rng: np.random.Generator) -> Mutant | None:
    """Input-output aliasing flipped: a module that donates (`tf.aliasing_output`, which
    jax writes for a donated argument with a matching result, or `jax.buffer_donor`)
    loses every such attribute; one that does not gets `tf.aliasing_output` on each
    argument whose type matches a result not yet aliased, so the target compiles it with
    the output written into the input's buffer."""
    m = _MAIN.search(module) or _MAIN_SINGLE.search(module)
    if m is None:
        return None
    args = _split_top(m.group(1))
    if any(_DONOR_ATTR.search(a) for a in args):
        new_args = [_without_donation(a) for a in args]
        what = "donation removed"
    else:
        results = [r.split(" ", 1)[0] for r in _split_top(m.group(2))]
        free = list(range(len(results)))
        new_args = []
        for a in args:
            arg_type = a.split(": ", 1)[1].split(" ", 1)[0]
            j = next((j for j in free if results[j] == arg_type), None)
            if j is None:
                new_args.append(a)
                continue
            free.remove(j)
            attr = f"tf.aliasing_output = {j} : i32"
            new_args.append(a[:-1] + f", {attr}}}" if a.endswith("}") else f"{a} {{{attr}}}")
        if new_args == args:
            return None
        what = f"donation added ({sum(a != b for a, b in zip(args, new_args, strict=True))} arguments)"
    text = module[:m.start(1)] + ", ".join(new_args) + module[m.end(1):]
    return Mutant(text, inputs, dtypes, what)


# Device counts a sharding mutant spreads a module over; workers have more host devices
# (worker.HOST_DEVICES), and a CPU target runs them as virtual devices.
SHARD_DEVICES = (2, 4)
_PARTITIONS_ONE = re.compile(r"mhlo\.num_partitions = 1 : i32")


def _sharding(module: str, inputs: list[np.ndarray], dtypes: list[str], rng: np.random.Generator) -> Mutant | None:
    """The same program partitioned over N devices (GSPMD): `mhlo.num_partitions = N` and
    an `mhlo.sharding` on each array argument, split along one dimension N divides or
    replicated, at least one split; the partitioner propagates the rest. Only a module
    that is not partitioned already (num_partitions 1, no sharding attributes): choosing
    another sharding of a sharded one would have to read its mesh first."""
    m = _MAIN.search(module) or _MAIN_SINGLE.search(module)
    if m is None or not _PARTITIONS_ONE.search(module) or "mhlo.sharding" in module or "sdy." in module:
        return None
    args = _split_top(m.group(1))
    for n in [SHARD_DEVICES[i] for i in rng.permutation(len(SHARD_DEVICES))]:
        splittable = [i for i, x in enumerate(inputs) if any(d % n == 0 for d in x.shape)]
        if not splittable:
            continue
        split = {i for i in splittable if rng.random() < 0.5} or {splittable[int(rng.integers(len(splittable)))]}
        new_args, parts = [], []
        for i, (a, x) in enumerate(zip(args, inputs, strict=True)):
            if x.ndim == 0:
                new_args.append(a)
                continue
            if i in split:
                dims = [d for d, size in enumerate(x.shape) if size % n == 0]
                d = dims[int(rng.integers(len(dims)))]
                tiles = ",".join(str(n if k == d else 1) for k in range(x.ndim))
                attr = f'mhlo.sharding = "{{devices=[{tiles}]<=[{n}]}}"'
                parts.append(f"arg{i} dim {d}")
            else:
                attr = 'mhlo.sharding = "{replicated}"'
            new_args.append(a[:-1] + f", {attr}}}" if a.endswith("}") else f"{a} {{{attr}}}")
        text = module[:m.start(1)] + ", ".join(new_args) + module[m.end(1):]
        text = _PARTITIONS_ONE.sub(f"mhlo.num_partitions = {n} : i32", text, count=1)
        return Mutant(text, inputs, dtypes, f"sharding over {n} devices: {', '.join(parts)}")
    return None


_KINDS: dict[str, Mutation] = {"dtype": _dtype, "special_values": _special_values, "swap_op": _swap_op,
                          "round_trip": _round_trip, "perturb_constant": _perturb_constant,
                          "batch": _batch, "donation": _donation, "sharding": _sharding}
