"""HLO text utilities: parse XLA's HLO text into computations and instructions, and edit
it precisely (no jax here: the coordinator reads optimized HLO with it; hlo_proto.py
converts to and from jaxlib's HloModuleProto inside workers and plugins).

The parser is line-based and keeps every instruction's attributes as raw text, so
`parse(text).to_text() == text` for what `HloModule.to_string()` prints: an edit changes
only the lines it touches. It understands what the fault plugins and the bisector need
(fusion kinds, which computation is a fusion body or a control-flow body), not the whole
HLO grammar.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

_COMPUTATION_HEADER = re.compile(r"^(ENTRY )?%([\w.\-]+) .*\{$")
_INSTRUCTION_START = re.compile(r"^(\s+)(ROOT )?%([\w.\-]+) = ")
_OPERAND_NAME = re.compile(r"%([\w.\-]+)")
_ARRAY_SHAPE = re.compile(r"^(\w+)\[([\d,]*)\](?:\{([\d,]*)[^}]*\})?$")

FLOAT_TYPES = frozenset({"f16", "bf16", "f32", "f64"})
SIGNED_INT_TYPES = frozenset({"s8", "s16", "s32", "s64"})

# Attributes through which an instruction calls another computation, and the role that
# gives the callee.
_CALLEE_ROLES = {
    ("fusion", "calls"): "fusion",
    ("while", "body"): "while_body",
    ("while", "condition"): "while_condition",
    ("conditional", "branch_computations"): "branch",
    ("conditional", "true_computation"): "branch",
    ("conditional", "false_computation"): "branch",
    ("call", "to_apply"): "call",
}
CONTROL_FLOW_ROLES = frozenset({"while_body", "while_condition", "branch"})

# An instruction attribute as written: `key=value`, or a bare `key` (value None).
Attr = tuple[str, str | None]


class HloParseError(ValueError):
    """The text is not HLO this parser understands; the message names the line."""


@dataclass(frozen=True)
class Shape:
    """An array shape: element type, dimensions and minor-to-major layout (may be empty)."""

    dtype: str
    dims: tuple[int, ...]
    layout: tuple[int, ...] = ()

    def __str__(self) -> str:
        text = f"{self.dtype}[{','.join(map(str, self.dims))}]"
        if self.layout:
            text += "{" + ",".join(map(str, self.layout)) + "}"
        return text

    def with_dtype(self, dtype: str) -> Shape:
        return Shape(dtype, self.dims, self.layout)

    def with_dims(self, dims: Iterable[int]) -> Shape:
        return Shape(self.dtype, tuple(dims), self.layout)


def parse_shape(text: str) -> Shape | None:
    """The array shape in `text` (`f32[4,5]{1,0}`), or None for tuples and tokens."""
    match = _ARRAY_SHAPE.match(text)
    if not match:
        return None
    dtype, dims, layout = match.groups()
    return Shape(
        dtype,
        tuple(int(d) for d in dims.split(",") if d),
        tuple(int(d) for d in (layout or "").split(",") if d),
    )


@dataclass
class Instruction:
    """One HLO instruction line, with its attributes kept as raw `key=value` text."""

    name: str
    shape_text: str
    opcode: str
    operand_text: str
    attrs: list[Attr] = field(default_factory=list)
    is_root: bool = False
    indent: str = "  "

    @property
    def shape(self) -> Shape | None:
        return parse_shape(self.shape_text)

    @property
    def array_shape(self) -> Shape:
        """The shape of an instruction that must make an array (HloParseError if not)."""
        shape = self.shape
        if shape is None:
            raise HloParseError(f"%{self.name} makes {self.shape_text}, not an array")
        return shape

    @property
    def dtype(self) -> str | None:
        shape = self.shape
        return shape.dtype if shape else None

    @property
    def operands(self) -> list[str]:
        """Names of the instructions this one reads, in order (empty for constants)."""
        if self.opcode in ("constant", "parameter", "iota"):
            return []
        return _OPERAND_NAME.findall(self.operand_text)

    def attr(self, key: str) -> str | None:
        for name, value in self.attrs:
            if name == key:
                return value
        return None

    def required_attr(self, key: str) -> str:
        """The value of an attribute the opcode always has (`to_apply` of a reduce)."""
        value = self.attr(key)
        if value is None:
            raise HloParseError(f"%{self.name} ({self.opcode}) has no {key}=")
        return value

    def set_attr(self, key: str, value: str) -> None:
        for i, (name, _) in enumerate(self.attrs):
            if name == key:
                self.attrs[i] = (key, value)
                return
        self.attrs.append((key, value))

    def drop_attr(self, key: str) -> None:
        self.attrs = [(k, v) for k, v in self.attrs if k != key]

    def callees(self) -> list[tuple[str, str]]:
        """(attribute, computation name) for each computation this instruction calls."""
        found: list[tuple[str, str]] = []
        for key, value in self.attrs:
            if value is not None and key in (
                    "calls", "body", "condition", "to_apply", "branch_computations",
                    "true_computation", "false_computation", "called_computations"):
                found.extend((key, name) for name in _OPERAND_NAME.findall(value))
        return found

    @property
    def fusion_kind(self) -> str | None:
        """`kLoop`, `kInput`, `kOutput`, `kCustom`... for a fusion, None otherwise."""
        return self.attr("kind") if self.opcode == "fusion" else None

    @property
    def custom_fusion_kind(self) -> str | None:
        """The backend's name for a kCustom fusion (`__ynn_fusion`), None otherwise."""
        config = self.attr("backend_config") or ""
        match = re.search(r'"fusion_config":\{"kind":"([^"]+)"', config)
        return match.group(1) if match and self.fusion_kind == "kCustom" else None

    def set_operands(self, names: Iterable[str]) -> None:
        self.operand_text = ", ".join(f"%{name}" for name in names)

    def replace_operand(self, old: str, new: str) -> bool:
        """Point every use of `%old` in the operand list at `%new`; True if any changed."""
        pattern = re.compile(rf"%{re.escape(old)}(?![\w.\-])")
        updated = pattern.sub(f"%{new}", self.operand_text)
        changed = updated != self.operand_text
        self.operand_text = updated
        return changed

    def render(self) -> str:
        root = "ROOT " if self.is_root else ""
        text = f"{self.indent}{root}%{self.name} = {self.shape_text} {self.opcode}({self.operand_text})"
        if self.attrs:
            text += ", " + ", ".join(f"{k}={v}" if v is not None else k for k, v in self.attrs)
        return text


