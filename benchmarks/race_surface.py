"""Does a race policy read the race or the surface? Its answers to held-out synthetic C items, as generated and after
one harmless edit at a time that leaves every label as it is.

The edits: longer array names (``a`` -> ``alpha_v``, names no generator pool holds), a race-free parallel loop over
a new array before the kernel, a serial loop-carried recurrence over a new array before the report (one thread: no
race), another ``printf`` format, and the generator's own comments removed (as the loader strips those of real
programs). Prints accuracy, race F1 and the share of "yes" answers per edit. A policy that reads the race keeps its
accuracy under every edit; one that matches the generator's surface loses it, and answers "yes" to what it does not
recognise.

Run: ``.venv/bin/python benchmarks/race_surface.py --model DIR --data DIR [--items 600]`` (``DIR``s as written by
``benchmarks/race_scale.py``: ``<run>/sft/final`` and ``<run>/data``, or ``checkpoints/sft/final`` and ``data``).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from hpcrl_core.data.race.generator import race_question
from hpcrl_core.data.race.tsan import extract_c_code
from hpcrl_core.data.schema import Record, read_jsonl
from hpcrl_core.evaluation.generate import generate
from hpcrl_core.evaluation.metrics import parse_race_answer, race_f1
from hpcrl_core.evaluation.runner import load_model

# Single-letter array names of the generator's narrow pool and a longer word for each (none is in any pool).
LONGER = {"a": "alpha_v", "b": "bravo_v", "c": "carry_v", "d": "delta_v", "e": "echo_v", "x": "xpos", "y": "ypos",
          "z": "zpos", "u": "uvel", "v": "vvel", "w": "wgt", "f": "fx", "g": "gx"}
EXTRA = "static double extra[100];"


def c_code(r: Record) -> str | None:
    """The C program a race item asks about (None for Fortran or C++ items)."""
    found = extract_c_code(r.prompt[-1]["content"])
    return found[0] if found and found[1] == ".c" else None


def _pad(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _before_main(lines: list[str], new: list[str]) -> list[str]:
    m = next(i for i, line in enumerate(lines) if line.startswith("int main"))
    return [*lines[:m], *new, *lines[m:]]


def rename(code: str) -> str:
    for short, long in LONGER.items():
        code = re.sub(rf"\b{short}\b", long, code)
    return code


def clean_loop_before(code: str) -> str:
    lines = code.split("\n")
    k = next(i for i, line in enumerate(lines) if line.lstrip().startswith("#pragma omp"))
    pad = _pad(lines[k + 1])  # the loop's (a pragma may sit flush left)
    lines[k:k] = ["#pragma omp parallel for", f"{pad}for (int q = 0; q < 100; q++)",
                  f"{pad}    extra[q] = q * 0.5;", ""]
    return "\n".join(_before_main(lines, [EXTRA, ""]))


def serial_recurrence(code: str) -> str:
    lines = code.split("\n")
    k = max(i for i, line in enumerate(lines) if line.lstrip().startswith("printf"))
    pad = _pad(lines[k])
    lines[k:k] = [f"{pad}for (int q = 1; q < 100; q++)", f"{pad}    extra[q] = extra[q - 1] + 1.0;"]
    return "\n".join(_before_main(lines, [EXTRA, ""]))


def printf_format(code: str) -> str:
    return code.replace('printf("%g', 'printf("result = %f')


def no_comments(code: str) -> str:
    return "\n".join(line for line in code.split("\n") if not line.strip().startswith(("//", "/*")))


EDITS: dict[str, Callable[[str], str]] = {"as generated": lambda c: c, "longer names": rename,
                                          "parallel loop before": clean_loop_before,
                                          "serial recurrence after": serial_recurrence,
                                          "printf format": printf_format, "comments removed": no_comments}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--data", type=Path, required=True, help="prepared data; race_c/eval.jsonl is read")
    ap.add_argument("--items", type=int, default=600, help="the first this many held-out C items")
    a = ap.parse_args(argv)
    records = [r for r in read_jsonl(a.data / "race_c" / "eval.jsonl") if c_code(r) is not None][: a.items]
    model, tokenizer = load_model(a.model)
    print(f"{len(records)} held-out C items, {sum(r.answer == 'yes' for r in records)} racy; model {a.model}")
    for name, edit in EDITS.items():
        prompts = [[*r.prompt[:-1], {"role": "user", "content": race_question(edit(str(c_code(r))), "c")}]
                   for r in records]
        answers = [x[0] for x in generate(model, tokenizer, prompts, temperature=0.0, max_new_tokens=8,
                                          batch_size=16, seed=0)]
        s = race_f1(answers, [r.answer or "" for r in records])
        yes = sum(parse_race_answer(x) == "yes" for x in answers) / len(answers)
        print(f"{name:<24} accuracy {s['accuracy']:.3f}  F1 {s['f1']:.3f}  yes {yes:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
