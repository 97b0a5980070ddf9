"""`make dev-cluster`: the test control plane and the real node (node.py: kubelet, containerd,
kube-scheduler, CoreDNS), the chart installed with `helm install` from the images `make
images` left in the cache (the operator as the chart's two pods, workers as pods of the
runner image), for a person to try campaigns with kubectl. Ctrl-C stops everything.

`--fake-node`: the earlier set-up, for a machine without the node's kernel features or
without built images: the chart's CRDs and RBAC, a fake node (kubelet.py) that runs worker
pods as local processes of this checkout, and the operator as a local process with the
chart's ServiceAccount."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: tools, controlplane

from tools import REPO_ROOT  # noqa: E402

from controlplane.cluster import ControlPlane  # noqa: E402
from controlplane.kit import (  # noqa: E402
    OPERATOR_SA,
    RELEASE_NS,
    Api,
    chart_operator_flags,
    helm_install,
    install_chart,
    kubectl,
)
from controlplane.kubelet import FakeNode  # noqa: E402
from controlplane.node import RealNode, built_images, chart_image_values  # noqa: E402

RUNNER = str(REPO_ROOT / ".venv" / "bin" / "xla-sentinel")


# The namespaces the examples use, and the webhook Secrets they name.
NAMESPACES = ("xla-fuzz", "xla-fuzz-tpu")
SECRETS = ("xla-cpu-webhook", "xla-tpu-webhook")


def wait_forever() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.sigwait({signal.SIGINT, signal.SIGTERM})


def real_node(cp: ControlPlane, api: Api) -> None:
    images = built_images()  # a ControlPlaneError naming `make images` where missing
    with RealNode(cp, [Path(images[t]["archive"]) for t in ("operator", "runner-cpu")]) as node:
        sets = [*chart_image_values(images), f"operator.watchNamespaces={{{','.join(NAMESPACES)}}}",
                f"alerts.extraSecretNames={{{','.join(SECRETS)}}}"]
        helm_install(cp, sets)
        deadline = time.monotonic() + 300
        while not [p for p in api.all("v1/pods", RELEASE_NS, {"app.kubernetes.io/component": "operator"})
                   if any(c["type"] == "Ready" and c["status"] == "True"
                          for c in p["status"].get("conditions") or [])]:
            if time.monotonic() > deadline:
                raise SystemExit(f"no operator pod Ready within 300 s; logs in {node.logs}")
            time.sleep(1)
        print(f"KUBECONFIG={cp.kubeconfig_path}", flush=True)
        print(f"# node and control-plane logs: {node.logs}, {cp.root / 'logs'}; "
              f"operator: kubectl logs -n {RELEASE_NS} -l app.kubernetes.io/component=operator",
              flush=True)
        print("# try: kubectl apply -f examples/k8s-quickstart.yaml; "
              "kubectl get fuzzcampaigns -A -w", flush=True)
        wait_forever()


def fake_node(cp: ControlPlane, api: Api) -> None:
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
    try:
        wait_forever()
    finally:
        operator.terminate()
        operator.wait(30)
        node.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fake-node", action="store_true",
                   help="the fake node and a local operator process instead of the real node")
    args = p.parse_args(argv)
    with ControlPlane() as cp:
        api = Api(cp)
        for ns in (RELEASE_NS, *NAMESPACES):
            kubectl(cp, "create", "namespace", ns)
        (fake_node if args.fake_node else real_node)(cp, api)
    return 0


if __name__ == "__main__":
    sys.exit(main())
