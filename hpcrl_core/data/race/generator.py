"""Synthetic OpenMP data-race items for the ``race_c`` and ``race_fortran`` families, labelled by construction.

Each item is a small, complete OpenMP program (``main`` / ``program``) in the manner of DataRaceBench's
micro-benchmarks, built from one pattern class of ``PATTERNS``; every pattern comes as a racy program and as its
race-free counterpart (private/reduction clause, no dependence, barrier, taskwait, unique indices, atomic).
Names, sizes, element types, memory layout, loop bounds, brace style and harmless extra statements vary with the
seed; no identifier names the label. The same ``(language, per_pattern, seed)`` always gives the same records, and
item ``j`` of a pattern does not depend on ``per_pattern`` (a larger count extends a smaller one).

Items come in minimal pairs: the racy item ``2m`` and the race-free item ``2m + 1`` of a pattern are drawn from one
seed, so they share names, sizes, types and layout up to where the kernel's choice of fix starts drawing (a
comment or an extra statement after that point may differ). A model trained on such pairs has to find what makes
the race, not what tells two unrelated programs apart: with the tiny SFT model on race items alone, held-out F1
rose from 0.62 to 0.86 at the same size and steps (docs/experiments.md). ``provenance["pair"]`` names the pair, and
the prepare stage keeps both halves of a pair on one side of the train/eval split. ``held_out_pairs`` more pairs per
pattern (``prepare.race.eval_pairs``) come after every trained item and are marked ``provenance["held_out"]``: the
prepare stage puts them in eval only, so eval is large enough to compare methods while train stays as it was.

Labels follow OpenMP semantics, not what one run shows: an ``omp simd`` loop with a loop-carried dependence is a
race (SIMD lanes run iterations concurrently) although no second thread exists; ThreadSanitizer cannot see those
(see ``tsan``).

This module is the public entry point (``generate_race_items``, ``race_question``, ``race_metadata``, ``PATTERNS``,
``FAMILIES``, ``SYSTEM``). What every pattern shares (names, declarations, init and report code, the C / Fortran
layout) is the program builder ``programs.Program``; the per-pattern kernels that build on it live in ``kernels``.

Run: ``python -c "import hpcrl_core.data.race.generator as r; print(r.generate_race_items('c', 2, 0)[0].question)"``
Test: ``pytest tests/data/race/test_generator.py`` (compiles every sampled program with gcc / gfortran -fopenmp).
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from hpcrl_core.data.race.grammar import grammar_kernel
from hpcrl_core.data.race.kernels import KERNELS as PATTERN_KERNELS
from hpcrl_core.data.race.programs import Program
from hpcrl_core.data.schema import Record, assistant, messages
from hpcrl_core.errors import DataError

SYSTEM = "You are an expert in parallel programming with OpenMP in C, C++ and Fortran."
QUESTION = "Does the following OpenMP program contain a data race? Answer yes or no, then explain briefly."
SOURCE = "synthetic:race@3"  # @3: 14 patterns (@2: 8; @1 drew every item from its own seed)
SURFACES = ("narrow", "wide")  # prepare.race.surface; "wide" items are tagged SOURCE + "+wide"
FAMILIES = {"c": "race_c", "fortran": "race_fortran"}
FENCES = {"c": "c", "fortran": "fortran"}
PATTERNS = ("missing_private", "missing_reduction", "loop_carried", "missing_barrier", "missing_taskwait",
            "simd_dependence", "indirect_access", "missing_atomic", "nested_dependence", "sections", "locks",
            "task_depend", "offload", "function_state")
GRAMMAR = "grammar"  # drawn nests labelled by a dependence check (``grammar``); counted by ``grammar_pairs``
KERNELS = {**PATTERN_KERNELS, GRAMMAR: grammar_kernel}

def race_question(code: str, fence: str) -> str:
    """The user message for one program; ``fence`` is the code block's language tag (c, cpp, fortran)."""
    return f"{QUESTION}\n\n```{fence}\n{code.strip()}\n```"


def race_metadata(language: str, pattern: str | None, label: str, source_name: str | None = None) -> dict[str, Any]:
    """The metadata of every race record: exactly these keys, whatever the source."""
    return {"language": language, "pattern": pattern, "label": label, "tsan": None, "source_name": source_name}


