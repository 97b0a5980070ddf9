"""Stage 3, fusion: where does the culprit op live in the failing target's optimized HLO?

Kept ops carry the location `sentinel.op<i>`, which XLA copies into each instruction's
metadata, so the culprit's instructions are found by name in the optimized HLO of the
whole program and of the reduced case: the fusion holding each, its kind (kLoop, kInput,
kOutput, kCustom; YNNPACK fusions as kCustom:__ynn_fusion) and its other ops. The
fusion of the reduced case is then cut out as a standalone HLO module and checked alone
against its float64 version.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from xla_sentinel.bisect.context import Context
from xla_sentinel.bisect.lab import LabError, own_dtype
from xla_sentinel.core.dtypes import NP_DTYPES
from xla_sentinel.core.elements import name_of
from xla_sentinel.core.model import Verdict
from xla_sentinel.core.names import FLOATS
from xla_sentinel.core.stablehlo import LOCATION_PREFIX
from xla_sentinel.judge import oracle
from xla_sentinel.spec.options import LEGAL
from xla_sentinel.worker.client import WorkerDied, WorkerHung
from xla_sentinel.worker.protocol import RequestFailed, RunHlo
from xla_sentinel.xla import hlo

NAME = "fusion"
_OP_NAME = re.compile(r'op_name="' + re.escape(LOCATION_PREFIX) + r'(\d+)"')
_LAYOUT = re.compile(r"\{[\d,]*\}")
_NARROW_FLOAT = re.compile(r"\b(f32|bf16|f16)\[")


def kind_of(fusion: hlo.Instruction) -> str | None:
    custom = fusion.custom_fusion_kind
    return f"kCustom:{custom}" if custom else fusion.fusion_kind


def locate(hlo_text: str, op_index: int) -> list[dict[str, Any]]:
    """Every instruction that came from op `op_index`, with the fusion it sits in."""
    module = hlo.parse(hlo_text)
    bodies = module.fusion_bodies()
    roles = module.roles()
    hits = []
    for comp, instr in module.instructions():
        match = _OP_NAME.search(instr.attr("metadata") or "")
        if instr.opcode == "fusion" or not match or int(match.group(1)) != op_index:
            continue
        hit: dict[str, Any] = {"instruction": instr.name, "opcode": instr.opcode,
                               "computation": comp.name}
        fusion = bodies.get(comp.name)
        if fusion is None:
            hit.update(fusion=None, kind="unfused", role=sorted(roles[comp.name]))
        else:
            hit.update(fusion=fusion.name, kind=kind_of(fusion),
                       fusion_ops=sorted({i.opcode for i in comp
                                          if i.opcode != "parameter" and i is not instr}))
        hits.append(hit)
    # An op with a region (reduce, sort, scatter) also names the instructions of the
    # computation it applies: the op's own instruction comes first, its fusion is the op's.
    return sorted(hits, key=lambda h: "apply" in h.get("role", ()))


def _callees(module: hlo.HloModule, name: str) -> list[str]:
    order, stack = [], [name]
    while stack:
        current = stack.pop()
        if current in order:
            continue
        order.append(current)
        stack.extend(callee for instr in module.computation(current) for _, callee in instr.callees())
    return order


def _array(shape: hlo.Shape) -> str:
    return f"{shape.dtype}[{','.join(map(str, shape.dims))}]"


def extract(hlo_text: str, fusion_name: str) -> tuple[str, list[int], bool]:
    """A standalone module computing one entry fusion, defused so it recompiles; for each of
    its parameters the entry parameter number that feeds it; and whether the fusion is the
    entry's root (then it computes exactly what the module returns)."""
    module = hlo.parse(hlo_text)
    entry = module.entry
    fusion = entry.get(fusion_name)
    params, feeds, lines = [], [], []
    for k, operand in enumerate(fusion.operands):
        source = entry.get(operand)
        if source.opcode == "parameter" and source.shape is not None:
            params.append(f"p{k}: {_array(source.shape)}")
            feeds.append(int(source.operand_text))
            lines.append(f"  %{operand} = {source.shape_text} parameter({len(feeds) - 1})")
        elif source.opcode == "constant":
            lines.append(source.render())
        else:
            raise ValueError(f"fusion operand %{operand} is computed by {source.opcode}")
    keep = set(_callees(module, (fusion.attr("calls") or "").lstrip("%")))
    comps = [c for c in module.computations if c.name in keep]
    result = _LAYOUT.sub("", fusion.shape_text)
    root = hlo.Instruction(fusion.name, fusion.shape_text, "fusion", fusion.operand_text,
                           list(fusion.attrs), is_root=True)
    text = "\n".join(["HloModule sentinel_fusion", ""]
                     + [line for c in comps for line in [*c.render(), ""]]
                     + [f"ENTRY %main ({', '.join(params)}) -> {result} {{", *lines,
                        root.render(), "}"])
    return hlo.defuse(text), feeds, fusion.is_root


