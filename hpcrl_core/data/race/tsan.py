"""Cross-check data-race labels with ThreadSanitizer: each C item is compiled with clang's TSan against LLVM's
libomp, run, and ``metadata["tsan"]`` records what TSan saw: "race", "no_race" or "error", with
``metadata["tsan_error"]`` saying why for an error (``ERROR_KINDS``: no code block, compile error or timeout, run
timeout, a crash of the instrumented run, another failing exit status). A crashed run is never read as race-free.
DataRaceBench programs compile against the folder they came from (local headers, PolyBench's support file), as the
suite's own harness builds them. Nothing else in a record changes; the label stays the construction's, and
``tsan_agreement`` lists every disagreement for the data card instead of hiding it.

Why clang + libomp: gcc's TSan with libgomp reports false races, because libgomp is not instrumented and its
barriers are invisible to TSan. LLVM's libomp loads the Archer tool (libarcher.so), which tells TSan about OpenMP
synchronisation (barriers, taskwait, reductions, critical). Debian packages: ``clang`` and ``libomp-dev``.

Each program runs with ``OMP_NUM_THREADS=4`` (TSan needs real concurrency, even on 2 cores) up to ``runs`` times,
stopping at the first race report, because whether a task runs on another thread varies between runs.

Findings (clang 14.0.6, libomp 14, 4 threads on 2 cores, runs=3; 288 generated items: --per-pattern 6, seeds 0-2;
plus 72 more missing_taskwait items, seeds 0-5):

- No false positives: TSan flagged none of the race-free items of any pattern.
- missing_private, missing_reduction, loop_carried, missing_barrier, indirect_access, missing_atomic: every racy
  item reported; TSan agrees on all of them.
- simd_dependence: TSan reports none of the racy items (0 of 18). An ``omp simd`` loop runs on one thread; its race is
  between SIMD lanes, not threads, so TSan cannot see it. TSan cannot check this pattern; the label (DataRaceBench's
  convention: a loop-carried dependence under simd is a race) stands.
- missing_taskwait: TSan catches 24 of 36 racy items: 19 of 22 with two tasks but 5 of 14 with one task. libomp
  usually runs a lone task on the thread that created it, after that thread's premature read, so the conflicting
  accesses are on one thread and TSan, which sees happens-before between threads only, has nothing to report.
  Detection depends on scheduling, so the count changes from run to run; the label stands.

- The six patterns added later, over the default prepare stage's 1,456 C items (104 per pattern): sections, locks,
  task_depend and function_state agree on every item. nested_dependence: 10 racy items unreported, all
  ``collapse(2)`` loops whose dependence runs along the inner index: a static schedule of the collapsed space cuts
  it into whole rows at these sizes, so the conflicting accesses land on one thread in this run, although OpenMP
  does not promise that schedule (the label stands). offload: TSan reports every racy item, and every race-free one
  crashes inside the instrumented libomp's target-region code (``crash: ThreadSanitizer:DEADLYSIGNAL``), an error
  and not a verdict, as for DataRaceBench's ``omp target`` programs. Whole card: agreement 0.94 (1,322 of 1,404
  verdicts), 52 errors (all offload crashes); the other disagreements are simd_dependence (52, the blind spot above)
  and missing_taskwait (20).

Cost: 0.15-0.35 s per item with jobs=2 on 2 cores (96 items: 16-34 s, by machine load), mostly the TSan compile.

Run: ``python -m hpcrl_core.data.race.tsan --per-pattern 6 --seed 0`` (agreement per pattern and wall time).
Test: ``pytest tests/data/race/test_tsan.py`` (integration tests skip without clang and libomp).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from hpcrl_core.data.race.generator import generate_race_items
from hpcrl_core.data.schema import Record
from hpcrl_core.errors import BenchInfraError

CLANG = "clang"
FLAGS = ("-fsanitize=thread", "-fopenmp", "-g", "-O1")
RUN_ENV = {"TSAN_OPTIONS": "ignore_noninstrumented_modules=1 halt_on_error=0 exitcode=66", "OMP_NUM_THREADS": "4",
           "OMP_TOOL": "enabled"}  # the OMPT tool interface is how libomp loads Archer
RACE_MARK = "WARNING: ThreadSanitizer: data race"
# what a crashed instrumented run prints: TSan's deadly-signal and internal-error reports, the OpenMP runtime's abort
CRASH_MARKS = ("ThreadSanitizer:DEADLYSIGNAL", "ERROR: ThreadSanitizer:", "ThreadSanitizer: CHECK failed",
               "FATAL: ThreadSanitizer", "OMP: Error #", "Segmentation fault")
ERROR_KINDS = ("no_code", "compile_error", "compile_timeout", "run_timeout", "crash", "run_failed")
_POLYBENCH_INCLUDE = re.compile(r'#\s*include\s*"[^"]*polybench\.h"', re.I)
# DataRaceBench's test harness builds its PolyBench programs with utilities/polybench.c and these defines
POLYBENCH_DEFINES = ("-DPOLYBENCH_NO_FLUSH_CACHE", "-DPOLYBENCH_TIME", "-D_POSIX_C_SOURCE=200112L")
_FENCE = re.compile(r"```(c|cpp|c\+\+|cxx)?[ \t]*\n(.*?)```", re.S | re.I)
# Race-free only if TSan understands OpenMP barriers (Archer loaded); without Archer it reports a false race.
_PROBE = """#include <stdio.h>
int main(void) {
    int a[64], b[64];
#pragma omp parallel
    {
#pragma omp for
        for (int i = 0; i < 64; i++) a[i] = i;
#pragma omp for
        for (int i = 0; i < 64; i++) b[i] = a[63 - i];
    }
    printf("%d\\n", b[0]);
    return 0;
}
"""


@functools.lru_cache(maxsize=1)
def tsan_available() -> bool:
    """True when clang can build and run a TSan + OpenMP program here, and TSan knows OpenMP's barriers (cached)."""
    if shutil.which(CLANG) is None:
        return False
    with tempfile.TemporaryDirectory(prefix="hpcrl-tsan-") as tmp:
        return _verdict(_PROBE, ".c", Path(tmp), 60.0, 1)[0] == "no_race"


