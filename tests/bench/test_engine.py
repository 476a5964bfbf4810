"""Tests of the engine end to end: every status, the shipped ladder, bad input, verification strength.

Run: pytest tests/bench/test_engine.py
"""

from __future__ import annotations

import pytest

from hpcrl_core.bench.engine import Engine, check_sizes
from hpcrl_core.bench.reference import LADDER, ladder_kernels
from hpcrl_core.bench.result import Status
from tests.bench.test_adversarial import GOOD, SIG

pytestmark = pytest.mark.integration

EXPECTED_TECHNIQUES = {
    "naive": set(),
    "ikj": {"loop_reorder"},
    "blocked": {"loop_reorder", "cache_blocking"},
    "blocked_omp_simd": {"loop_reorder", "cache_blocking", "openmp", "simd"},
    "packed": {"cache_blocking", "register_blocking", "openmp", "simd"},
}

STATUS_CASES = {
    "ok": (GOOD, Status.OK),
    "format_violation": ("#include <stdio.h>\n" + GOOD, Status.FORMAT_VIOLATION),
    "compile_error": (SIG + "{ for (int i = 0; i < n; i++) C[i] = A[i] + ; }", Status.COMPILE_ERROR),
    "timeout": (SIG + "{ while (1) { } }", Status.TIMEOUT),
    "runtime_error": (SIG + "{ C[-100000000] = 1; }", Status.RUNTIME_ERROR),
    "wrong_result": (SIG + "{ for (int i = 0; i < n * n; i++) C[i] = A[i] * B[i]; }", Status.WRONG_RESULT),
}


@pytest.mark.parametrize("case", list(STATUS_CASES))
def test_every_status(engine: Engine, cores: tuple[int, ...], case: str) -> None:
    code, status = STATUS_CASES[case]
    r = engine.run(code, cores)
    assert r.status is status, r.detail
    assert r.isolation and "rlimits" in r.isolation
    if status is Status.OK:
        assert r.gflops and r.gflops > 0 and r.cv is not None and r.reps >= 3 and r.median_s
        assert r.extra["checked_sizes"] == check_sizes(64, 13)
    else:
        assert r.gflops is None and r.detail


@pytest.mark.parametrize("name", LADDER)
def test_shipped_ladder_verifies_with_its_documented_techniques(engine: Engine, cores: tuple[int, ...],
                                                                 name: str) -> None:
    r = engine.run(ladder_kernels()[name], cores)
    assert r.ok, r.detail
    assert EXPECTED_TECHNIQUES[name] <= set(r.techniques), r.techniques
    if name == "naive":
        assert r.techniques == ()


