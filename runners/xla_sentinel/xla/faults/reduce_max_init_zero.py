"""Injected fault: wrong reduction init value.

Imitates a reduction emitter or simplifier that seeds a max-reduction with 0 instead of
its identity -inf (the class of bugs where an init value is taken from the wrong
constant, e.g. after a reduce is split or vectorized): rows whose values are all
negative reduce to 0 instead of their maximum. Rows with a non-negative element are
unaffected.

Fires when: a floating-point `reduce` whose reducer is `maximum` has the scalar
constant -inf as its init value (directly or passed into its fusion), outside
YNNPACK custom fusions.
"""

from xla_sentinel.xla import hlo, hlo_proto

NAME = "reduce_max_init_zero"
FIRES_ON = "float max-reduce with init -inf (visible only when a reduced row is all negative)"


def _edit(module: hlo.HloModule) -> bool:
    changed = False
    for comp in module.editable_computations():
        for reduce in list(comp):
            if reduce.opcode != "reduce" or reduce.dtype not in hlo.FLOAT_TYPES:
                continue
            if module.computation(reduce.required_attr("to_apply").lstrip("%")).root.opcode != "maximum":
                continue
            init = reduce.operands[1]
            if module.scalar_constant(comp, init) != "-inf":
                continue
            _zero_init(module, comp, reduce)
            changed = True
    return changed


def _zero_init(module: hlo.HloModule, comp: hlo.Computation, reduce: hlo.Instruction) -> None:
    """Feed the reduce a 0. A fusion body may not keep an instruction without users, so a
    constant only this reduce reads is edited in place, and a fused parameter only it
    reads gets its 0 from the caller, which replaces only that fusion's operand."""
    init = comp.get(reduce.operands[1])
    sole_reader = len(comp.users(init.name)) == 1
    if init.opcode == "constant" and sole_reader:
        init.operand_text = "0"
        return
    target, reader, position = comp, reduce, 1
    if init.opcode == "parameter" and sole_reader:
        reader = module.fusion_bodies()[comp.name]
        target, position = module.computation_of(reader), int(init.operand_text)
    zero = hlo.constant(module.fresh_name("fault_init"), reduce.array_shape.dtype, "0")
    target.insert_before(reader, [zero])
    operands = reader.operands
    operands[position] = zero.name
    reader.set_operands(operands)


def transform(proto: bytes) -> bytes | None:
    return hlo_proto.rewrite_proto(proto, _edit)
