"""Tests of the ThreadSanitizer cross-check: agreement bookkeeping (always), and real clang + libomp runs
(``integration``; skipped where ``clang -fsanitize=thread -fopenmp`` cannot build and run a probe).

Run: pytest tests/data/race/test_tsan.py
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from hpcrl_core.data.race import tsan as race_tsan
from hpcrl_core.data.race.generator import SYSTEM, generate_race_items, race_metadata, race_question
from hpcrl_core.data.race.loaders import load_dataracebench
from hpcrl_core.data.race.tsan import check_with_tsan, extract_c_code, tsan_agreement, tsan_available
from hpcrl_core.data.schema import Record, assistant, messages
from hpcrl_core.errors import BenchInfraError
from tests.helpers import processes_under

FIXTURES = Path(__file__).parent / "fixtures"
# Patterns whose races are thread races that TSan observes; simd races are between SIMD lanes of one thread, and a
# lone task racing with its creator is run by the creating thread itself under libomp (see race/tsan.py).
THREAD_VISIBLE = ("missing_private", "missing_reduction", "loop_carried", "missing_barrier", "indirect_access",
                  "missing_atomic", "nested_dependence", "sections", "locks", "task_depend", "function_state")


def require_tsan() -> None:
    if not tsan_available():
        pytest.skip("needs clang with TSan and libomp (Debian packages clang, libomp-dev)")


def c_record(code: str, label: str = "yes", pattern: str | None = "handmade") -> Record:
    return Record(family="race_c", prompt=messages(SYSTEM, race_question(code, "c")), completion=assistant(label),
                  answer=label, metadata=race_metadata("c", pattern, label))


def with_tsan(r: Record, tsan: str | None) -> Record:
    return replace(r, metadata={**r.metadata, "tsan": tsan})


def test_agreement_counts_and_lists_every_disagreement() -> None:
    a, b, c, d, e = (c_record(f"int main(void) {{ return {k}; }}", label, p) for k, (label, p) in
                     enumerate([("yes", "p1"), ("no", "p1"), ("yes", "p2"), ("no", "p2"), ("no", "p2")]))
    recs = [with_tsan(a, "race"), with_tsan(b, "race"), with_tsan(c, "no_race"), with_tsan(d, "error"), e]
    s = tsan_agreement(recs)
    assert (s["checked"], s["agree"], s["disagree"], s["error"], s["unchecked"]) == (4, 1, 2, 1, 1)
    assert s["agreement_rate"] == pytest.approx(1 / 3)
    assert s["per_pattern"] == {"p1": {"agree": 1, "disagree": 1, "error": 0},
                                "p2": {"agree": 0, "disagree": 1, "error": 1}}
    assert s["disagreements"] == [{"id": b.id, "pattern": "p1", "label": "no", "tsan": "race"},
                                  {"id": c.id, "pattern": "p2", "label": "yes", "tsan": "no_race"}]
    assert s["errors"] == [d.id]
    assert tsan_agreement([e])["agreement_rate"] is None
    crashed = replace(d, metadata={**d.metadata, "tsan": "error", "tsan_error": "crash: ThreadSanitizer:DEADLYSIGNAL"})
    kinds = tsan_agreement([crashed, with_tsan(b, "race")])["error_kinds"]
    assert kinds["crash"] == 1 and sum(kinds.values()) == 1 and set(race_tsan.ERROR_KINDS) <= set(kinds)


def test_extract_code_block() -> None:
    assert extract_c_code("Q?\n\n```c\nint main(void) { return 0; }\n```") == ("int main(void) { return 0; }\n", ".c")
    assert extract_c_code("Q?\n\n```cpp\nint main() {}\n```")[1] == ".cpp"  # type: ignore[index]
    assert extract_c_code("no code here") is None


def test_fortran_records_pass_through_without_a_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(race_tsan, "CLANG", "clang-that-does-not-exist")
    race_tsan.tsan_available.cache_clear()
    try:
        recs = generate_race_items("fortran", 1, seed=0)[:3]
        assert check_with_tsan(recs) == recs
        with pytest.raises(BenchInfraError, match="clang and libomp-dev"):
            check_with_tsan(generate_race_items("c", 1, seed=0)[:1])
    finally:
        race_tsan.tsan_available.cache_clear()


@pytest.mark.integration
def test_the_wide_surface_adds_no_race() -> None:
    """The extra loops of the wide surface go under both labels: no race-free program gains a race."""
    require_tsan()
    def race_free(surface: str) -> list[Record]:  # target regions can crash the instrumented libomp: left out
        return [r for r in generate_race_items("c", 2, seed=3, surface=surface) if r.answer == "no"
                and r.metadata["pattern"] != "offload"]

    recs = race_free("wide")
    loops = [sum(r.question.count(w) for r in rs for w in ("for (", "omp parallel"))
             for rs in (race_free("narrow"), recs)]
    assert loops[1] > loops[0] * 1.2, loops  # the extra loops are there to check
    verdicts = {r.metadata["tsan"] for r in check_with_tsan(recs, jobs=2)}
    assert verdicts == {"no_race"}


@pytest.mark.integration
def test_tsan_agrees_on_thread_races_and_never_flags_race_free_items() -> None:
    require_tsan()
    recs = generate_race_items("c", 1, seed=1)
    calls: list[tuple[int, int]] = []
    checked = check_with_tsan(recs, jobs=2, progress=lambda done, total: calls.append((done, total)), every=10)
    assert calls == [*((k, len(recs)) for k in range(10, len(recs), 10)), (len(recs), len(recs))]
    for before, after in zip(recs, checked, strict=True):
        assert replace(after, metadata=before.metadata) == before  # nothing but metadata["tsan"] changes
        if after.metadata["pattern"] == "offload":  # target regions can crash the instrumented libomp: an error
            assert after.metadata["tsan"] in ("race", "error"), (after.metadata, after.question)
            assert after.metadata["tsan"] == "race" or after.metadata["tsan_error"].startswith("crash")
            continue
        assert after.metadata["tsan"] in ("race", "no_race"), (after.metadata, after.question)
        if after.answer == "no" or after.metadata["pattern"] in THREAD_VISIBLE:
            assert (after.metadata["tsan"] == "race") == (after.answer == "yes"), (after.metadata, after.question)
        if after.metadata["pattern"] == "simd_dependence":  # the documented blind spot
            assert after.metadata["tsan"] == "no_race"


@pytest.mark.integration
def test_compile_failure_is_an_error_and_changes_nothing_else() -> None:
    require_tsan()
    bad, fine = c_record("int main(void) { return undeclared; }"), c_record("int main(void) { return 3; }")
    out = check_with_tsan([bad, fine])
    assert [r.metadata["tsan"] for r in out] == ["error", "error"]  # exit status 3 is a run failure
    reason = out[0].metadata["tsan_error"]
    assert reason.startswith("compile_error: ") and "undeclared" in reason
    assert out[1].metadata["tsan_error"] == "run_failed: exit status 3"
    assert replace(out[0], metadata=bad.metadata) == bad


@pytest.mark.integration
def test_a_crashing_instrumented_run_is_an_error_not_a_verdict() -> None:
    require_tsan()
    segv = c_record("""#include <stdio.h>
