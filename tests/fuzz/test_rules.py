"""The StableHLO-level rules come from the op table: each entry's named StableHLO ops are
what jax really lowers it to, and the tables judge those ops as the entry is judged."""

from __future__ import annotations

import re

import pytest
from xla_sentinel.ops.rules import DISCRETE_OPS, STABLEHLO_TAGS, annotate_ops, has_discrete_ops
from xla_sentinel.ops.table import OPS
from xla_sentinel.programs import evaluate
from xla_sentinel.programs.generator import single_op

NAMED = sorted(n for n, op in OPS.items() if op.stablehlo)


@pytest.mark.parametrize("name", NAMED)
def test_an_entry_lowers_to_the_stablehlo_ops_it_names(name: str) -> None:
    # Over a few plans: jax elides an identity transpose or an empty pad.
    texts = [evaluate.lower_text(g) for seed in range(1, 6)
             if (g := single_op(name, OPS[name].dtypes[0], seed=seed)) is not None]
    text = "\n".join(texts)
    present = [h for h in OPS[name].stablehlo if re.search(re.escape(h) + r"\b", text)]
    # top_k also names the sort it may become further down; jax itself emits chlo.top_k.
    assert present == (["chlo.top_k"] if name == "top_k" else list(OPS[name].stablehlo)), text


def test_single_op_entries_give_their_bitwise_tags_to_their_op() -> None:
    assert STABLEHLO_TAGS["stablehlo.maximum"] == {"selects"}
    assert STABLEHLO_TAGS["stablehlo.compare"] == {"exact"}
    assert STABLEHLO_TAGS["stablehlo.multiply"] == {"rounded"}
    # select_compare (compare and select together) does not make select exact.
    assert STABLEHLO_TAGS["stablehlo.select"] == {"selects"}
    assert "stablehlo.exponential" not in STABLEHLO_TAGS  # approximate: never bitwise


def test_the_ops_of_every_discrete_entry_are_discrete_and_no_others() -> None:
    assert {"stablehlo.compare", "stablehlo.convert", "stablehlo.floor", "stablehlo.remainder"} <= DISCRETE_OPS
    assert "stablehlo.add" not in DISCRETE_OPS and "stablehlo.exponential" not in DISCRETE_OPS
    assert has_discrete_ops("%1 = stablehlo.remainder %0, %0 : tensor<4xf32>")
    assert not has_discrete_ops("%1 = stablehlo.add %0, %0 : tensor<4xf32>")


def test_a_max_reduce_selects_and_ops_are_annotated_for_the_bisector() -> None:
    info = {"ops": [{"name": "stablehlo.reduce", "text": "%1 = stablehlo.reduce(%0 init: %c) applies stablehlo.maximum"},
                    {"name": "stablehlo.reduce", "text": "%2 = stablehlo.reduce(%0 init: %c) applies stablehlo.add"},
                    {"name": "stablehlo.compare", "text": "%3 = stablehlo.compare GT, %1, %2"}]}
    ops = annotate_ops(info)["ops"]
    assert [(o["tags"], o["discrete"]) for o in ops] == [(["selects"], False), ([], False), (["exact"], True)]
