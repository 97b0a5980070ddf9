"""Injected fault: precision loss inside fusions.

Imitates a fusion emitter that keeps an intermediate in a narrower type than the HLO
says (the class of bugs where a bf16 "excess precision" or mixed-precision rewrite
leaks into f32 code): the result of an f32 `exponential`, `log` or `tanh` inside a
loop or input fusion is rounded through bf16 before its consumers read it.

Fires when: an f32 exponential, log or tanh instruction sits in the body of a kLoop or
kInput fusion (not in unfused code and not in YNNPACK custom fusions). The error is
about 2^-9 relative on every element of that intermediate.
"""

from xla_sentinel.xla import hlo, hlo_proto

NAME = "fusion_bf16_rounding"
FIRES_ON = "f32 exponential/log/tanh inside a kLoop or kInput fusion body"

_OPCODES = ("exponential", "log", "tanh")


def _edit(module: hlo.HloModule) -> bool:
    kinds = module.fusion_body_kinds()
    changed = False
    for comp in module.editable_computations():
        if kinds.get(comp.name) not in ("kLoop", "kInput"):
            continue
        for instr in list(comp):
            if instr.opcode in _OPCODES and instr.dtype == "f32":
                shape = instr.array_shape
                narrow = hlo.make_instruction(module.fresh_name("fault_bf16"),
                                              shape.with_dtype("bf16"), "convert", [instr.name])
                wide = hlo.make_instruction(module.fresh_name("fault_f32"), shape, "convert",
                                            [narrow.name])
                comp.insert_after(instr, [narrow, wide])
                changed = True
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
