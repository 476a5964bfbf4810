"""Tests of the synthetic data-race generator: labels right by construction (checked against the program text by an
independent reading, and by compiling and running every sampled program), determinism, balance and no label leaks.

Run: pytest tests/data/race/test_generator.py (the compile tests need gcc; the Fortran one skips without gfortran).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hpcrl_core.config import parse_params
from hpcrl_core.data.families import prepare_race
from hpcrl_core.data.race.generator import PATTERNS, SYSTEM, generate_race_items
from hpcrl_core.data.schema import Record
from hpcrl_core.errors import DataError

LANGUAGES = ("c", "fortran")
LABEL_WORDS = ("race", "yes", "no", "safe", "bug", "drb")
KEYWORDS = {"nowait", "none", "inout", "not"}  # OpenMP / Fortran keywords (.not.) that contain "no"


def code_of(r: Record) -> str:
    m = re.search(r"```(\w+)\n(.*)\n```$", r.question, re.S)
    assert m, r.question
    return m.group(2)


def named(r: Record) -> list[str]:
    return re.findall(r"`([^`]+)`", r.response)


def test_counts_balance_and_families() -> None:
    for language, family in (("c", "race_c"), ("fortran", "race_fortran")):
        recs = generate_race_items(language, 3, seed=3)
        assert len(recs) == 2 * 3 * len(PATTERNS)
        assert {r.family for r in recs} == {family}
        per = Counter((r.metadata["pattern"], r.answer) for r in recs)
        assert per == {(p, a): 3 for p in PATTERNS for a in ("yes", "no")}
        assert len({r.id for r in recs}) == len(recs), "duplicate programs"


def test_same_seed_same_records_other_seed_other_programs() -> None:
    a = [r.to_json() for r in generate_race_items("c", 1, seed=11)]
    assert a == [r.to_json() for r in generate_race_items("c", 1, seed=11)]
    assert not {r.question for r in generate_race_items("c", 1, seed=11)} & \
        {r.question for r in generate_race_items("c", 1, seed=12)}


def test_more_items_extend_fewer() -> None:
    few = generate_race_items("fortran", 1, seed=5)
    many = generate_race_items("fortran", 3, seed=5)
    for pattern in PATTERNS:
        assert [r.question for r in few if r.metadata["pattern"] == pattern] == \
            [r.question for r in many if r.metadata["pattern"] == pattern][:2]


def test_record_shape() -> None:
    for language in LANGUAGES:
        for i, r in enumerate(generate_race_items(language, 1, seed=0)):
            assert r.metadata == {"language": language, "pattern": r.metadata["pattern"], "label": r.answer,
                                  "tsan": None, "source_name": None}
            assert r.provenance == {"source": "synthetic:race@3", "seed": 0, "index": i,
                                    "pair": f"{language}:{r.metadata['pattern']}:0"}  # one pair per pattern
            assert r.prompt[0] == {"role": "system", "content": SYSTEM}
            assert r.question.startswith("Does the following OpenMP program contain a data race? Answer yes or no, "
                                         f"then explain briefly.\n\n```{language}\n")
            assert r.response.startswith(f"{r.answer}: ") and r.response.endswith(".")
            code = code_of(r)
            assert ("int main" in code) if language == "c" else code.startswith("program ")
            for name in named(r):  # the reason names variables of this program
                base = re.split(r"[\[(]", name)[0]
                assert re.search(rf"\b{re.escape(base)}\b", code), (name, code)


def _identifiers(r: Record) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", code_of(r)))


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b)


@pytest.mark.parametrize("language", LANGUAGES)
def test_items_come_in_minimal_pairs(language: str) -> None:
    recs = generate_race_items(language, 6, seed=3)
    halves = list(zip(recs[::2], recs[1::2], strict=True))
    for racy, fixed in halves:
        assert (racy.answer, fixed.answer) == ("yes", "no")
        assert racy.provenance["pair"] == fixed.provenance["pair"]
        assert racy.metadata["pattern"] == fixed.metadata["pattern"]
    assert len({a.provenance["pair"] for a, _ in halves}) == len(halves)
    # The two halves of a pair share most names; a racy item and the fixed half of another pair share far fewer.
    within = [_jaccard(_identifiers(a), _identifiers(b)) for a, b in halves]
    across = [_jaccard(_identifiers(a), _identifiers(b)) for (a, _), (_, b) in zip(halves, halves[1:] + halves[:1],
                                                                                 strict=True)]
    assert sum(within) / len(within) > 0.7
    assert sum(within) / len(within) > sum(across) / len(across) + 0.2


def test_the_split_keeps_both_halves_of_a_pair_together() -> None:
    params = parse_params({"prepare": {"race": {"per_pattern": 12, "eval_pairs": 0, "tsan": False}}}).prepare
    for language in LANGUAGES:
        out = prepare_race(language, params)
        train, evals = out.files["train.jsonl"], out.files["eval.jsonl"]
        assert {r.provenance["pair"] for r in train}.isdisjoint({r.provenance["pair"] for r in evals})
        assert Counter(r.answer for r in evals) == {"yes": len(PATTERNS), "no": len(PATTERNS)}
        assert Counter(r.metadata["pattern"] for r in evals) == {p: 2 for p in PATTERNS}  # one pair per pattern


def test_held_out_pairs_extend_eval_and_leave_the_trained_items_as_they_were() -> None:
    plain = generate_race_items("c", 3, seed=5)
    more = generate_race_items("c", 3, seed=5, held_out_pairs=2)
    assert [r.to_json() for r in more[:len(plain)]] == [r.to_json() for r in plain]  # same records, same indices
    extra = more[len(plain):]
    assert len(extra) == 2 * 2 * len(PATTERNS) and all(r.provenance["held_out"] is True for r in extra)
    assert Counter((r.metadata["pattern"], r.answer) for r in extra) == {(p, a): 2 for p in PATTERNS
                                                                        for a in ("yes", "no")}
    assert {r.provenance["pair"] for r in extra} == {f"c:{p}:{k}" for p in PATTERNS for k in (3, 4)}
    assert not {r.question for r in extra} & {r.question for r in plain}
    with pytest.raises(DataError, match="held_out_pairs=-1"):
        generate_race_items("c", 3, seed=5, held_out_pairs=-1)
    params = parse_params({"prepare": {"race": {"per_pattern": 12, "eval_pairs": 3, "tsan": False}}}).prepare
    without = parse_params({"prepare": {"race": {"per_pattern": 12, "eval_pairs": 0, "tsan": False}}}).prepare
    for language in LANGUAGES:
        out, base = prepare_race(language, params), prepare_race(language, without)
        assert out.files["train.jsonl"] == base.files["train.jsonl"]  # held-out pairs take no part in the draw
        evals = out.files["eval.jsonl"]
        assert Counter(r.metadata["pattern"] for r in evals) == {p: 2 * (1 + 3) for p in PATTERNS}
        assert out.card["hygiene"]["eval_held_out"] == 2 * 3 * len(PATTERNS)


@pytest.mark.parametrize("surface", ["narrow", "wide"])
def test_no_identifier_gives_the_label_away(surface: str) -> None:
    for language in LANGUAGES:
        for seed in range(3):
            for r in generate_race_items(language, 4, seed, surface=surface):
                words = set(re.findall(r"[a-z_]\w*", code_of(r).lower())) - KEYWORDS
                leaks = {w for w in words if any(bad in w for bad in LABEL_WORDS)}
                assert not leaks, (leaks, code_of(r))


@pytest.mark.parametrize(("language", "per_pattern"), [("rust", 2), ("c", 0), ("fortran", -2)])
def test_bad_arguments(language: str, per_pattern: int) -> None:
    with pytest.raises(DataError, match=language if language == "rust" else "per_pattern"):
        generate_race_items(language, per_pattern, seed=0)


# An independent reading of each program: does its text have the racy structure of its pattern?

def _carried(low: str) -> bool:
    """The first assignment after the loop's directive reads its own array at another subscript."""
    lines = low.splitlines()
    start = next(k for k, ln in enumerate(lines) if re.search(r"omp (parallel for|for|parallel do|do|simd)\b", ln))
    stmt = next(ln for ln in lines[start + 1:] if "=" in ln and not re.match(r"\s*(for \(|do )", ln))
    lhs, rhs = (x.strip().rstrip(";") for x in stmt.split("=", 1))
    name, sub = re.match(r"(\w+)\s*[\[(](.*)[\])]$", lhs).groups()  # type: ignore[union-attr]
    reads = re.findall(rf"\b{name}\s*[\[(]([^\])]*)[\])]", rhs)
    return any(s.replace(" ", "") != sub.replace(" ", "") for s in reads)


