"""The local stack's S3 side against a real S3 server (rclone serve s3). Run: pytest tests/flows/test_serve_s3.py"""

from __future__ import annotations

import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flows.serve_s3 import BUCKETS, REGION, ensure_buckets, s3_buckets, s3_keys
from flows.service import ServeError, rclone


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(port: int, key: str, secret: str) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A fresh ``rclone serve s3`` on a free port with keys made by ``s3_keys``; its environment."""
    key, secret = s3_keys(tmp_path)
    port = _free_port()
    (tmp_path / "s3").mkdir()
    proc = subprocess.Popen([rclone(), "serve", "s3", "--auth-key", f"{key},{secret}", "--addr", f"127.0.0.1:{port}",
                             str(tmp_path / "s3")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail(f"rclone serve s3 did not listen on {port} (exit {proc.poll()})")
            time.sleep(0.1)
        yield _env(port, key, secret)
    finally:
        proc.terminate()
        proc.wait(10)


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
    nobody = _env(_free_port(), "k", "s")
    with pytest.raises(ServeError, match="cannot be reached"):
        s3_buckets(nobody)