def make_instruction(name: str, shape: Shape | str, opcode: str, operands: Iterable[str] = (),
                     attrs: Iterable[Attr] = (), literal: str | None = None) -> Instruction:
    """A new instruction reading `operands` (names without `%`), or holding `literal`."""
    operand_text = literal if literal is not None else ", ".join(f"%{o}" for o in operands)
    return Instruction(name, str(shape), opcode, operand_text, list(attrs))


def constant(name: str, dtype: str, literal: str) -> Instruction:
    """A scalar constant instruction."""
    return make_instruction(name, Shape(dtype, ()), "constant", literal=literal)


def broadcast_scalar(name: str, scalar: str, shape: Shape) -> Instruction:
    """Broadcast the scalar instruction `scalar` to `shape`."""
    return make_instruction(name, shape, "broadcast", [scalar], [("dimensions", "{}")])


@dataclass
class Computation:
    """One computation: its header line kept raw, its instructions in order."""

    name: str
    header: str
    is_entry: bool
    instructions: list[Instruction]

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.instructions)

    def get(self, name: str) -> Instruction:
        for instr in self.instructions:
            if instr.name == name:
                return instr
        raise KeyError(f"no instruction %{name} in %{self.name}")

    @property
    def root(self) -> Instruction:
        return next(i for i in self.instructions if i.is_root)

    def parameters(self) -> list[Instruction]:
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(params, key=lambda i: int(i.operand_text))

    def users(self, name: str) -> list[Instruction]:
        return [i for i in self.instructions if name in i.operands]

    def insert_before(self, anchor: Instruction, new: Iterable[Instruction]) -> None:
        index = self.instructions.index(anchor)
        for offset, instr in enumerate(new):
            instr.indent = anchor.indent
            self.instructions.insert(index + offset, instr)

    def insert_after(self, anchor: Instruction, new: list[Instruction]) -> None:
        """Insert `new` after `anchor` and make every other reader of `anchor` (and the
        computation's ROOT, if it was `anchor`) read the last new instruction instead."""
        index = self.instructions.index(anchor)
        for offset, instr in enumerate(new):
            instr.indent = anchor.indent
            self.instructions.insert(index + 1 + offset, instr)
        self.replace_uses(anchor.name, new[-1].name, skip=[i.name for i in new])
        if anchor.is_root:
            anchor.is_root, new[-1].is_root = False, True

    def replace_uses(self, old: str, new: str, skip: Iterable[str] = ()) -> int:
        """Make every instruction except those named in `skip` read `new` instead of `old`."""
        skipped = set(skip)
        return sum(i.replace_operand(old, new) for i in self.instructions if i.name not in skipped)

    def depends_on(self, instr: Instruction, name: str) -> bool:
        """Whether `instr` reads `name` directly or through other instructions."""
        by_name = {i.name: i for i in self.instructions}
        seen: set[str] = set()
        stack = list(instr.operands)
        while stack:
            current = stack.pop()
            if current == name:
                return True
            if current in seen or current not in by_name:
                continue
            seen.add(current)
            stack.extend(by_name[current].operands)
        return False

    def render(self) -> list[str]:
        return [self.header, *(i.render() for i in self.instructions), "}"]