BAD_INPUT = {
    "empty": ("", "empty"),
    "ten_megabytes": (GOOD + "\n" + "/* padding */\n" * (10 * 1024 * 1024 // 14), "limit"),
    "binary_garbage": (bytes(range(256)) * 64, "UTF-8"),
    "no_function": ("int x = 3;", "no function named dgemm"),
    "prose": ("I would use a blocked algorithm with OpenMP.", "no function named dgemm"),
    "wrong_signature_float": ("void dgemm(int n, const float *A, const float *B, float *C) { }", "wrong signature"),
    "wrong_signature_arity": ("void dgemm(int n, double *C) { }", "wrong signature"),
    "wrong_return_type": ("int dgemm(int n, const double *A, const double *B, double *C) { return 0; }",
                          "wrong signature"),
    "static_dgemm": ("static " + GOOD, "wrong signature"),
    "only_declaration": ("void dgemm(int n, const double *A, const double *B, double *C);", "does not define dgemm"),
    "unbalanced": (SIG + "{ for (;;) { ", "compile"),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_gives_a_clear_status(engine: Engine, cores: tuple[int, ...], case: str) -> None:
    code, needle = BAD_INPUT[case]
    r = engine.run(code, cores)
    assert r.status in (Status.FORMAT_VIOLATION, Status.COMPILE_ERROR), r
    assert needle.lower() in (r.detail + r.status.value).lower(), r.detail


def test_odd_size_check_catches_tile_only_kernels(engine: Engine, cores: tuple[int, ...]) -> None:
    tiled = SIG + """{  /* assumes n % 4 == 0 */
      for (int i = 0; i < n; i++) for (int j = 0; j < n; j++) C[i*n+j] = 0;
      for (int i = 0; i < n; i += 4) for (int k = 0; k < n; k++) for (int j = 0; j < n; j++) {
        C[i*n+j] += A[i*n+k]*B[k*n+j]; C[(i+1)*n+j] += A[(i+1)*n+k]*B[k*n+j];
        C[(i+2)*n+j] += A[(i+2)*n+k]*B[k*n+j]; C[(i+3)*n+j] += A[(i+3)*n+k]*B[k*n+j]; } }"""
    r = engine.run(tiled, cores)
    assert r.status is Status.WRONG_RESULT and "n=65" in r.detail


def test_accumulating_into_garbage_c_fails(engine: Engine, cores: tuple[int, ...]) -> None:
    no_zero = SIG + "{ for (int i = 0; i < n; i++) for (int k = 0; k < n; k++) for (int j = 0; j < n; j++)" \
        " C[i*n+j] += A[i*n+k]*B[k*n+j]; }"
    assert engine.run(no_zero, cores).status is Status.WRONG_RESULT


def test_tiny_error_is_caught_but_reordering_rounding_is_not(engine: Engine, cores: tuple[int, ...]) -> None:
    off = SIG + "{" + GOOD.split("{", 1)[1].rsplit("}", 1)[0] + " C[5] *= 1.0 + 1e-9; }"
    assert engine.run(off, cores).status is Status.WRONG_RESULT
    reversed_k = SIG + """{ for (int i = 0; i < n; i++) for (int j = 0; j < n; j++) { double s = 0;
      for (int k = n - 1; k >= 0; k--) s += A[i*n+k]*B[k*n+j]; C[i*n+j] = s; } }"""
    assert engine.run(reversed_k, cores).ok


def test_cache_key_ignores_layout_but_not_size_or_code(engine: Engine) -> None:
    spaced = GOOD.replace("{", "{\n  // comment\n")
    assert engine.key(GOOD, 64, 1) == engine.key(spaced, 64, 1)
    assert engine.key(GOOD, 64, 1) != engine.key(GOOD, 128, 1)
    assert engine.key(GOOD, 64, 1) != engine.key(GOOD, 64, 2)
    assert engine.key(GOOD, 64, 1) != engine.key(GOOD.replace("0.0", "0.5"), 64, 1)


def test_relative_folders_work_from_any_directory(tmp_path, monkeypatch: pytest.MonkeyPatch,
                                                   cores: tuple[int, ...]) -> None:
    # regression: a relative cache folder made the stub include path relative to each job's scratch folder
    import os
    import tempfile
    from pathlib import Path

    from hpcrl_core.config import Settings
    from tests.conftest import fast_params

    root = Path(tempfile.mkdtemp(prefix="hpcrl-rel-"))
    os.chmod(root, 0o755)
    monkeypatch.chdir(root)
    eng = Engine(fast_params(), Settings(cache_dir=Path(".hpcrl/cache"), scratch_dir=Path("scratch")))
    r = eng.run(ladder_kernels()["ikj"], cores)
    assert r.ok, r.detail


def test_missing_stub_headers_are_an_infrastructure_fault(engine: Engine, cores: tuple[int, ...], tmp_path) -> None:
    from hpcrl_core.bench.screen import screen_source
    from hpcrl_core.errors import BenchInfraError

    with pytest.raises(BenchInfraError, match="stub headers"):
        screen_source(ladder_kernels()["ikj"], tmp_path, tmp_path / "absent", engine.params.cflags,
                      engine.tc.compiler)
