"""Tests of the DGEMM variant generator: determinism, distinct codes, the mix of kinds, the contract in the source,
intended techniques against the detector, and (integration) every variant of a batch verified by a real engine.

Run: pytest tests/data/dgemm/test_variants.py            (add -m integration for the engine test alone)
"""

from __future__ import annotations

import re

import pytest

from hpcrl_core.bench.engine import Engine
from hpcrl_core.bench.executor import LocalExecutor
from hpcrl_core.bench.extract import normalise_code
from hpcrl_core.bench.node import vector_registers
from hpcrl_core.bench.techniques import ALL_TECHNIQUES, Technique, detect_techniques_in_source
from hpcrl_core.data.dgemm.kinds import packed as packed_kind
from hpcrl_core.data.dgemm.problems import HEADERS
from hpcrl_core.data.dgemm.variants import (
    KINDS,
    UNIFORM_HEADERS,
    Variant,
    generate_variants,
    kind_schedule,
    uniform_prelude,
)
from hpcrl_core.errors import DataError

_INCLUDE = re.compile(r"^\s*#\s*include\s*<([^>]+)>", re.M)
_INCLUDE_LINES = re.compile(r"^#include <[^>]+>\n", re.M)
_SIGNATURE = re.compile(r"void\s+dgemm\s*\(\s*(const\s+)?int\s+n\s*,\s*const\s+double\s*\*\s*(restrict\s+)?A\s*,\s*"
                        r"const\s+double\s*\*\s*(restrict\s+)?B\s*,\s*double\s*\*\s*(restrict\s+)?C\s*\)")


def test_variants_are_deterministic_in_the_seed() -> None:
    assert generate_variants(5, 30) == generate_variants(5, 30)
    assert [v.code for v in generate_variants(5, 30)] != [v.code for v in generate_variants(6, 30)]


@pytest.mark.parametrize("vary_names", [False, True])
def test_variants_are_distinct_even_ignoring_comments_and_layout(vary_names: bool) -> None:
    variants = generate_variants(0, 600, vary_names)
    assert len({normalise_code(v.code) for v in variants}) == 600
    assert len({v.name for v in variants}) == 600


def test_a_small_batch_holds_every_kind_in_proportion() -> None:
    names = [v.name.split(":")[1] for v in generate_variants(2, 40)]
    assert set(names) == set(KINDS)
    counts = {k: kind_schedule(1000).count(k) for k in KINDS}
    for k, (_, share) in KINDS.items():
        assert abs(counts[k] / 1000 - share) < 0.01, (k, counts[k])


@pytest.mark.parametrize("vary_names", [False, True])
def test_every_variant_keeps_the_contract_in_its_source(vary_names: bool) -> None:
    for v in generate_variants(1, 300, vary_names):
        assert len(_SIGNATURE.findall(v.code)) == 1, v.name
        assert set(_INCLUDE.findall(v.code)) <= set(HEADERS), v.name
        assert not re.search(r"\bmain\s*\(|printf|cblas|dgemm_\(", v.code), v.name


@pytest.mark.parametrize("vary_names", [False, True])
def test_intended_techniques_agree_with_the_detector(vary_names: bool) -> None:
    bad = [(v.name, sorted(v.intended), sorted(detect_techniques_in_source(v.code)))
           for v in generate_variants(3, 400, vary_names) if detect_techniques_in_source(v.code) != v.intended]
    assert not bad, bad[:5]


# Loop variables and helper names that only a drawn spelling produces (the first spellings are i/j/k, imin,
# dot_col, sum, a, crow, brow; tiles BS or BI/BJ/BK or bm/bn/bk; packed pack_a/pack_b).
_DRAWN_NAMES = re.compile(r"\bfor \(int (p|row|col|y|x|i0|yb) = |\b(min_int|mini|col_dot|edge_dot|packA|pack_lhs)\("
                          r"|\b(c_row|Ci|b_row|Bk) = |\b(TILE|BLK|TI|MB|tile_m) = ")


