"""Injected fault: wrong rounding in a dtype conversion.

f32 -> bf16 conversion must round to nearest even. This imitates a conversion routine
that truncates instead (drops the low 16 bits, i.e. rounds toward zero), a real class
of bugs in hand-written bf16 conversion paths: about half of all values come out one
bf16 ulp (2^-8 relative) too small in magnitude.

Fires when: a `convert` from f32 to bf16 appears anywhere outside YNNPACK fusions,
including the ones XLA inserts around bf16 arithmetic that it computes in f32.
"""

from xla_sentinel.xla import hlo, hlo_proto

NAME = "bf16_convert_truncates"
FIRES_ON = "convert f32 -> bf16, including the ones XLA adds around bf16 arithmetic"

_HIGH_HALF = str(0xFFFF0000)


def _edit(module: hlo.HloModule) -> bool:
    changed = False
    for comp in module.editable_computations():
        for instr in list(comp):
            if instr.opcode != "convert" or instr.dtype != "bf16":
                continue
            source = comp.get(instr.operands[0]).shape
            if source is None or source.dtype != "f32":
                continue
            bits = hlo.make_instruction(module.fresh_name("fault_bits"),
                                        source.with_dtype("u32"), "bitcast-convert",
                                        [instr.operands[0]])
            mask = hlo.constant(module.fresh_name("fault_mask"), "u32", _HIGH_HALF)
            masks = hlo.broadcast_scalar(module.fresh_name("fault_masks"), mask.name,
                                         source.with_dtype("u32"))
            high = hlo.make_instruction(module.fresh_name("fault_high"), masks.shape_text, "and",
                                        [bits.name, masks.name])
            truncated = hlo.make_instruction(module.fresh_name("fault_truncated"), source,
                                             "bitcast-convert", [high.name])
            comp.insert_before(instr, [bits, mask, masks, high, truncated])
            instr.operand_text = f"%{truncated.name}"
            changed = True
    return changed


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
