"""runners/xla_sentinel/xla/hlo.py on real HLO: parsing round-trips, structure (fusions, control flow),
edits, fusion_summary and defuse (optimized HLO recompiles and gives the same numbers)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from fault_corpus import CORPUS
from fault_harness import captured_proto, registered, run
from jax import lax
from xla_sentinel.xla import hlo, hlo_proto

_rng = np.random.default_rng(3)


def _f32(*shape: int) -> np.ndarray:
    return _rng.uniform(-1, 1, shape).astype(np.float32)


def _loop_and_branch(x, y, p):
    looped = lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) * 1.5 + y, x)
    branched = lax.cond(p > 0, lambda v: v * 2.0, lambda v: v - 1.0, y)
    return looped, branched, jnp.max(x, axis=0)


def _ynn_chain(x, y):
    return jnp.tanh(x @ y + 1.0).sum(axis=0)


def _windows_and_sort(x):
    return jnp.cumsum(x, axis=1), jnp.sort(x, axis=0), x.T * 2.0 + x


def _gather_scatter(x, i):
    return x[i] * 2.0, x.at[i].add(1.0), lax.dynamic_slice(x, (i[0], 0), (2, 3))


def _conv_topk_bf16(x, w):
    y = lax.conv_general_dilated(x, w, (1, 1), "SAME")
    return lax.top_k(y.reshape(4, -1), 3)[0], (y.astype(jnp.bfloat16) * 3).sum()


PROGRAMS = {
    "conv_topk_bf16": (_conv_topk_bf16, (_f32(1, 3, 8, 8), _f32(4, 3, 3, 3))),
    "loop_and_branch": (_loop_and_branch, (_f32(4, 4), _f32(4, 4), np.int32(1))),
    "ynn_chain": (_ynn_chain, (_f32(64, 64), _f32(64, 64))),
    "windows_and_sort": (_windows_and_sort, (_f32(16, 16),)),
    "gather_scatter": (_gather_scatter, (_f32(6, 3), np.array([4, 1], np.int32))),
}


def _optimized(name: str) -> str:
    f, args = PROGRAMS[name]
    return jax.jit(f).lower(*args).compile().as_text()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_parse_round_trips_plugin_and_optimized_text(name: str) -> None:
    f, args = PROGRAMS[name]
    plugin_text = hlo_proto.text_from_proto(captured_proto(f, *args))
    optimized = _optimized(name)

    for text in (plugin_text, optimized):
        module = hlo.parse(text)
        assert module.to_text() == text
        assert module.entry.root.is_root
        names = [i.name for _, i in module.instructions()]
        assert len(names) == len(set(names))


def test_parse_reads_instruction_fields() -> None:
    module = hlo.parse(_optimized("ynn_chain"))

    fusion = next(i for i in module.entry if i.opcode == "fusion")
    body = module.computation(fusion.attr("calls").lstrip("%"))
    dot = next(i for i in body if i.opcode == "dot")

    assert fusion.fusion_kind == "kCustom"
    assert fusion.custom_fusion_kind == "__ynn_fusion"
    assert fusion.shape == hlo.Shape("f32", (64,), (0,))
    assert [p.opcode for p in body.parameters()] == ["parameter", "parameter"]
    assert dot.operands == [p.name for p in body.parameters()]
    assert dot.attr("lhs_contracting_dims") == "{1}"
    assert dot.shape.dims == (64, 64) and dot.dtype == "f32"
    assert body.root.opcode == "reduce"
    assert module.computation(body.root.attr("to_apply").lstrip("%")).root.opcode == "add"


def test_roles_tell_fusion_bodies_from_control_flow_bodies() -> None:
    f, args = PROGRAMS["loop_and_branch"]
    module = hlo.parse(hlo_proto.text_from_proto(captured_proto(f, *args)))

    roles = module.roles()
    whiles = [i for _, i in module.instructions() if i.opcode == "while"]
    conditional = next(i for _, i in module.instructions() if i.opcode == "conditional")
    body = whiles[0].attr("body").lstrip("%")
    condition = whiles[0].attr("condition").lstrip("%")
    branches = [name for _, name in conditional.callees()]
    inside = module.control_flow_computations()
    fused_in_body = {i.attr("calls").lstrip("%") for i in module.computation(body)
                     if i.opcode == "fusion"}
    fused_at_top = {i.attr("calls").lstrip("%") for i in module.entry if i.opcode == "fusion"}
    reduce = next(i for _, i in module.instructions() if i.opcode == "reduce")

    assert len(whiles) == 1 and len(branches) == 2
    assert roles[module.entry.name] == {"entry"}
    assert roles[body] == {"while_body"} and roles[condition] == {"while_condition"}
    assert all(roles[b] == {"branch"} for b in branches)
    assert set(module.fusion_bodies()) == {n for n, r in roles.items() if "fusion" in r}
    assert {body, condition, *branches, *fused_in_body} <= inside
    assert fused_in_body and fused_at_top and not fused_at_top & inside
    assert roles[reduce.attr("to_apply").lstrip("%")] == {"apply"}


def test_fusion_summary_counts_by_kind() -> None:
    text = """HloModule m

