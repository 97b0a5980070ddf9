"""The test cluster, built from Go modules by build.sh (`make control-plane`, `make kwok`,
`make policy-engine`) and build_kueue.sh (`make kueue`).

cluster.py is the control plane every cluster test runs against (etcd, kube-apiserver,
kube-controller-manager; no scheduler, no kubelet). Where a test's pods go is one of three:

- The real node (node.py: kubelet, containerd, kube-scheduler, the device plugin), where a
  container must really run: tests/node (pods, the chart's pods from the built images,
  accelerators), `make dev-cluster`, bench/operator_scale.py --real-node. NetworkPolicy is
  enforced there only for tests that take the `policy_engine` fixture (kube-router's network
  policy controller, node.py): tests/node/test_networkpolicy_node.py.
- kwok (kwok.py: kwok's stages play the kubelet of many Nodes, the real kube-scheduler
  places pods), where no container must run but placement and pod phases matter: GKE TPU
  and CPU node pools in tests/k8s/test_kwok.py and bench/operator_scale.py --kwok-nodes;
  with Kueue's controller manager beside the control plane (kueue.py, as jobset.py runs
  JobSet's) in tests/k8s/test_kueue.py, and with both in tests/k8s/test_kueue_jobset.py (Kueue
  admits the operator's slice JobSets); with JobSet's (jobset.py) in tests/k8s/test_jobset.py,
  test_jobset_operator.py and test_jobset_maintenance.py, whose multi-host slices run on two
  v6e 4x4 pools (tests/k8s/conftest.py's `slice_pools`), a host failed (with the exit code
  the test gives) or completed by a kwok stage the test selects with a label on its pod
  (`fail_pod`, `complete_pod`), or evicted through the Eviction API (`evict`: a real
  DisruptionTarget, the pod then ended by kwok as a kubelet would).
- The fake node (kubelet.py: scheduler and kubelet in one, running the engine as local
  processes), where the worker's own process must run without an image:
  tests/k8s/test_end_to_end.py, test_lifecycle.py, test_swarm.py, test_swarm_events.py,
  test_version_bisection.py.
"""