def extract_c_code(question: str) -> tuple[str, str] | None:
    """The first C/C++ code block of a question and its file suffix (".c" or ".cpp"); None when there is none."""
    m = _FENCE.search(question)
    if m is None:
        return None
    return m.group(2), ".c" if (m.group(1) or "c").lower() == "c" else ".cpp"


def check_with_tsan(records: Sequence[Record], jobs: int = 2, timeout_s: float = 20, runs: int = 3,
                    progress: Callable[[int, int], None] | None = None, every: int = 200) -> list[Record]:
    """The records, with ``metadata["tsan"]`` and ``metadata["tsan_error"]`` set on every ``race_c`` record; other
    records come back unchanged.

    Args:
        records: race records; only family ``race_c`` is checked (TSan has no Fortran front end here).
        jobs: programs compiled and run at once.
        timeout_s: limit for each compile and each run; a timeout kills the whole process group -> "error".
        runs: runs per program at most; the first race report ends them.
        progress: called with (programs checked, programs to check) after every ``every`` programs and at the end.

    Returns:
        Copies whose ``tsan`` is "race", "no_race" or "error", and whose ``tsan_error`` is None or, for an error,
        ``"<kind>: <detail>"`` with kind one of ``ERROR_KINDS``.

    Raises:
        BenchInfraError: clang with TSan and libomp is not usable here (and there is something to check).
    """
    todo = [k for k, r in enumerate(records) if r.family == "race_c"]
    out = list(records)
    if not todo:
        return out
    if not tsan_available():
        raise BenchInfraError("ThreadSanitizer with OpenMP is not usable: `clang -fsanitize=thread -fopenmp` must "
                              "build and run a probe program; install the Debian packages clang and libomp-dev")
    verdicts: list[tuple[str, str | None]] = []
    with tempfile.TemporaryDirectory(prefix="hpcrl-tsan-") as tmp, ThreadPoolExecutor(max(1, jobs)) as pool:
        for found in pool.map(lambda k: _check_one(records[k], Path(tmp) / str(k), timeout_s, runs), todo):
            verdicts.append(found)
            if progress and (len(verdicts) % every == 0 or len(verdicts) == len(todo)):
                progress(len(verdicts), len(todo))
    for k, (verdict, error) in zip(todo, verdicts, strict=True):
        out[k] = replace(records[k], metadata={**records[k].metadata, "tsan": verdict, "tsan_error": error})
    return out


