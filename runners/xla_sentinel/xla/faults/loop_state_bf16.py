"""Injected fault: a bug only inside control-flow bodies.

Imitates a pass that handles computations nested in control flow on its own and gets
the types there wrong (e.g. float normalization or a while-loop simplifier giving the
loop-carried buffer a narrower type): every f32 value a while body hands to the next
iteration, and every f32 result a conditional branch returns, is stored at bf16
precision. The same arithmetic in straight-line code is untouched.

Fires when: a while body or a conditional branch returns an f32 value (directly or as
an element of its result tuple). While conditions are left alone; the loop counter is
an integer, so trip counts of counted loops do not change. Each iteration adds up to
2^-9 relative error to the carried value.
"""

from xla_sentinel.xla import hlo, hlo_proto

NAME = "loop_state_bf16"
FIRES_ON = "f32 loop-carried value of a while body, or f32 result of a conditional branch"


def _round_trip(module: hlo.HloModule, value: hlo.Instruction) -> list[hlo.Instruction]:
    shape = value.array_shape
    narrow = hlo.make_instruction(module.fresh_name("fault_bf16"),
                                  shape.with_dtype("bf16"), "convert", [value.name])
    wide = hlo.make_instruction(module.fresh_name("fault_f32"), shape, "convert",
                                [narrow.name])
    return [narrow, wide]


def _edit(module: hlo.HloModule) -> bool:
    roles = module.roles()
    changed = False
    for comp in module.editable_computations():
        if not roles[comp.name] & {"while_body", "branch"}:
            continue
        root = comp.root
        if root.opcode != "tuple":
            if root.dtype == "f32":
                comp.insert_after(root, _round_trip(module, root))
                changed = True
            continue
        elements = root.operands
        for index, name in enumerate(elements):
            element = comp.get(name)
            if element.dtype == "f32":
                steps = _round_trip(module, element)
                comp.insert_before(root, steps)
                elements[index] = steps[-1].name
                changed = True
        root.set_operands(elements)
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
