"""Tests of hygiene: planted duplicates, conflicts and leaks are caught; splits are stratified and disjoint;
items made for eval only go to eval without moving any other item.

Run: pytest tests/data/test_hygiene.py
"""

from __future__ import annotations

from collections import Counter

from hpcrl_core.data.hygiene import clean_and_split, question_twins, strip_leaks
from hpcrl_core.data.schema import Record, assistant, messages


def _race(i: int, label: str, code: str | None = None) -> Record:
    prog = code or f"int main() {{ int a{i}[10]; return a{i}[0]; }}"
    return Record("race_c", messages(None, f"Does it race?\n```c\n{prog}\n```"), assistant(label), label,
                  {"label": label, "pattern": "p"}, {"source": "test"})


def test_planted_duplicate_is_dropped() -> None:
    items = [_race(i, "yes" if i % 2 else "no") for i in range(40)]
    items.append(_race(3, "yes"))  # exact duplicate of item 3
    train, evals, rep = clean_and_split(items, lambda r: r.answer, 0.1, 7)
    assert rep.duplicates_dropped == 1 and len(train) + len(evals) == 40


def test_planted_conflict_is_flagged_and_kept_out_of_eval() -> None:
    items = [_race(i, "yes" if i % 2 else "no") for i in range(40)]
    conflict = _race(4, "yes")  # same question as item 4 (labelled no), other answer
    items.append(conflict)
    train, evals, rep = clean_and_split(items, lambda r: r.answer, 0.5, 7)
    assert set(rep.conflicts) == {conflict.id, items[4].id}
    assert not {r.id for r in evals} & set(rep.conflicts)


def test_planted_leaking_identifier_is_stripped() -> None:
    leaky = _race(1, "yes", code="/* DRB001-antidep1-orig-yes.c */\nint race_yes(void) { return 0; }")
    items = [leaky] + [_race(i, "no") for i in range(2, 12)]
    train, evals, rep = clean_and_split(items, lambda r: r.answer, 0.1, 1, strip=True)
    assert rep.leaks_stripped == 2
    text = " ".join(m["content"] for r in train + evals for m in r.prompt)
    assert "DRB001" not in text and "race_yes" not in text and "_yes" not in text
    assert strip_leaks("int foo_no = 1;")[0] == "int foo = 1;"
    assert strip_leaks("no leak here, yes")[1] == 0


def test_split_is_stratified_seeded_and_disjoint() -> None:
    items = [_race(i, "yes" if i < 60 else "no") for i in range(100)]
    train, evals, rep = clean_and_split(items, lambda r: r.answer, 0.1, 42)
    assert Counter(r.answer for r in evals) == {"yes": 6, "no": 4}
    assert not {r.content_hash() for r in train} & {r.content_hash() for r in evals}
    again = clean_and_split(items, lambda r: r.answer, 0.1, 42)[1]
    assert [r.id for r in again] == [r.id for r in evals]
    other = clean_and_split(items, lambda r: r.answer, 0.1, 43)[1]
    assert [r.id for r in other] != [r.id for r in evals]


def test_groups_stay_on_one_side() -> None:
    items = [Record("plp", messages(None, f"Q{fact} variant {v}?"), assistant(f"A{fact}"), f"A{fact}",
                    {"topic": "t", "fact_id": f"f{fact}"}, {"source": "t"}) for fact in range(30) for v in range(3)]
    train, evals, _ = clean_and_split(items, lambda r: "t", 0.1, 5, group=lambda r: r.metadata["fact_id"])
    assert len(evals) == 9  # 3 of 30 facts, all 3 paraphrases each
    assert not {r.metadata["fact_id"] for r in train} & {r.metadata["fact_id"] for r in evals}


def test_one_group_more_moves_no_other_group_across_the_split() -> None:
    items = [_race(i, "yes" if i % 2 else "no") for i in range(200)]
    _, evals, _ = clean_and_split(items, lambda r: r.answer, 0.1, 9)
    _, evals_more, _ = clean_and_split(items + [_race(1000, "yes")], lambda r: r.answer, 0.1, 9)
    assert len({r.id for r in evals} ^ {r.id for r in evals_more}) <= 2  # at most the newcomer swaps in for one