def _duplicates(code: str, language: str, ix: str) -> bool:
    """Whether the index array holds a repeated value: from its literal, or by evaluating its fill formula."""
    literal = re.search(rf"\b{ix}\s*[\[(]\w+[\])]\s*=\s*(?:\{{|\[|\(/)([^}}\]/]*)", code)
    if literal:
        vals = [int(v) for v in literal.group(1).split(",")]
        return len(set(vals)) < len(vals)
    size_decl = re.search(r"#define (\w+) (\d+)|int (\w+) = (\d+);|parameter :: (\w+) = (\d+)", code)
    assert size_decl
    size_name, size = (g for g in size_decl.groups() if g)
    var, expr = re.search(rf"\b{ix}\s*[\[(](\w+)[\])]\s*=\s*([^;\n]+)", code).groups()  # type: ignore[union-attr]
    expr = expr.replace("/", "//").replace(size_name, size)
    first = 0 if language == "c" else 1
    vals = [eval(expr, {"mod": lambda a, b: a % b}, {var: k}) for k in range(first, int(size) + first)]
    return len(set(vals)) < len(vals)


def _taskwait_missing(low: str, v: str) -> bool:
    lines = low.splitlines()
    read = next(k for k, ln in enumerate(lines)
                if re.search(rf"^\s*\w+\s*=.*\b{v}\b", ln) and not re.match(rf"\s*{v}\s*=", ln))
    return not any("omp taskwait" in ln for ln in lines[:read])


