# hpcrl: `make run` (main job on embedded defaults) and `make test` (tests) are all a fresh machine needs.
# Both call `make setup`, which installs system packages that are missing and creates or updates .venv
# (quick when nothing changed: the venv stamp is keyed on pyproject.toml).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.stamp-$(shell sha256sum pyproject.toml | cut -c1-12)
# gcc/binutils/util-linux: the benchmark engine; clang + libomp-dev: ThreadSanitizer checks of the race corpus
# (gcc's libgomp is not instrumented); gfortran: compiling the Fortran race items.
APT_PACKAGES := gcc binutils util-linux clang libomp-dev gfortran

export DO_NOT_TRACK := true
export MLFLOW_DISABLE_TELEMETRY := true
export DVC_NO_ANALYTICS := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: setup system-deps run test test-slow lint bench clean

setup: system-deps $(STAMP)

system-deps:
	@command -v dpkg-query >/dev/null || { echo "no dpkg: install $(APT_PACKAGES) yourself"; exit 0; }; \
	missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

# torch first and alone: the pinned CPU wheel lies on disk; anything asking for torch later finds it installed.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==$$(sed -n 's/.*"torch==\([^"]*\)".*/\1/p' pyproject.toml)"
	$(PY) -m pip install -q -e ".[dev]"
	rm -f $(VENV)/.stamp-* && touch $@

run: setup
	$(VENV)/bin/hpcrl bench --ladder --reference

test: setup
	$(PY) -m pytest

test-slow: setup
	$(PY) -m pytest -m "slow"

lint: setup
	$(VENV)/bin/ruff check hpcrl_core tasks flows tests benchmarks
	$(VENV)/bin/mypy

bench: setup
	$(PY) benchmarks/bench_throughput.py

clean:
	rm -rf .hpcrl .pytest_cache .mypy_cache .ruff_cache
