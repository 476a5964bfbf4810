"""``hpcrl bench``: benchmark kernel files, the shipped ladder, or this node's references; print a table or JSON.

Composes the benchmark engine with the reward ladder (the engine itself knows nothing of rewards). Progress goes
to stderr as results arrive; results go to stdout.

Run: ``hpcrl bench --ladder --reference``.  Test: ``pytest tests/test_cli.py``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hpcrl_core.bench.engine import Engine
from hpcrl_core.bench.executor import LocalExecutor, bench_backend, local_executor
from hpcrl_core.bench.reference import BEST_KERNEL, ladder_kernels, submit_numpy
from hpcrl_core.bench.result import BenchResult
from hpcrl_core.config import Params, Settings
from hpcrl_core.errors import ConfigError
from hpcrl_core.files import write_text_atomic
from hpcrl_core.rewards.ladder import needs_reference, shape_reward


def _progress(label: str) -> Any:
    def report(done: int, total: int) -> None:
        print(f"\r{label}: {done}/{total} benchmarked", end="\n" if done == total else "", file=sys.stderr,
              flush=True)
    return report


def _row(name: str, r: BenchResult, reward: float | None, peak: float | None) -> dict[str, Any]:
    return {"name": name, "status": r.status.value, "reward": reward, "gflops": r.gflops, "cv": r.cv,
            "pct_peak": (100 * r.gflops / peak) if (r.gflops and peak) else None, "techniques": list(r.techniques),
            "isolation": list(r.isolation), "compile_s": round(r.compile_s, 4), "run_s": round(r.run_s, 4),
            "detail": r.detail, "n": r.n, "reps": r.reps, "foreign_load": r.foreign_load, "retries": r.retries,
            "cores": list(r.cores), "cached": r.cached, "disturbed": r.disturbed,
            "gflops_median": r.extra.get("gflops_median"), "host_slowdown": r.extra.get("host_slowdown"),
            "handshake_s": r.extra.get("handshake_s"), "slot_wait_s": r.extra.get("slot_wait_s"),
            "gflops_runs": r.extra.get("gflops_runs"), "same_object": r.extra.get("same_object")}


def _fmt(v: Any, spec: str) -> str:
    """Format a number, or a dash of the same width when there is none."""
    if v is None:
        width = "".join(ch for ch in spec.split(".")[0] if ch.isdigit())
        return "-".rjust(int(width) if width else 1)
    return format(v, spec)


def _table(title: str, rows: Sequence[dict[str, Any]]) -> str:
    head = f"{'name':<22} {'status':<17} {'GFLOPS':>8} {'CV':>6} {'%peak':>6} {'reward':>8}  techniques"
    lines = [f"\n{title}", head, "-" * len(head)]
    for r in rows:
        cv = None if r.get("cv") is None else 100 * r["cv"]
        lines.append(f"{r['name'][:22]:<22} {r['status']:<17} {_fmt(r.get('gflops'), '8.2f')} {_fmt(cv, '5.1f')}"
                     f"{'%' if cv is not None else ' '} {_fmt(r.get('pct_peak'), '6.1f')} "
                     f"{_fmt(r.get('reward'), '8.2f')}  {','.join(r.get('techniques') or []) or '-'}")
        if r["status"] not in ("ok", "reference") and r.get("detail"):
            lines.append(f"{'':<22} {r['detail'].splitlines()[0][:95]}")
        runs = r.get("gflops_runs") or []
        if r["status"] == "ok" and len(runs) > 1:
            lines.append(f"{'':<22} fresh runs: {', '.join(_fmt(g, '.2f') for g in runs)} GFLOPS "
                         "(the figure is the fastest undisturbed one)")
        if r.get("same_object"):
            lines.append(f"{'':<22} same machine code as a kernel timed before: its figure, not a new timing")
        if r.get("disturbed"):
            lines.append(f"{'':<22} disturbed: the host ran at 1/{r.get('host_slowdown') or 0:.2f} of its speed or "
                         f"others used the slot ({_fmt(r.get('foreign_load'), '.0%')}); measured again next time")
    return "\n".join(lines)


def run_bench_command(params: Params, settings: Settings, *, files: Sequence[Path], reference: bool, ladder: bool,
                      as_json: bool, report: Path | None = None) -> int:
    """Implements ``hpcrl bench``; returns the exit code (1 when a given kernel file did not pass)."""
    for f in files:
        if not f.is_file():
            raise ConfigError(f"{f}: no such kernel file")
    if settings.bench_backend != "local":
        return _run_on_backend(params, settings, files=files, reference=reference, ladder=ladder, as_json=as_json)
    out: list[str] = []
    rows_files: list[dict[str, Any]] = []
    with local_executor(params.bench, settings) as ex:
        engine = ex.engine
        slot = ex.slots[0]
        peak = engine.node.peak_gflops(len(slot))
        n = params.bench.n
        numpy_gflops: float | None = None
        ref_rows: list[dict[str, Any]] = []
        want_numpy = files and needs_reference(params.reward) and params.reward.reference == "numpy"
        if reference and importlib.util.find_spec("numpy") is None and not want_numpy:
            ref_rows.append({"name": "numpy (OpenBLAS)", "status": "not installed", "gflops": None, "cv": None,
                             "pct_peak": None, "reward": None, "techniques": [], "detail": "pip install numpy"})
        elif reference or want_numpy:
            print(f"measuring numpy's DGEMM at n={n} on {len(slot)} core(s), best of "
                  f"{params.bench.timing.fresh_runs} runs ...", file=sys.stderr)
            m = submit_numpy(ex, n).result()  # the figure rewards compare kernels with
            numpy_gflops = m.gflops
            ref_rows.append({"name": "numpy (OpenBLAS)", "status": "reference", "gflops": m.gflops, "cv": m.cv,
                             "pct_peak": 100 * m.gflops / peak if peak else None, "reward": None, "techniques": [],
                             "detail": json.dumps(m.info)})
        kernels = ladder_kernels()
        wanted = dict(kernels) if ladder else {}
        if reference:
            wanted.update({k: kernels[k] for k in ("naive", BEST_KERNEL)})
        ladder_results = dict(zip(wanted, ex.map(list(wanted.values()), progress=_progress("ladder")), strict=True))
        ref_value = _reference_value(params, numpy_gflops, ladder_results)
        if files:
            codes = [f.read_bytes() for f in files]
            results = ex.map(codes, progress=_progress("kernels"))
            if needs_reference(params.reward) and ref_value is None:
                ref_value = _reference_value(params, numpy_gflops, _measure_named(ex, params))
            for f, r in zip(files, results, strict=True):
                row = _row(str(f), r, shape_reward(r, params.reward, ref_value), peak)
                rows_files.append(row)
        hit_rate = ex.cache.hit_rate if ex.cache else None
    if ladder:
        rows = [_row(name, r, _reward_or_none(r, params, ref_value), peak) for name, r in ladder_results.items()]
        out.append(_emit("Kernel ladder", rows, as_json))
    if reference:
        for name in ("naive", BEST_KERNEL):
            ref_rows.insert(0 if name == "naive" else 1, _row(f"{name} kernel", ladder_results[name], None, peak))
        ref_rows.append({"name": "peak (estimate)", "status": "reference", "gflops": peak, "cv": None,
                         "pct_peak": 100.0 if peak else None, "reward": None, "techniques": [],
                         "detail": f"{engine.node.model}; {engine.node.flops_per_cycle} flop/cycle/core x "
                                   f"{engine.node.clock_ghz} GHz ({engine.node.clock_source}) x {len(slot)} core(s)"})
        out.append(_emit(f"Node references (n={n}, {len(slot)}-core slot)", ref_rows, as_json))
        if report is not None:
            _write_report(report, engine, n, slot, ref_rows)
    if files:
        out.append(_emit("Kernels", rows_files, as_json))
    if not as_json:
        out.append(f"\nisolation: {', '.join(engine.isolation.names) or 'none'}; "
                   f"slots: {ex.slots}; cache hit rate: {_fmt(hit_rate, '.0%')}")
    for name, meaning in engine.isolation.missing.items():  # stderr: JSON on stdout stays parseable
        print(f"warning: the host refuses {name}: {meaning}", file=sys.stderr)
    print("\n".join(o for o in out if o))
    return 1 if any(r["status"] != "ok" for r in rows_files) else 0


def _run_on_backend(params: Params, settings: Settings, *, files: Sequence[Path], reference: bool, ladder: bool,
                    as_json: bool) -> int:
    """``hpcrl bench`` on a remote backend (``--backend agents``): kernel files and the ladder, timed by whichever
    agent takes each; rewards use the reference of the node that timed the kernel, peaks that node's estimate."""
    if reference:
        raise ConfigError("--reference measures this machine; with --backend agents each agent measures its own "
                          "node: `hpcrl status` lists every agent's reference and peak")
    kind = params.reward.reference if needs_reference(params.reward) else None
    with bench_backend(params.bench, settings, reference=kind) as ex:
        named = list(ladder_kernels().items()) if ladder else []
        named += [(str(f), f.read_bytes().decode("utf-8", "replace")) for f in files]
        results = ex.map([code for _, code in named], progress=_progress("kernels"))
    rows = []
    for (name, _), r in zip(named, results, strict=True):
        ref = r.node_reference
        row = _row(name, r, _reward_or_none(r, params, ref), r.extra.get("node_peak_gflops"))
        rows.append({**row, "agent": r.extra.get("agent"), "node": r.extra.get("node")})
    print(_emit(f"Kernels on agents (n={params.bench.n})", rows, as_json))
    if not as_json:
        agents = sorted({str(r["agent"]) for r in rows if r.get("agent")})
        print(f"\ntimed by: {', '.join(agents) or 'no agent (no kernel reached one)'}")
    return 1 if any(r["status"] != "ok" for r in rows[len(named) - len(files):]) else 0


