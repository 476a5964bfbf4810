"""Prepare a lab's servers once: create the S3 buckets and register the Prefect result-storage block.

- Buckets (``BUCKETS``): ``hpcrl`` (Prefect task parameters and results of the CPU agents, under ``prefect/``),
  ``hpcrl-mlflow`` (the MLflow server's proxied artifacts), ``hpcrl-dvc`` (the DVC remote). Existing ones are kept.
- The Prefect block ``remote-file-system/hpcrl-results`` = ``RemoteFileSystem(basepath="s3://hpcrl/prefect")``
  (docs/agents.md): agents, trainers and evaluations name it in ``PREFECT_TASKS_SCHEDULING_DEFAULT_STORAGE_BLOCK``
  and ``PREFECT_RESULTS_DEFAULT_STORAGE_BLOCK``. It holds no secret: every host reads the S3 endpoint and keys from
  its own ``AWS_*`` environment.

Environment: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL`` (the S3 server) and
``PREFECT_API_URL`` (the Prefect server; without it ``--buckets-only`` is required).

Run: ``python infra/lab_init.py [--buckets-only]`` (the ``lab-init`` service of infra/docker-compose.yml runs it).
Test: ``pytest tests/infra`` (the buckets against a real S3 server, ``rclone serve s3``).
"""

from __future__ import annotations

import argparse
import os
import sys

BUCKETS = ("hpcrl", "hpcrl-mlflow", "hpcrl-dvc")
RESULTS_BLOCK = "hpcrl-results"
RESULTS_BASEPATH = "s3://hpcrl/prefect"


def create_buckets(buckets: tuple[str, ...] = BUCKETS) -> list[str]:
    """Create each missing bucket on the S3 server of ``AWS_ENDPOINT_URL``; returns those created."""
    import boto3
    from botocore.exceptions import ClientError

    s3 = boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None)
    existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    created = []
    for bucket in buckets:
        if bucket in existing:
            continue
        try:
            s3.create_bucket(Bucket=bucket)
        except ClientError as err:  # another lab-init got there first
            if err.response.get("Error", {}).get("Code") not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise
        created.append(bucket)
    return created


def register_results_block() -> None:
    """Save (or overwrite) the ``hpcrl-results`` RemoteFileSystem block on the server of ``PREFECT_API_URL``."""
    from prefect.filesystems import RemoteFileSystem

    RemoteFileSystem(basepath=RESULTS_BASEPATH).save(RESULTS_BLOCK, overwrite=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--buckets-only", action="store_true", help="create the buckets, leave Prefect alone")
    a = ap.parse_args(argv)
    missing = [v for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL") if not os.environ.get(v)]
    if not a.buckets_only and not os.environ.get("PREFECT_API_URL"):
        missing.append("PREFECT_API_URL")
    if missing:
        print(f"lab_init: {', '.join(missing)} not set; see infra/.env.example", file=sys.stderr)
        return 2
    created = create_buckets()
    print(f"buckets: created {', '.join(created) or 'none'}; present: {', '.join(BUCKETS)} "
          f"at {os.environ['AWS_ENDPOINT_URL']}")
    if not a.buckets_only:
        register_results_block()
        print(f"block remote-file-system/{RESULTS_BLOCK} -> {RESULTS_BASEPATH} at {os.environ['PREFECT_API_URL']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