def racy_by_structure(r: Record) -> bool:
    code, v = code_of(r), named(r)[0]
    low, pattern = code.lower(), r.metadata["pattern"]
    if pattern == "missing_private":
        clauses = re.findall(r"private\(([^)]*)\)", low)
        listed = any(v in [x.strip() for x in c.split(",")] for c in clauses)
        local = re.search(rf"\b(int|long|float|double)\s+{v}\b", low.split("omp parallel", 1)[1])
        return not (listed or local)
    if pattern == "missing_reduction":
        return not re.search(rf"reduction\((\+|max):{v}\)", low)
    if pattern in ("loop_carried", "simd_dependence"):
        return _carried(low)
    if pattern == "missing_barrier":
        return ("nowait" in low or "omp master" in low) and "omp barrier" not in low
    if pattern == "missing_taskwait":
        return _taskwait_missing(low, v)
    if pattern == "indirect_access":
        return _duplicates(code, r.metadata["language"], v)
    if pattern == "nested_dependence":
        return _nested_racy(code)
    if pattern == "sections":
        return _sections_racy(low)
    if pattern == "locks":
        return _locks_racy(low, v)
    if pattern == "task_depend":
        return _tasks_racy(low, v)
    if pattern == "offload":
        if re.search(rf"\b{v}\s*(\+=|=\s*{v}\s*\+)", low):  # a sum into a scalar
            return not re.search(rf"reduction\(\+:{v}\)", low)
        return _carried(low.replace("target teams distribute ", ""))
    if pattern == "function_state":
        return _helper_keeps_state(code, r.metadata["language"])
    assert pattern == "missing_atomic"
    return "omp atomic" not in low and "omp critical" not in low


