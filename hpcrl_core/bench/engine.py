"""The DGEMM benchmark engine: one completion in, one ``BenchResult`` out.

extract -> screen (+ techniques) -> compile -> link-level screen -> link with the runner -> the monitor runs it in
a sandboxed process of its own (full verification at n, an odd size and a small size; timed calls on fresh
inputs, each checked; the clock and the checks stay in the monitor) -> statistics. A job holds its slot's cores
machine-wide (``slots.py``). A disturbed timing (foreign CPU load above the threshold) is repeated and the least
disturbed run kept; one still disturbed after the retries is marked ``disturbed`` (the executor measures it again
when it comes back). ``Engine.prepare`` keeps a kernel's linked program for several fresh runs (the executor's
``timing.fresh_runs``), so they pay for one build. The engine knows nothing of rewards or RL;
``hpcrl_core.rewards`` turns a result into a reward.

Run: ``hpcrl bench FILE``.  Test: ``pytest tests/bench/test_engine.py tests/bench/test_adversarial.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import signal
import statistics
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from hpcrl_core.bench.compile import (
    Toolchain,
    compile_kernel,
    harness_version,
    link,
    monitor_binary,
    runner_object,
    screen_object,
    toolchain,
)
from hpcrl_core.bench.extract import extract_code, normalise_code
from hpcrl_core.bench.node import NodeInfo, node_info
from hpcrl_core.bench.result import BenchResult, Status, failure
from hpcrl_core.bench.sandbox import Isolation, RunOutcome, probe_isolation, run_monitored
from hpcrl_core.bench.screen import ensure_stub_headers, screen_source
from hpcrl_core.bench.slots import core_locks
from hpcrl_core.bench.speed import HostSpeed
from hpcrl_core.bench.syscalls import syscall_name
from hpcrl_core.config import BenchParams, Settings, TimingParams
from hpcrl_core.errors import BenchInfraError

ENGINE_VERSION = "3"  # bump when engine.py changes results for the same code (harness/screens are hashed)
_PLAUSIBLE_PEAK_FACTOR = 3.0  # the monitor's figures above this multiple of the estimated peak mean a broken clock
_log = logging.getLogger(__name__)
_GATE_FACTOR = 3.0  # timing waits for full-speed calls up to this multiple of min_time_s (make bench: the cost)
_MIN_LOAD_WALL_S = 0.2  # foreign load is judged over runs at least this long (the probe covers shorter ones)
_EXIT_REFUSED = 121  # runner.c: the SIGSYS handler's exit code (HPCRL_EXIT_REFUSED in protocol.h)


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


def quantile(xs: Sequence[float], q: float) -> float:
    """The q-quantile of ``xs`` with linear interpolation between order statistics (q = 0.5: the median)."""
    ys = sorted(xs)
    pos = q * (len(ys) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ys) - 1)
    return ys[lo] + (ys[hi] - ys[lo]) * (pos - lo)


def full_speed_time(times: Sequence[float], clean: Sequence[bool], timing: TimingParams) -> tuple[float, bool]:
    """The call time a run's figure comes from, and whether the host disturbed the run.

    The figure is the ``timing.quantile`` of the calls made at full host speed (``clean``) when there are
    ``min_reps`` of them, else of all calls. The run is disturbed when there are fewer, or when they are fewer than
    ``timing.min_clean_share`` of its calls: the host's slow phases outlast a call, and a few calls judged clean
    inside one came out up to 20% slow (docs/bench.md, "Timing").
    """
    kept = [t for t, ok in zip(times, clean, strict=True) if ok]
    enough = len(kept) >= min(timing.min_reps, len(times))
    busy = not enough or len(kept) < timing.min_clean_share * len(times)
    return quantile(kept if enough else times, timing.quantile), busy


def _badness(r: BenchResult, max_load: float) -> tuple[int, float, float]:
    """Order of preference among repeated runs: undisturbed first, then least foreign load, least host slowdown."""
    return (int(r.disturbed), max(0.0, (r.foreign_load or 0.0) - max_load), float(r.extra.get("host_slowdown", 9)))


def _check_reachable(folder: Path, isolation: Isolation, user: str) -> None:
    """When runs drop to another user, every folder above scratch must let others through (o+x).

    Raises:
        BenchInfraError: naming the folder that blocks, and how to fix it.
    """
    if not isolation.user_dropped:
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
        self.stub = ensure_stub_headers(self.cache_dir)
        self.runner = runner_object(self.cache_dir, self.tc, self.node.fingerprint)
        self.monitor = monitor_binary(self.cache_dir, self.tc, self.node.fingerprint)
        self.isolation = probe_isolation(self.monitor, params.sandbox.namespaces, params.sandbox.user)
        _check_reachable(self.scratch, self.isolation, params.sandbox.user)
        for name, meaning in self.isolation.missing.items():
            _log.warning("benchmark sandbox: this host refuses %s: %s", name, meaning)
        self.locks = core_locks(settings.lock_dir)
        self._speeds: dict[int, HostSpeed] = {}
        self._speed_lock = threading.Lock()
        self._context = json.dumps({
            "engine": ENGINE_VERSION, "harness": harness_version(), "screen": screen_version(),
            "compiler": self.tc.version,
            "cflags": list(params.cflags), "node": self.node.fingerprint,
            "verify": params.verify.model_dump(), "timing": params.timing.model_dump(),
            "sandbox": params.sandbox.model_dump(),
        }, sort_keys=True)

    def speed(self, n: int) -> HostSpeed:
        """The host-speed reference at size n: the probe after the monitor's own work at size n runs ~20% slower
        at n = 512 than at n = 128 here, so each size has its own (the first runs at a size judge themselves)."""
        with self._speed_lock:
            if n not in self._speeds:
                self._speeds[n] = HostSpeed(self.cache_dir / f"host-speed-{self.node.fingerprint[:16]}-n{n}.json")
            return self._speeds[n]

    def key(self, code: str, n: int, cores_per_slot: int) -> str:
        """Cache key of (normalised code, n, slot size, flags, compiler, harness, node, engine params)."""
        h = hashlib.sha256()
        for part in (normalise_code(code), str(n), str(cores_per_slot), self._context):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\0")
        return h.hexdigest()

    def object_key(self, obj: bytes, n: int, cores_per_slot: int) -> str:
        """Cache key of (the compiled kernel object's bytes, n, slot size, engine params): kernels whose source
        differs but whose machine code does not (an unused ``#include``, a renamed local, a reordered declaration)
        share it, so they share one figure instead of two timings that differ by the host's noise. ``key`` with the
        object's digest in place of the code, so the two keys are built alike."""
        return self.key("object:" + hashlib.sha256(obj).hexdigest(), n, cores_per_slot)

    def run(self, completion: str | bytes, cores: Sequence[int], n: int | None = None) -> BenchResult:
        """Benchmark one completion on the given cores, held machine-wide for the whole job.

        Raises:
            BenchInfraError: the machinery failed; never for a fault of the kernel.
        """
        with self.prepare(completion, n) as kernel:
            return kernel.run(cores)

    def prepare(self, completion: str | bytes, n: int | None = None) -> Kernel:
        """One kernel for one or more fresh timed runs: its first ``run`` screens, compiles and links it, every
        ``run`` times the linked program in a fresh sandboxed process. Close it (or use ``with``) to remove its
        folder."""
        return Kernel(self, completion, n or self.params.n)

    def _build(self, work: Path, code: str, cores: tuple[int, ...], base: dict) -> Path | BenchResult:
        """Screen, compile and link ``code`` in ``work``: the linked program, or the failure that stopped it."""
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
        linked = link(obj, self.runner, exe, self.tc, p.compile_timeout_s, cores)
        seconds += linked.seconds
        if linked.kind != "ok":
            return failure(Status(linked.kind), linked.detail, compile_s=seconds, **base)
        os.chmod(exe, 0o755)
        base["compile_s"] = seconds
        base["object_key"] = self.object_key(obj.read_bytes(), int(base["n"]), len(cores))
        return exe

    def _time(self, work: Path, exe: Path, n: int, cores: tuple[int, ...], base: dict) -> BenchResult:
        p = self.params
        t, v = p.timing, p.verify
        sizes = ",".join(map(str, check_sizes(n, v.small_n)))
        best: BenchResult | None = None
        run_s = 0.0
        runs = 0
        args = {"n": str(n), "sizes": sizes, "warmup": str(t.warmup_calls), "min_reps": str(t.min_reps),
                "max_reps": str(t.max_reps), "min_time": repr(t.min_time_s), "max_time": repr(t.max_time_s),
                "tol": repr(v.tolerance), "fv": str(v.freivalds_vectors), "min_clean": str(t.min_reps),
                # waiting for a busy host to calm down costs at most this much kernel time (then: disturbed)
                "gate_time": repr(min(t.max_time_s, _GATE_FACTOR * t.min_time_s))}
        while runs <= t.disturbed_retries:
            runs += 1
            limit = self.speed(n).limit(t.probe_tolerance)
            args["probe_limit"] = repr(limit or 0.0)
            out = run_monitored(self.monitor, exe, args, cores=cores, params=p.sandbox, timeout=p.run_timeout_s,
                                workdir=work)
            run_s += out.wall_s
            result = self._classify(out, n, cores, {**base, "run_s": run_s})
            if not result.ok:
                return result
            if best is None or _badness(result, t.max_foreign_load) < _badness(best, t.max_foreign_load):
                best = result
            # a run is repeated for foreign load only: the monitor already waited for a busy host up to max_time_s
            if not result.disturbed or (result.foreign_load or 0.0) <= t.max_foreign_load:
                break
        assert best is not None
        return dataclasses.replace(best, run_s=run_s, retries=runs - 1)

    def _classify(self, out: RunOutcome, n: int, cores: tuple[int, ...], base: dict) -> BenchResult:
        extra = {"foreign_load": out.foreign_load}
        tail = out.output.strip()[:500]
        if out.kind == "timeout":
            return failure(Status.TIMEOUT, f"still running after {self.params.run_timeout_s:g} s (killed)",
                           **base, **extra)
        try:
            report = json.loads(out.payload.decode("utf-8"))
            status = str(report["status"])
        except (ValueError, KeyError, TypeError) as err:
            raise BenchInfraError(f"the benchmark monitor ended ({out.kind} {out.code}) without a report: "
                                  f"{tail}") from err
        if isinstance(report.get("isolation"), list):
            base = {**base, "isolation": tuple(str(x) for x in report["isolation"])}
        if status == "ok":
            return self._stats(report, out, n, cores, base, extra)
        if status == "driver_error":
            raise BenchInfraError(f"benchmark monitor: {report.get('detail')} {tail}".strip())
        status_, detail = self._kernel_failure(report, tail)
        return failure(status_, detail, **base, **extra)

    def _kernel_failure(self, report: dict, tail: str) -> tuple[Status, str]:
        """The status and reason of a failure the monitor reported (the kernel's fault, never the machinery's)."""
        status, detail = report["status"], str(report.get("detail", ""))
        if status == "wrong":
            return Status.WRONG_RESULT, detail
        if status == "timeout":
            return Status.TIMEOUT, f"{detail} (killed)"
        if status == "refused":
            name = syscall_name(int(report.get("syscall", -1)))
            return Status.FORMAT_VIOLATION, (f"the kernel made the system call '{name}', which the sandbox refuses "
                                             "(a kernel may only compute: memory, OpenMP threads)")
        if status == "violation":
            return Status.FORMAT_VIOLATION, f"tampering with the benchmark handshake: {detail}"
        if status == "crashed":
            sig = int(report.get("signal", 0))
            if sig == signal.SIGXCPU:
                return Status.TIMEOUT, f"CPU time limit of {self.params.sandbox.cpu_s} s exceeded"
            if sig == signal.SIGSYS:
                return Status.FORMAT_VIOLATION, "the kernel made a system call the sandbox refuses (killed by SIGSYS)"
            name = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
            return Status.RUNTIME_ERROR, f"killed by {name}: {tail}".rstrip(": ")
        if status == "exited":
            code = int(report.get("code", -1))
            if code == _EXIT_REFUSED:
                return Status.FORMAT_VIOLATION, "the kernel made a system call the sandbox refuses"
            return Status.RUNTIME_ERROR, (f"the kernel's process exited with code {code} during a call (exit() in "
                                          f"the kernel?) {tail}").strip()
        raise BenchInfraError(f"the benchmark monitor reported an unknown status {status!r}: {detail}")

    def _stats(self, report: dict, out: RunOutcome, n: int, cores: tuple[int, ...], base: dict,
               extra: dict) -> BenchResult:
        raw = [float(x) for x in report.get("times", [])]
        if len(raw) < 3 or min(raw) <= 0:
            raise BenchInfraError(f"the benchmark monitor reported an implausible timing: {raw[:5]}")
        # The handshake's cost was measured before any kernel code ran, so the kernel cannot inflate it; never
        # more than half a call is taken off.
        hs = float(report.get("handshake_s") or 0.0)
        times = [max(t - hs, 0.5 * t) for t in raw]
        timing = self.params.timing
        speed = self.speed(n).judge([float(x) for x in report.get("probes", [])], timing.probe_tolerance)
        fast, host_busy = full_speed_time(times, speed.clean, timing)
        median = statistics.median(times)
        gflops = 2.0 * n**3 / fast / 1e9
        peak = self.node.peak_gflops(len(cores))
        if sum(raw) > out.wall_s * len(cores) + 0.01 or (peak and gflops > _PLAUSIBLE_PEAK_FACTOR * peak):
            raise BenchInfraError(f"impossible timing from the monitor: {gflops:.1f} GFLOPS in {out.wall_s:.2f} s "
                                  f"of wall time (estimated peak {peak or 0:.0f})")
        cv = statistics.pstdev(times) / statistics.fmean(times)
        # /proc/stat counts in 10 ms ticks: over a shorter run one foreign tick reads as a large share
        loaded = out.wall_s >= _MIN_LOAD_WALL_S and (out.foreign_load or 0.0) > timing.max_foreign_load
        disturbed = host_busy or loaded
        return BenchResult(status=Status.OK, gflops=gflops, cv=cv, median_s=median, reps=len(times),
                           disturbed=disturbed,
                           extra={"max_err": report.get("max_err"), "checked_sizes": report.get("sizes"),
                                  "gflops_median": 2.0 * n**3 / median / 1e9, "quantile": timing.quantile,
                                  "handshake_s": hs, "kernel_cpu_s": report.get("cpu_s"),
                                  "host_slowdown": round(speed.slowdown, 3), "clean_calls": sum(speed.clean)},
                           **base, **extra)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Kernel:
    """One kernel prepared for fresh runs (``Engine.prepare``). The first ``run`` builds it in a folder of its own;
    later runs time the same linked program again in a new sandboxed process, so a kernel's fresh runs pay for one
    compile. The program's hash is checked before each later run (a run cannot leave a changed program for the
    next) and the scratch the kernel's process sees is emptied between runs. One run at a time (runs may come from
    different threads, one after the other)."""

    def __init__(self, engine: Engine, completion: str | bytes, n: int) -> None:
        self.engine, self.n = engine, n
        self._completion: str | bytes | None = completion
        self._work: Path | None = None
        self._exe: Path | None = None
        self._digest = ""
        self._failed: BenchResult | None = None
        self._base: dict = {}
        self._closed = False
        self.runs = 0

    def run(self, cores: Sequence[int]) -> BenchResult:
        """One fresh timed run on ``cores``, held machine-wide for the whole of it (the build too, on the first).

        Raises:
            BenchInfraError: the machinery failed; never for a fault of the kernel.
        """
        eng, cores = self.engine, tuple(cores)
        with eng.locks.hold(cores) as waited:
            result = self._run(cores)
        self.runs += 1
        return dataclasses.replace(result, extra={**result.extra, "slot_wait_s": round(waited, 4)})

    def build(self, cores: Sequence[int]) -> BenchResult | None:
        """Screen, compile and link the kernel on ``cores`` (held machine-wide), once: the failure that stopped it,
        or None once it is linked (``object_key`` is then known). ``run`` builds on its own when this was not
        called."""
        with self.engine.locks.hold(tuple(cores)):
            return self._build(tuple(cores))

    @property
    def object_key(self) -> str:
        """``Engine.object_key`` of the built kernel; "" before a successful build."""
        return str(self._base.get("object_key", "")) if self._exe is not None else ""

    @property
    def base(self) -> dict:
        """What the build learned of the kernel (cache key, techniques, compile seconds, object key)."""
        return dict(self._base)

    def _build(self, cores: tuple[int, ...]) -> BenchResult | None:
        eng = self.engine
        if self._failed is not None:
            return self._failed
        if self._closed:
            raise RuntimeError("Kernel used after close")
        if self._completion is None:
            return None
        completion, self._completion = self._completion, None
        base = {"n": self.n, "cores": cores, "isolation": eng.isolation.names}
        ex = extract_code(completion, eng.params.max_code_bytes)
        if ex.code is None:
            self._failed = failure(Status.FORMAT_VIOLATION, ex.error or "no code", **base)
            return self._failed
        base["key"] = eng.key(ex.code, self.n, len(cores))
        self._work = Path(tempfile.mkdtemp(prefix="job-", dir=eng.scratch))
        os.chmod(self._work, 0o755)
        built = eng._build(self._work, ex.code, cores, base)
        if isinstance(built, BenchResult):
            self._failed = built
            shutil.rmtree(self._work, ignore_errors=True)
            self._work = None
            return built
        self._exe, self._digest, self._base = built, _digest(built), base
        return None

    def _run(self, cores: tuple[int, ...]) -> BenchResult:
        failed = self._build(cores)
        if failed is not None:
            return failed
        eng = self.engine
        assert self._work is not None and self._exe is not None
        if self.runs:
            shutil.rmtree(self._work / "tmp", ignore_errors=True)
            if _digest(self._exe) != self._digest:
                self._failed = failure(Status.FORMAT_VIOLATION, "the kernel's linked program changed between its "
                                       "fresh runs", **self._base)
                return self._failed
        return eng._time(self._work, self._exe, self.n, cores, {**self._base, "cores": cores})

    def close(self) -> None:
        """Remove the kernel's folder (idempotent). A kernel that failed keeps answering with its failure; any
        other raises on a later ``run``."""
        if self._work is not None:
            shutil.rmtree(self._work, ignore_errors=True)
            self._work = None
        self._completion = None
        self._closed = True

    def __enter__(self) -> Kernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
