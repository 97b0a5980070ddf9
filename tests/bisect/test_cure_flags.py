"""The cures the passes stage tries (bisect/passes.flags_to_try): the presets, with
single-pass disables (algsimp) before the first preset that disables several, so a bug
that disabling the simplifier alone cures is named by that flag. No jax here."""

from __future__ import annotations

from xla_sentinel.bisect.passes import flags_to_try
from xla_sentinel.spec.options import flag_name


def test_algsimp_alone_is_tried_before_the_pair_it_belongs_to() -> None:
    names = [flag_name(o) for o in flags_to_try({})]
    assert "xla_disable_hlo_passes=algsimp" in names
    assert names.index("xla_disable_hlo_passes=fusion") < names.index("xla_disable_hlo_passes=algsimp") \
        < names.index("xla_disable_hlo_passes=algsimp,fusion")
    assert len(names) == len(set(names))


def test_a_target_that_disables_passes_keeps_them_disabled_in_each_cure() -> None:
    tries = flags_to_try({"xla_disable_hlo_passes": "cse"})
    singles = [o for o in tries if o.get("xla_disable_hlo_passes") == "cse,algsimp"]
    assert singles == [{"xla_disable_hlo_passes": "cse,algsimp"}]
    # A target with algsimp already off gets no algsimp cure to try.
    assert not any(o.get("xla_disable_hlo_passes", "").endswith(",algsimp")
                   for o in flags_to_try({"xla_disable_hlo_passes": "algsimp"}))