def _size(code: str) -> tuple[str, int]:
    m = re.search(r"#define (\w+) (\d+)|int (\w+) = (\d+);|parameter :: (\w+) = (\d+)", code)
    assert m
    name, value = (g for g in m.groups() if g)
    return name, int(value)


_LOOP_HEAD = re.compile(r"^\s*(?:for\s*\(\s*(?:int\s+)?(\w+)\s*=|do\s+(\w+)\s*=)")


def _groups(text: str, k: int) -> tuple[list[str], int]:
    """The bracketed groups that start at ``text[k]`` (``[..][..]`` or one ``(..)``), their contents split into
    subscripts, and where they end."""
    subs: list[str] = []
    while k < len(text) and text[k] in "[(":
        depth, j = 0, k
        while True:
            depth += text[j] in "[("
            depth -= text[j] in "])"
            j += 1
            if depth == 0:
                break
        inner = text[k + 1:j - 1]
        subs += [inner] if text[k] == "[" else [x.strip() for x in inner.split(",")]
        if text[k] == "(":
            return subs, j
        k = j
    return subs, k


def _nested_racy(code: str) -> bool:
    """Whether the 2-D statement reads an element that another iteration of a parallel loop writes: find the
    distance between the written and the read element, and see whether a parallel loop carries it."""
    lines = code.splitlines()
    start = next(k for k, ln in enumerate(lines) if re.search(r"omp (parallel for|for|parallel do|do)\b", ln, re.I))
    heads = [m.group(1) or m.group(2) for ln in lines[start:] if (m := _LOOP_HEAD.match(ln))]
    parallel = set(heads[:2] if "collapse(2)" in lines[start].lower() else heads[:1])
    stmt = next(ln for ln in lines[start:] if "=" in ln and not _LOOP_HEAD.match(ln) and "omp" not in ln.lower())
    lhs, rhs = (x.strip().rstrip(";") for x in stmt.split("=", 1))
    name = re.match(r"\w+", lhs).group()  # type: ignore[union-attr]
    written, _ = _groups(lhs, len(name))
    at = re.search(rf"\b{name}\b", rhs)
    assert at, stmt
    read, _ = _groups(rhs, at.end())
    size_name, size = _size(code)
    loop_vars = sorted({m.group(1) or m.group(2) for ln in lines if (m := _LOOP_HEAD.match(ln))})

    def element(subs: list[str], env: dict[str, int]) -> tuple[int, ...]:
        return tuple(eval(re.sub(rf"\b{size_name}\b", str(size), x), {}, env) for x in subs)

    point = {v: 5 + 3 * k for k, v in enumerate(loop_vars)}
    target = element(read, point)
    carriers = [v for v in loop_vars for d in range(-3, 4)
                if d and element(written, {**point, v: point[v] - d}) == target]
    assert element(written, point) == target or carriers, (stmt, code)
    return any(v in parallel for v in carriers)


def _region(lines: list[str], start: int) -> list[str]:
    """The lines of the construct whose directive is at ``start``: to its matching brace (C) or end directive."""
    if "!$omp" in lines[start].lower():
        kind = re.search(r"omp (parallel sections|parallel|sections)", lines[start].lower()).group(1)  # type: ignore
        end = next(k for k in range(start + 1, len(lines)) if f"omp end {kind}" in lines[k].lower())
        return lines[start + 1:end]
    depth, out = 0, []
    for ln in lines[start + 1:]:
        depth += ln.count("{") - ln.count("}")
        out.append(ln)
        if depth == 0 and "}" in ln:
            return out
    raise AssertionError(lines[start])


def _unprotected(section: list[str]) -> list[str]:
    """The lines of a section outside its critical regions."""
    out, k = [], 0
    while k < len(section):
        if "omp critical" not in section[k]:
            out.append(section[k])
            k += 1
        elif "!$omp" in section[k]:
            k = next(x for x in range(k, len(section)) if "omp end critical" in section[x]) + 1
        elif section[k + 1].strip() == "{":
            k += 1 + len(_region(section, k))
        else:
            k += 2
    return out


