"""Injected fault: aliasing bug in an in-place update.

A dynamic-update-slice updates its operand's buffer in place; when the original value
is still read elsewhere, copy insertion adds a `copy` so those readers keep the old
data. This imitates a buffer-assignment or copy-elision bug that drops that protection:
the other readers of the original value see the updated buffer instead.

Fires when: a `dynamic-update-slice` (bare, or as the root of a fusion) updates a `copy`
of a value that has other readers placed after the update (for instance `x` and
`x.at[i].set(v)` both returned or both used). Those readers get the updated value.
"""

from xla_sentinel.xla import hlo, hlo_proto

NAME = "dus_copy_elided"
FIRES_ON = "in-place dynamic-update-slice on a copy whose source is read again later"


def _updates_in_place(module: hlo.HloModule, instr: hlo.Instruction) -> bool:
    if instr.opcode == "dynamic-update-slice":
        return True
    if instr.opcode != "fusion":
        return False
    body = module.computation(instr.required_attr("calls").lstrip("%"))
    root = body.root
    if root.opcode != "dynamic-update-slice":
        return False
    buffer = body.get(root.operands[0])
    return buffer.opcode == "parameter" and int(buffer.operand_text) == 0


def _edit(module: hlo.HloModule) -> bool:
    fusion_bodies = module.fusion_bodies()
    changed = False
    for comp in module.editable_computations():
        if comp.name in fusion_bodies:
            continue
        for update in list(comp):
            if not update.operands or not _updates_in_place(module, update):
                continue
            copy = comp.get(update.operands[0])
            source = copy.operands[0] if copy.opcode == "copy" else None
            # A copy that also changes the layout is not the protective one, and its
            # readers could not take the update's layout anyway.
            if source is None or comp.get(source).shape_text != copy.shape_text:
                continue
            position = comp.instructions.index(update)
            for reader in comp.instructions[position + 1:]:
                if source in reader.operands and not comp.depends_on(update, reader.name):
                    changed |= reader.replace_operand(source, update.name)
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
