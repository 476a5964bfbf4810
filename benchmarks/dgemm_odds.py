"""The odds that one RL visit samples a fast DGEMM kernel, read from a saved policy without training.

Whether a GRPO run finds the fast kinds (packed micro-kernels, vector tiles) depends on how often the policy samples
one that verifies, on the problems RL trains on, at the temperature RL samples at. This script measures that
directly, separating the policy's **choice** of a kind from its **capacity** to write one:

- **free**: ``--k`` samples per problem at ``--temperature`` (default ``rl_dgemm.temperature``), as a visit samples
  them (after the code fence when ``rl_dgemm.fence_given`` is on, their plan lines held to the corpus's when
  ``rl_dgemm.plan_vocabulary`` is, as RL generates them); each counted under the
  kind its plan line names (``exploration.kind_of``; "none" without one);
- **forced**: per kind the problem's permitted set allows (``exploration.kind_requirements``), ``--k`` samples
  after the forced opening ``// plan: <kind>``, in the ids one of the kind's SFT completions opens with, drawn per
  sample (``exploration.opening_ids``, as plan novelty forces them): can the policy write that kind once chosen.

Problems: the first ``rl_dgemm.problems`` of ``data/dgemm/problems_train.jsonl`` (the ones RL trains on), rendered at
``--stage`` (default 5, every technique permitted: the stage at which the fast kinds are allowed). Every sample is
benchmarked at its problem's n on 1-core slots (``bench.short_timing``) and compared with numpy measured in the same
run at that n; "fast" is ``targets.BEST_VS_NUMPY`` (0.8) of numpy or more. The visit odds are, per problem,
1 - (1 - p)^G with p that problem's fast share of free samples and G ``rl_dgemm.num_generations``, averaged.

Several ``--model`` folders are sampled, then timed in one run against one numpy figure per size (numpy measured in
separate runs on a shared VM moved by 10-25%, which moves the fast share with it). Writes ``<out>/odds.json``
(every sample's model, kind, status and ratio) and prints the tables per model.

Run: ``.venv/bin/python benchmarks/dgemm_odds.py --model checkpoints/sft/final [more ...] [--data data] [--k 8]
[--temperature 0.5] [--stage 5] [--kinds packed tile_vec] [--problems 16] [--seed 0] [--out experiments/odds]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from transformers import LogitsProcessorList  # noqa: E402

from hpcrl_core.algorithms.exploration import kind_of, kind_openings, kind_requirements, opening_ids  # noqa: E402
from hpcrl_core.bench.executor import map_sized  # noqa: E402
from hpcrl_core.config import Settings, load_params  # noqa: E402
from hpcrl_core.data.dgemm.corpus import CODE_FENCE, plan_openings  # noqa: E402
from hpcrl_core.data.dgemm.problems import problem_prompt  # noqa: E402
from hpcrl_core.evaluation.dgemm import evaluation_executor, node_figures  # noqa: E402
from hpcrl_core.evaluation.openings import OpeningVocabulary  # noqa: E402
from hpcrl_core.evaluation.targets import BEST_VS_NUMPY  # noqa: E402
from hpcrl_core.models.saved import load_saved_policy  # noqa: E402
from hpcrl_core.training.rl_curriculum import load_curriculum  # noqa: E402


def sample(model: Any, tokenizer: Any, prompt: list[dict[str, str]], opening: Sequence[int], *, k: int,
           temperature: float, seed: int, max_new_tokens: int, vocab: OpeningVocabulary | None = None) -> list[str]:
    """k completions of ``prompt`` at ``temperature``, each opening with the token ids ``opening`` (may be empty),
    decoded with the opening in front; with ``vocab`` the plan line is held to the corpus's, as RL holds it
    (``rl_dgemm.plan_vocabulary``)."""
    text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    ids = [*tokenizer(text, add_special_tokens=False)["input_ids"], *opening]
    x = torch.tensor([ids] * k)
    held = {} if vocab is None else {"logits_processor": LogitsProcessorList(
        [vocab.processor("".join(vocab.pieces[i] for i in opening))])}
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), do_sample=True,
                             temperature=temperature, max_new_tokens=max_new_tokens,
                             pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id, **held)
    return [str(tokenizer.decode([*opening, *row[len(ids):].tolist()], skip_special_tokens=True)) for row in out]


def cells(rows: Sequence[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    """Per value of ``key``: samples, the share whose plan line names that kind, verified share, fast share, best
    ratio to numpy."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[str(r[key])].append(r)
    return {name: {"samples": len(g), "named": round(sum(r["kind"] == name for r in g) / len(g), 3),
                   "verified": round(sum(r["status"] == "ok" for r in g) / len(g), 3),
                   "fast": round(sum(r["fast"] for r in g) / len(g), 3),
                   "best_vs_numpy": round(max((r["ratio"] or 0.0 for r in g), default=0.0), 3)}
            for name, g in sorted(groups.items())}


