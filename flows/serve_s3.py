"""The local stack's S3 side (``flows/serve.py``): the keys of the local server, and the buckets hpcrl uses on
whichever S3 server the stack points at.

Test: ``pytest tests/flows/test_serve_s3.py``; with the whole stack:
``pytest -m integration tests/flows/test_deployment.py``.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flows.service import ServeError

BUCKETS = ("hpcrl", "hpcrl-mlflow", "hpcrl-dvc")  # infra/lab_init.py creates the same three in a lab
REGION = "us-east-1"


def s3_keys(d: Path) -> tuple[str, str]:
    """The local S3 server's keys, made on first start (random, 0600) and kept, so that data and serve.env stay
    valid across restarts."""
    path = d / "s3.keys"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"hpcrl{secrets.token_hex(10)} {secrets.token_hex(20)}\n")
    key, secret = path.read_text().split()
    return key, secret


def s3_client(env: Mapping[str, str]) -> Any:
    """A boto3 S3 client on the server of ``env`` (``AWS_ENDPOINT_URL`` and keys), with short timeouts."""
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env.get("AWS_DEFAULT_REGION", REGION),
                        aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                        config=Config(connect_timeout=5, read_timeout=20, retries={"max_attempts": 2}))


def s3_buckets(env: Mapping[str, str]) -> set[str]:
    """The buckets on the S3 server of ``env`` (``AWS_ENDPOINT_URL`` and keys). Raises ``ServeError`` naming the cause
    when the server is unreachable or refuses the credentials."""
    from botocore.exceptions import ClientError, EndpointConnectionError

    endpoint = env["AWS_ENDPOINT_URL"]
    try:
        return {b["Name"] for b in s3_client(env).list_buckets().get("Buckets", [])}
    except EndpointConnectionError as exc:
        raise ServeError(f"the S3 server at {endpoint} cannot be reached ({exc})") from exc
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "?")
        raise ServeError(f"the S3 server at {endpoint} refuses the credentials ({code}): check AWS_ACCESS_KEY_ID and "
                         f"AWS_SECRET_ACCESS_KEY (key id {env['AWS_ACCESS_KEY_ID']!r})") from exc


def ensure_buckets(env: Mapping[str, str], buckets: tuple[str, ...] = BUCKETS) -> list[str]:
    """Create the missing ``buckets`` on the S3 server of ``env``; returns those created (``ServeError`` as
    ``s3_buckets``)."""
    from botocore.exceptions import ClientError

    s3, created = s3_client(env), []
    for bucket in sorted(set(buckets) - s3_buckets(env)):
        try:
            s3.create_bucket(Bucket=bucket)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise ServeError(f"cannot create bucket {bucket} at {env['AWS_ENDPOINT_URL']}: {exc}") from exc
        created.append(bucket)
    return created
