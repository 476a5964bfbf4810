# The image of every hpcrl host in the lab: the GPU trainer worker, the CPU-pool worker and the CPU agents.
# Python 3.11 and this repository's pyproject (installed editable at /opt/hpcrl), plus what the benchmark engine
# needs on a host (gcc, binutils, util-linux) and git (DVC and the runs' git_commit tag need a git work tree).
#
# Build (from the repository root; infra/docker-compose.yml does the same):
#   docker build -f infra/docker/hpcrl.Dockerfile -t hpcrl:cpu .
#   docker build -f infra/docker/hpcrl.Dockerfile --build-arg EXTRAS=gpu --build-arg DEEPSPEED=0.19.8 -t hpcrl:gpu .
# EXTRAS=gpu adds trl[vllm] (CUDA only); DEEPSPEED installs that deepspeed version (ZeRO, infra/accelerate/).
# TORCH_INDEX_URL: another wheel index for torch alone (e.g. PyTorch's CPU-only index, for a smaller agent image);
# empty takes PyPI's torch wheel, which is the CUDA build on Linux x86-64.
# Test: pytest tests/infra (the pins here must equal pyproject.toml's). Not built on the development VM (no daemon).
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc binutils util-linux git \
    && rm -rf /var/lib/apt/lists/*

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DO_NOT_TRACK=true \
    MLFLOW_DISABLE_TELEMETRY=true \
    DVC_NO_ANALYTICS=1 \
    PREFECT_SERVER_ANALYTICS_ENABLED=false

ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=
ARG EXTRAS=
ARG DEEPSPEED=

# torch first and alone (as `make setup` does), so that nothing later pulls another build of it
RUN if [ -n "$TORCH_INDEX_URL" ]; then pip install "torch==${TORCH_VERSION}" --index-url "$TORCH_INDEX_URL"; \
    else pip install "torch==${TORCH_VERSION}"; fi

WORKDIR /opt/hpcrl
COPY . /opt/hpcrl
# editable: a checkout bind-mounted over /opt/hpcrl at run time (docker-compose.yml) is the code that runs
RUN pip install -e ".${EXTRAS:+[$EXTRAS]}" \
    && if [ -n "$DEEPSPEED" ]; then pip install "deepspeed==${DEEPSPEED}"; fi \
    && pip check

# the engine's scratch, cache and core-lock folders; the lock folder must be shared by every agent of a host
ENV HPCRL_SCRATCH_DIR=/var/lib/hpcrl/scratch \
    HPCRL_CACHE_DIR=/var/lib/hpcrl/cache \
    HPCRL_LOCK_DIR=/var/lib/hpcrl/cores \
    PREFECT_HOME=/var/lib/hpcrl/prefect
RUN mkdir -p /var/lib/hpcrl/scratch /var/lib/hpcrl/cache /var/lib/hpcrl/cores /var/lib/hpcrl/prefect \
    && chmod 1777 /var/lib/hpcrl/scratch
