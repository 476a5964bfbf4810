"""Tests of code extraction from completions. Run: pytest tests/bench/test_extract.py"""

from __future__ import annotations

from hpcrl_core.bench.extract import extract_code, normalise_code

KERNEL = "void dgemm(int n, const double *A, const double *B, double *C) { }"


def test_fenced_block_is_extracted_from_prose() -> None:
    text = f"Here is my kernel:\n```c\n{KERNEL}\n```\nIt is fast."
    assert extract_code(text, 10_000).code == KERNEL + "\n"


def test_block_defining_dgemm_wins_over_others() -> None:
    text = f"```c\nstatic int helper(void);\n```\n```C\n{KERNEL}\n```\n```\nnot code\n```"
    assert extract_code(text, 10_000).code == KERNEL + "\n"


def test_raw_code_and_unterminated_fence() -> None:
    assert extract_code(KERNEL, 10_000).code == KERNEL + "\n"
    assert extract_code(f"```c\n{KERNEL}\n", 10_000).code == KERNEL + "\n"


def test_bad_inputs_give_reasons_not_exceptions() -> None:
    cases = {
        "": "empty",
        "   \n\t": "empty",
        "Sorry, I cannot help.": "no function named dgemm",
        "void gemm(int n) {}": "no function named dgemm",
        "void dgemm(int n) {}\x00\x01": "binary",
    }
    for text, reason in cases.items():
        ex = extract_code(text, 10_000)
        assert ex.code is None and reason in (ex.error or ""), (text, ex)


def test_size_limit_and_undecodable_bytes() -> None:
    big = KERNEL + "\n" + "// pad\n" * (10 * 1024 * 1024 // 7)
    ex = extract_code(big, 65_536)
    assert ex.code is None and "limit is 65536" in (ex.error or "")
    assert extract_code(b"\xff\xfe\x00garbage" * 100, 65_536).error.startswith("completion is not UTF-8")
    assert extract_code(big.encode(), 65_536).code is None


def test_normalisation_ignores_comments_and_layout_but_not_code() -> None:
    a = "void dgemm(int n, const double *A, const double *B, double *C) {\n  // zero\n  C[0] = 0; /* x */ }"
    b = "void dgemm(int n, const double *A, const double *B, double *C)\n{ C[0] = 0;   }"
    c = "void dgemm(int n, const double *A, const double *B, double *C) { C[0] = 1; }"
    assert normalise_code(a) == normalise_code(b)
    assert normalise_code(a) != normalise_code(c)
    assert '"// not a comment"' in normalise_code('const char *s = "// not a comment";')


def test_normalisation_keeps_directives_and_splices_on_their_lines() -> None:
    code = "#include <stdlib.h>\n#define T \\\n 64\nvoid dgemm(int n,\n const double *A) {}\n"
    norm = normalise_code(code)
    assert norm.splitlines()[0] == "#include <stdlib.h>"
    assert "#define T \\\n64" in norm
    assert "void dgemm(int n, const double *A) {}" in norm
