"""ddmin on its own: 1-minimal results, whatever the failure needs."""

from __future__ import annotations

from xla_sentinel.bisect.reduce import ddmin


def test_single_culprit() -> None:
    assert ddmin(list(range(100)), lambda keep: 37 in keep) == [37]


def test_failure_needing_two_far_apart_ops() -> None:
    assert ddmin(list(range(64)), lambda keep: {3, 60} <= set(keep)) == [3, 60]


def test_result_is_one_minimal() -> None:
    def fails(keep: list[int]) -> bool:
        return {5, 6, 7} <= set(keep) or {20, 40} <= set(keep)

    result = ddmin(list(range(50)), fails)
    assert fails(result)
    assert all(not fails([x for x in result if x != y]) for y in result)