def _emit(title: str, rows: list[dict[str, Any]], as_json: bool) -> str:
    return "\n".join(json.dumps(r, sort_keys=True) for r in rows) if as_json else _table(title, rows)


def _measure_named(ex: LocalExecutor, params: Params) -> dict[str, BenchResult]:
    name = BEST_KERNEL if params.reward.reference == "best_kernel" else "naive"
    return {name: ex.map([ladder_kernels()[name]])[0]}


def _reference_value(params: Params, numpy_gflops: float | None, measured: dict[str, BenchResult]) -> float | None:
    kind = params.reward.reference
    if kind == "numpy":
        return numpy_gflops
    r = measured.get(BEST_KERNEL if kind == "best_kernel" else "naive")
    return r.gflops if r is not None and r.ok else None


def _reward_or_none(r: BenchResult, params: Params, ref: float | None) -> float | None:
    if needs_reference(params.reward) and r.ok and ref is None:
        return None
    return shape_reward(r, params.reward, ref)


def _write_report(path: Path, engine: Engine, n: int, slot: Sequence[int], rows: list[dict[str, Any]]) -> None:
    """The reference figures as flat JSON metrics (a DVC metrics file), written atomically."""
    by_name = {r["name"]: r for r in rows}

    def g(name: str) -> float | None:
        row = by_name.get(name)
        return round(row["gflops"], 3) if row and row.get("gflops") else None

    data = {"n": n, "cores_per_slot": len(slot), "node": engine.node.model,
            "naive_gflops": g("naive kernel"), "best_kernel_gflops": g(f"{BEST_KERNEL} kernel"),
            "numpy_gflops": g("numpy (OpenBLAS)"), "peak_gflops_estimate": g("peak (estimate)"),
            "measured_at": datetime.now(UTC).isoformat(timespec="seconds")}
    write_text_atomic(path, json.dumps(data, indent=2) + "\n")
