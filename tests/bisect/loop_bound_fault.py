"""Test plugin: a loop condition that reads its bound one too far. Every `LT` compare a
while condition computes (in the condition or a fusion it calls) becomes `LE`, as a
simplifier that rewrote a counted loop's exit test wrongly would leave it: a `fori_loop`
runs once more than asked, while every op of its body computes right."""

from xla_sentinel.xla import hlo, hlo_proto


def _edit(module: hlo.HloModule) -> bool:
    changed = False
    inside = module.control_flow_computations({"while_condition"})
    for comp in module.editable_computations():
        if comp.name not in inside:
            continue
        for instr in comp:
            if instr.opcode == "compare" and instr.attr("direction") == "LT":
                instr.set_attr("direction", "LE")
                changed = True
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
