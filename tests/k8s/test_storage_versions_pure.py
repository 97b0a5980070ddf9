"""What `xla-sentinel operator migrate-storage` plans for a CRD, from its versions and
status.storedVersions alone (the migration itself runs on the real API server:
test_storage_versions.py)."""

from __future__ import annotations

from typing import Any

import pytest
from xla_sentinel.cli.entry import main as entry
from xla_sentinel_operator.storage_versions import Migration, MigrationError, plan


def crd(versions: dict[str, bool], stored: list[str] | None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": "widgets.example.dev"},
        "spec": {"group": "example.dev", "names": {"plural": "widgets"},
                 "versions": [{"name": v, "served": True, "storage": s}
                              for v, s in versions.items()]}}
    if stored is not None:
        obj["status"] = {"storedVersions": stored}
    return obj


def test_stored_only_at_the_storage_version_needs_nothing() -> None:
    assert plan(crd({"v1alpha1": True}, ["v1alpha1"])) is None
    assert plan(crd({"v1alpha1": False, "v1beta1": True}, ["v1beta1"])) is None
    assert plan(crd({"v1alpha1": True}, None)) is None  # not yet established: nothing stored


def test_an_older_stored_version_is_migrated_to_the_storage_version() -> None:
    m = plan(crd({"v1alpha1": False, "v1beta1": True}, ["v1alpha1", "v1beta1"]))
    assert m == Migration(crd="widgets.example.dev", group="example.dev", plural="widgets",
                          storage="v1beta1", stale=("v1alpha1",))
    assert m.api_version == "example.dev/v1beta1"
    # Stored only at a version that is no longer the storage version (the new one holds
    # nothing yet): still every object is rewritten.
    assert plan(crd({"v1alpha1": False, "v1beta1": True}, ["v1alpha1"])) == m


@pytest.mark.parametrize("versions", [{"v1": False}, {"v1": True, "v2": True}])
def test_a_crd_without_exactly_one_storage_version_is_refused(versions: dict[str, bool]) -> None:
    with pytest.raises(MigrationError, match="widgets.example.dev: .* storage versions"):
        plan(crd(versions, ["v1"]))


def test_outside_a_pod_without_a_kubeconfig_is_a_clear_error(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(SystemExit) as e:
        entry(["operator", "migrate-storage"])
    assert e.value.code == 2
    assert "not in a pod: name a cluster with --kubeconfig" in capsys.readouterr().err