def tsan_agreement(records: Sequence[Record]) -> dict[str, Any]:
    """How TSan's verdicts compare with the labels: counts overall and per pattern, and every disagreement.

    Returns:
        ``{"checked", "agree", "disagree", "error", "unchecked", "agreement_rate", "per_pattern": {pattern:
        {"agree", "disagree", "error"}}, "disagreements": [{"id", "pattern", "label", "tsan"}], "errors": [ids],
        "error_kinds": {kind: n}}`` (every kind of ``ERROR_KINDS``, 0 when none); the rate is agree / (agree +
        disagree), None when nothing was compared: an error is never counted as a verdict.
    """
    counts = {"checked": 0, "agree": 0, "disagree": 0, "error": 0, "unchecked": 0}
    kinds = dict.fromkeys(ERROR_KINDS, 0)
    per_pattern: dict[str, dict[str, int]] = {}
    disagreements: list[dict[str, Any]] = []
    errors: list[str] = []
    for r in records:
        tsan, label = r.metadata.get("tsan"), r.metadata.get("label", r.answer)
        if tsan is None:
            counts["unchecked"] += 1
            continue
        outcome = "error" if tsan == "error" else "agree" if (tsan == "race") == (label == "yes") else "disagree"
        counts["checked"] += 1
        counts[outcome] += 1
        pattern = str(r.metadata.get("pattern"))
        per_pattern.setdefault(pattern, {"agree": 0, "disagree": 0, "error": 0})[outcome] += 1
        if outcome == "disagree":
            disagreements.append({"id": r.id, "pattern": r.metadata.get("pattern"), "label": label, "tsan": tsan})
        elif outcome == "error":
            errors.append(r.id)
            kind = str(r.metadata.get("tsan_error") or "unknown").partition(":")[0]
            kinds[kind] = kinds.get(kind, 0) + 1
    compared = counts["agree"] + counts["disagree"]
    return {**counts, "agreement_rate": counts["agree"] / compared if compared else None,
            "per_pattern": per_pattern, "disagreements": disagreements, "errors": errors, "error_kinds": kinds}


def _check_one(record: Record, work: Path, timeout_s: float, runs: int) -> tuple[str, str | None]:
    found = extract_c_code(record.question)
    if found is None:
        return "error", "no_code: the question holds no C/C++ code block"
    work.mkdir(parents=True)
    return _verdict(found[0], found[1], work, timeout_s, runs, build_extras(record, found[0]))


def source_folder(record: Record) -> Path | None:
    """The folder a DataRaceBench record's program came from (``provenance``: source ``dataracebench:<root>`` and
    ``path`` under it), when it still exists; None for other records."""
    kind, _, root = str(record.provenance.get("source") or "").partition(":")
    path = record.provenance.get("path")
    if kind != "dataracebench" or not root or not path:
        return None
    folder = (Path(root) / str(path)).parent
    return folder if folder.is_dir() else None