%f1 (p: f32[4]) -> f32[4] {
  ROOT %p = f32[4]{0} parameter(0)
}

ENTRY %main (x: f32[4]) -> (f32[4], f32[4], f32[4], f32[4]) {
  %x = f32[4]{0} parameter(0)
  %a = f32[4]{0} fusion(%x), kind=kLoop, calls=%f1
  %b = f32[4]{0} fusion(%a), kind=kLoop, calls=%f1
  %c = f32[4]{0} fusion(%b), kind=kInput, calls=%f1
  %d = f32[4]{0} fusion(%c), kind=kCustom, calls=%f1, backend_config={"fusion_config":{"kind":"__ynn_fusion"}}
  ROOT %t = (f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}) tuple(%a, %b, %c, %d)
}"""
    assert hlo.fusion_summary(text) == {"kLoop": 2, "kInput": 1, "kOutput": 0, "kCustom": 1,
                                        "ynn": 1}
    real = hlo.fusion_summary(_optimized("ynn_chain"))
    assert real["ynn"] == real["kCustom"] >= 1


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_defused_optimized_module_recompiles_to_the_same_numbers(name: str) -> None:
    f, args = PROGRAMS[name]
    expected = [np.asarray(leaf) for leaf in jax.tree.leaves(jax.jit(f)(*args))]

    defused = hlo.defuse(_optimized(name))
    outputs = hlo_proto.run_hlo(defused, args)

    assert "fusion(" not in defused and hlo.fusion_summary(defused)["kLoop"] == 0
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_defuse_keeps_the_meaning_of_layout_changing_and_type_changing_bitcasts() -> None:
    text = """HloModule m, is_scheduled=true

ENTRY %main (x: f32[4,6]) -> (f32[6,4], s32[4,6], f32[2,2,6]) {
  %x = f32[4,6]{1,0} parameter(0)
  %transposing = f32[6,4]{0,1} bitcast(%x)
  %as_int = s32[4,6]{1,0} bitcast(%x)
  %split = f32[2,2,6]{2,1,0} bitcast(%x)
  ROOT %t = (f32[6,4]{0,1}, s32[4,6]{1,0}, f32[2,2,6]{2,1,0}) tuple(%transposing, %as_int, %split)
}"""
    x = _f32(4, 6)

    transposed, as_int, split = hlo_proto.run_hlo(hlo.defuse(text), [x])

    np.testing.assert_array_equal(transposed, x.T)
    np.testing.assert_array_equal(as_int, x.view(np.int32))
    np.testing.assert_array_equal(split, x.reshape(2, 2, 6))


def test_insert_after_reroutes_readers_and_root() -> None:
    module = hlo.parse("""HloModule m

ENTRY %main (x.1: f32[3]) -> f32[3] {
  %x.1 = f32[3]{0} parameter(0)
  %x.10 = f32[3]{0} negate(%x.1)
  ROOT %y = f32[3]{0} add(%x.1, %x.10)
}""")
    comp = module.entry
    y = comp.get("y")
    name = module.fresh_name("y")
    doubled = hlo.make_instruction(name, y.shape, "add", [y.name, y.name])

    comp.insert_after(y, [doubled])
    comp.replace_uses("x.1", "x.10", skip=["x.10"])

    assert name not in ("y", "x.1") and module.fresh_name("y") != name
    assert comp.root is doubled and not y.is_root
    assert y.operands == ["x.10", "x.10"] and comp.get("x.10").operands == ["x.1"]
    np.testing.assert_array_equal(hlo_proto.run_hlo(module.to_text(), [np.ones(3, np.float32)])[0],
                                  np.full(3, -4.0, np.float32))


def test_parse_errors_name_the_problem() -> None:
    with pytest.raises(hlo.HloParseError, match="line 4"):
        hlo.parse("HloModule m\n\nENTRY %main (x: f32[]) -> f32[] {\n  nonsense\n}")
    with pytest.raises(hlo.HloParseError, match="not closed"):
        hlo.parse("HloModule m\n\nENTRY %main (x: f32[]) -> f32[] {\n  ROOT %x = f32[] parameter(0)")
    with pytest.raises(hlo.HloParseError, match="no ENTRY"):
        hlo.parse("HloModule m\n")


def test_rewriting_without_an_edit_keeps_every_corpus_program_bitwise() -> None:
    """The text round trip every fault relies on must itself change nothing."""

    rewritten: list[str] = []

    def touch_nothing(module: hlo.HloModule) -> bool:
        rewritten.append(module.entry.name)
        return True  # forces parse -> text -> proto without any edit

    clean = {name: run(f, *args) for name, (f, args) in CORPUS.items()}
    with registered("test_round_trip", lambda proto: hlo_proto.rewrite_proto(proto, touch_nothing)):
        round_tripped = {name: run(f, *args) for name, (f, args) in CORPUS.items()}

    assert len(rewritten) == len(CORPUS)

    for name, outputs in clean.items():
        assert [o.tobytes() for o in round_tripped[name]] == [o.tobytes() for o in outputs], name
