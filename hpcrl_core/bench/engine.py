"""The DGEMM benchmark engine: one completion in, one ``BenchResult`` out.

extract -> screen (+ techniques) -> compile -> link-level screen -> link -> sandboxed run of the project's driver
(full verification at n, an odd size and a small size; timed calls on fresh inputs, each checked) -> statistics.
A disturbed timing (foreign CPU load above the threshold) is repeated and the least disturbed run kept. The
engine knows nothing of rewards or RL; ``hpcrl_core.rewards`` turns a result into a reward.

Run: ``hpcrl bench FILE``.  Test: ``pytest tests/bench/test_engine.py tests/bench/test_adversarial.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import signal
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path

from hpcrl_core.bench.compile import (
    Toolchain,
    compile_kernel,
    driver_object,
    driver_version,
    link,
    screen_object,
    toolchain,
)
from hpcrl_core.bench.extract import extract_code, normalise_code
from hpcrl_core.bench.node import NodeInfo, node_info
from hpcrl_core.bench.result import BenchResult, Status, failure
from hpcrl_core.bench.sandbox import Isolation, RunOutcome, probe_isolation, run_sandboxed
from hpcrl_core.bench.screen import ensure_stub_headers, screen_source
from hpcrl_core.config import BenchParams, Settings
from hpcrl_core.errors import BenchInfraError

ENGINE_VERSION = "2"  # bump when engine.py changes results for the same code (driver/screens are hashed)
_PLAUSIBLE_PEAK_FACTOR = 3.0  # results above this multiple of the estimated peak are impossible: tampering


def screen_version() -> str:
    """Hash of the code that decides statuses and techniques before a run (screens, detector, compile rules).

    Part of every cache key, so that a change to a screen or to technique detection is never answered from
    results cached under the old rules.
    """
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted([here / "screen.py", here / "compile.py", here / "ctokens.py", here / "extract.py",
                        *(here / "techniques").glob("*.py")]):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def check_sizes(n: int, small_n: int) -> list[int]:
    """Sizes of the full check: n, an odd size near n, and a small odd size (dupes removed, order kept)."""
    odd = n + 1 if n % 2 == 0 else n + 2
    return list(dict.fromkeys([n, odd, small_n]))


def _check_reachable(folder: Path, isolation: Isolation) -> None:
    """When runs drop to another user, every folder above scratch must let others through (o+x).

    Raises:
        BenchInfraError: naming the folder that blocks, and how to fix it.
    """
    user = next((n.split(":", 1)[1] for n in isolation.names if n.startswith("uid:")), None)
    if user is None:
        return
    for d in [folder, *folder.resolve().parents]:
        if not d.stat().st_mode & 0o001:
            raise BenchInfraError(f"scratch folder {folder} is not reachable by the sandbox user {user!r}: {d} is "
                                  f"mode {d.stat().st_mode & 0o777:o}; set HPCRL_SCRATCH_DIR to a folder under "
                                  "/tmp, or bench.sandbox.user to ''")


class Engine:
    """Benchmarks kernels on this node with fixed parameters. Thread-safe: each call has its own scratch folder."""

    def __init__(self, params: BenchParams, settings: Settings | None = None) -> None:
        settings = settings or Settings()
        self.params = params
        self.tc: Toolchain = toolchain(params.compiler)
        self.node: NodeInfo = node_info()
        # absolute: helper programs run inside per-job folders, where a relative path would point elsewhere
        self.cache_dir = Path(settings.cache_dir).resolve()
        self.scratch = Path(settings.scratch_dir).resolve()
        try:
            self.scratch.mkdir(parents=True, exist_ok=True)
            os.chmod(self.scratch, 0o755)  # the sandboxed user must reach its binary
        except OSError as err:
            raise BenchInfraError(f"scratch folder {self.scratch} is not usable: {err}; "
                                  "set HPCRL_SCRATCH_DIR") from err
        self.isolation = probe_isolation(params.sandbox.namespaces, params.sandbox.user)
        _check_reachable(self.scratch, self.isolation)
        self.stub = ensure_stub_headers(self.cache_dir)
        self.driver = driver_object(self.cache_dir, self.tc, self.node.fingerprint)
        self._context = json.dumps({
            "engine": ENGINE_VERSION, "driver": driver_version(), "screen": screen_version(),
            "compiler": self.tc.version,
            "cflags": list(params.cflags), "node": self.node.fingerprint,
            "verify": params.verify.model_dump(), "timing": params.timing.model_dump(),
            "sandbox": params.sandbox.model_dump(),
        }, sort_keys=True)

    def key(self, code: str, n: int, cores_per_slot: int) -> str:
        """Cache key of (normalised code, n, slot size, flags, compiler, driver, node, engine params)."""
        h = hashlib.sha256()
        for part in (normalise_code(code), str(n), str(cores_per_slot), self._context):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\0")
        return h.hexdigest()

    def run(self, completion: str | bytes, cores: Sequence[int], n: int | None = None) -> BenchResult:
        """Benchmark one completion on the given cores (the caller guarantees they are exclusively ours).

        Raises:
            BenchInfraError: the machinery failed; never for a fault of the kernel.
        """
        n = n or self.params.n
        cores = tuple(cores)
        base = {"n": n, "cores": cores, "isolation": self.isolation.names + ("rlimits", "pgroup", "affinity")}
        ex = extract_code(completion, self.params.max_code_bytes)
        if ex.code is None:
            return failure(Status.FORMAT_VIOLATION, ex.error or "no code", **base)
        base["key"] = self.key(ex.code, n, len(cores))
        work = Path(tempfile.mkdtemp(prefix="job-", dir=self.scratch))
        try:
            os.chmod(work, 0o755)
            return self._run_in(work, ex.code, n, cores, base)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _run_in(self, work: Path, code: str, n: int, cores: tuple[int, ...], base: dict) -> BenchResult:
        p = self.params
        screened = screen_source(code, work, self.stub, p.cflags, self.tc.compiler, p.compile_timeout_s, cores)
        base["techniques"] = tuple(sorted(t.value for t in screened.techniques))
        if not screened.ok:
            return failure(Status.FORMAT_VIOLATION, screened.reason or "", **base)
        src, obj, exe = work / "kernel.c", work / "kernel.o", work / "bench"
        src.write_text(code)
        compiled = compile_kernel(src, obj, self.tc, p.cflags, p.compile_timeout_s, cores)
        seconds = compiled.seconds
        if compiled.kind != "ok":
            return failure(Status(compiled.kind), compiled.detail, compile_s=seconds, **base)
        reason = screen_object(obj, cores)
        if reason:
            return failure(Status.FORMAT_VIOLATION, reason, compile_s=seconds, **base)
        linked = link(obj, self.driver, exe, self.tc, p.compile_timeout_s, cores)
        seconds += linked.seconds
        if linked.kind != "ok":
            return failure(Status(linked.kind), linked.detail, compile_s=seconds, **base)
        os.chmod(exe, 0o755)
        return self._time(work, exe, n, cores, {**base, "compile_s": seconds})

    def _time(self, work: Path, exe: Path, n: int, cores: tuple[int, ...], base: dict) -> BenchResult:
        p = self.params
        t, v = p.timing, p.verify
        sizes = ",".join(map(str, check_sizes(n, v.small_n)))
        best: BenchResult | None = None
        run_s = 0.0
        runs = 0
        while runs <= t.disturbed_retries:
            runs += 1
            seed = str(int.from_bytes(os.urandom(6), "little"))  # fresh inputs every run: nothing to tune to
            args = [str(n), sizes, str(t.warmup_calls), str(t.min_reps), str(t.max_reps), repr(t.min_time_s),
                    repr(t.max_time_s), repr(v.tolerance), str(v.freivalds_vectors), seed]
            out = run_sandboxed(exe, args, cores=cores, params=p.sandbox, timeout=p.run_timeout_s, workdir=work)
            run_s += out.wall_s
            result = self._classify(out, n, cores, {**base, "run_s": run_s})
            if not result.ok:
                return result
            if best is None or (result.foreign_load or 0.0) < (best.foreign_load or 0.0):
                best = result
            if (result.foreign_load or 0.0) <= t.max_foreign_load:
                break
        assert best is not None
        return dataclasses.replace(best, run_s=run_s, retries=runs - 1)

    def _classify(self, out: RunOutcome, n: int, cores: tuple[int, ...], base: dict) -> BenchResult:
        load = {"foreign_load": out.foreign_load}
        if out.kind == "timeout":
            return failure(Status.TIMEOUT, f"still running after {self.params.run_timeout_s:g} s (killed)",
                           **base, **load)
        if out.kind == "signaled":
            if out.code == signal.SIGXCPU:
                return failure(Status.TIMEOUT, f"CPU time limit of {self.params.sandbox.cpu_s} s exceeded",
                               **base, **load)
            name = signal.Signals(out.code).name if out.code in signal.valid_signals() else str(out.code)
            return failure(Status.RUNTIME_ERROR, f"killed by {name}: {out.output[:500]}".rstrip(": "), **base, **load)
        tail = out.output.strip()[:500]
        if out.code != 0:
            if tail.startswith(("unshare:", "prlimit:", "taskset:", "driver:")) and not out.payload:
                raise BenchInfraError(f"the sandbox failed to start the benchmark: {tail}")
            return failure(Status.RUNTIME_ERROR, f"exited with code {out.code}: {tail}".rstrip(": "), **base, **load)
        try:
            report = json.loads(out.payload.decode("utf-8"))
            status = report["status"]
        except (ValueError, KeyError, TypeError):
            return failure(Status.RUNTIME_ERROR, "the process ended without reporting a result (exit() in the "
                           f"kernel, or a damaged report) {tail}".strip(), **base, **load)
        if status == "wrong":
            return failure(Status.WRONG_RESULT, str(report.get("detail", "")), **base, **load)
        if status == "driver_error":
            raise BenchInfraError(f"benchmark driver: {report.get('detail')}")
        return self._stats(report, out, n, cores, base, load)

    def _stats(self, report: dict, out: RunOutcome, n: int, cores: tuple[int, ...], base: dict,
               load: dict) -> BenchResult:
        times = [float(x) for x in report.get("times", [])]
        if len(times) < 3 or min(times) <= 0:
            return failure(Status.RUNTIME_ERROR, f"implausible timing report: {times[:5]}", **base, **load)
        median = statistics.median(times)
        gflops = 2.0 * n**3 / median / 1e9
        peak = self.node.peak_gflops(len(cores))
        if sum(times) > out.wall_s * len(cores) + 0.01 or (peak and gflops > _PLAUSIBLE_PEAK_FACTOR * peak):
            return failure(Status.WRONG_RESULT, f"impossible timing: {gflops:.1f} GFLOPS in {out.wall_s:.2f} s of "
                           f"wall time (estimated peak {peak or 0:.0f}); the measurement was tampered with",
                           **base, **load)
        cv = statistics.pstdev(times) / statistics.fmean(times)
        return BenchResult(status=Status.OK, gflops=gflops, cv=cv, median_s=median, reps=len(times),
                           extra={"max_err": report.get("max_err"), "checked_sizes": report.get("sizes")},
                           **base, **load)
