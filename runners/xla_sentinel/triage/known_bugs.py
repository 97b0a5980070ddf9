"""Known XLA bugs: findings that match one are counted as known, not new.

Each entry in known_bugs.yaml names the fields a finding must match (`match`: any of
verdict, target, culprit_op, dtype, signature, fusion_kind; a list there means any one of
its values), a reproducer, and the evidence that XLA is wrong. Two optional keys narrow an
entry where the finding's fields cannot (an SPMD bug is found unbisected: no culprit op):

- `error`: substrings the finding's error text (a crash's or compile error's) must all hold;
- `program`: what the finding's program graph (graph.json) must hold: `sharded: true|false`
  (a sharding plan or none), and `through`: op names or SPMD region kinds (runners/xla_sentinel/programs/spmd.py),
  one of which must compute the wrong output (its ancestors in the graph; for a failure
  with no output, the whole graph), and `nested: [[outer ops], [inner ops]]`: among those
  ancestors, an outer op applied directly to the result of an inner one (a slice of a
  slice), or through ops that only copy or rearrange it, where `between` names them (a
  slice of a broadcast of a slice: XLA moves a slice through a broadcast). An entry with `program` matches only a finding whose graph is given, or for a
  replayed module (no graph) its StableHLO text, whose op names are StableHLO's.

`replay` (optional): for a replayed module whose StableHLO does not satisfy `program`
(the generator's op names do not exist there: its `loop_shift` is a `scatter` of a
`slice`), what the bisector found: `op` (the culprit op's StableHLO name, its types left
out), `cure` (the culprit_pass it named), match fields, and a `program` rule read from
the StableHLO text. The entry's `match` and `error` hold either way.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from xla_sentinel.core import stablehlo
from xla_sentinel.core.graph import Graph
from xla_sentinel.core.model import FINDING_FIELDS, Finding

KNOWN_BUGS_FILE = Path(__file__).with_name("known_bugs.yaml")
# The Finding fields a rule may name: what describes the bug, not the program or the time.
MATCH_FIELDS = tuple(f for f in FINDING_FIELDS
                     if f in ("verdict", "target", "culprit_op", "dtype", "signature", "fusion_kind"))
PROGRAM_KEYS = ("sharded", "through", "nested", "between")
# What a `replay` rule may name besides the match fields: the culprit op's name without
# its types (`op`), the cure the bisector named (`cure`: culprit_pass) and a `program`
# rule read from the module's StableHLO.
REPLAY_KEYS = (*MATCH_FIELDS, "op", "cure", "program")


@cache
def entries(path: Path = KNOWN_BUGS_FILE) -> list[dict[str, Any]]:
    data = yaml.safe_load(path.read_text()) or {}
    bugs: list[dict[str, Any]] = data.get("bugs", [])
    for b in bugs:
        unknown = set(b.get("match", {})) - set(MATCH_FIELDS)
        if unknown or not b.get("match"):
            raise ValueError(f"{path}: bug {b.get('id')!r} has a bad match rule {sorted(unknown)}")
        program = b.get("program", {})
        if not isinstance(program, dict) or set(program) - set(PROGRAM_KEYS):
            raise ValueError(f"{path}: bug {b.get('id')!r}: `program` takes only {list(PROGRAM_KEYS)}")
        nested = program.get("nested", [[], []])
        if not (isinstance(nested, list) and len(nested) == 2 and all(isinstance(n, list) for n in nested)):
            raise ValueError(f"{path}: bug {b.get('id')!r}: `nested` is [[outer ops], [inner ops]]")
        replay = b.get("replay", {})
        if not isinstance(replay, dict) or set(replay) - set(REPLAY_KEYS):
            raise ValueError(f"{path}: bug {b.get('id')!r}: `replay` takes only {list(REPLAY_KEYS)}")
        if not all(isinstance(s, str) for s in b.get("error", [])):
            raise ValueError(f"{path}: bug {b.get('id')!r}: `error` is a list of strings")
    return bugs


def _equal(value: Any, wanted: Any) -> bool:
    return value in wanted if isinstance(wanted, list) else value == wanted


def upstream(graph: Graph, output: int | None, between: frozenset[str] = frozenset(),
             ) -> tuple[set[str], set[tuple[str, str]]]:
    """The op names and SPMD region kinds that compute the graph's output number `output`
    (every output where None), and the (op, op of an argument) pairs among them; an
    argument made by an op of `between` pairs the op with that op's own arguments' ops too."""
    regions = graph.sharding.regions if graph.sharding is not None else {}
    stack = list(graph.outputs if output is None else [graph.outputs[output]])
    seen: set[int] = set()
    names: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in regions:
            names.add(regions[v]["kind"])
        node = graph.producer(v)
        if node is not None:
            names.add(node.op)
            stack.extend(node.args)
            args = [graph.producer(a) for a in node.args]
            while args:
                arg = args.pop()
                if arg is not None:
                    pairs.add((node.op, arg.op))
                    if arg.op in between:
                        args.extend(graph.producer(a) for a in arg.args)
    return names, pairs


def module_upstream(module: str, output: int | None) -> tuple[set[str], set[tuple[str, str]]] | None:
    """upstream() of a module without a graph (a replayed trace), read from its StableHLO
    (core/stablehlo.main_dataflow): op names as StableHLO spells them without the dialect
    (`dynamic_slice`), which the rules name where a generator op lowers to one op. None
    when the module does not have that output."""
    defs, returns = stablehlo.main_dataflow(module)
    if output is not None and not 0 <= output < len(returns):
        return None
    stack = list(returns if output is None else [returns[output]])
    seen: set[str] = set()
    names: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    while stack:
        v = stack.pop()
        if v in seen or v not in defs:
            continue
        seen.add(v)
        op, reads = defs[v]
        names.add(op)
        stack.extend(reads)
        pairs.update((op, defs[r][0]) for r in reads if r in defs)
    return names, pairs


def _program_matches(rule: dict[str, Any], finding: Finding, graph: Graph | None,
                     module: str | None = None) -> bool:
    if not rule:
        return True
    output = finding.evidence.get("output")
    if graph is None:
        if module is None:
            return False
        if "sharded" in rule and (stablehlo.partitions(module) > 1) != rule["sharded"]:
            return False
        found = module_upstream(module, output)
        if found is None:
            return False
        names, pairs = found
    else:
        if "sharded" in rule and (graph.sharding is not None) != rule["sharded"]:
            return False
        if output is not None and not 0 <= output < len(graph.outputs):
            return False  # the finding is of another program than this graph
        names, pairs = upstream(graph, output, frozenset(rule.get("between", ())))
    if "through" in rule and not names & set(rule["through"]):
        return False
    if "nested" in rule:
        outer, inner = (set(ops) for ops in rule["nested"])
        return any(o in outer and i in inner for o, i in pairs)
    return True


def match(finding: Finding, path: Path = KNOWN_BUGS_FILE, *,
          graph: Graph | None = None, module: str | None = None) -> str | None:
    """The id of the known bug this finding is, or None if it is new. `graph` is the
    finding's program graph, for entries with a `program` rule; a replayed module, which
    has none, is read from its StableHLO text `module` instead."""
    for bug in entries(path):
        if not all(_equal(getattr(finding, k), v) for k, v in bug["match"].items()):
            continue
        if not all(s in (finding.error or "") for s in bug.get("error", [])):
            continue
        if _program_matches(bug.get("program", {}), finding, graph, module):
            return str(bug["id"])
        replay = bug.get("replay")
        # A replayed module has no generator graph: where its StableHLO does not show what
        # `program` names, what the bisector found there may (a finding not bisected yet
        # has no culprit, and waits for it).
        if replay is not None and graph is None and _replay_matches(replay, finding, module):
            return str(bug["id"])
    return None


def _replay_matches(rule: dict[str, Any], finding: Finding, module: str | None) -> bool:
    """A `replay` rule against a finding of a replayed module: its match fields, the
    culprit op's name (`op`), the cure (`cure`) and a `program` rule on the StableHLO."""
    op = finding.culprit_op.split(" ")[0] if finding.culprit_op else None
    if "op" in rule and not _equal(op, rule["op"]):
        return False
    if "cure" in rule and not _equal(finding.culprit_pass, rule["cure"]):
        return False
    if not all(_equal(getattr(finding, k), v) for k, v in rule.items() if k in MATCH_FIELDS):
        return False
    return "program" not in rule or _program_matches(rule["program"], finding, None, module)