def _check_alone(ctx: Context, text: str, inputs: list[np.ndarray],
                 expected: list[np.ndarray] | None) -> dict[str, Any]:
    """Run the extracted fusion under the target and a legal configuration and judge both
    against `expected` (the case's float64 values, when the fusion computes the case's
    outputs) or else against the extracted HLO widened to float64."""
    lab = ctx.lab
    lab.compiles[NAME] += 1
    try:
        target = lab.target.call(RunHlo(text, inputs, lab.options), lab.timeout)
    except RequestFailed as e:
        return {"error": e.error[:500]}
    legal = lab.ask_reference(RunHlo(text, inputs, LEGAL))
    if expected is None:
        wide_inputs = [x.astype(np.float64) if x.dtype.kind == "f" or x.dtype == NP_DTYPES["bf16"]
                       else x for x in inputs]
        expected = lab.ask_reference(RunHlo(_NARROW_FLOAT.sub("f64[", text), wide_inputs, LEGAL)).outputs
    # A RunHlo answers outputs: only a reference that does not apply answers none.
    mine_out, legal_out = target.outputs, legal.outputs
    assert mine_out is not None and legal_out is not None and expected is not None
    floats_in = any(name_of(x.dtype) in FLOATS for x in inputs)
    infos = [oracle.OutputInfo(name_of(o.dtype), floats_in) for o in mine_out]
    literal: dict[str, list[np.ndarray]] = {}
    if expected is not None and ctx.reduced is not None and ctx.bitwise_finding:
        # The fusion computes the reduced case's outputs: those fixed bitwise are judged
        # against the case's legal (literal) result, as the case itself was.
        for info, case_info in zip(infos, ctx.reduced.infos, strict=True):
            info.bitwise = case_info.bitwise
        literal["literal"] = lab.legal(ctx.reduced.module, ctx.reduced.inputs)
    discrete = "compare(" in text

    # Judged against float64, not against a legal compile of the same HLO: that HLO may
    # itself be wrong (a pass rewrote it), and then a legal compile is wrong the same way.
    # The float64 values rounded to each output's type stand in for "another
    # configuration": what correct rounding gives, NaN and Inf included.
    rounded = [own_dtype(e, i.dtype) for e, i in zip(expected, infos, strict=True)]

    def alone(outputs: list[np.ndarray]) -> oracle.Judgement:
        return oracle.judge("x", {"x": outputs, "rounded": rounded, **literal}, expected, infos,
                            lambda: None, discrete, exact="literal")

    mine, theirs = alone(mine_out), alone(legal_out)
    return {"fails_alone": mine.verdict != Verdict.PASS, "verdict": mine.verdict,
            "error": mine.evidence.get("error"), "threshold": mine.evidence.get("threshold"),
            # The legal configuration fails on it too: the wrong result is in the optimized
            # HLO itself (an HLO pass), not in how the target compiles it.
            "hlo_itself_wrong": theirs.verdict != Verdict.PASS}


def run(ctx: Context) -> dict[str, Any]:
    assert ctx.culprit is not None and ctx.full is not None and ctx.reduced is not None
    evidence: dict[str, Any] = {}
    for label, case in (("program", ctx.full), ("reduced", ctx.reduced)):
        check = ctx.check(case, want_hlo=True)
        if check.hlo is None:
            evidence[label] = {"error": check.evidence.get("error", "no optimized HLO")}
            continue
        evidence[label] = {"hits": locate(check.hlo, ctx.culprit), "fusions": hlo.fusion_summary(check.hlo)}
        evidence[label + "_hlo"] = check.hlo
    hits = evidence.get("reduced", {}).get("hits") or evidence.get("program", {}).get("hits") or []
    # The reduced case's fusion names the bug: the program's depends on what else was nearby.
    ctx.fusion_kind = hits[0]["kind"] if hits else None
    fused = [h for h in hits if h.get("fusion")]
    if fused and "reduced_hlo" in evidence:
        try:
            text, feeds, is_root = extract(evidence["reduced_hlo"], fused[0]["fusion"])
            expected = ctx.reduced.expected if is_root else None
            evidence["extracted"] = {"module": text, "reference": "case" if is_root else "hlo_f64",
                                     **_check_alone(ctx, text, [ctx.reduced.inputs[f] for f in feeds],
                                                    expected)}
        except (KeyError, ValueError, LabError, WorkerDied, WorkerHung) as e:
            evidence["extracted"] = {"skipped": str(e)}
    return evidence
