"""The operator's in-cluster login: the API address from the service environment, as
client-go reads it, never a DNS name (kopf's own login dials kubernetes.default.svc, which
failed on the real node of tests/node before CoreDNS ran)."""

from __future__ import annotations

from pathlib import Path

from xla_sentinel_operator.kube import connection_in_cluster


def _account(tmp_path: Path, token: str = "tok\n") -> Path:
    (tmp_path / "token").write_text(token)
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    (tmp_path / "namespace").write_text("xla-sentinel\n")
    return tmp_path


def test_the_service_address_is_used_and_the_files_are_read(tmp_path: Path) -> None:
    info = connection_in_cluster({"KUBERNETES_SERVICE_HOST": "10.96.0.1",
                                  "KUBERNETES_SERVICE_PORT": "443"}, _account(tmp_path))
    assert info is not None
    assert info.server == "https://10.96.0.1:443"
    assert info.token == "tok"
    assert info.ca_path == str(tmp_path / "ca.crt")
    assert info.default_namespace == "xla-sentinel"


def test_an_ipv6_service_address_is_bracketed(tmp_path: Path) -> None:
    info = connection_in_cluster({"KUBERNETES_SERVICE_HOST": "fd00::1",
                                  "KUBERNETES_SERVICE_PORT": "6443"}, _account(tmp_path))
    assert info is not None and info.server == "https://[fd00::1]:6443"


def test_outside_a_pod_there_is_no_in_cluster_login(tmp_path: Path) -> None:
    assert connection_in_cluster({}, _account(tmp_path)) is None
    assert connection_in_cluster({"KUBERNETES_SERVICE_HOST": "10.96.0.1",
                                  "KUBERNETES_SERVICE_PORT": "443"}, tmp_path / "absent") is None