def build_extras(record: Record, code: str) -> list[str]:
    """Compiler arguments that let a suite program build as its suite builds it: ``-I`` its folder and that folder's
    ``utilities/`` (local headers such as ``signaling.h``, ``polybench/polybench.h``), and, for a program that includes
    the PolyBench header, ``utilities/polybench.c`` with the defines DataRaceBench's own test harness compiles it
    with. Empty for a record whose folder is unknown (synthetic, HPC-GPT) or gone."""
    folder = source_folder(record)
    if folder is None:
        return []
    extras = [f"-I{folder}", f"-I{folder / 'utilities'}"]
    polybench = folder / "utilities" / "polybench.c"
    if _POLYBENCH_INCLUDE.search(code) and polybench.is_file():
        extras += [str(polybench), *POLYBENCH_DEFINES]
    return extras


def _crash(output: str) -> str | None:
    """The first line of a TSan or runtime crash report in ``output``, or None."""
    for line in output.splitlines():
        if any(mark in line for mark in CRASH_MARKS):
            return line.strip()[:200]
    return None


def _verdict(code: str, suffix: str, work: Path, timeout_s: float, runs: int, extras: Sequence[str] = ()
             ) -> tuple[str, str | None]:
    """Compile ``code`` in ``work`` and run it up to ``runs`` times: ("race" | "no_race", None) or ("error", reason).

    A run that crashes (a TSan deadly signal, a CHECK failure, a signal ending the process) before TSan reported a
    race is an error with the crash line as its reason, never "no_race"; a race TSan reported before a crash stands
    (TSan reported no false race on any generated race-free item).
    """
    src, exe = work / f"prog{suffix}", work / "prog"
    src.write_text(code, encoding="utf-8")
    compiler = CLANG if suffix == ".c" else f"{CLANG}++"
    built = _run([compiler, *FLAGS, str(src), *extras, "-o", str(exe), "-lm"], work, None, timeout_s)
    if built is None:
        return "error", f"compile_timeout: no binary within {timeout_s:g} s"
    if built[0] != 0 or not exe.is_file():
        first = next((line.strip() for line in built[1].splitlines() if "error" in line), built[1].strip()[:200])
        return "error", f"compile_error: {first[:200]}"
    env = {**os.environ, **RUN_ENV}
    for _ in range(runs):
        ran = _run([str(exe)], work, env, timeout_s)
        if ran is None:
            return "error", f"run_timeout: the program ran past {timeout_s:g} s"
        if RACE_MARK in ran[1]:
            return "race", None
        crash = _crash(ran[1])
        if crash is not None or ran[0] < 0:
            return "error", f"crash: {crash or f'killed by signal {-ran[0]}'}"
        if ran[0] not in (0, 66):  # 66: TSan warned about something other than a data race (and nothing crashed)
            return "error", f"run_failed: exit status {ran[0]}"
    return "no_race", None


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None, timeout_s: float) -> tuple[int, str] | None:
    """(exit code, stdout+stderr), or None on timeout. The command runs in its own process group, which is killed
    whatever happens, so no compiler child or OpenMP program outlives the call."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        return None
    finally:
        # The group id stays reserved while any member lives, so this never hits an unrelated process.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.returncode is None:
            proc.communicate()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Generate C items, check them with TSan, print agreement per pattern and the wall time."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-pattern", type=int, default=6, help="items per (pattern, label)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    records = generate_race_items("c", args.per_pattern, args.seed)
    start = time.perf_counter()
    summary = tsan_agreement(check_with_tsan(records, args.jobs, args.timeout, args.runs))
    wall = time.perf_counter() - start
    print(f"{'pattern':<20} agree disagree error")
    for pattern, c in summary["per_pattern"].items():
        print(f"{pattern:<20} {c['agree']:>5} {c['disagree']:>8} {c['error']:>5}")
    print(f"{len(records)} items, jobs={args.jobs}: {wall:.1f} s; agreement {summary['agreement_rate']}")
    for d in summary["disagreements"]:
        print(f"disagree: {d['id']} {d['pattern']} label={d['label']} tsan={d['tsan']}")
    return summary


if __name__ == "__main__":
    main()