class HloModule:
    """A parsed HLO module: raw lines outside computations plus parsed computations."""

    def __init__(self, items: list[str | Computation]) -> None:
        self.items = items
        self.computations = [item for item in items if isinstance(item, Computation)]
        self._taken = {c.name for c in self.computations} | {
            i.name for c in self.computations for i in c}

    @property
    def entry(self) -> Computation:
        return next(c for c in self.computations if c.is_entry)

    def computation(self, name: str) -> Computation:
        for comp in self.computations:
            if comp.name == name:
                return comp
        raise KeyError(f"no computation %{name}")

    def computation_of(self, instr: Instruction) -> Computation:
        return next(c for c in self.computations if any(i is instr for i in c))

    def instructions(self) -> Iterator[tuple[Computation, Instruction]]:
        for comp in self.computations:
            for instr in comp:
                yield comp, instr

    def fresh_name(self, base: str) -> str:
        """A name no computation or instruction in the module uses yet."""
        index = 0
        while f"{base}.{index}" in self._taken:
            index += 1
        name = f"{base}.{index}"
        self._taken.add(name)
        return name

    def roles(self) -> dict[str, set[str]]:
        """For each computation, how it is called: entry, fusion, while_body,
        while_condition, branch, call or apply (reduce/sort/scatter regions)."""
        roles: dict[str, set[str]] = {c.name: set() for c in self.computations}
        roles[self.entry.name].add("entry")
        for _, instr in self.instructions():
            for key, callee in instr.callees():
                if callee in roles:
                    roles[callee].add(_CALLEE_ROLES.get((instr.opcode, key), "apply"))
        return roles

    def fusion_bodies(self) -> dict[str, Instruction]:
        """Fused computation name -> the fusion instruction that calls it."""
        return {callee: instr for _, instr in self.instructions() if instr.opcode == "fusion"
                for key, callee in instr.callees() if key == "calls"}

    def fusion_body_kinds(self) -> dict[str, str]:
        """Fused computation name -> kind of its fusion (`__ynn_fusion` for YNNPACK ones)."""
        return {name: instr.custom_fusion_kind or instr.fusion_kind or ""
                for name, instr in self.fusion_bodies().items()}

    def scalar_constant(self, comp: Computation, name: str) -> str | None:
        """The literal of the scalar constant `name` in `comp` holds, following a fusion
        parameter to the operand the fusion passes; None when it is not a constant."""
        instr = comp.get(name)
        if instr.opcode == "constant" and instr.shape is not None and not instr.shape.dims:
            return instr.operand_text
        if instr.opcode == "parameter":
            fusion = self.fusion_bodies().get(comp.name)
            if fusion is not None:
                caller = self.computation_of(fusion)
                return self.scalar_constant(caller, fusion.operands[int(instr.operand_text)])
        return None

    def called_from(self, seeds: Iterable[str]) -> set[str]:
        """`seeds` plus every computation they call, directly or through others."""
        inside = set(seeds)
        stack = list(inside)
        while stack:
            for instr in self.computation(stack.pop()):
                for _, callee in instr.callees():
                    if callee not in inside:
                        inside.add(callee)
                        stack.append(callee)
        return inside

    def control_flow_computations(self, seed_roles: Iterable[str] = CONTROL_FLOW_ROLES
                                  ) -> set[str]:
        """Computations that run inside a while body or condition or a conditional branch
        (or the roles in `seed_roles`), directly or through calls and fusions in them."""
        seeds = set(seed_roles)
        return self.called_from(name for name, r in self.roles().items() if r & seeds)

    def custom_fusion_computations(self) -> set[str]:
        """Bodies of kCustom fusions (YNNPACK) and all they call. A backend library runs
        them and rejects ops it does not know at run time, so edits must stay out."""
        return self.called_from(name for name, instr in self.fusion_bodies().items()
                                if instr.fusion_kind == "kCustom")

    def editable_computations(self) -> list[Computation]:
        """The computations a fault may edit: all but custom (library) fusion bodies."""
        library = self.custom_fusion_computations()
        return [c for c in self.computations if c.name not in library]

    def to_text(self) -> str:
        lines: list[str] = []
        for item in self.items:
            lines.extend(item.render() if isinstance(item, Computation) else [item])
        return "\n".join(lines)


