"""benchmarks/failed_samples.py: failed samples sorted into a missing standard header, a tile width that disagrees
with VW x NV, or their status; an undeclared local name or an included header is no missing header; totals per model;
bad input refused by name.

Run: pytest tests/test_failed_samples_script.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.failed_samples import (
    DEPARTS,
    DEPARTS_ALL,
    MISSING_HEADER,
    NR_MISMATCH,
    OFF_CORPUS,
    OFF_CORPUS_ALL,
    cause,
    corpus_plans,
    departs,
    header_of,
    main,
    missing_header,
)

_NR_BAD = "#define VW 4\n#define NV 2\n#define NR 12\nvoid dgemm(void) {}\n"


def _row(code: str, status: str, detail: str = "", model: str = "rl") -> dict:
    return {"model": model, "status": status, "detail": detail, "completion": f"```c\n{code}```"}


def test_a_missing_header_is_a_standard_name_the_kernel_does_not_include() -> None:
    memset = "kernel.c:4:5: error: implicit declaration of function ‘memset’ [-Werror=implicit-function-declaration]"
    assert missing_header("void dgemm(void) { memset(0, 0, 0); }", memset) == "string.h"
    assert missing_header("#include <string.h>\nvoid dgemm(void) {}", memset) is None
    assert missing_header("int x;", "kernel.c:9:1: error: unknown type name ‘__m256d’") == "immintrin.h"
    assert missing_header("int x;", "error: ‘jj’ undeclared (first use in this function)") is None
    assert missing_header("int x;", "error: ‘size_t’ undeclared (first use in this function)") == "stddef.h"
    assert header_of("omp_get_thread_num") == "omp.h" and header_of("posix_memalign") == "stdlib.h"
    assert header_of("MR") is None


def test_causes_first_match_wins() -> None:
    memset = "error: implicit declaration of function ‘memset’"
    assert cause(_row("void f(void) {}", "ok")) is None
    assert cause(_row("void f(void) {}", "compile_error", memset)) == MISSING_HEADER
    assert cause(_row(_NR_BAD, "compile_error", memset)) == MISSING_HEADER
    assert cause(_row(_NR_BAD, "wrong_result")) == NR_MISMATCH
    assert cause(_row(_NR_BAD.replace("12", "8"), "wrong_result")) == "wrong_result"
    assert cause(_row("int x;", "compile_error", "error: ‘jj’ undeclared")) == "compile_error"


def test_rows_per_report_and_model_with_totals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    memset = "error: implicit declaration of function ‘memset’"
    for name, rows in (("a", [_row("x", "ok"), _row("void f(void) {}", "compile_error", memset),
                              _row(_NR_BAD, "wrong_result"), _row("x", "format_violation", model="sft")]),
                       ("b", [_row(_NR_BAD, "wrong_result"), _row("x", "ok", model="sft")])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "eval_dgemm_samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main([str(tmp_path / "a"), str(tmp_path / "b"), "--models", "rl", "sft"]) == 0
    out = capsys.readouterr().out.splitlines()
    header = [c.strip() for c in out[0].split("|")][1:-1]
    assert header == ["report", "model", "samples", "failed", MISSING_HEADER, NR_MISMATCH, "format_violation"]
    table = {(c[1], c[2]): c[3:-1] for c in ([x.strip() for x in line.split("|")] for line in out[2:])}
    assert table[(str(tmp_path / "a"), "rl")] == ["3", "2", "1", "1", "0"]
    assert table[(str(tmp_path / "a"), "sft")] == ["1", "1", "0", "0", "1"]
    assert table[("all", "rl")] == ["4", "3", "1", "2", "0"]
    assert table[("all", "sft")] == ["2", "1", "0", "0", "1"]


def test_bad_input_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "none")]) == 2
    assert "none: no none there" in capsys.readouterr().err
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "eval_dgemm_samples.jsonl").write_text(json.dumps({"model": "rl", "status": "ok"}) + "\n")
    assert main([str(tmp_path / "run")]) == 2
    assert "without a completion or status" in capsys.readouterr().err


def test_plans_no_corpus_kernel_has_are_a_cause_and_a_count_over_every_sample(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"name": f"000{i}:{kind}:{name}", "kind": kind, "techniques": []}) + "\n"
                              for i, (kind, name) in enumerate((("naive", "naive-ijk"), ("packed", "packed-ext4")))))
    known, mashed = "// plan: packed: packed-ext4\n", "// plan: tile_vec: tile-vec4-ext-64-loops-kb-omp\n"
    rows = [_row(known + "int x;", "ok"), _row(mashed + "int x;", "ok"),  # an off-corpus plan that verified
            _row(mashed + "int x;", "compile_error", "error: ‘KB’ undeclared"),
            _row(known + "int x;", "compile_error", "error: ‘KB’ undeclared"),
            _row("int x;", "format_violation"),  # no plan line at all
            _row(mashed + "void f(void) { memset(0, 0, 0); }", "compile_error",
                 "error: implicit declaration of function ‘memset’")]  # the header is named first
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "eval_dgemm_samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main([str(tmp_path / "run"), "--corpus", str(corpus)]) == 0
    out = capsys.readouterr().out.splitlines()
    header = [c.strip() for c in out[0].split("|")][1:-1]
    assert header[:10] == ["report", "model", "samples", "failed", MISSING_HEADER, NR_MISMATCH, OFF_CORPUS,
                           OFF_CORPUS_ALL, DEPARTS, DEPARTS_ALL]
    values = dict(zip(header, [c.strip() for c in out[2].split("|")][1:-1], strict=True))
    assert [values[k] for k in ("samples", "failed", MISSING_HEADER, OFF_CORPUS, OFF_CORPUS_ALL, "compile_error")] \
        == ["6", "4", "1", "2", "4", "1"]
    assert main([str(tmp_path / "run"), "--corpus", str(tmp_path / "none.jsonl")]) == 2
    assert "none.jsonl is missing" in capsys.readouterr().err


def test_code_that_uses_other_techniques_than_its_plans_kernel_departs_from_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus.jsonl"
    kernels = (("tile_vec", "tile-vec8-4x8", ["register_blocking", "simd"]),
               ("tile_vec", "tile-vec8-4x8-omp", ["openmp", "register_blocking", "simd"]),
               ("tile_vec", "tile-vec8-4x8", ["cache_blocking", "register_blocking", "simd"]))  # one plan, two sets
    corpus.write_text("".join(json.dumps({"name": f"000{i}:{kind}:{name}", "kind": kind, "techniques": t}) + "\n"
                              for i, (kind, name, t) in enumerate(kernels)))
    plain, omp = "// plan: tile_vec: tile-vec8-4x8\n", "// plan: tile_vec: tile-vec8-4x8-omp\n"

    def row(plan: str, status: str, techniques: list[str] | None) -> dict:
        r = _row(plan + "int x;", status)
        return r if techniques is None else {**r, "techniques": techniques}

    rows = [row(plain, "wrong_result", ["openmp", "register_blocking", "simd"]),  # a pragma its plan lacks
            row(plain, "ok", ["openmp", "register_blocking", "simd"]),  # departs, yet verified
            row(plain, "wrong_result", ["cache_blocking", "register_blocking", "simd"]),  # the plan's other kernel
            row(omp, "wrong_result", ["openmp", "register_blocking", "simd"]),
            row(omp, "compile_error", None),  # nothing detected: no departure claimed
            row(plain, "format_violation", [])]
    plans = corpus_plans(corpus)
    assert plans[plain] == {frozenset({"register_blocking", "simd"}),
                            frozenset({"cache_blocking", "register_blocking", "simd"})}
    assert [departs(r, plans) for r in rows] == [True, True, False, False, False, False]
    assert [cause(r, plans) for r in rows] == [DEPARTS, None, "wrong_result", "wrong_result", "compile_error",
                                               "format_violation"]
    assert cause(rows[0]) == "wrong_result"  # without the corpus there is no plan to depart from
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "eval_dgemm_samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main([str(tmp_path / "run"), "--corpus", str(corpus)]) == 0
    out = capsys.readouterr().out.splitlines()
    header = [c.strip() for c in out[0].split("|")][1:-1]
    values = dict(zip(header, [c.strip() for c in out[2].split("|")][1:-1], strict=True))
    assert (values["failed"], values[DEPARTS], values[DEPARTS_ALL], values[OFF_CORPUS_ALL]) == ("5", "1", "2", "0")
    corpus.write_text(json.dumps({"name": "0001:naive:n", "kind": "naive"}) + "\n")
    assert main([str(tmp_path / "run"), "--corpus", str(corpus)]) == 2
    assert "techniques" in capsys.readouterr().err
