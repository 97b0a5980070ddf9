"""The Pod Security "restricted" profile as a check over one pod spec and container."""

from __future__ import annotations

from typing import Any


def restricted_violations(pod: dict[str, Any], container: dict[str, Any]) -> list[str]:
    """The Pod Security "restricted" checks, each satisfiable at pod or container level."""
    def effective(key: str) -> Any:
        return container.get("securityContext", {}).get(key, pod.get("securityContext", {}).get(key))

    bad = []
    if effective("runAsNonRoot") is not True:
        bad.append("runAsNonRoot must be true")
    if effective("runAsUser") == 0:
        bad.append("runAsUser must not be 0")
    if (effective("seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"):
        bad.append("seccompProfile.type must be RuntimeDefault")
    sc = container.get("securityContext", {})
    if sc.get("allowPrivilegeEscalation") is not False:
        bad.append("allowPrivilegeEscalation must be false")
    if sc.get("readOnlyRootFilesystem") is not True:
        bad.append("readOnlyRootFilesystem must be true")
    if sc.get("privileged"):
        bad.append("privileged must not be set")
    caps = sc.get("capabilities", {})
    if "ALL" not in caps.get("drop", []):
        bad.append("capabilities.drop must include ALL")
    if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
        bad.append("capabilities.add may only hold NET_BIND_SERVICE")
    return bad
