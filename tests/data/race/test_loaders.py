"""Tests of the DataRaceBench and HPC-GPT race loaders on small fixtures in the real formats
(tests/data/race/fixtures/), of quarantining the records they cannot label, and of label-leak stripping.

Run: pytest tests/data/race/test_loaders.py
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hpcrl_core.data.quarantine import Quarantined
from hpcrl_core.data.race.generator import SYSTEM
from hpcrl_core.data.race.loaders import (
    NOTICE_FILE,
    dataracebench_notice,
    load_dataracebench,
    load_hpcgpt_race,
    race_label,
    strip_label_leaks,
)
from hpcrl_core.data.schema import Record
from hpcrl_core.errors import DataError

FIXTURES = Path(__file__).parent / "fixtures"
DRB = FIXTURES / "dataracebench"
KEYS = {"language", "pattern", "label", "tsan", "source_name"}


def code_of(r: Record) -> str:
    m = re.search(r"```\w*\n(.*?)```", r.question, re.S)
    assert m, r.question
    return m.group(1)


def assert_no_leak(code: str) -> None:
    low = code.lower()
    assert "drb" not in low and "race" not in low and "antidep" not in low, code
    assert not re.search(r"\b(yes|no)\b", low), code


def test_dataracebench_c() -> None:
    recs = load_dataracebench(DRB, "c")
    assert [(r.metadata["source_name"], r.metadata["pattern"], r.answer) for r in recs] == [
        ("DRB001-antidep1-orig-yes.c", "antidep1", "yes"), ("DRB045-doall1-orig-no.c", "doall1", "no")]
    for r in recs:  # the helper in utilities/ has no label and is not read
        assert r.family == "race_c" and set(r.metadata) == KEYS and r.metadata["tsan"] is None
        assert r.metadata["label"] == r.answer and r.prompt[0]["content"] == SYSTEM
        path = f"micro-benchmarks/{r.metadata['source_name']}"
        assert r.provenance == {"source": f"dataracebench:{DRB}", "path": path}
        assert_no_leak(code_of(r))
        assert "```c\n#include <stdio.h>" in r.question
    code = code_of(recs[0])
    assert 'printf("kernel1 a[500]=%d\\n", a[500]);' in code  # a DRB name in a string is renamed
    assert "http://example.org // not a comment" in code       # "//" inside a string is no comment
    assert recs[0].response == ("yes: `a[i+1]` and `a[i]` are accessed concurrently without synchronization, and at "
                                "least one access is a write.")
    assert recs[1].response == "no"


def test_dataracebench_fortran() -> None:
    recs = load_dataracebench(DRB, "fortran")
    assert [(r.metadata["source_name"], r.answer, r.family) for r in recs] == [
        ("DRB001-antidep1-orig-yes.f95", "yes", "race_fortran"), ("DRB045-doall1-orig-no.f90", "no", "race_fortran")]
    code = code_of(recs[0])
    assert_no_leak(code)
    assert "module kernel1" in code and "use kernel1" in code and "program kernel2" in code
    assert "end program kernel2" in code and "!$omp parallel do\n" in code  # the directive stays, its comment goes
    assert "print *, 'it''s done: ', a(50)\n" in code_of(recs[1])  # "!" after a quoted quote


@pytest.mark.integration
def test_stripped_programs_still_compile(tmp_path: Path) -> None:
    tools = [("c", "gcc", ".c"), ("fortran", "gfortran", ".f90")]
    for language, compiler, suffix in tools:
        if shutil.which(compiler) is None:
            continue
        for k, r in enumerate(load_dataracebench(DRB, language)):
            src = tmp_path / f"p{k}{suffix}"
            src.write_text(code_of(r))
            built = subprocess.run([compiler, "-fopenmp", str(src), "-o", str(tmp_path / f"p{k}")],
                                   capture_output=True, text=True, cwd=tmp_path)
            assert built.returncode == 0, built.stderr


def test_files_directly_under_root_and_unlabelled_files(tmp_path: Path) -> None:
    shutil.copy(DRB / "micro-benchmarks" / "DRB045-doall1-orig-no.c", tmp_path)
    assert [r.answer for r in load_dataracebench(tmp_path, "c")] == ["no"]
    assert load_dataracebench(tmp_path, "c")[0].provenance["path"] == "DRB045-doall1-orig-no.c"
    (tmp_path / "DRB024-simdtruedep-orig-dd.c").write_text("int main(void) { return 0; }\n")
    with pytest.raises(DataError) as err:
        load_dataracebench(tmp_path, "c")
    assert f"{tmp_path / 'DRB024-simdtruedep-orig-dd.c'}: cannot read a yes/no label" in str(err.value)
    assert [r.answer for r in load_dataracebench(tmp_path, "c", skip_unlabelled=True)] == ["no"]


@pytest.mark.parametrize(("name", "pattern", "label"), [
    ("DRB002-antidep1-var-yes.c", "antidep1", "yes"), ("DRB027b-taskdependmissing-orig-yes.c", "taskdependmissing",
                                                       "yes"),
    ("DRB116-target-teams-orig-yes.c", "target-teams", "yes"), ("3mm-parallel-no.c", "3mm-parallel", "no"),
    ("kernel_private_no.c", "kernel_private", "no"),
])
def test_label_and_pattern_from_file_name(tmp_path: Path, name: str, pattern: str, label: str) -> None:
    (tmp_path / name).write_text("int main(void) { return 0; }\n")
    r = load_dataracebench(tmp_path, "c")[0]
    assert (r.metadata["pattern"], r.answer) == (pattern, label)


def test_dataracebench_bad_input(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such DataRaceBench folder"):
        load_dataracebench(tmp_path / "missing", "c")
    with pytest.raises(DataError, match="no c files"):
        load_dataracebench(tmp_path, "c")
    with pytest.raises(DataError, match="'cobol' is not supported"):
        load_dataracebench(DRB, "cobol")


def test_hpcgpt_c() -> None:
    path = FIXTURES / "hpcgpt_race_c.json"
    recs = load_hpcgpt_race(path, "c")
    assert [r.answer for r in recs] == ["yes", "no", "yes", "no"]
    for i, r in enumerate(recs):
        assert r.family == "race_c" and r.prompt[0]["content"] == SYSTEM
        assert r.metadata == {"language": "c", "pattern": None, "label": r.answer, "tsan": None, "source_name": None}
        assert r.provenance == {"source": f"hpcgpt:{path}", "record": i}
        assert "DRB" not in r.question and "Data race pair" not in r.question
        assert r.id == Record(r.family, r.prompt, r.completion, r.answer).id  # id follows the stripped content
    assert recs[0].question.startswith("Does the following code have a data race? Answer yes or no.\n\n#include")
    assert "```c\n#include <stdio.h>\n" in recs[2].question and recs[2].question.endswith("}\n```")
    assert recs[2].response.startswith("The program contains a data race on sum")


def test_hpcgpt_fortran() -> None:
    recs = load_hpcgpt_race(FIXTURES / "hpcgpt_race_fortran.json", "fortran")
    assert [(r.answer, r.family) for r in recs] == [("yes", "race_fortran"), ("no", "race_fortran")]
    assert "!$omp parallel do\n" in recs[0].question and "DRB" not in recs[0].question
    assert "!$omp parallel do reduction(+:s)\n" in recs[1].question


@pytest.mark.parametrize(("output", "label"), [
    ("yes", "yes"), ("Yes, `sum` is shared.", "yes"), ("**No**. Each thread owns its element.", "no"),
    ("The program contains a data race on a.", "yes"), ("There is a data race between the two loops.", "yes"),
    ("A data race exists on x.", "yes"), ("There is no data race.", "no"), ("It is data race free.", "no"),
    ("This code does not contain a data race.", "no"), ("The code doesn't have any data races.", "no"),
    ("The loop is race-free.", "no"),
])
def test_race_label(output: str, label: str) -> None:
    assert race_label(output, Path("f.json"), 0) == label


@pytest.mark.parametrize("output", ["Nope", "Maybe, it depends.", "The loop is parallel.",
                                    "It does not contain a data race in loop 1 but contains a data race in loop 2."])
def test_unreadable_label(output: str) -> None:
    with pytest.raises(DataError) as err:
        race_label(output, Path("task_race.json"), 7)
    assert str(err.value) == f"task_race.json: record 7: field 'output': cannot read a yes/no race label from " \
                             f"{output[:60]!r}"


def test_hpcgpt_bad_input(tmp_path: Path) -> None:
    bad_json = tmp_path / "race.json"
    bad_json.write_text('[{"instruction": "Race?", "input": "int main(void) {}", "output": "yes"}')
    with pytest.raises(DataError, match=re.escape(f"{bad_json}: not valid JSON")):
        load_hpcgpt_race(bad_json, "c")
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps([{"instruction": "Race?", "input": "x", "output": "yes"},
                                   {"instruction": "Race?", "input": "y", "output": "Perhaps."}]))
    with pytest.raises(DataError, match=re.escape(f"{unknown}: record 1: field 'output': cannot read a yes/no race "
                                                  "label from 'Perhaps.'")):
        load_hpcgpt_race(unknown, "c")
    with pytest.raises(DataError, match=re.escape(f"{tmp_path / 'absent.json'}: no such file")):
        load_hpcgpt_race(tmp_path / "absent.json", "fortran")
    with pytest.raises(DataError, match="'rust' is not supported"):
        load_hpcgpt_race(FIXTURES / "hpcgpt_race_c.json", "rust")


def test_dataracebench_notice_is_the_stripped_opening_comment() -> None:
    for language, header in (("c", "Stand-in notice: Copyright (c) hpcrl test authors."),
                             ("fortran", "!!! micro-benchmark (stand-in notice, DataRaceBench-style).")):
        notice = dataracebench_notice([DRB], language)
        assert header in notice and f"dataracebench:{DRB}" in notice
        assert all(header not in r.question for r in load_dataracebench(DRB, language))  # the records lost it
    assert "Data race pair" not in dataracebench_notice([DRB], "c")  # only the opening comment, not the next one


def test_dataracebench_notice_prefers_the_checkout_licence_files(tmp_path: Path) -> None:
    root = tmp_path / "dataracebench"
    shutil.copytree(DRB, root)
    (root / "LICENSE.txt").write_text("BSD licence text of the checkout\n")
    (root / "COPYRIGHT").write_text("Copyright notice of the checkout\n")
    for given in (root, root / "micro-benchmarks"):  # the checkout, or its micro-benchmarks folder
        notice = dataracebench_notice([given], "c")
        assert "BSD licence text of the checkout" in notice and "Copyright notice of the checkout" in notice
        assert "Stand-in notice" not in notice
    assert NOTICE_FILE == "NOTICE-DataRaceBench.txt"


def test_dataracebench_without_a_notice_is_refused(tmp_path: Path) -> None:
    bare = tmp_path / "drb"
    bare.mkdir()
    (bare / "DRB001-antidep1-orig-yes.c").write_text("int main(void) { return 0; }\n")
    with pytest.raises(DataError, match="no DataRaceBench licence notice found"):
        dataracebench_notice([bare], "c")


def test_strip_label_leaks_c() -> None:
    code = ('/* licence\n DataRaceBench */\n#include <stdio.h>\nint main(void) { // yes: race on x\n'
            '  char c = \'"\'; /* DRB001 */ int x = 1;\n  printf("a /* b */ DRB001-antidep1-orig-yes\\n");\n'
            '  return x - 1; }\n')
    assert strip_label_leaks(code) == ('#include <stdio.h>\nint main(void) {\n  char c = \'"\';   int x = 1;\n'
                                       '  printf("a /* b */ kernel1\\n");\n  return x - 1; }\n')


def test_strip_label_leaks_fortran() -> None:
    code = ("!!! header\n\n\nprogram DRB001_antidep1_orig_yes\n  use drb001\n  !$omp parallel do ! DRB001 race\n"
            "  x = \"a!b\" // 'c' ! comment\nend program drb001_antidep1_orig_yes\n")
    assert strip_label_leaks(code, "fortran") == ("program kernel1\n  use kernel2\n  !$omp parallel do\n"
                                                  "  x = \"a!b\" // 'c'\nend program kernel1\n")


PUBLISHED_C = FIXTURES / "hpcgpt_task2_c_sample.json"  # HPC-GPT's task2_c_c++.json layout, six records of our own
STRAY = "' marker are used for each code snippet.\n\n1."  # the output of the one broken record of the published file


def test_hpcgpt_published_layout_quarantines_the_stray_fragment_and_the_missing_field() -> None:
    held: list[Quarantined] = []
    recs = load_hpcgpt_race(PUBLISHED_C, "c", quarantine=held)
    assert [(r.provenance["record"], r.answer) for r in recs] == [(0, "yes"), (1, "no"), (4, "yes"), (5, "no")]
    source = f"hpcgpt:{PUBLISHED_C}"
    assert held == [
        Quarantined(source, 2, f"field 'output': cannot read a yes/no race label from {STRAY!r}"),
        Quarantined(source, 3, "field 'output' is missing or not a non-empty string"),
    ]
    assert recs[0].question.startswith("Given the code snippet:\n#include <stdio.h>\n")
    assert recs[0].question.endswith("Answer 'yes' if it causes a data race problem and 'no' if it will not cause a "
                                     "data race problem.")
    with pytest.raises(DataError, match=re.escape(f"{PUBLISHED_C}: record 2: field 'output': cannot read")):
        load_hpcgpt_race(PUBLISHED_C, "c")  # without a quarantine list the first broken record stops the load


def test_quarantine_leaves_good_records_as_they_were(tmp_path: Path) -> None:
    rows = json.loads(PUBLISHED_C.read_text())
    good = tmp_path / "good.json"
    good.write_text(json.dumps([rows[0], rows[1], {"instruction": "x", "input": "", "output": "Perhaps."},
                                rows[4], rows[5]]))
    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps([rows[0], rows[1], rows[4], rows[5]]))
    held: list[Quarantined] = []
    kept = load_hpcgpt_race(good, "c", quarantine=held)
    strict = load_hpcgpt_race(clean, "c")
    assert [r.to_json().replace(str(good), "F") for r in kept if r.provenance["record"] < 2] == \
           [r.to_json().replace(str(clean), "F") for r in strict[:2]]  # same records, same ids, same bytes
    assert [r.id for r in kept] == [r.id for r in strict] and len(held) == 1


def test_dataracebench_quarantines_unlabelled_files(tmp_path: Path) -> None:
    shutil.copy(DRB / "micro-benchmarks" / "DRB045-doall1-orig-no.c", tmp_path)
    (tmp_path / "DRB024-simdtruedep-orig-dd.c").write_text("int main(void) { return 0; }\n")
    held: list[Quarantined] = []
    assert [r.answer for r in load_dataracebench(tmp_path, "c", quarantine=held)] == ["no"]
    assert len(held) == 1 and held[0].source == f"dataracebench:{tmp_path}"
    assert held[0].record == "DRB024-simdtruedep-orig-dd.c"
    assert held[0].reason.startswith("cannot read a yes/no label from the file name")
    skipped: list[Quarantined] = []
    assert len(load_dataracebench(tmp_path, "c", skip_unlabelled=True, quarantine=skipped)) == 1
    assert skipped == []  # a skipped file is skipped, not quarantined