def sample_policy(model_dir: Path, problems: Sequence[Any], needs: Mapping[str, frozenset[Any]],
                  texts: Mapping[str, Sequence[str]], a: argparse.Namespace, temperature: float,
                  max_new: int, fence_given: bool,
                  plans: Sequence[str] = ()) -> list[tuple[dict[str, Any], str]]:
    """(metadata, completion) of every free and forced sample of one saved policy on ``problems``; free samples
    open with the code fence when ``fence_given`` (``rl_dgemm.fence_given``); every plan line is one of ``plans``
    when it is given (``rl_dgemm.plan_vocabulary``)."""
    model, tokenizer = load_saved_policy(model_dir)
    vocab = OpeningVocabulary(tokenizer, plans) if plans else None
    openings = {kind: opening_ids(tokenizer, kind, texts.get(kind, [])) for kind in needs}
    free = tuple(tokenizer(CODE_FENCE, add_special_tokens=False)["input_ids"]) if fence_given else ()
    out = []
    for i, problem in enumerate(problems):
        runs = [("free", None)] + [("forced", kind) for kind, need in sorted(needs.items())
                                   if need <= problem.permitted and (a.kinds is None or kind in a.kinds)]
        for mode, kind in runs:
            # free: one batch; forced: each sample opens with one of the kind's openings, drawn (seeded)
            draws = Counter([free] * a.k) if kind is None else Counter(
                tuple(random.Random(f"{a.seed}:{problem.id}:{kind}:{j}").choice(openings[kind])) for j in range(a.k))
            for opening, count in sorted(draws.items()):
                for text in sample(model, tokenizer, problem_prompt(problem), opening, k=count,
                                   temperature=temperature, seed=a.seed + i, max_new_tokens=max_new,
                                   vocab=vocab):
                    out.append(({"model": str(model_dir), "problem_id": problem.id, "n": problem.n, "mode": mode,
                                 "forced": kind, "kind": kind_of(text) or "none"}, text))
        print(f"{model_dir}: sampled problem {i + 1}/{len(problems)}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", nargs="+", default=[str(ROOT / "checkpoints" / "sft" / "final")],
                    help="saved policies; several are timed in one run against one numpy figure per size")
    ap.add_argument("--data", default=str(ROOT / "data"))
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--k", type=int, default=8, help="samples per problem (free) and per problem and kind (forced)")
    ap.add_argument("--temperature", type=float, default=None, help="default: rl_dgemm.temperature")
    ap.add_argument("--stage", type=int, default=5, help="SQD stage the problems are rendered at (0-5)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kinds", nargs="+", default=None, help="forced kinds (default: every kind the stage allows)")
    ap.add_argument("--problems", type=int, default=None, help="the first this many RL problems (default: all)")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default: rl_dgemm.max_completion_length")
    ap.add_argument("--out", default=str(ROOT / "experiments" / "odds"))
    a = ap.parse_args()
    params, data = load_params(a.params), Path(a.data)
    rp = params.rl_dgemm
    temperature = rp.temperature if a.temperature is None else a.temperature
    max_new = a.max_new_tokens or rp.max_completion_length
    if not 0 <= a.stage <= 5 or a.k < 1 or temperature <= 0:
        raise SystemExit("--stage must be 0-5, --k at least 1 and the temperature above 0")
    curriculum = load_curriculum(params, data)
    needs = kind_requirements(data / "dgemm" / "corpus.jsonl")
    unknown = sorted(set(a.kinds or []) - set(needs))
    if unknown:
        raise SystemExit(f"--kinds {unknown}: not kinds of the corpus ({', '.join(sorted(needs))})")
    texts = kind_openings(data / "dgemm" / "corpus.jsonl")
    pids = curriculum.problem_ids[:a.problems] if a.problems else curriculum.problem_ids
    problems = [dataclasses.replace(curriculum.problem(pid), stage=a.stage) for pid in pids]
    d = params.prepare.dgemm
    plans = plan_openings(data / "dgemm" / "corpus.jsonl", d.plan_line, d.plan_permitted,
                          "rl_dgemm.plan_vocabulary", rp.plan_vocabulary)
    samples = [s for m in a.model for s in sample_policy(Path(m), problems, needs, texts, a, temperature, max_new,
                                                         rp.fence_given, plans)]

    print(f"benchmarking {len(samples)} kernels", flush=True)
    with evaluation_executor(params, Settings()) as ex:
        results = map_sized(ex, [(text, m["n"]) for m, text in samples])
        numpy, _, nodes = node_figures(ex, results, sorted({m["n"] for m, _ in samples}))
    meta = [m for m, _ in samples]
    for m, res in zip(meta, results, strict=True):
        ref = res.reference(numpy) if res.ok else None
        m["status"] = res.status.value
        m["ratio"] = round(res.gflops / ref, 4) if ref and res.gflops is not None else None
        m["fast"] = m["ratio"] is not None and m["ratio"] >= BEST_VS_NUMPY

    report: dict[str, Any] = {"temperature": temperature, "k": a.k, "stage": a.stage, "seed": a.seed,
                              "nodes": nodes, "numpy": numpy, "models": {}, "samples": meta}
    print(f"\n{len(pids)} RL problems at stage {a.stage}, T {temperature}, k {a.k}; numpy "
          f"{min(numpy.values()):.1f}-{max(numpy.values()):.1f} GFLOPS at n {min(numpy)}-{max(numpy)}")
    for model in a.model:
        mine = [m for m in meta if m["model"] == model]
        free = [m for m in mine if m["mode"] == "free"]
        odds = []
        for pid in pids:
            here = [m for m in free if m["problem_id"] == pid]
            odds.append(1 - (1 - sum(m["fast"] for m in here) / len(here)) ** rp.num_generations)
        block = {"free": cells(free, "kind"), "forced": cells([m for m in mine if m["mode"] == "forced"], "forced"),
                 "free_fast_share": round(sum(m["fast"] for m in free) / len(free), 4),
                 "visit_odds": round(statistics.fmean(odds), 4)}
        report["models"][model] = block
        print(f"\n## {model}")
        for mode, table in (("free (the kind the plan line names)", block["free"]),
                            ("forced (after // plan: <kind>)", block["forced"])):
            print(f"\n{mode}\n| kind | samples | plan names it | verified | fast (>= {BEST_VS_NUMPY} numpy) "
                  "| best vs numpy |\n|---|---:|---:|---:|---:|---:|")
            for kind, c in table.items():
                print(f"| {kind} | {c['samples']} | {c['named']:.2f} | {c['verified']:.2f} | {c['fast']:.2f} "
                      f"| {c['best_vs_numpy']:.2f} |")
        print(f"\nfree samples fast: {block['free_fast_share']:.3f}; odds of a fast kernel in one visit of "
              f"G = {rp.num_generations}, mean over problems: {block['visit_odds']:.3f}")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "odds.json").write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