def test_held_out_items_go_to_eval_and_move_nothing_else() -> None:
    items = [_race(i, "yes" if i % 2 else "no") for i in range(100)]
    held = [Record("race_c", messages(None, f"Held {i}?"), assistant("yes"), "yes", {"label": "yes"},
                   {"source": "test", "held_out": True}) for i in range(7)]

    def is_held(r: Record) -> bool:
        return r.provenance.get("held_out") is True

    train, evals, rep = clean_and_split(items, lambda r: r.answer, 0.1, 3)
    train_h, evals_h, rep_h = clean_and_split(items + held, lambda r: r.answer, 0.1, 3, held_out=is_held)
    assert train_h == train  # the 9:1 draw of the other items is exactly as without them
    assert [r for r in evals_h if not is_held(r)] == evals and {r.id for r in held} <= {r.id for r in evals_h}
    assert (rep.eval, rep_h.eval, rep_h.held_out, rep_h.as_dict()["eval_held_out"]) == (10, 17, 7, 7)


def test_a_held_out_item_with_a_conflicting_answer_goes_to_train() -> None:
    items = [_race(i, "yes" if i % 2 else "no") for i in range(20)]
    clash = Record("race_c", items[4].prompt, assistant("yes"), "yes", {"label": "yes"},
                   {"source": "test", "held_out": True})  # item 4's question, the other answer
    train, evals, rep = clean_and_split(items + [clash], lambda r: r.answer, 0.1, 3,
                                        held_out=lambda r: r.provenance.get("held_out") is True)
    assert clash.id in {r.id for r in train} and clash.id in rep.conflicts and rep.held_out == 0


def _twin(i: int, label: str, why: str) -> Record:
    """Item i's question and answer with another explanation: neither a duplicate nor a conflict."""
    return Record("race_c", _race(i, label).prompt, assistant(f"{label}: {why}"), label, {"label": label},
                  {"source": "test"})


def test_an_eval_question_that_train_asks_moves_to_train_with_its_group() -> None:
    items = [_race(i, "yes" if i % 2 else "no") for i in range(40)] + [_twin(i, "yes" if i % 2 else "no", "again")
                                                                      for i in range(40)]
    plain_train, plain_evals, plain = clean_and_split(items[:40], lambda r: r.answer, 0.2, 7)
    train, evals, rep = clean_and_split(items, lambda r: r.answer, 0.2, 7)
    assert rep.duplicates_dropped == 0 and not rep.conflicts  # the twins are neither
    assert rep.twins_moved > 0 and len(train) + len(evals) == 80
    assert not {r.question_hash() for r in evals} & {r.question_hash() for r in train}
    assert rep.as_dict()["eval_twins_moved_to_train"] == rep.twins_moved and rep.as_dict()["split"] == "cleaned"
    assert plain.twins_moved == 0 and len(plain_evals) == 8


def test_the_raw_split_keeps_everything_and_counts_the_twins() -> None:
    items = [_race(i, "yes" if i % 2 else "no") for i in range(40)]
    items += [_race(3, "yes"), _race(4, "yes"), _twin(5, "yes", "again")]  # a duplicate, a conflict, a twin
    items.append(_race(99, "no", code="/* DRB001-antidep1-orig-no.c */ int main(void) { return 0; }"))
    train, evals, rep = clean_and_split(items, lambda r: r.answer, 0.5, 7, strip=True, raw=True)
    assert len(train) + len(evals) == len(items) and rep.split == "raw"
    assert rep.duplicates_dropped == rep.leaks_stripped == rep.twins_moved == 0 and not rep.conflicts
    assert any("DRB001" in r.question for r in train + evals)  # nothing stripped either
    exact, conflicting = question_twins(train, evals)
    assert (rep.eval_exact_twins, rep.eval_conflicting_twins) == (exact, conflicting)
    twins = {3, 4, 5}  # each question asked twice: by how the draw fell, a twin in eval faces one in train or not
    pairs = [(i, [r for r in items if r.question_hash() == _race(i, "no").question_hash()]) for i in twins]
    split = [(i, [any(r is e for e in evals) for r in rs]) for i, rs in pairs]
    expected_exact = sum(1 for i, flags in split if i in (3, 5) and flags.count(True) == 1)
    expected_conflicting = sum(1 for i, flags in split if i == 4 and flags.count(True) == 1)
    assert (exact, conflicting) == (expected_exact, expected_conflicting) and exact + conflicting >= 1
    assert rep.as_dict()["train_eval_overlap"] is None  # not checked: the raw split may overlap by design
