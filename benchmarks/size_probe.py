"""Does a policy write a kernel right at the sizes it trained on and wrong at the held-out ones? The prompt's ``n``
is the one thing that differs between a train and a held-out prompt of the same permitted set, so a policy that
learnt code tied to the values of n it was trained at shows it here and nowhere else.

For each policy folder: the held-out problems (``data/dgemm/problems_eval.jsonl``, the first
``evaluate.max_problems``) whose permitted techniques include every technique of the corpus kernel ``--plan`` names,
each prompt rendered as asked and once more at each of ``--sizes`` instead (default ``prepare.dgemm.train_sizes``;
nothing else changes). Every completion opens with the code fence and that kernel's plan line, given; the rest is
sampled as the evaluation samples (``evaluate.samples_per_problem`` at ``evaluate.temperature``, ``evaluate.seed``).
Each completion is benchmarked at the size its prompt asked for (the evaluation's backend, short timing, result cache).

One row per (policy, size): samples, the verified share, and the count per status. Held-out sizes as asked
(``held-out``) against the train sizes: a policy whose failures sit only in the held-out row learnt size-tied code
(``rl_dgemm.visit_sizes``, docs/experiments.md).

Run: ``.venv/bin/python benchmarks/size_probe.py checkpoints/sft/final checkpoints/rl_dgemm/final
[--plan tile-vec8-intrin-4x8] [--sizes 192 256 320] [--data data] [--params params.yaml]``
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hpcrl_core.algorithms.sqd import problems_from_records  # noqa: E402
from hpcrl_core.config import Params, Settings, load_params  # noqa: E402
from hpcrl_core.data.dgemm.corpus import CODE_FENCE, corpus_rows, plan_parameters, plan_text  # noqa: E402
from hpcrl_core.data.dgemm.problems import Problem, problem_prompt  # noqa: E402
from hpcrl_core.errors import ConfigError  # noqa: E402
from hpcrl_core.evaluation.dgemm import benchmark_groups, eval_problems, evaluation_executor  # noqa: E402
from hpcrl_core.evaluation.generate import generate  # noqa: E402
from hpcrl_core.models.saved import load_saved_policy  # noqa: E402

HELD_OUT = "held-out"


def plan_kernel(corpus: Path, parameters: str) -> tuple[str, frozenset[str]]:
    """The opening (code fence and plan line) of the corpus kernel whose name ends in ``parameters``, and its
    techniques.

    Raises:
        ConfigError: no corpus kernel has those parameters.
    """
    for _, row in corpus_rows(corpus, {"kind": str, "name": str, "techniques": list}):
        if plan_parameters(row["name"]) == parameters:
            return CODE_FENCE + plan_text(row["kind"], parameters), frozenset(map(str, row["techniques"]))
    raise ConfigError(f"--plan {parameters!r}: no kernel of {corpus} has these plan parameters")


def probe_problems(problems: Sequence[Problem], techniques: frozenset[str]) -> list[Problem]:
    """The problems whose permitted set includes every one of ``techniques``."""
    return [p for p in problems if techniques <= {str(t) for t in p.permitted}]


def at_sizes(problems: Sequence[Problem], sizes: Sequence[int]) -> dict[str, list[Problem]]:
    """The problems as asked (``held-out``) and at each of ``sizes`` instead (keyed by the size)."""
    out = {HELD_OUT: list(problems)}
    for n in sizes:
        out[str(n)] = [dataclasses.replace(p, n=n) for p in problems]
    return out


def probe_rows(label: str, results: dict[str, list[list[Any]]]) -> list[list[str]]:
    """One table row per size: label, size, samples, verified share, counts per status."""
    rows = []
    for size, groups in results.items():
        flat = [r for g in groups for r in g]
        counts = Counter(str(r.status) for r in flat)
        ok = counts.get("ok", 0)
        rows.append([label, size, str(len(flat)), f"{ok / len(flat):.2f}" if flat else "-",
                     ", ".join(f"{s} {c}" for s, c in sorted(counts.items()) if s != "ok") or "-"])
    return rows


def probe(policy: Path, problems: dict[str, list[Problem]], opening: str, params: Params,
          ex: Any) -> dict[str, list[list[Any]]]:
    """Per size: the benchmark results of the policy's samples, grouped per problem."""
    ep = params.evaluate
    model, tokenizer = load_saved_policy(policy)
    out = {}
    for size, ps in problems.items():
        groups = generate(model, tokenizer, [problem_prompt(p) for p in ps], temperature=ep.temperature,
                          max_new_tokens=ep.dgemm_max_new_tokens, num_return_sequences=ep.samples_per_problem,
                          batch_size=ep.batch_size, seed=ep.seed, opening=opening)
        out[size] = benchmark_groups(ex, groups, [p.n for p in ps])
        print(f"{policy}: n {size}: {sum(len(g) for g in groups)} samples benchmarked", file=sys.stderr, flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("policies", nargs="+", type=Path, help="saved policy folders (checkpoints/.../final)")
    ap.add_argument("--plan", default="tile-vec8-intrin-4x8", help="plan parameters of a corpus kernel")
    ap.add_argument("--sizes", type=int, nargs="+", help="n each prompt is asked again at (default: the params' "
                    "prepare.dgemm.train_sizes; with many train sizes, name a few)")
    ap.add_argument("--data", type=Path, default=ROOT / "data")
    ap.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    args = ap.parse_args(argv)
    params = load_params(args.params)
    sizes = args.sizes or params.prepare.dgemm.train_sizes
    if any(n < 1 for n in sizes):
        raise SystemExit(f"--sizes: matrix sizes are >= 1, got {sizes}")
    try:
        opening, techniques = plan_kernel(args.data / "dgemm" / "corpus.jsonl", args.plan)
    except ConfigError as err:
        raise SystemExit(str(err)) from None
    chosen = probe_problems(problems_from_records(eval_problems(args.data, params.evaluate.max_problems)), techniques)
    if not chosen:
        raise SystemExit(f"no held-out problem permits {', '.join(sorted(techniques))}, the techniques of {args.plan}")
    problems = at_sizes(chosen, sizes)
    ex = evaluation_executor(params, Settings())
    rows = []
    try:
        for policy in args.policies:
            rows += probe_rows(str(policy), probe(policy, problems, opening, params, ex))
    finally:
        ex.close()
    print(f"plan {opening[len(CODE_FENCE):].strip()} on {len(chosen)} held-out problems, "
          f"{params.evaluate.samples_per_problem} samples each at T {params.evaluate.temperature}\n")
    print("| policy | n asked | samples | verified | failed (status count) |\n|---|---|---:|---:|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
