"""The version_regression rule (oracle.version_regression): wrong numbers that an older
release in the same configuration does not give; a newer release that is right says
where it is fixed. Pure."""

from __future__ import annotations

from xla_sentinel.judge.oracle import VersionPeer, version_regression

EV = {"error": 0.5, "threshold": 1e-5}


def test_an_older_release_that_is_right_makes_a_mismatch_a_version_regression() -> None:
    peers = [VersionPeer("v08", "0.8.3", True), VersionPeer("v09", "0.9.2", True),
             VersionPeer("v101", "0.10.1", False)]
    verdict, ev = version_regression("mismatch", EV, "0.10.2", peers)
    assert verdict == "version_regression"
    # The newest older release that was right is the last good one.
    assert ev["lastGood"] == {"target": "v09", "jaxlib": "0.9.2"}
    assert (ev["judged_as"], ev["jaxlib"], ev["error"]) == ("mismatch", "0.10.2", 0.5)
    assert "judged_as" not in EV  # the caller's evidence is not changed


def test_no_older_release_right_keeps_the_verdict_and_a_newer_one_names_the_fix() -> None:
    assert version_regression("nan_mismatch", EV, "0.10.2", [VersionPeer("v", "0.9.2", False)]) == (
        "nan_mismatch", EV)
    verdict, ev = version_regression("mismatch", EV, "0.9.2", [VersionPeer("new", "0.10.1", True),
                                                              VersionPeer("newer", "0.10.2", True)])
    assert verdict == "mismatch" and ev["fixed_on"] == {"target": "new", "jaxlib": "0.10.1"}


def test_compiler_failures_are_not_judged_across_versions() -> None:
    ok = [VersionPeer("old", "0.9.2", True)]
    for verdict in ("crash", "compile_error", "hang", "nondeterministic"):
        assert version_regression(verdict, EV, "0.10.2", ok) == (verdict, EV)
