"""Tests of the C tokenizer. Run: python3 -m pytest tests/bench/test_ctokens.py -q"""

from __future__ import annotations

import dataclasses

import pytest

from hpcrl_core.bench.ctokens import CTokenizeError, Token, identifiers, tokenize


def kinds_texts(src: str) -> list[tuple[str, str]]:
    return [(t.kind, t.text) for t in tokenize(src)]


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("x _y2 $z", [("ident", "x"), ("ident", "_y2"), ("ident", "$z")]),
        ("42 64u 1e-3 0x1p3 .5f 0xFFul 1'000", [("number", "42"), ("number", "64u"), ("number", "1e-3"),
                                                 ("number", "0x1p3"), ("number", ".5f"), ("number", "0xFFul"),
                                                 ("number", "1'000")]),
        ('"a\\"b" L"w" u8"s" u"x" U"y"', [("string", '"a\\"b"'), ("string", 'L"w"'), ("string", 'u8"s"'),
                                          ("string", 'u"x"'), ("string", 'U"y"')]),
        ("'a' '\\'' '\\n' L'c' u'd'", [("char", "'a'"), ("char", "'\\''"), ("char", "'\\n'"), ("char", "L'c'"),
                                       ("char", "u'd'")]),
        ("#pragma omp simd\n", [("pragma", "omp simd")]),
        ("a+=b->c<<=d...e##f", [("ident", "a"), ("punct", "+="), ("ident", "b"), ("punct", "->"), ("ident", "c"),
                                ("punct", "<<="), ("ident", "d"), ("punct", "..."), ("ident", "e"), ("punct", "##"),
                                ("ident", "f")]),
        ("i++ + ++j&&k||!l", [("ident", "i"), ("punct", "++"), ("punct", "+"), ("punct", "++"), ("ident", "j"),
                             ("punct", "&&"), ("ident", "k"), ("punct", "||"), ("punct", "!"), ("ident", "l")]),
        ("x/=2/3%4%=5", [("ident", "x"), ("punct", "/="), ("number", "2"), ("punct", "/"), ("number", "3"),
                         ("punct", "%"), ("number", "4"), ("punct", "%="), ("number", "5")]),
        ("a ? b : c; s.x", [("ident", "a"), ("punct", "?"), ("ident", "b"), ("punct", ":"), ("ident", "c"),
                            ("punct", ";"), ("ident", "s"), ("punct", "."), ("ident", "x")]),
    ],
)
def test_token_kinds_and_spellings(src: str, expected: list[tuple[str, str]]) -> None:
    assert kinds_texts(src) == expected


def test_prefix_is_merged_only_when_adjacent() -> None:
    assert kinds_texts('L "x" abcL"y" uL') == [("ident", "L"), ("string", '"x"'), ("ident", "abcL"),
                                               ("string", '"y"'), ("ident", "uL")]


def test_digraphs_are_returned_as_what_they_stand_for() -> None:
    assert [t.text for t in tokenize("a<:1:> <% %> %:%:")] == ["a", "[", "1", "]", "{", "}", "##"]


def test_comments_are_dropped_and_lines_kept() -> None:
    src = "a // one /* not a block\nb /* two\nlines */ c\n/**/d"
    assert [(t.text, t.line) for t in tokenize(src)] == [("a", 1), ("b", 2), ("c", 3), ("d", 4)]


def test_comment_markers_and_names_inside_literals_stay_literals() -> None:
    toks = tokenize('s = "/* not a comment */ // nor this"; t = "system"; c = \'/\';')
    assert [t.kind for t in toks if t.kind in ("string", "char")] == ["string", "string", "char"]
    assert toks[2].text == '"/* not a comment */ // nor this"'
    assert "system" not in identifiers(toks)


def test_backslash_newline_splices() -> None:
    toks = tokenize("int fo\\\no = 1;\nx = \"ab\\\ncd\";\ny")
    assert [(t.text, t.line) for t in toks] == [("int", 1), ("foo", 1), ("=", 2), ("1", 2), (";", 2), ("x", 3),
                                                 ("=", 3), ('"abcd"', 3), (";", 4), ("y", 5)]


@pytest.mark.parametrize(
    ("src", "text"),
    [
        ("#pragma omp parallel for\n", "omp parallel for"),
        ("   #  pragma   omp   parallel\tfor simd  \n", "omp parallel for simd"),
        ("#pragma omp parallel \\\n   for schedule(static)\n", "omp parallel for schedule(static)"),
        ("#pragma GCC unroll 4 /* four */ // really\n", "GCC unroll 4"),
        ("#pragma omp /* a\nlong comment */ simd\n", "omp simd"),
        ("%:pragma GCC ivdep\n", "GCC ivdep"),
        ('_Pragma("omp simd") for', "omp simd"),  # raw source: the operator form
        ('_Pragma("GCC optimize(\\"unroll-loops\\")")', 'GCC optimize("unroll-loops")'),
    ],
)
def test_pragmas_become_one_token(src: str, text: str) -> None:
    toks = tokenize(src)
    assert toks[0] == Token("pragma", text, 1)


