"""Why a DGEMM policy does (not) write every kernel family of its corpus: capacity, data or decoding.

Three measurements on one saved policy (default: the SFT policy) and the data it was trained on:

1. **Fit** (teacher forcing): per generator kind, the completion's mean token loss on the DGEMM train records paired
   with kernels of that kind. A kind the model has not fit (high loss) points at capacity or steps.
2. **Reproduction** (``--per-kind`` train prompts per kind, each asked with the prompt it was trained on): the model
   writes the kernel either from the prompt alone (prefix 0) or after the first ``P`` lines of its trained completion
   (``--prefix-lines``; a plan line, where the data has one, is the first of them). For each, the kind of the
   nearest corpus kernel (token-multiset Jaccard), the share that is the paired kernel exactly (after
   ``normalise_code``), and the verified rate (engine, at the problem's n). A model that writes a kind correctly once
   its first lines are given, but not from the prompt, can hold the kernel (capacity suffices) and does not choose it
   (data mix or decoding).
3. **Held-out choice**: on held-out problems that permit every technique, the kinds the model writes and how many
   verify.

Writes ``<out>/families.json`` and prints the tables. Sampling: ``--temperature`` (0 = greedy) with ``--k`` samples
per prompt and ``--seed``. Verification uses ``bench.short_timing`` on 1-core slots, as the evaluation does.

Run: ``.venv/bin/python benchmarks/dgemm_families.py [--model checkpoints/sft/final] [--data data]
[--per-kind 6] [--prefix-lines 0 8] [--k 2] [--temperature 0.2] [--out experiments/families]``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from hpcrl_core.bench.executor import map_sized  # noqa: E402
from hpcrl_core.bench.extract import extract_code, normalise_code  # noqa: E402
from hpcrl_core.config import Settings, load_params  # noqa: E402
from hpcrl_core.data.schema import Record, read_jsonl  # noqa: E402
from hpcrl_core.evaluation.dgemm import evaluation_executor  # noqa: E402
from hpcrl_core.evaluation.generate import generate  # noqa: E402
from hpcrl_core.models.saved import load_saved_policy  # noqa: E402

FULL = {"openmp", "simd", "loop_reorder", "cache_blocking", "register_blocking"}
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+|\S")


def tokens(code: str) -> Counter[str]:
    return Counter(_TOKEN.findall(code))


def jaccard(a: Counter[str], b: Counter[str]) -> float:
    union = sum((a | b).values())
    return sum((a & b).values()) / union if union else 0.0


def nearest(code: str, corpus: Sequence[dict[str, Any]], bags: Sequence[Counter[str]]) -> tuple[str, float]:
    """The kind of the corpus kernel nearest to ``code`` and that similarity."""
    bag = tokens(code)
    best = max(range(len(corpus)), key=lambda i: jaccard(bag, bags[i]))
    return str(corpus[best]["kind"]), jaccard(bag, bags[best])


def completion_losses(model: Any, tokenizer: Any, records: Sequence[Record]) -> list[tuple[float, int]]:
    """Per record, the mean token loss of its completion given its prompt, and its token count."""
    out = []
    model.eval()
    with torch.no_grad():
        for r in records:
            prompt = tokenizer.apply_chat_template(r.prompt, tokenize=False, add_generation_prompt=True)
            full = tokenizer.apply_chat_template(r.prompt + r.completion, tokenize=False)
            p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            ids = tokenizer(full, add_special_tokens=False)["input_ids"]
            x = torch.tensor([ids])
            logits = model(input_ids=x).logits[0, :-1]
            targets = x[0, 1:]
            nll = torch.nn.functional.cross_entropy(logits, targets, reduction="none")[len(p_ids) - 1:]
            out.append((float(nll.mean()), int(nll.numel())))
    return out


def continue_from(model: Any, tokenizer: Any, prompt: list[dict[str, str]], prefix: str, *, k: int,
                  temperature: float, seed: int, max_new_tokens: int) -> list[str]:
    """k completions of the assistant turn that starts with ``prefix`` (the prefix included in each)."""
    text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True) + prefix
    batch = tokenizer([text] * k, return_tensors="pt", add_special_tokens=False)
    options: dict[str, Any] = {"max_new_tokens": max_new_tokens, "pad_token_id": tokenizer.pad_token_id
                               or tokenizer.eos_token_id}
    options.update({"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False})
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(**batch, **options)
    start = batch["input_ids"].shape[1]
    return [prefix + tokenizer.decode(row[start:], skip_special_tokens=True) for row in out]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "checkpoints" / "sft" / "final"))
    ap.add_argument("--data", default=str(ROOT / "data"))
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--per-kind", type=int, default=6, help="train prompts per kind for the reproduction test")
    ap.add_argument("--prefix-lines", type=int, nargs="+", default=[0, 8])
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--temperature", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--held-out", type=int, default=16, help="held-out problems permitting every technique")
    ap.add_argument("--max-new-tokens", type=int, default=600)
    ap.add_argument("--out", default=str(ROOT / "experiments" / "families"))
    a = ap.parse_args()
    params, data = load_params(a.params), Path(a.data)
    corpus = [json.loads(line) for line in (data / "dgemm" / "corpus.jsonl").read_text().splitlines() if line]
    if not corpus or "kind" not in corpus[0]:
        raise SystemExit(f"{data}/dgemm/corpus.jsonl has no 'kind' per kernel: rerun `dvc repro prepare`")
    by_name = {c["name"]: c for c in corpus}
    bags = [tokens(c["code"]) for c in corpus]
    train = [r for r in read_jsonl(data / "dgemm" / "train.jsonl") if r.metadata.get("kernel_name") in by_name]
    model, tokenizer = load_saved_policy(Path(a.model))
    kinds = sorted({c["kind"] for c in corpus})

    print(f"fit: completion loss of {len(train)} train records", flush=True)
    losses = completion_losses(model, tokenizer, train)
    fit: dict[str, Any] = {}
    for kind in kinds:
        rows = [(loss, n) for r, (loss, n) in zip(train, losses, strict=True) if r.metadata["kernel_kind"] == kind]
        if rows:
            fit[kind] = {"records": len(rows), "loss_median": round(statistics.median(x for x, _ in rows), 4),
                         "loss_max": round(max(x for x, _ in rows), 4),
                         "tokens_median": statistics.median(n for _, n in rows)}

    jobs: list[tuple[str, int]] = []
    meta: list[dict[str, Any]] = []
    for kind in kinds:
        picked = sorted((r for r in train if r.metadata["kernel_kind"] == kind),
                        key=lambda r: r.metadata["problem_id"])[:a.per_kind]
        for r in picked:
            target = by_name[r.metadata["kernel_name"]]["code"]
            trained = r.response.partition("```c\n")[2]  # the completion as trained (with its plan line, if any)
            for lines in a.prefix_lines:
                prefix = "```c\n" + "".join(trained.splitlines(keepends=True)[:lines]) if lines else ""
                outs = continue_from(model, tokenizer, r.prompt, prefix, k=a.k, temperature=a.temperature,
                                     seed=a.seed, max_new_tokens=a.max_new_tokens)
                for text in outs:
                    code = extract_code(text, 65536).code or ""
                    near, sim = nearest(code, corpus, bags)
                    meta.append({"test": "reproduce", "kind": kind, "prefix_lines": lines, "nearest": near,
                                 "similarity": round(sim, 3), "chars": len(code),
                                 "exact": normalise_code(code) == normalise_code(target)})
                    jobs.append((text, int(r.metadata["n"])))
        print(f"reproduce: {kind} done", flush=True)

    held = [r for r in read_jsonl(data / "dgemm" / "problems_eval.jsonl")
            if set(r.metadata.get("permitted") or []) == FULL][:a.held_out]
    if held:
        samples = generate(model, tokenizer, [r.prompt for r in held], temperature=a.temperature,
                           max_new_tokens=a.max_new_tokens, num_return_sequences=a.k, seed=a.seed)
        for r, group in zip(held, samples, strict=True):
            for text in group:
                code = extract_code(text, 65536).code or ""
                near, sim = nearest(code, corpus, bags)
                meta.append({"test": "held_out", "kind": None, "prefix_lines": 0, "nearest": near,
                             "similarity": round(sim, 3), "chars": len(code), "exact": False})
                jobs.append((text, int(r.metadata["n"])))

    print(f"verifying {len(jobs)} kernels", flush=True)
    with evaluation_executor(params, Settings()) as ex:
        results = map_sized(ex, jobs)
    for m, res in zip(meta, results, strict=True):
        m["status"] = res.status.value
        m["gflops"] = res.gflops

    def cell(rows: list[dict[str, Any]]) -> dict[str, Any]:
        return {"samples": len(rows),
                "same_kind": round(sum(r["nearest"] == r["kind"] for r in rows) / len(rows), 3),
                "exact": round(sum(r["exact"] for r in rows) / len(rows), 3),
                "verified": round(sum(r["status"] == "ok" for r in rows) / len(rows), 3),
                "chars_median": statistics.median(r["chars"] for r in rows)}

    reproduce = {f"{kind}/prefix{lines}": cell(rows) for kind in kinds for lines in a.prefix_lines
                 if (rows := [m for m in meta if m["test"] == "reproduce" and m["kind"] == kind
                              and m["prefix_lines"] == lines])}
    held_rows = [m for m in meta if m["test"] == "held_out"]
    held_out = {kind: {"samples": len(rows), "verified": sum(r["status"] == "ok" for r in rows),
                       "gflops_max": max((r["gflops"] or 0.0 for r in rows), default=0.0)}
                for kind in kinds if (rows := [m for m in held_rows if m["nearest"] == kind])}
    report = {"model": a.model, "temperature": a.temperature, "k": a.k, "seed": a.seed, "fit": fit,
              "reproduce": reproduce, "held_out": held_out, "held_out_problems": len(held), "samples": meta}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "families.json").write_text(json.dumps(report, indent=1) + "\n")

    print("\n| kind | train records | completion loss (median / max) | tokens |\n|---|---:|---:|---:|")
    for kind, f in fit.items():
        print(f"| {kind} | {f['records']} | {f['loss_median']:.3f} / {f['loss_max']:.3f} | {f['tokens_median']:g} |")
    print("\n| kind | prefix lines | samples | nearest is that kind | exact | verified | chars (median) |"
          "\n|---|---:|---:|---:|---:|---:|---:|")
    for key, c in reproduce.items():
        kind, _, lines = key.partition("/prefix")
        print(f"| {kind} | {lines} | {c['samples']} | {c['same_kind']:.2f} | {c['exact']:.2f} | {c['verified']:.2f} "
              f"| {c['chars_median']:g} |")
    print(f"\nHeld-out problems permitting every technique ({len(held)} x {a.k}): nearest kind -> samples, verified, "
          "best GFLOPS")
    for kind, h in held_out.items():
        print(f"- {kind}: {h['samples']}, {h['verified']} verified, {h['gflops_max']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