def test_names_vary_only_when_asked() -> None:
    fixed = [v.code for v in generate_variants(7, 300)]
    assert not [c for c in fixed if _DRAWN_NAMES.search(c)]
    assert sum("dot_col(" in c for c in fixed) >= 10 and sum("imin(" in c for c in fixed) >= 10
    drawn = [v.code for v in generate_variants(7, 300, vary_names=True)]
    found = {m.group(0) for c in drawn for m in _DRAWN_NAMES.finditer(c)}
    assert len(found) >= 8, found


def test_the_batch_spans_plain_kernels_and_every_technique() -> None:
    sets = [v.intended for v in generate_variants(4, 400)]
    assert frozenset() in sets
    for t in ALL_TECHNIQUES:
        assert frozenset({t}) in sets, t  # each technique alone, too
        assert sum(t in s for s in sets) >= 40, t
    assert sum(s == frozenset(ALL_TECHNIQUES) for s in sets) >= 20  # the packed, threaded top of the ladder
    assert len(set(sets)) >= 28  # most of the 32 combinations


def test_a_negative_count_is_rejected() -> None:
    assert generate_variants(0, 0) == []
    with pytest.raises(DataError, match="got -1"):
        generate_variants(0, -1)


@pytest.mark.integration
def test_every_variant_of_a_batch_verifies_with_the_intended_techniques(engine: Engine) -> None:
    variants = generate_variants(0, 40)
    with LocalExecutor(engine) as ex:
        results = ex.map([v.code for v in variants])
    failed = [(v.name, r.status.value, r.detail[:300]) for v, r in zip(variants, results, strict=True) if not r.ok]
    assert not failed, failed
    mismatched = [(v.name, sorted(v.intended), r.techniques) for v, r in zip(variants, results, strict=True)
                  if set(r.techniques) != {t.value for t in v.intended}]
    assert not mismatched, mismatched


# Layout that only a drawn style produces: schedule clauses on `omp parallel for`, enum constants, helper-function
# bounds, line comments, Allman braces, two-space indentation, C zeroed by a loop, pointer-arithmetic indexing.
_DRAWN_LAYOUT = re.compile(r"parallel for.*schedule\((dynamic, 4|guided)\)|^enum \{|\b(imin|min_int|mini)\(|^\s*//"
                           r"|^\s*(for|if) \(.*\)\n\s*\{$|^  \S|C\[z\] = 0\.0|\*\([ABC] \+ ", re.M)
_HOUSE_SIGNATURE = "void dgemm(int n, const double *A, const double *B, double *C)\n{"


def test_the_house_layout_writes_every_kernel_one_way_and_keeps_the_kernels() -> None:
    drawn, house = generate_variants(11, 240), generate_variants(11, 240, vary_layout=False)
    assert sum(bool(_DRAWN_LAYOUT.search(v.code)) for v in drawn) > 120
    assert not [v.name for v in house if _DRAWN_LAYOUT.search(v.code) or _HOUSE_SIGNATURE not in v.code]
    assert len({normalise_code(v.code) for v in house}) == len(house)
    # the same draws: a kind's first kernel is the same kernel; later ones differ where two drawn kernels became one
    # in the house layout and the duplicate was drawn again, or the kind ran out (ikj_unrolled)
    for kind in KINDS:
        d = [(v.name.split(":", 2)[2], v.intended) for v in drawn if v.name.split(":")[1] == kind]
        h = [(v.name.split(":", 2)[2], v.intended) for v in house if v.name.split(":")[1] == kind]
        if kind != "blocked":  # the house layout writes every tile bound in the loop header (mode "end")
            assert h[0] == d[0], kind
        assert len(h) >= len(d) // 2, kind


def test_small_kinds_run_out_of_distinct_kernels_only_in_the_house_layout(
        caplog: pytest.LogCaptureFixture) -> None:
    house = generate_variants(0, 640, vary_layout=False)
    assert 400 < len(house) < 640 and len({normalise_code(v.code) for v in house}) == len(house)
    assert "no more distinct kernels" in caplog.text and "ikj_unrolled" in caplog.text
    assert len(generate_variants(0, 640)) == 640


