"""The local stack's S3 side against a real S3 server (rclone serve s3). Run: pytest tests/flows/test_serve_s3.py"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from flows.agents_stack import local_s3
from flows.serve_s3 import BUCKETS, REGION, ensure_buckets, s3_buckets, s3_keys
from flows.service import ServeError, free_port


def _env(port: int, key: str, secret: str) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A fresh ``rclone serve s3`` without buckets (``flows.agents_stack.local_s3``); its environment."""
    with local_s3(tmp_path / "s3", buckets=()) as env:
        yield env


def test_keys_are_made_once_private_and_kept(tmp_path: Path) -> None:
    first = s3_keys(tmp_path)
    assert stat.S_IMODE((tmp_path / "s3.keys").stat().st_mode) == 0o600
    assert s3_keys(tmp_path) == first  # a restart keeps the data's keys
    (tmp_path / "other").mkdir()
    assert s3_keys(tmp_path / "other") != first
    assert first[0].startswith("hpcrl") and len(first[1]) == 40


def test_buckets_are_created_once_and_listed(server: dict[str, str]) -> None:
    assert s3_buckets(server) == set()
    assert ensure_buckets(server) == sorted(BUCKETS)
    assert ensure_buckets(server) == []  # a second start creates nothing
    assert s3_buckets(server) == set(BUCKETS)


def test_refused_credentials_and_an_unreachable_server_are_named(server: dict[str, str]) -> None:
    with pytest.raises(ServeError, match="refuses the credentials .*key id 'wrong'"):
        s3_buckets({**server, "AWS_ACCESS_KEY_ID": "wrong"})
    with pytest.raises(ServeError, match="refuses the credentials"):
        ensure_buckets({**server, "AWS_SECRET_ACCESS_KEY": "x" * 40})
    nobody = _env(free_port(), "k", "s")
    with pytest.raises(ServeError, match="cannot be reached"):
        s3_buckets(nobody)
