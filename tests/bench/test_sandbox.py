"""Tests of the sandbox layer itself, with hostile programs that never pass the screen (they call fork, socket,
fopen ... directly), so that the sandbox holds even if a kernel got past both screens.

Run: pytest tests/bench/test_sandbox.py
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from hpcrl_core.bench.sandbox import probe_isolation, run_sandboxed
from hpcrl_core.config import SandboxParams
from tests.helpers import processes_under, public_tmp

pytestmark = pytest.mark.integration

PARAMS = SandboxParams(cpu_s=10, memory_mb=512, file_mb=1, open_files=32, processes=64)
PRELUDE = """
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
static void report(const char *s) { write(3, s, strlen(s)); }
"""


def _build(tmp_path: Path, body: str) -> Path:
    work = public_tmp(tmp_path) / "job"
    work.mkdir(mode=0o755)
    os.chmod(work, 0o755)
    src = work / "prog.c"
    src.write_text(PRELUDE + body)
    exe = work / "prog"
    subprocess.run(["gcc", "-O1", str(src), "-o", str(exe)], check=True)
    os.chmod(exe, 0o755)
    return exe


def _run(tmp_path: Path, body: str, timeout: float = 5.0, args: list[str] | None = None):
    exe = _build(tmp_path, body)
    out = run_sandboxed(exe, args or [], cores=(sorted(os.sched_getaffinity(0))[0],), params=PARAMS,
                        timeout=timeout, workdir=exe.parent)
    time.sleep(0.05)
    assert processes_under(exe.parent) == [], "a process of the job survived it"
    shutil.rmtree(exe.parent.parent, ignore_errors=True)
    return out


def test_result_channel_and_clean_exit(tmp_path: Path) -> None:
    out = _run(tmp_path, 'int main(int c, char **v) { report("{\\"hello\\": 1}"); printf("noise\\n"); return 0; }')
    assert out.kind == "exited" and out.code == 0
    assert out.payload == b'{"hello": 1}'
    assert "noise" in out.output and b"noise" not in out.payload  # stdout never reaches the channel


def test_infinite_loop_is_killed_at_the_deadline(tmp_path: Path) -> None:
    t0 = time.monotonic()
    out = _run(tmp_path, "int main(void) { volatile long x = 0; for (;;) x++; }", timeout=1.0)
    assert out.kind == "timeout"
    assert time.monotonic() - t0 < 5


def test_fork_bomb_is_contained_and_leaves_nothing(tmp_path: Path) -> None:
    body = "int main(void) { for (int i = 0; i < 100000; i++) fork(); for (;;) pause(); }"
    out = _run(tmp_path, body, timeout=2.0)
    assert out.kind in ("timeout", "signaled", "exited")


def test_grandchild_in_its_own_session_does_not_survive(tmp_path: Path) -> None:
    body = """int main(void) {
      if (fork() == 0) { setsid(); signal(SIGTERM, SIG_IGN); signal(SIGHUP, SIG_IGN); for (;;) pause(); }
      report("{}"); return 0; }"""
    out = _run(tmp_path, body, timeout=2.0)
    assert out.kind in ("exited", "timeout")


def test_no_network(tmp_path: Path) -> None:
    if "netns" not in probe_isolation(PARAMS.namespaces, PARAMS.user).names:
        pytest.skip("network namespaces are not available on this host")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    body = """int main(int argc, char **argv) {
      int s = socket(AF_INET, SOCK_STREAM, 0);
      struct sockaddr_in a = {0}; a.sin_family = AF_INET; a.sin_port = htons(atoi(argv[1]));
      a.sin_addr.s_addr = inet_addr("127.0.0.1");
      report(connect(s, (struct sockaddr *)&a, sizeof a) == 0 ? "connected" : "refused"); return 0; }"""
    try:
        out = _run(tmp_path, body, args=[str(port)])
    finally:
        server.close()
    assert out.payload == b"refused"


def test_files_cannot_be_written_outside_or_grow(tmp_path: Path) -> None:
    # the job's own folder belongs to root: as an unprivileged user nothing can be created there or elsewhere
    # outside world-writable folders; anywhere, the file-size limit stops a file at bench.sandbox.file_mb
    target = Path.cwd() / "hpcrl-sandbox-escape"
    body = f"""int main(void) {{
      FILE *f = fopen("{target}", "w"); int outside = f != NULL; if (f) fclose(f);
      FILE *h = fopen("here.txt", "w"); int here = h != NULL; if (h) fclose(h);
      char buf[4096]; memset(buf, 'x', sizeof buf); FILE *g = fopen("/tmp/hpcrl-sandbox-big", "w"); long written = 0;
      if (g) {{ for (int i = 0; i < 1024; i++) written += fwrite(buf, 1, sizeof buf, g); fclose(g); }}
      char msg[64]; snprintf(msg, sizeof msg, "%d %d %ld", outside, here, written); report(msg); return 0; }}"""
    target.unlink(missing_ok=True)
    try:
        out = _run(tmp_path, body)
        if os.geteuid() == 0 and "uid:nobody" in probe_isolation(PARAMS.namespaces, PARAMS.user).names:
            assert out.payload.startswith(b"0 0 "), out
            assert not target.exists()
        big = Path("/tmp/hpcrl-sandbox-big")
        assert out.kind == "signaled" or not big.exists() or big.stat().st_size <= PARAMS.file_mb * 1024 * 1024
    finally:
        target.unlink(missing_ok=True)
        Path("/tmp/hpcrl-sandbox-big").unlink(missing_ok=True)


def test_memory_bomb_hits_the_address_space_limit(tmp_path: Path) -> None:
    body = """int main(void) { long got = 0; for (int i = 0; i < 4096; i++) { char *p = malloc(1 << 20);
      if (!p) break; memset(p, 1, 1 << 20); got++; } char m[32]; snprintf(m, sizeof m, "%ld", got); report(m);
      return 0; }"""
    out = _run(tmp_path, body)
    assert out.kind == "exited" and int(out.payload) < PARAMS.memory_mb


def test_isolation_is_reported() -> None:
    iso = probe_isolation(True, "nobody")
    if os.geteuid() == 0:
        assert {"netns", "pidns"} <= set(iso.names)
