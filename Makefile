# One entry point for every task. `make demo` and `make test` install what they need first.
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROTO_SRC := $(wildcard proto/skyqa/v1/*.proto)
APT_PACKAGES := libusb-1.0-0 libgomp1 chromium

.PHONY: setup apt proto proto-check lint test test-unit test-integration demo bench clean

setup: $(STAMP)

apt:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing apt packages:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi; \
	fi

$(STAMP): pyproject.toml requirements.lock | apt
	@command -v $(PY) >/dev/null || { echo "python 3.11 is required ($(PY) not found)"; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c requirements.lock -e '.[dev]'
	touch $(STAMP)

# Generated code is committed; `proto-check` fails when it no longer matches proto/.
proto: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH scripts/gen_proto.sh libs

proto-check: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH scripts/gen_proto.sh --check libs

lint: $(STAMP) proto-check
	$(BIN)/ruff check libs services tests bench scripts
	$(BIN)/ruff format --check libs services tests bench scripts
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/bandit -q -c pyproject.toml -r libs services
	SKYQA_AUDIT_OFFLINE_OK=1 $(BIN)/python scripts/audit.py -r requirements.lock --no-deps --disable-pip  # the lock pins every package; opt-in: this machine reaches no advisory source

test: $(STAMP) proto-check
	$(BIN)/python -m pytest -q -m "unit or integration or e2e" tests

test-unit: $(STAMP)
	$(BIN)/python -m pytest -q -m unit tests

test-integration: $(STAMP)
	$(BIN)/python -m pytest -q -m integration tests

demo: $(STAMP)
	$(BIN)/skyqa demo --data-dir .skyqa

bench: $(STAMP)
	$(BIN)/python -m bench.run --out bench/results.json

clean:
	rm -rf .skyqa .pytest_cache .mypy_cache .ruff_cache