def test_the_array_form_of_a_vector_tile_reads_the_same_for_every_tile_shape() -> None:
    """In the house layout, array-form ``tile_vec`` kernels of one vector spelling differ only in their constants
    (and the header comment naming the shape): the text a model writes does not depend on MR and NV. The named form
    spells out MR * NV accumulators; both forms occur and only the array form loop-reorders."""
    tiles = [v for v in generate_variants(4, 480, vary_layout=False) if v.kind == "tile_vec"]
    loops = [v for v in tiles if "-loops" in v.name]
    assert 0.3 < len(loops) / len(tiles) < 0.7
    assert all(Technique.LOOP_REORDER in v.intended for v in loops)
    assert not any(Technique.LOOP_REORDER in v.intended for v in tiles if v not in loops)

    def spelling(name: str) -> str:  # the vector spelling and options without the shape: tile-vec8-ext-loops-kb
        return re.sub(r"-\d+x\d+-", "-", name.split(":", 2)[2])

    def without_constants(code: str) -> str:
        return re.sub(r"^#define (VW|MR|NV|NR|KB) \d+\n|^// C = A \* B with a .*\n", "", code, flags=re.M)

    groups: dict[str, list[str]] = {}
    for v in loops:
        groups.setdefault(spelling(v.name), []).append(v.code)
    assert any(len(codes) > 1 for codes in groups.values())
    for name, codes in groups.items():
        assert len({without_constants(c) for c in codes}) == 1, name


def _transposed(variants: list[Variant]) -> list[bool]:
    return [":ijk-bt-" in v.name or ":jik-bt-" in v.name for v in variants if v.kind == "naive"]


def test_the_transposed_share_sets_how_many_naive_kernels_transpose_b() -> None:
    none, some, every = (_transposed(generate_variants(3, 400, naive_transposed=s)) for s in (0.0, 0.4, 1.0))
    assert not any(none) and all(every)
    assert 0 < sum(some) < len(some)
    for share in (-0.1, 1.5, float("nan")):
        with pytest.raises(DataError, match="naive_transposed"):
            generate_variants(3, 10, naive_transposed=share)