def generate_race_items(language: str, per_pattern: int, seed: int, held_out_pairs: int = 0,
                        rl_pairs: int = 0, surface: str = "narrow", grammar_pairs: int = 0) -> list[Record]:
    """``per_pattern`` racy ("yes") and ``per_pattern`` race-free ("no") programs for each of ``PATTERNS``.

    Then, after all of them (which stay exactly as without it), ``held_out_pairs`` more pairs per pattern (pair numbers
    ``per_pattern`` on), marked ``provenance["held_out"] = True``: the prepare stage puts them in eval only; then
    ``rl_pairs`` more (pair numbers after those), marked ``provenance["rl"] = True``: RL prompts only, never in SFT
    or eval.

    Args:
        language: "c" (family race_c) or "fortran" (family race_fortran).
        per_pattern: items per (pattern, label), as ``prepare.race.per_pattern`` in params.yaml.
        seed: every program is a pure function of (seed, language, pattern, item number).
        held_out_pairs: pairs per pattern made for eval only, as ``prepare.race.eval_pairs``.
        rl_pairs: pairs per pattern made for RL only, as ``prepare.race.rl_pairs``.
        surface: as ``prepare.race.surface``. "narrow": names from small pools, one printf format, the kernel alone.
            "wide": more names per role, varied report formats, and up to two race-free extra loops (an independent
            parallel loop, a reduction with its clause, a private temporary, a serial recurrence) before or after
            the kernel under both labels. Labels are unchanged by construction; "narrow" items are exactly those of
            the generator before "wide" existed.
        grammar_pairs: pairs of the ``grammar`` pattern (random loop nests labelled by a dependence check, see
            ``grammar``), as ``prepare.race.grammar_pairs``; after the fourteen patterns in each block, with
            ``held_out_pairs`` and ``rl_pairs`` more of them when it is above 0. 0 leaves every item as before.

    Raises:
        DataError: unknown language or surface, ``per_pattern`` below 1, ``held_out_pairs`` or ``rl_pairs`` below 0.
    """
    if language not in FAMILIES:
        raise DataError(f"race generator: language {language!r} is not supported; allowed: {', '.join(FAMILIES)}")
    if surface not in SURFACES:
        raise DataError(f"race generator: surface {surface!r} is not supported; allowed: {', '.join(SURFACES)}")
    if per_pattern < 1:
        raise DataError(f"race generator: per_pattern={per_pattern}; it must be >= 1 (items per pattern and label)")
    if held_out_pairs < 0:
        raise DataError(f"race generator: held_out_pairs={held_out_pairs}; it must be >= 0 (eval-only pairs per "
                        "pattern, prepare.race.eval_pairs)")
    if grammar_pairs < 0:
        raise DataError(f"race generator: grammar_pairs={grammar_pairs}; it must be >= 0 (prepare.race.grammar_pairs)")
    if rl_pairs < 0:
        raise DataError(f"race generator: rl_pairs={rl_pairs}; it must be >= 0 (RL-only pairs per pattern, "
                        "prepare.race.rl_pairs)")
    out: list[Record] = []
    seen: set[str] = set()
    wide = surface == "wide"
    source = SOURCE + ("+wide" if wide else "")
    counts = {pattern: per_pattern for pattern in PATTERNS}
    if grammar_pairs:
        counts[GRAMMAR] = grammar_pairs
    blocks = ((None, 0), ("held_out", held_out_pairs), ("rl", rl_pairs))
    starts = dict.fromkeys(counts, 0)  # the next pair number of each pattern
    for mark, extra in blocks:
        for pattern, trained in counts.items():
            count = trained if mark is None else extra
            first = starts[pattern]
            starts[pattern] = first + count
            for j in range(2 * first, 2 * (first + count)):
                label, pair = "no" if j % 2 else "yes", j // 2
                code, reason = _program(language, pattern, label == "yes", seed, pair, seen, wide)
                provenance = {"source": source, "seed": seed, "index": len(out),
                              "pair": f"{language}:{pattern}:{pair}"}
                out.append(Record(family=FAMILIES[language], answer=label,
                                  prompt=messages(SYSTEM, race_question(code, FENCES[language])),
                                  completion=assistant(f"{label}: {reason}."),
                                  metadata=race_metadata(language, pattern, label),
                                  provenance={**provenance, mark: True} if mark else provenance))
    return out


def _program(language: str, pattern: str, race: bool, seed: int, pair: int, seen: set[str],
             wide: bool = False) -> tuple[str, str]:
    """A program of pair ``pair`` not yet in ``seen`` (redrawn deterministically on the rare collision), and its
    reason. Both halves of a pair start from the same random stream."""
    for attempt in range(100):
        key = f"{seed}:{language}:{pattern}:{pair}:{attempt}".encode()
        prog = Program(random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big")), language, wide)
        kernel, reason = KERNELS[pattern](prog, race)
        code = prog.render(kernel)
        if code not in seen:
            seen.add(code)
            return code, reason
    raise DataError(f"race generator: could not draw a new {pattern} program for pair {pair}")  # pragma: no cover