def _scan_balanced(text: str, start: int, open_char: str, close_char: str) -> int:
    """Index just past the bracket that closes the one at `start`, skipping strings."""
    depth = 0
    in_string = False
    i = start
    while i < len(text):
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == open_char:
            depth += 1
        elif ch == close_char:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise HloParseError(f"unbalanced {open_char!r} in: {text}")


def _split_attrs(text: str) -> list[Attr]:
    """Split `, a=1, b={x, y}, c="s, t"` at top-level commas into (key, value) pairs."""
    parts: list[str] = []
    depth = 0
    in_string = False
    current: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if in_string:
            current.append(ch)
            if ch == "\\" and i + 1 < len(text):
                current.append(text[i + 1])
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            current.append(ch)
        elif ch in "{([":
            depth += 1
            current.append(ch)
        elif ch in "})]":
            depth -= 1
            current.append(ch)
        elif ch == "," and depth == 0 and text[i + 1:i + 2] == " ":
            parts.append("".join(current))
            current = []
            i += 1
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    pairs: list[Attr] = []
    for part in parts:
        key, sep, value = part.partition("=")
        pairs.append((key, value) if sep else (key, None))
    return pairs


def parse_instruction(line: str) -> Instruction:
    match = _INSTRUCTION_START.match(line)
    if not match:
        raise HloParseError(f"not an HLO instruction: {line!r}")
    indent, root, name = match.groups()
    pos = match.end()
    if line[pos] == "(":
        shape_end = _scan_balanced(line, pos, "(", ")")
    else:
        shape_end = line.index(" ", pos)
    shape_text = line[pos:shape_end]
    open_paren = line.index("(", shape_end)
    opcode = line[shape_end + 1:open_paren]
    close_paren = _scan_balanced(line, open_paren, "(", ")")
    rest = line[close_paren:]
    if rest and not rest.startswith(", "):
        raise HloParseError(f"unexpected text after operands: {line!r}")
    attrs = _split_attrs(rest[2:]) if rest else []
    return Instruction(name, shape_text, opcode, line[open_paren + 1:close_paren - 1], attrs,
                       bool(root), indent)


def parse(text: str) -> HloModule:
    """Parse HLO module text as printed by XLA (`HloModule.to_string()`, `as_text()`)."""
    items: list[str | Computation] = []
    current: Computation | None = None
    for number, line in enumerate(text.split("\n"), start=1):
        if current is None:
            header = _COMPUTATION_HEADER.match(line)
            if header:
                current = Computation(header.group(2), line, bool(header.group(1)), [])
            else:
                items.append(line)
        elif line == "}":
            items.append(current)
            current = None
        else:
            try:
                current.instructions.append(parse_instruction(line))
            except HloParseError as err:
                raise HloParseError(f"line {number}: {err}") from None
    if current is not None:
        raise HloParseError(f"computation %{current.name} is not closed")
    if not any(isinstance(i, Computation) and i.is_entry for i in items):
        raise HloParseError("no ENTRY computation")
    return HloModule(items)