@pytest.mark.parametrize("avx512", [False, True])
def test_fit_registers_draws_only_micro_tiles_that_fit_the_nodes_registers(
        avx512: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    flags = frozenset({"avx2", "fma"} | ({"avx512f", "avx512vl"} if avx512 else set()))
    monkeypatch.setattr(packed_kind, "vector_doubles", lambda: 8 if avx512 else 4)
    monkeypatch.setattr(packed_kind, "vector_registers", lambda w: vector_registers(w, flags))

    def tiles(fit: bool) -> set[tuple[int, int]]:
        shapes = set()
        for v in generate_variants(5, 400, fit_registers=fit):
            found = re.search(r"packed-(?:ext|intrin)(\d)-(\d+)x(\d+)-", v.name)
            if v.kind == "packed" and found:
                w, mr, nr = (int(g) for g in found.groups())
                shapes.add((mr, nr // w))
        return shapes

    fitting, every = tiles(True), tiles(False)
    registers = 32 if avx512 else 16
    assert fitting and all(packed_kind.tile_registers(mr, nv) <= registers for mr, nv in fitting)
    if avx512:
        assert fitting == every  # every drawn shape fits 32 registers
    else:
        assert {(6, 2), (4, 3)} <= fitting and every - fitting >= {(4, 4), (6, 3)}  # 21 and 22 registers


_NR_LINE = re.compile(r"^#define NR .*\n|NR = [^,}]+(?=[,}])", re.M)


@pytest.mark.parametrize("vary_layout", [False, True])
def test_derived_nr_writes_the_tile_width_as_vw_times_nv_and_changes_nothing_else(vary_layout: bool) -> None:
    plain = generate_variants(7, 300, vary_layout=vary_layout)
    derived = generate_variants(7, 300, vary_layout=vary_layout, derived_nr=True)
    assert [(v.name, v.intended) for v in plain] == [(v.name, v.intended) for v in derived]
    widths = 0
    for p, d in zip(plain, derived, strict=True):
        assert _NR_LINE.sub("", p.code) == _NR_LINE.sub("", d.code), p.name
        literal = re.search(r"^#define NR (\d+)$|NR = (\d+)", p.code, re.M)
        if literal:  # packed and array-form tile_vec kernels: the same width, now derived from VW and NV
            widths += 1
            assert re.search(r"^#define NR \(VW \* NV\)$|NR = VW \* NV\b", d.code, re.M), d.name
            vw, nv = (int(re.search(rf"(?:#define |\b){c}(?: | = )(\d+)", p.code).group(1))  # type: ignore[union-attr]
                      for c in ("VW", "NV"))
            assert int(literal.group(1) or literal.group(2)) == vw * nv, p.name
        else:
            assert p.code == d.code, p.name
    assert widths > 30


@pytest.mark.integration
def test_a_derived_width_keeps_a_kernel_whose_nv_was_changed_correct(engine: Engine) -> None:
    """What ``derived_nr`` is for: a policy that writes another NV (or VW) than the kernel it learnt from, and
    leaves NR, gets a consistent kernel; with the width written as a number it gets a wrong one."""
    def first_packed(derived: bool) -> str:
        return next(v.code for v in generate_variants(3, 120, vary_layout=False, derived_nr=derived)
                    if v.kind == "packed" and "-ext" in v.name)

    def other_nv(code: str) -> str:
        nv = int(re.search(r"^#define NV (\d+)$", code, re.M).group(1))  # type: ignore[union-attr]
        return re.sub(r"^#define NV \d+$", f"#define NV {1 if nv > 1 else 2}", code, flags=re.M)

    with LocalExecutor(engine) as ex:
        literal, derived = ex.map([other_nv(first_packed(False)), other_nv(first_packed(True))])
    assert derived.ok, derived.detail[:300]
    assert literal.status.value == "wrong_result", (literal.status, literal.detail[:300])


def test_the_uniform_prelude_replaces_the_includes_where_they_stood() -> None:
    assert uniform_prelude("#include <omp.h>\n#include <string.h>\n\nvoid f(void) {}\n") == (
        "#include <stddef.h>\n#include <stdlib.h>\n#include <string.h>\n#include <omp.h>\n\nvoid f(void) {}\n")
    assert uniform_prelude("void dgemm(void) {}\n") == (
        "#include <stddef.h>\n#include <stdlib.h>\n#include <string.h>\n\nvoid dgemm(void) {}\n")
    guard = "#ifndef _POSIX_C_SOURCE\n#define _POSIX_C_SOURCE 200112L\n#endif\n"
    assert uniform_prelude(guard + "#include <immintrin.h>\n#include <stdlib.h>\n\nint x;\n") == (
        guard + "#include <stddef.h>\n#include <stdlib.h>\n#include <string.h>\n#include <immintrin.h>\n\nint x;\n")
    assert uniform_prelude(guard + "int y;\n").startswith(guard + "#include <stddef.h>\n")


@pytest.mark.parametrize("vary_layout", [False, True])
def test_uniform_includes_open_every_kernel_alike_and_keep_the_batch(vary_layout: bool) -> None:
    plain = generate_variants(7, 300, vary_layout=vary_layout)
    uniform = generate_variants(7, 300, vary_layout=vary_layout, uniform_includes=True)
    assert [(v.name, v.intended) for v in plain] == [(v.name, v.intended) for v in uniform]
    block = "".join(f"#include <{h}>\n" for h in UNIFORM_HEADERS)
    for p, u in zip(plain, uniform, strict=True):
        assert block in u.code, u.name
        assert set(_INCLUDE.findall(u.code)) == set(_INCLUDE.findall(p.code)) | set(UNIFORM_HEADERS), u.name
        assert _INCLUDE_LINES.sub("", u.code).strip() == _INCLUDE_LINES.sub("", p.code).strip(), u.name
    assert len({p.code.split("\n", 1)[0] for p in plain}) > 1  # without: kernels open with different headers


@pytest.mark.integration
def test_every_variant_with_uniform_includes_verifies(engine: Engine) -> None:
    variants = generate_variants(0, 24, vary_layout=False, uniform_includes=True)
    with LocalExecutor(engine) as ex:
        results = ex.map([v.code for v in variants])
    failed = [(v.name, r.status.value, r.detail[:300]) for v, r in zip(variants, results, strict=True) if not r.ok]
    assert not failed, failed
