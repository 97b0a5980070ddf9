"""`make dev-cluster`: the test control plane, the chart's CRDs and RBAC (cluster-wide), a
fake node that runs worker pods as local processes, and the operator as the chart's
ServiceAccount, for a person to try campaigns with kubectl. Ctrl-C stops everything."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: tools, controlplane

from tools import REPO_ROOT  # noqa: E402

from controlplane.cluster import ControlPlane  # noqa: E402
from controlplane.kit import (  # noqa: E402
    OPERATOR_SA,
    RELEASE_NS,
    Api,
    chart_operator_flags,
    install_chart,
    kubectl,
)
from controlplane.kubelet import FakeNode  # noqa: E402

RUNNER = str(REPO_ROOT / ".venv" / "bin" / "xla-sentinel")


# The namespaces the examples use, and the webhook Secrets they name.
NAMESPACES = ("xla-fuzz", "xla-fuzz-tpu")
SECRETS = ("xla-cpu-webhook", "xla-tpu-webhook")


def main() -> int:
    with ControlPlane() as cp:
        api = Api(cp)
        for ns in (RELEASE_NS, *NAMESPACES):
            kubectl(cp, "create", "namespace", ns)
        # Installed as a user would for those namespaces: per-namespace Roles, the worker
        # ServiceAccount in each, read access to the named Secrets.
        sets = (f"operator.watchNamespaces={{{','.join(NAMESPACES)}}}",
                f"alerts.extraSecretNames={{{','.join(SECRETS)}}}")
        install_chart(cp, *sets)
        flags = chart_operator_flags(*sets)
        # Campaigns without spec.image run on the operator's --runner-image, which the fake
        # node runs as this checkout's engine.
        node = FakeNode(api, images={"runner:dev": [RUNNER]}, host_paths=[REPO_ROOT]).start()
        op_config = cp.write_kubeconfig(f"system:serviceaccount:{RELEASE_NS}:{OPERATOR_SA}",
                                        token=api.token(RELEASE_NS, OPERATOR_SA, 48 * 3600))
        operator = subprocess.Popen(
            [RUNNER, "operator", "--kubeconfig", str(op_config), "--runner-image", "runner:dev",
             "--service-account", flags["--service-account"],
             *[a for ns in NAMESPACES for a in ("--namespace", ns)],
             "--standalone", "--metrics-host", "127.0.0.1", "--metrics-port", "0"],
            stdout=open(cp.root / "logs" / "operator.log", "ab"), stderr=subprocess.STDOUT)
        print(f"KUBECONFIG={cp.kubeconfig_path}", flush=True)
        print(f"# operator, control-plane and pod logs: {cp.root / 'logs'}, {node.root}",
              flush=True)
        print("# try: kubectl apply -f examples/k8s-quickstart.yaml; "
              "kubectl get fuzzcampaigns -A -w", flush=True)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            signal.sigwait({signal.SIGINT, signal.SIGTERM})
        finally:
            operator.terminate()
            operator.wait(30)
            node.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