def fusion_summary(hlo_text: str) -> dict[str, int]:
    """Count fusions by kind in (optimized) HLO text. Always has kLoop, kInput, kOutput and
    kCustom; `ynn` counts the kCustom fusions that go to YNNPACK (`__ynn_fusion`)."""
    counts = {"kLoop": 0, "kInput": 0, "kOutput": 0, "kCustom": 0, "ynn": 0}
    for _, instr in parse(hlo_text).instructions():
        kind = instr.fusion_kind
        if kind is None:
            continue
        counts[kind] = counts.get(kind, 0) + 1
        if instr.custom_fusion_kind == "__ynn_fusion":
            counts["ynn"] += 1
    return counts


def _major_to_minor(shape: Shape) -> list[int]:
    return list(reversed(shape.layout)) if shape.layout else list(range(len(shape.dims)))


def _logical_bitcast(module: HloModule, comp: Computation, instr: Instruction) -> None:
    """Rewrite a bitcast (a reinterpretation of memory, so it depends on layouts, and may
    change the element type) as transpose -> reshape -> transpose -> bitcast-convert, which
    means the same thing once layouts are gone."""
    source, target = comp.get(instr.operands[0]).shape, instr.shape
    if source is None or target is None:
        raise HloParseError(f"bitcast %{instr.name} of a non-array shape")
    m2m_in, m2m_out = _major_to_minor(source), _major_to_minor(target)
    steps: list[Instruction] = []
    current = instr.operands[0]

    def step(opcode: str, dims: Iterable[int], attrs: list[tuple[str, str]]) -> None:
        nonlocal current
        steps.append(make_instruction(module.fresh_name(f"defuse_{opcode}"),
                                      Shape(source.dtype, tuple(dims)), opcode, [current], attrs))
        current = steps[-1].name

    def permutation(perm: list[int]) -> list[tuple[str, str]]:
        return [("dimensions", "{" + ",".join(map(str, perm)) + "}")]

    if m2m_in != sorted(m2m_in):
        step("transpose", (source.dims[d] for d in m2m_in), permutation(m2m_in))
    step("reshape", (target.dims[d] for d in m2m_out), [])
    if m2m_out != sorted(m2m_out):
        step("transpose", target.dims, permutation([m2m_out.index(i) for i in range(len(m2m_out))]))
    last = steps.pop()
    current = last.operands[0]
    if target.dtype != source.dtype:
        steps.append(last)
        instr.opcode, instr.operand_text, instr.attrs = "bitcast-convert", f"%{last.name}", []
    else:
        instr.opcode, instr.operand_text, instr.attrs = last.opcode, last.operand_text, last.attrs
    comp.insert_before(instr, steps)


def defuse(hlo_text: str) -> str:
    """Turn every fusion into a call of its fused computation, so optimized HLO (whose
    fusions lack the backend config a fresh compile demands) can be compiled again.
    Bitcasts become transposes and reshapes, since layouts do not survive the trip
    through StableHLO."""
    module = parse(hlo_text)
    for comp, instr in list(module.instructions()):
        if instr.opcode == "bitcast":
            _logical_bitcast(module, comp, instr)
        if instr.opcode != "fusion":
            continue
        body = instr.attr("calls")
        instr.opcode = "call"
        instr.attrs = [(k, v) for k, v in instr.attrs
                       if k not in ("kind", "calls", "backend_config")]
        instr.attrs.insert(0, ("to_apply", body))
    text = module.to_text()
    # A schedule printed with the module names the fusions; it no longer applies.
    return text.replace(", is_scheduled=true", "", 1)


_INSTR_NAME = re.compile(r"%[\w.\-]+")
_METADATA = re.compile(r",?\s*metadata=\{[^}]*\}")


def hlo_fingerprint(hlo_text: str) -> str:
    """Optimized HLO without instruction names and metadata: equal when a pass did nothing.

    Names differ between two compiles of one module (unique-id suffixes), so the text
    itself cannot be compared.
    """
    return _INSTR_NAME.sub("%", _METADATA.sub("", hlo_text.split("\n", 1)[-1]))
