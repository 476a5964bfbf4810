"""Tests of the sandbox layers themselves, below the screens and below the seccomp filter.

- Kernels that call fork, socket, fopen, execve ... by name, compiled and linked with the runner directly (never
  screened): the filter refuses each call and the result names it.
- Programs the monitor starts in place of the runner (so no filter at all): what they find out about their world
  shows that the namespaces, the read-only file system, the private scratch and the unprivileged user hold on
  their own.

Run: pytest tests/bench/test_sandbox.py
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from hpcrl_core.bench.engine import Engine
from hpcrl_core.bench.result import BenchResult, Status
from hpcrl_core.bench.sandbox import probe_isolation, run_monitored
from hpcrl_core.config import SandboxParams, Settings
from tests.helpers import processes_under, public_tmp

pytestmark = pytest.mark.integration

PARAMS = SandboxParams(cpu_s=10, memory_mb=512, file_mb=1, open_files=32, processes=64)
FULL = {"pidns", "netns", "readonly-fs", "private-tmpfs", "private-proc", "unprivileged-user", "no-new-privs",
        "seccomp"}
ARGS = {"n": "32", "sizes": "32,33,13"}


def _unscreened(engine: Engine, tmp_path: Path, code: str, cores: tuple[int, ...]) -> BenchResult:
    """Compile and link ``code`` with the runner, skipping both screens, and run it like the engine does."""
    work = public_tmp(tmp_path) / "job"
    work.mkdir(mode=0o755)
    src, obj, exe = work / "kernel.c", work / "kernel.o", work / "bench"
    src.write_text("#define _GNU_SOURCE\n" + code)
    subprocess.run(["gcc", "-O1", "-fopenmp", "-c", str(src), "-o", str(obj)], check=True)
    subprocess.run(["gcc", "-fopenmp", str(engine.runner), str(obj), "-o", str(exe), "-lm"], check=True)
    os.chmod(exe, 0o755)
    try:
        with engine.locks.hold(cores):
            return engine._time(work, exe, 32, cores, {"n": 32, "cores": cores})
    finally:
        time.sleep(0.05)
        assert processes_under(work) == [], "a process of the job survived it"
        shutil.rmtree(work.parent, ignore_errors=True)


SIG = "void dgemm(int n, const double *A, const double *B, double *C)"
CALLS = {
    "fork": ("#include <unistd.h>\n" + SIG + "{ for (;;) fork(); }", "clone"),  # glibc's fork is a clone
    "socket": ("#include <sys/socket.h>\n" + SIG + "{ socket(AF_INET, SOCK_STREAM, 0); }", "socket"),
    "fopen": ("#include <stdio.h>\n" + SIG +
              '{ FILE *f = fopen("/tmp/hpcrl-sandbox-escape", "w"); if (f) fputs("x", f); }', "open"),
    "execve": ("#include <unistd.h>\n" + SIG + '{ char *a[] = {"/bin/true", 0}; execv(a[0], a); }', "execve"),
    "kill": ("#include <signal.h>\n" + SIG + "{ kill(-1, SIGKILL); }", "kill"),
    "ptrace": ("#include <sys/ptrace.h>\n" + SIG + "{ ptrace(PTRACE_ATTACH, 1, 0, 0); }", "ptrace"),
    "exec_memory": ("#include <sys/mman.h>\n" + SIG +
                    "{ mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); }",
                    "mmap"),
    "setpriority": ("#include <sys/resource.h>\n" + SIG + "{ setpriority(PRIO_PROCESS, 0, -20); }", "setpriority"),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_the_filter_refuses_and_names_the_call(engine: Engine, cores: tuple[int, ...], tmp_path: Path,
                                               name: str) -> None:
    code, call = CALLS[name]
    result = _unscreened(engine, tmp_path, code, cores)
    assert result.status is Status.FORMAT_VIOLATION, (name, result.status, result.detail)
    assert call in result.detail, result.detail
    assert not Path("/tmp/hpcrl-sandbox-escape").exists()


def test_infinite_loop_is_killed_at_the_deadline(engine: Engine, cores: tuple[int, ...], tmp_path: Path) -> None:
    quick = engine.params.model_copy(update={"run_timeout_s": 1.0})
    fast = Engine(quick, engine_settings(engine))
    t0 = time.monotonic()
    result = _unscreened(fast, tmp_path, SIG + "{ volatile long x = 0; for (;;) x++; }", cores)
    assert result.status is Status.TIMEOUT and "killed" in result.detail, result.detail
    assert time.monotonic() - t0 < 8


def engine_settings(engine: Engine) -> Settings:
    return Settings(cache_dir=engine.cache_dir, scratch_dir=engine.scratch)


def test_memory_bomb_hits_the_address_space_limit(engine: Engine, cores: tuple[int, ...], tmp_path: Path) -> None:
    code = "#include <stdlib.h>\n#include <string.h>\n" + SIG + """{
      long got = 0; for (int i = 0; i < 100000; i++) { char *p = malloc(1 << 20); if (!p) break; memset(p, 1, 1 << 20);
      got++; } C[0] = (double)got; }"""
    result = _unscreened(engine, tmp_path, code, cores)
    assert result.status is Status.WRONG_RESULT, result.detail
    got = float(result.detail.split("C[0][0] = ")[1].split()[0])
    assert got < engine.params.sandbox.memory_mb  # the limit stopped it, not the host's memory


# ---- the layers without the filter: a program in place of the runner reports what it can do ----

PROBE_PROGRAM = r"""
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
static int can_create(const char *path) {
  FILE *f = fopen(path, "w"); if (!f) return 0; fclose(f); unlink(path); return 1; }