def test_pragma_lines_from_the_preprocessor_keep_their_lines() -> None:
    # What `gcc -E -P` emits for `_Pragma("omp parallel for")` inside a function.
    src = "void f(int n) {\n#pragma omp parallel for\n for (int i = 0; i < n; i++) g(i);\n}\n"
    toks = tokenize(src)
    assert toks[7] == Token("pragma", "omp parallel for", 2)
    assert toks[8] == Token("ident", "for", 3)


@pytest.mark.parametrize(
    "directives",
    [
        '# 1 "kernel.c"\n# 12 "kernel.c" 2\n',
        "#include <stdio.h>\n#include \"x.h\"\n",
        "#define BS \\\n  64\n#define MIN(a, b) ((a) < (b) ? (a) : (b))\n",
        "#error don't do this\n#warning \"odd\n",
        "#\n#if 0\n#endif\n",
        "#define X 1 /* comment running\n onto the next line */\n",
        "  #  ifdef  _OPENMP // note\n  #endif\n",
    ],
)
def test_other_directives_are_skipped_whole(directives: str) -> None:
    toks = tokenize(directives + "int x;")
    assert [(t.kind, t.text) for t in toks] == [("ident", "int"), ("ident", "x"), ("punct", ";")]
    assert toks[0].line == directives.count("\n") + 1


def test_hash_in_the_middle_of_a_line_is_a_punctuator() -> None:
    assert kinds_texts("a # b\n") == [("ident", "a"), ("punct", "#"), ("ident", "b")]


@pytest.mark.parametrize(
    ("src", "line", "what"),
    [
        ('int x;\ns = "abc;\n', 2, "string"),
        ("int x;\n\nc = 'a;\n", 3, "char"),
        ("int x; /* never\nclosed\n", 1, "comment"),
        ("#define X /* never closed\n", 1, "comment"),
        ("a\nb\\\n\"open", 3, "string"),
    ],
)
def test_unterminated_constructs_raise_with_their_line(src: str, line: int, what: str) -> None:
    with pytest.raises(ValueError, match=f"line {line}: unterminated {what}") as info:
        tokenize(src)
    assert isinstance(info.value, CTokenizeError) and info.value.line == line


def test_crlf_line_endings() -> None:
    toks = tokenize("a\r\n#pragma omp simd\r\nb\r\n")
    assert [(t.kind, t.text, t.line) for t in toks] == [("ident", "a", 1), ("pragma", "omp simd", 2),
                                                        ("ident", "b", 3)]


def test_unknown_characters_are_punctuators() -> None:
    assert kinds_texts("a @ b `") == [("ident", "a"), ("punct", "@"), ("ident", "b"), ("punct", "`")]


def test_identifiers_helper() -> None:
    assert identifiers(tokenize("int x = y + 1; /* z */ \"w\"")) == {"int", "x", "y"}


def test_tokens_are_frozen() -> None:
    tok = tokenize("x")[0]
    assert tok == Token("ident", "x", 1) and hash(tok) == hash(Token("ident", "x", 1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        tok.text = "y"  # type: ignore[misc]


KERNEL = """void dgemm(int n, const double *A, const double *B, double *C) {
    for (int i = 0; i < n; i++) /* rows */ for (int k = 0; k < n; k++) { double a = A[i*n + k];
#pragma omp simd
        for (int j = 0; j < n; j++) C[i*n + j] += a * B[k*n + j] / 2.5e0; // x
    }
    const char *s = u8"s\\"t"; char c = L'\\''; int h = 0x1F, o = 017 % 3, d = .5 < 1 ? h : o;
}
"""


def test_fast_path_and_spliced_path_agree() -> None:
    # A trailing splice makes the tokenizer take its per-token path; both must produce the same tokens.
    fast = tokenize(KERNEL)
    slow = tokenize(KERNEL + "\\\n")
    assert fast == slow
    assert len(fast) > 100


def test_a_64_kb_kernel_tokenizes() -> None:
    src = KERNEL * (65_536 // len(KERNEL) + 1)
    toks = tokenize(src)
    per_copy = len(tokenize(KERNEL))
    assert len(toks) == per_copy * (65_536 // len(KERNEL) + 1)
    assert toks[-1] == Token("punct", "}", src.count("\n"))
