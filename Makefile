# hpcrl: `make run` (main job on embedded defaults) and `make test` (tests) are all a fresh machine needs.
# Both call `make setup`, which installs system packages that are missing and creates or updates .venv
# (quick when nothing changed: the venv stamp is keyed on pyproject.toml).
# `make serve` starts the local stack in the background (S3, MLflow, Prefect with pools cpu/gpu and the deployments
# of prefect.yaml, one CPU agent) and writes serve.env; `make stop` stops it. See docs/orchestration.md.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.stamp-$(shell sha256sum pyproject.toml | cut -c1-12)
# gcc/binutils/util-linux: the benchmark engine; clang + libomp-dev: ThreadSanitizer checks of the race corpus
# (gcc's libgomp is not instrumented); gfortran: compiling the Fortran race items; shellcheck + docker-compose:
# validating infra/ (tests/infra); chromium + chromium-driver: the MLflow UI test in a real headless browser.
APT_PACKAGES := gcc binutils util-linux clang libomp-dev gfortran shellcheck docker-compose chromium chromium-driver

export DO_NOT_TRACK := true
export MLFLOW_DISABLE_TELEMETRY := true
export DVC_NO_ANALYTICS := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: setup system-deps run hargo ladder test test-slow lint bench bench-rl clean

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

# The DGEMM chain on embedded defaults: prepare -> sft -> rl_dgemm -> evaluate_dgemm (DVC skips what did not
# change) -> register in MLflow; ends with a summary table. `hpcrl bench --ladder --reference` alone: make ladder.
run: setup
	$(PY) -m flows.train_dgemm

# The HARGO comparison on embedded defaults: prepare -> sft_hargo -> rl_hargo (5 methods x 3 seeds) ->
# evaluate_hargo -> register hpcrl-hargo; prints the comparison table (also reports/eval_hargo.md).
hargo: setup
	$(PY) -m flows.train_hargo

ladder: setup
	$(VENV)/bin/hpcrl bench --ladder --reference

test: setup  # the 15 slowest tests are listed at the end: the default run must stay under 15 minutes
	$(PY) -m pytest --durations=15

test-slow: setup
	$(PY) -m pytest -m "slow"

lint: setup
	$(VENV)/bin/ruff check hpcrl_core tasks flows tests benchmarks
	$(VENV)/bin/mypy

bench: setup
	$(PY) benchmarks/bench_throughput.py

# RL step time and reward-wait share (needs checkpoints/sft: dvc repro sft).
bench-rl: setup
	$(PY) benchmarks/bench_rl_step.py

clean:
	rm -rf .hpcrl .pytest_cache .mypy_cache .ruff_cache

# The local stack (flows/serve.py): rclone S3 on $(S3_PORT), MLflow on $(MLFLOW_PORT) (artifacts in S3), Prefect on
# $(SERVE_PORT) with workers of pools cpu and gpu and the deployments of prefect.yaml, one CPU agent; pids and logs in
# .prefect/serve/, endpoints and keys in serve.env. Running it again starts nothing twice. `hpcrl status`: health.
SERVE_PORT ?= 4200
MLFLOW_PORT ?= 5000
S3_PORT ?= 9000
.PHONY: serve stop

serve: setup
	$(PY) -m flows.serve start --port $(SERVE_PORT) --mlflow-port $(MLFLOW_PORT) --s3-port $(S3_PORT)

# Stops the agent, the workers (and flow runs they started), the Prefect server, MLflow, S3; removes serve.env.
stop:
	@if [ -x $(PY) ]; then $(PY) -m flows.serve stop; else echo "no $(VENV): nothing to stop"; fi
