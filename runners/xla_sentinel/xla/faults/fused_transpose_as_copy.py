"""Injected fault: wrong layout/transpose in a fused op.

Imitates a layout-assignment or fusion bug that treats a transpose as a mere layout
change (the class of bugs where a physical transpose is mistaken for a bitcast or a
copy): inside a fusion, a transpose whose output has the same dimensions as its input
(a square matrix, or any permutation that keeps the shape) is emitted as a copy, so the
data comes out untransposed.

Fires when: a `transpose` with a non-identity permutation that leaves the dimension
sizes unchanged sits in the body of a kLoop, kInput or kOutput fusion.
"""

from xla_sentinel.xla import hlo, hlo_proto

NAME = "fused_transpose_as_copy"
FIRES_ON = "shape-preserving transpose (e.g. of a square matrix) inside a non-custom fusion"


def _edit(module: hlo.HloModule) -> bool:
    kinds = module.fusion_body_kinds()
    changed = False
    for comp in module.editable_computations():
        if kinds.get(comp.name) not in ("kLoop", "kInput", "kOutput"):
            continue
        for instr in comp:
            if instr.opcode != "transpose":
                continue
            permutation = [int(d) for d in instr.required_attr("dimensions").strip("{}").split(",")]
            source = comp.get(instr.operands[0]).array_shape
            if permutation != sorted(permutation) and source.dims == instr.array_shape.dims:
                instr.opcode = "copy"
                instr.drop_attr("dimensions")
                changed = True
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