int main(int argc, char **argv) {
  signal(SIGXFSZ, SIG_IGN);
  int procs = 0; DIR *d = opendir("/proc"); struct dirent *e;
  while (d && (e = readdir(d))) if (e->d_name[0] >= '1' && e->d_name[0] <= '9') procs++;
  int s = socket(AF_INET, SOCK_STREAM, 0); struct sockaddr_in a = {0}; a.sin_family = AF_INET;
  a.sin_port = htons(PORT); a.sin_addr.s_addr = inet_addr("127.0.0.1");
  int net = connect(s, (struct sockaddr *)&a, sizeof a) == 0;
  char big[4096]; memset(big, 'x', sizeof big); long wrote = 0; FILE *g = fopen("big", "w");
  if (g) { for (int i = 0; i < 1024 && fwrite(big, 1, sizeof big, g) == sizeof big; i++) wrote += sizeof big;
           fclose(g); }
  if (fork() == 0) { setsid(); for (;;) pause(); }  /* a grandchild that tries to outlive the job */
  fprintf(stderr, "RESULT uid=%d procs=%d net=%d tmp=%d job=%d cwd=%d wrote=%ld\n", (int)getuid(), procs, net,
          can_create("/tmp/hpcrl-layer-escape"), can_create("JOB/escape"), can_create("here"), wrote);
  return 0;
}
"""


def _layers(tmp_path: Path, engine: Engine, port: int) -> dict[str, int]:
    work = public_tmp(tmp_path) / "job"
    work.mkdir(mode=0o755)
    src, exe = work / "probe.c", work / "probe"
    src.write_text(PROBE_PROGRAM.replace("PORT", str(port)).replace("JOB", str(work)))
    subprocess.run(["gcc", "-O1", str(src), "-o", str(exe)], check=True)
    os.chmod(exe, 0o755)
    try:
        out = run_monitored(engine.monitor, exe, ARGS, cores=(sorted(os.sched_getaffinity(0))[0],), params=PARAMS,
                            timeout=5.0, workdir=work)
        time.sleep(0.05)
        assert processes_under(work) == [], "a process of the job survived it"
        line = next(ln for ln in out.output.splitlines() if ln.startswith("RESULT"))
        return {k: int(v) for k, v in (kv.split("=") for kv in line.split()[1:])}
    finally:
        shutil.rmtree(work.parent, ignore_errors=True)


def test_layers_hold_without_the_filter(engine: Engine, tmp_path: Path) -> None:
    iso = engine.isolation
    if not FULL - {"seccomp"} <= set(iso.names):
        pytest.skip(f"this host refuses {sorted(FULL - set(iso.names))}")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        seen = _layers(tmp_path, engine, server.getsockname()[1])
    finally:
        server.close()
    assert seen["uid"] != 0 and seen["net"] == 0
    assert seen["procs"] == 1  # its own PID namespace and /proc: nothing else to see or signal
    assert seen["tmp"] == 0 and seen["job"] == 0  # the host's file system is read-only to it
    assert seen["cwd"] == 1 and seen["wrote"] <= PARAMS.file_mb * 1024 * 1024  # a small private scratch
    assert not Path("/tmp/hpcrl-layer-escape").exists()


def test_isolation_is_probed_and_reported(engine: Engine, cores: tuple[int, ...]) -> None:
    if os.geteuid() == 0:
        assert set(engine.isolation.names) >= FULL, engine.isolation
        assert engine.isolation.missing == {}
    result = engine.run(SIG + "{ for (int i = 0; i < n * n; i++) C[i] = 0; }", cores, n=32)
    assert set(result.isolation) >= set(engine.isolation.names) - {"affinity"}, result.isolation


def test_without_root_a_user_namespace_gives_the_same_layers(engine: Engine) -> None:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root to start the probe as an unprivileged user")
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)
        (Path(d) / "tmp").mkdir(mode=0o755)
        res = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(engine.monitor),
                              "probe", "ns=1", f"work={d}"], capture_output=True, text=True, check=False)
    if '"userns"' not in res.stdout:
        pytest.skip(f"unprivileged user namespaces are disabled here: {res.stdout.strip()}")
    for layer in ("pidns", "netns", "readonly-fs", "private-tmpfs", "seccomp"):
        assert f'"{layer}"' in res.stdout, res.stdout


def test_probe_names_what_is_missing(engine: Engine) -> None:
    off = probe_isolation(engine.monitor, False, "")  # namespaces off, no user to drop to
    assert "pidns" not in off.names and "pidns" in off.missing and "readonly-fs" in off.missing