def _sections_racy(low: str) -> bool:
    lines = low.splitlines()
    start = next(k for k, ln in enumerate(lines) if "omp parallel sections" in ln)
    region = _region(lines, start)
    cuts = [k for k, ln in enumerate(region) if re.search(r"omp section\b", ln)]
    parts = [region[a + 1:b] for a, b in zip(cuts, [*cuts[1:], len(region)], strict=True)]
    def assigned(part: list[str]) -> set[str]:
        return {m.group(1) for ln in part if not _LOOP_HEAD.match(ln)
                if (m := re.match(r"\s*(\w+)\s*(?:\+=|=[^=])", ln))}
    def used(part: list[str]) -> set[str]:
        return {w for ln in part if not _LOOP_HEAD.match(ln) for w in re.findall(r"[a-z_]\w*", ln)}
    free = [_unprotected(x) for x in parts]
    return any(assigned(free[a]) & used(parts[b]) for a in range(len(parts)) for b in range(len(parts)) if a != b)


def _locks_racy(low: str, v: str) -> bool:
    """An update of ``v`` inside the parallel loop while no lock is held."""
    lines = low.splitlines()
    start = next(k for k, ln in enumerate(lines) if re.search(r"omp parallel", ln))
    depth = 0
    for ln in lines[start:]:
        if "destroy_" in ln:
            break
        if "unset_" in ln:
            depth -= 1
        elif re.search(r"omp_(set|test)_(nest_)?lock", ln):
            depth += 1
        elif re.search(rf"\b{v}\s*(\+=|=)", ln) and depth == 0:
            return True
    return False


def _tasks_racy(low: str, v: str) -> bool:
    """Tasks that access ``v``, in program order; the first writes it. Ordered only by depend(out/inout) on the
    writer and a depend on ``v`` on each later task."""
    lines = low.splitlines()
    tasks = []
    for k, ln in enumerate(lines):
        m = re.search(r"omp task\b(.*)", ln)
        if not m:
            continue
        body = next(x for x in lines[k + 1:] if x.strip() not in ("{", ""))
        dep = re.search(rf"depend\((in|out|inout): {v}\)", m.group(1))
        if re.search(rf"\b{v}\b", body):
            tasks.append((dep.group(1) if dep else None, bool(re.match(rf"\s*{v}\s*=", body))))
    assert tasks and tasks[0][1], low
    writer = tasks[0][0]
    return any(not (writer in ("out", "inout") and dep is not None) for dep, _ in tasks[1:])


def _helper_keeps_state(code: str, language: str) -> bool:
    """The function called in the parallel loop writes a variable with static storage (C: a static local or a
    file-scope variable; Fortran: a SAVE or initialised local, or a variable of the host program)."""
    low = code.lower()
    start = next(k for k, ln in enumerate(low.splitlines()) if re.search(r"omp parallel", ln))
    loop_body = "\n".join(low.splitlines()[start:start + 6])
    if language == "c":
        funcs = {m.group(1): m.group(2) for m in
                 re.finditer(r"^static \w+ \*?(\w+)\([^)]*\)\s*\{?\s*\n(.*?)^\}", low, re.S | re.M)}
        called = next(f for f in funcs if re.search(rf"\b{f}\(", loop_body))
        body = funcs[called]
        statics = set(re.findall(r"^\s+static \w+ (\w+)", body, re.M))
        statics |= set(re.findall(r"^static \w+ (\w+);", low, re.M))
        written = set(re.findall(r"^\s*(\w+)\s*=", body, re.M))
        return bool(written & statics)
    helpers = {m.group(2): m.group(3) for m in
               re.finditer(r"^\s*(function|subroutine) (\w+)\([^)]*\)[^\n]*\n(.*?)^\s*end \1", low, re.S | re.M)}
    called = next(f for f in helpers if re.search(rf"\b{f}\(", loop_body))
    body = helpers[called]
    declared = {w.strip() for ln in body.splitlines() if "::" in ln
                for w in ln.split("::")[1].split("=")[0].split(",")}
    saved = {ln.split("::")[1].split("=")[0].strip() for ln in body.splitlines()
             if "::" in ln and ("save" in ln.split("::")[0] or "=" in ln.split("::")[1])}
    written = set(re.findall(r"^\s*(\w+)\s*=", body, re.M))
    return bool(written & saved or written - declared)


