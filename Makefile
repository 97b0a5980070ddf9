# xla-sentinel: every target installs what it needs into ./.venv from PyPI alone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OUT ?= out/smoke

.PHONY: install demo test lint bench

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

lint: install
	$(BIN)/ruff check runners operator tests bench

bench: install
	$(BIN)/python bench/throughput.py