int main(void) {
    int a[16];
    int *volatile nowhere = 0;
#pragma omp parallel for
    for (int i = 0; i < 16; i++) a[i] = i;
    *nowhere = a[3];
    printf("%d\\n", a[3]);
    return 0;
}""", label="no")
    aborts = c_record("""#include <stdlib.h>
int main(void) {
    int s = 0;
#pragma omp parallel for reduction(+:s)
    for (int i = 0; i < 16; i++) s += i;
    if (s) abort();
    return 0;
}""", label="no")
    out = check_with_tsan([segv, aborts])
    assert [r.metadata["tsan"] for r in out] == ["error", "error"]
    assert all(r.metadata["tsan_error"].startswith("crash: ") for r in out), [r.metadata["tsan_error"] for r in out]
    assert tsan_agreement(out)["error_kinds"]["crash"] == 2 and tsan_agreement(out)["agreement_rate"] is None


@pytest.mark.integration
def test_timeout_is_an_error_and_leaves_no_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_tsan()
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # the checker's scratch folder lands in tmp_path
    pid_file = tmp_path / "pid"
    hang = c_record(f"""#include <stdio.h>
#include <unistd.h>
int main(void) {{
    FILE *f = fopen("{pid_file}", "w");
    fprintf(f, "%d", (int)getpid());
    fclose(f);
    for (;;) sleep(1);
}}""")
    out = check_with_tsan([hang], timeout_s=5)
    assert out[0].metadata["tsan"] == "error" and out[0].metadata["tsan_error"].startswith("run_timeout: ")
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert processes_under(tmp_path) == []


@pytest.mark.integration
def test_suite_programs_build_against_their_own_folder(tmp_path: Path) -> None:
    """A suite program that includes a local header, and one that includes the PolyBench header and needs its
    support file, build as the suite builds them (our own minimal files in DataRaceBench's layout)."""
    require_tsan()
    bench = tmp_path / "micro-benchmarks"
    (bench / "polybench").mkdir(parents=True)
    (bench / "utilities").mkdir()
    (bench / "signaling.h").write_text("#define SIGNAL_SLOTS 8\n")
    (bench / "polybench" / "polybench.h").write_text("double polybench_checksum(const double *v, int n);\n")
    (bench / "utilities" / "polybench.c").write_text(
        "double polybench_checksum(const double *v, int n) { double s = 0; for (int i = 0; i < n; i++) s += v[i];"
        " return s; }\n")
    (bench / "DRB901-localheader-orig-no.c").write_text("""#include <stdio.h>
#include "signaling.h"
int main(void) {
    int a[SIGNAL_SLOTS];
#pragma omp parallel for
    for (int i = 0; i < SIGNAL_SLOTS; i++) a[i] = i;
    printf("%d\\n", a[1]);
    return 0;
}
""")
    (bench / "DRB902-polyheader-orig-no.c").write_text("""#include <stdio.h>
#include "polybench/polybench.h"
int main(void) {
    double v[32];
#pragma omp parallel for
    for (int i = 0; i < 32; i++) v[i] = i;
    printf("%f\\n", polybench_checksum(v, 32));
    return 0;
}
""")
    records = load_dataracebench(tmp_path, "c")
    out = check_with_tsan(records)
    assert [(r.metadata["tsan"], r.metadata["tsan_error"]) for r in out] == [("no_race", None), ("no_race", None)]
    elsewhere = [replace(r, provenance={**r.provenance, "source": f"dataracebench:{tmp_path / 'gone'}"})
                 for r in records]  # the folder is gone: the program alone does not build
    assert all(r.metadata["tsan_error"].startswith("compile_error") for r in check_with_tsan(elsewhere))


@pytest.mark.integration
def test_dataracebench_fixtures() -> None:
    require_tsan()
    out = check_with_tsan(load_dataracebench(FIXTURES / "dataracebench", "c"))
    assert [(r.answer, r.metadata["tsan"]) for r in out] == [("yes", "race"), ("no", "no_race")]
