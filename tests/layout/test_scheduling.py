"""The xdist work units of tests/conftest.py: every test that needs the real node in one unit
(one worker runs them, so no worker waits on another's node lock), every other test its own."""

from __future__ import annotations

from costs import REAL_NODE_SCOPE, scope_of


def test_every_real_node_test_is_one_work_unit_and_the_rest_are_their_own() -> None:
    node_tests = ["tests/node/test_node.py::test_a_pod_runs",
                  "tests/node/test_chart.py::test_install[x@y]",
                  "tests/node/test_accelerators.py::test_chips"]
    others = ["tests/node/test_oom_pure.py::test_kill",  # pure: needs no node
              "tests/k8s/test_lifecycle.py::test_create",
              "tests/fuzz/test_model.py::test_verdict"]

    assert {scope_of(n) for n in node_tests} == {REAL_NODE_SCOPE}
    assert [scope_of(n) for n in others] == others


def test_every_slow_file_exists_so_none_is_marked_in_name_only() -> None:
    from costs import SLOW_FILES, TESTS

    assert sorted(f for f in SLOW_FILES if not (TESTS / f).is_file()) == []