def test_labels_match_the_program_structure() -> None:
    for language in LANGUAGES:
        for seed in range(4):
            for r in generate_race_items(language, 4, seed):
                assert racy_by_structure(r) == (r.answer == "yes"), (r.metadata, r.response, code_of(r))
                if r.metadata["pattern"] == "simd_dependence":
                    assert "omp simd" in code_of(r).lower() and "parallel" not in code_of(r).lower()


def _build_and_run(r: Record, work: Path, cmd: list[str], suffix: str) -> str | None:
    """None when the program compiles cleanly and runs to exit 0 on one thread (where no race can occur), else why."""
    work.mkdir()
    src = work / f"prog{suffix}"
    src.write_text(code_of(r))
    built = subprocess.run([*cmd, str(src), "-o", str(work / "prog")], capture_output=True, text=True, timeout=120)
    if built.returncode:
        return f"{r.metadata} does not compile:\n{code_of(r)}\n{built.stderr}"
    ran = subprocess.run([str(work / "prog")], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    return None if ran.returncode == 0 else f"{r.metadata} exits {ran.returncode}:\n{code_of(r)}\n{ran.stderr}"


def _check_all(records: list[Record], tmp_path: Path, cmd: list[str], suffix: str) -> None:
    with ThreadPoolExecutor(4) as pool:
        problems = [p for p in pool.map(lambda kr: _build_and_run(kr[1], tmp_path / str(kr[0]), cmd, suffix),
                                        enumerate(records)) if p]
    assert not problems, problems[0]


@pytest.mark.integration
@pytest.mark.parametrize("surface", ["narrow", "wide"])
def test_c_programs_compile_warning_free_and_run_in_bounds(tmp_path: Path, surface: str) -> None:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    recs = [r for seed in (0, 1) for r in generate_race_items("c", 2, seed, surface=surface)]
    # -Wall -Werror: no unused or uninitialised variable; ASan/UBSan: every index stays in bounds.
    _check_all(recs, tmp_path, ["gcc", "-fopenmp", "-Wall", "-Werror", "-g", "-fsanitize=address,undefined"], ".c")


@pytest.mark.integration
@pytest.mark.parametrize("surface", ["narrow", "wide"])
def test_fortran_programs_compile_warning_free_and_run_in_bounds(tmp_path: Path, surface: str) -> None:
    if shutil.which("gfortran") is None:
        pytest.skip("gfortran is not installed (Debian package gfortran)")
    recs = [r for seed in (0, 1) for r in generate_race_items("fortran", 2, seed, surface=surface)]
    _check_all(recs, tmp_path, ["gfortran", "-fopenmp", "-Wall", "-Werror", "-g", "-fcheck=bounds"], ".f90")


def test_wide_names_are_new_and_distinct_ignoring_case() -> None:
    """Fortran ignores case, so two names that differ only in case would declare one variable twice."""
    from hpcrl_core.data.race.names import POOLS, WIDE

    narrow = {x.lower() for pool in POOLS.values() for x in pool}
    wide = [x.lower() for pool in WIDE.values() for x in pool]
    assert set(WIDE) == set(POOLS)
    assert len(wide) == len(set(wide)) and not set(wide) & narrow


def test_unknown_surface_is_refused() -> None:
    with pytest.raises(DataError, match="surface 'fancy'"):
        generate_race_items("c", 1, 0, surface="fancy")
