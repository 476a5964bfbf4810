"""Assemble TRL's GRPOTrainer for the ``rl_dgemm`` stage: the SFT policy, SQD prompts, benchmark rewards.

No maths here. ``SQDGRPOTrainer`` subclasses GRPOTrainer at three hooks only:

- ``_generate_and_score_completions``: before generating, each row's prompt and permitted set are re-rendered at
  the stage the curriculum picks for its problem's visit (``visit_stage``: the current SQD stage, or an earlier
  one for a replay; the dataset holds one row per problem, the curriculum owns the stage) and at the size it draws
  (``visit_size``: with ``rl_dgemm.visit_sizes`` ``train`` or ``span``, one size per visit), and the row
  carries that ``stage`` and ``n``; after scoring, the curriculum and archive statistics are logged for the step.
- ``_generate_single_turn``: with ``rl_dgemm.elite_replay`` > 0, in that share of the visits the last completion
  of the group is replaced by the archive's fastest kernel of the problem that the visit permits (``plan_elites``):
  a kernel RL found stays in its groups, trained on with its measured reward like a sample (docs/sqd.md). With
  ``rl_dgemm.elite_replay_behind`` only visits after one that fell behind the elite get it. With
  ``rl_dgemm.plan_novelty`` > 0, in that share of the visits the first completion is generated after a forced
  plan opening of a kind the problem's archive lacks (``hpcrl_core/algorithms/exploration.py``). With
  ``rl_dgemm.fence_given`` every other row is generated after the code fence (its completion opens with those ids):
  the opening the prompt asks for is given, not sampled. With ``rl_dgemm.plan_vocabulary`` its ``generate`` holds
  each row's plan line to the corpus's (``hpcrl_core/evaluation/openings.py``).
- ``_save_checkpoint``: the curriculum state and the quality-diversity archive are written into ``checkpoint-N``
  *before* TRL writes ``trainer_state.json`` there, so a checkpoint that counts as complete
  (``checkpoints.last_checkpoint``) always carries them; a resumed run loads them back.

Rewards come from ``rl_dgemm.rewards`` (``hpcrl_core.rewards.REWARDS``); their observer (``Rollouts``) records each
group's rewards with the curriculum (promotion) and every verified, technique-respecting kernel in the archive.
Layout of ``output_dir`` (``checkpoints/rl_dgemm``)::

    checkpoint-N/   Trainer checkpoint + sqd_state.json + qd_archive.json; a rerun resumes here
    final/          the trained policy (model + tokenizer), sqd_state.json, qd_archive.json, qd_archive.png and
                    log_history.json (the trainer's per-step logs, for the evaluation's plots)

Run: ``python -m hpcrl_core.training.rl [PARAMS] [DATA_DIR] [SFT_DIR] [OUTPUT_DIR]`` (no tracking).
Test: ``pytest tests/training/test_rl.py``.
"""

from __future__ import annotations

import contextlib
import functools
import random
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from transformers import LogitsProcessorList, PreTrainedTokenizerBase
from trl import GRPOConfig, GRPOTrainer

from hpcrl_core.algorithms.archive import ARCHIVE_FILE, QDArchive
from hpcrl_core.algorithms.exploration import (
    kind_openings,
    kind_requirements,
    opening_ids,
    plan_elites,
    plan_novel_kinds,
)
from hpcrl_core.algorithms.sqd import STATE_FILE, SQDCurriculum
from hpcrl_core.bench.executor import BenchBackend, LocalExecutor, bench_backend
from hpcrl_core.bench.extract import kernel_identity
from hpcrl_core.bench.reference import ReferenceTracker
from hpcrl_core.bench.result import BenchResult
from hpcrl_core.bench.techniques import Technique
from hpcrl_core.config import Params, RLDgemmParams, Settings, load_params
from hpcrl_core.data.dgemm.corpus import CODE_FENCE, plan_openings
from hpcrl_core.errors import ConfigError
from hpcrl_core.evaluation.generate import fitting_prompt_rows
from hpcrl_core.evaluation.openings import OpeningVocabulary
from hpcrl_core.models.saved import load_saved_policy
from hpcrl_core.rewards import RewardContext, get_reward
from hpcrl_core.rewards.dgemm import violates
from hpcrl_core.rewards.ladder import needs_reference
from hpcrl_core.training.checkpoints import (
    finished_state,
    last_checkpoint,
    last_logged,
    save_log_history,
    save_policy,
)
from hpcrl_core.training.mlflow_callback import use_hpcrl_mlflow
from hpcrl_core.training.rl_anchor import SFTAnchor, anchor_records
from hpcrl_core.training.rl_curriculum import load_curriculum, rendered_columns, rl_dataset
from hpcrl_core.training.trl_options import check_passthrough, grpo_options, trl_version

SQD_STATE = STATE_FILE
ARCHIVE = ARCHIVE_FILE
HEATMAP = "qd_archive.png"
FINAL_DIR = "final"
OWNED_FIELDS: dict[str, str] = {
    **{name: f"rl_dgemm.{name}" for name in RLDgemmParams.model_fields
       if name not in ("trl", "warmup_ratio", "problems", "rewards", "sqd", "elite_replay",
                       "elite_replay_behind", "plan_novelty", "sft_anchor", "sft_anchor_batch")},
    "warmup_steps": "rl_dgemm.warmup_ratio",
    "output_dir": "the stage's output folder (checkpoints/rl_dgemm)",
    "report_to": "the flow (report_to argument)",
    "save_strategy": "rl_dgemm.save_steps",
}


# GRPOConfig.loss_type values of the pinned TRL (1.16). TRL itself only rejects an unknown one at the first loss
# computation, after a whole step of generation and benchmarking; tests/training/test_rl.py checks this list
# against TRL's own documentation of the field.
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo", "cispo", "sapo", "vespo")


def check_trl_options(options: dict[str, Any]) -> None:
    """Raise unless every ``rl_dgemm.trl`` key is a GRPOConfig field that rl_dgemm params do not already own."""
    check_passthrough(options, GRPOConfig, "rl_dgemm", OWNED_FIELDS)


def grpo_config(rp: RLDgemmParams, output_dir: Path, report_to: list[str]) -> GRPOConfig:
    """The GRPOConfig for ``rl_dgemm`` params: CPU-safe defaults, steps-based saving, ``rl_dgemm.trl`` on top."""
    check_trl_options(rp.trl)
    if rp.loss_type not in LOSS_TYPES:
        raise ConfigError(f"rl_dgemm.loss_type: received {rp.loss_type!r}; allowed by trl {trl_version()}: "
                          f"{', '.join(LOSS_TYPES)}")
    options = {**grpo_options(rp, output_dir, report_to, rp.seed), "loss_type": rp.loss_type,
               "scale_rewards": rp.scale_rewards}
    options.update(rp.trl)
    try:
        return GRPOConfig(**options)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"rl_dgemm: GRPOConfig rejected the options: {err}",
                          [f"{k}: {v!r}" for k, v in {"loss_type": rp.loss_type, **rp.trl}.items()]) from None


@dataclass
class Rollouts:
    """The reward functions' observer: feeds each group's rewards to the curriculum and verified kernels that
    respect their problem to the archive, and measures how varied each group's completions are (``stats``).
    ``step`` is set by the trainer before each generation, and ``injected``: the rows that are archive elites put
    in place of a sample (``rl_dgemm.elite_replay``); those count for no promotion, archive entry or distinct
    count."""

    curriculum: SQDCurriculum
    archive: QDArchive
    step: int = 0
    promotions: list[tuple[int, str, int]] = field(default_factory=list)  # (step, problem id, new stage)
    distinct: list[tuple[int, int]] = field(default_factory=list)  # the last batch: (distinct kernels, size) per group
    injected: frozenset[int] = frozenset()  # rows of the next batch that are archive elites, not samples
    elites: int = 0  # elites in the last batch

    def stats(self) -> dict[str, float]:
        """Exploration of the last batch: ``rollouts/distinct_per_group`` (mean count of distinct kernels in a
        group, compared by ``kernel_identity``; 1 means the policy wrote the same kernel G times) and
        ``rollouts/distinct_share`` (that count over the group size, averaged). TRL logs the entropy (``entropy``)
        and the share of groups whose rewards are all equal, i.e. zero advantage (``frac_reward_zero_std``), beside
        them."""
        if not self.distinct:
            return {}
        return {"rollouts/distinct_per_group": statistics.fmean(d for d, _ in self.distinct),
                "rollouts/distinct_share": statistics.fmean(d / size for d, size in self.distinct),
                "rollouts/elites": float(self.elites)}

    def __call__(self, completions: Sequence[str], results: Sequence[BenchResult], rewards: Sequence[float],
                 columns: dict[str, Sequence[Any]]) -> None:
        groups: dict[tuple[str, int], list[float]] = defaultdict(list)
        texts: dict[tuple[str, int], list[str]] = defaultdict(list)
        stages = columns.get("stage")
        injected, self.injected = self.injected, frozenset()
        self.elites = len(injected)
        visits: dict[str, float] = {}  # problem -> fastest of the policy's own kernels that count, this batch
        for i, (code, res, reward) in enumerate(zip(completions, results, rewards, strict=True)):
            if i in injected:  # an elite replayed from the archive: trained on, but not the policy's own sample
                continue
            pid = str(columns["problem_id"][i])
            stage = self.curriculum.stage(pid) if stages is None else int(stages[i])
            groups[(pid, stage)].append(float(reward))
            texts[(pid, stage)].append(kernel_identity(code))
            visits.setdefault(pid, 0.0)
            if res.ok and res.gflops and not violates(res, frozenset(map(str, columns["permitted"][i]))):
                self.archive.add(pid, frozenset(map(str, res.techniques)), float(res.gflops), code, self.step, stage)
                visits[pid] = max(visits[pid], float(res.gflops))
        for pid, best in visits.items():
            self.archive.record_visit(pid, best)
        self.distinct = [(len(set(group)), len(group)) for group in texts.values()]
        for (pid, stage), values in groups.items():
            if self.curriculum.record(pid, values, stage):
                self.promotions.append((self.step, pid, self.curriculum.stage(pid)))


class SQDGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose prompts follow the SQD curriculum and whose checkpoints carry its state (see module)."""

    def __init__(self, *args: Any, rollouts: Rollouts, elite_replay: float = 0.0,
                 elite_replay_behind: float | None = None, plan_novelty: float = 0.0,
                 kind_needs: Mapping[str, frozenset[Technique]] | None = None,
                 kind_texts: Mapping[str, Sequence[str]] | None = None, seed: int = 0, fence_given: bool = False,
                 plan_vocabulary: OpeningVocabulary | None = None, anchor: SFTAnchor | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rollouts, self.anchor = rollouts, anchor
        self.elite_replay, self.elite_replay_behind, self.seed = elite_replay, elite_replay_behind, seed
        self.plan_novelty, self.kind_needs = plan_novelty, dict(kind_needs or {})
        tokenizer = cast(PreTrainedTokenizerBase, self.processing_class)
        # per kind, the ids a forced row may open with (one per SFT completion of its kernels): tokenized once, and a
        # kind without kernels, or whose completions' ids do not spell its opening, is refused before the first step
        texts = kind_texts or {}
        self._openings = {kind: opening_ids(tokenizer, kind, texts.get(kind, ())) for kind in self.kind_needs}
        # with rl_dgemm.fence_given every other row opens with the code fence's ids (a forced plan opening holds them)
        self._fence = list(tokenizer(CODE_FENCE, add_special_tokens=False)["input_ids"]) if fence_given else []
        unfenced = sorted(kind for kind, ids in self._openings.items()
                          if self._fence and any(o[:len(self._fence)] != self._fence for o in ids))
        if unfenced:
            raise ConfigError(f"rl_dgemm.fence_given: the tokenizer splits the code fence differently inside the plan "
                              f"openings of {', '.join(unfenced)}; set rl_dgemm.fence_given: false or "
                              "rl_dgemm.plan_novelty: 0 for this model")
        self._elites: dict[int, str] = {}  # planned for the generation under way: row -> elite completion text
        self.plan_vocabulary = plan_vocabulary
        self._forced: dict[int, list[int]] = {}  # the same: row -> token ids its completion is forced to open with

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        cur = self.rollouts.curriculum
        self.rollouts.step = int(self.state.global_step)
        visits = {pid: (cur.visit_stage(pid), cur.visit_size(pid)) for pid in dict.fromkeys(x["problem_id"]
                                                                                               for x in inputs)}
        staged = [{**x, **rendered_columns(cur, x["problem_id"], *visits[x["problem_id"]])} for x in inputs]
        training = bool(getattr(self.model, "training", False))
        self._elites = plan_elites(staged, int(self.num_generations or 1), self.rollouts.archive, self.elite_replay,
                                   (self.seed, self.rollouts.step), self.elite_replay_behind) if training else {}
        self.rollouts.injected = frozenset(self._elites)
        kinds = plan_novel_kinds(staged, int(self.num_generations or 1), self.rollouts.archive, self.kind_needs,
                                 self.plan_novelty, (self.seed, self.rollouts.step)) if training else {}
        # one of the kind's openings, drawn as the kind was: from (seed, step, row) alone
        self._forced = {row: random.Random(f"opening:{self.seed}:{self.rollouts.step}:{row}").choice(
            self._openings[kind]) for row, kind in kinds.items()}
        if self._fence:
            self._forced = {row: self._forced.get(row, self._fence) for row in range(len(staged))}
        out = super()._generate_and_score_completions(staged)
        metrics = {**cur.stats(), **self.rollouts.archive.stats(), **self.rollouts.stats()}
        if self.plan_novelty > 0:
            metrics["rollouts/novel_plans"] = float(len(kinds))
        # straight into this step's metrics: ``_log_metric`` would hold them until the next step's rewards are
        # flushed, so every curve would lag a step and the last step's figures would never be logged
        for name, value in metrics.items():
            self._metrics["train" if training else "eval"][name].append(float(value))
        return out

    def compute_loss(self, model: Any, inputs: Any, return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        """TRL's GRPO loss; with ``rl_dgemm.sft_anchor`` in training, plus gamma x the SFT anchor's token NLL
        (scaled per micro-batch as TRL scales its own loss), logged as ``anchor/nll``."""
        loss = super().compute_loss(model, inputs, return_outputs=return_outputs,
                                    num_items_in_batch=num_items_in_batch)
        if self.anchor is None or not model.training:
            return loss
        accumulation = int(self.current_gradient_accumulation_steps)
        nll = self.anchor.nll(model, int(self.state.global_step), int(self._step) % accumulation)
        self._metrics["train"]["anchor/nll"].append(float(nll.detach()))
        return loss + self.anchor.weight * nll / accumulation

    def _generate_single_turn(self, prompt_ids: Any, images: Any, multimodal_fields: Any, num_generations: int,
                              has_tool_images: bool = False) -> tuple[Any, Any]:
        """TRL's generation, the rows of plan novelty (and with ``fence_given`` every row) generated after their
        forced opening (which then opens their completion), then the planned rows' completions replaced by their
        elites' tokens (and EOS)."""
        forced, self._forced = self._forced, {}
        if forced:
            prompt_ids = [[*ids, *forced[row]] if row in forced else ids for row, ids in enumerate(prompt_ids)]
        with self._held_openings([forced.get(row, []) for row in range(len(prompt_ids))]):
            completion_ids, logprobs = super()._generate_single_turn(prompt_ids, images, multimodal_fields,
                                                                     num_generations, has_tool_images)
        limit = int(self.max_completion_length or 1 << 30)
        for row, opening in forced.items():
            completion_ids[row] = [*opening, *completion_ids[row]][:limit]
        tokenizer = cast(PreTrainedTokenizerBase, self.processing_class)
        eos = tokenizer.eos_token_id
        for row, text in self._elites.items():
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            completion_ids[row] = [*ids[: limit - 1], eos]
        self._elites = {}
        return completion_ids, logprobs

    @contextlib.contextmanager
    def _held_openings(self, given: list[list[int]]) -> Iterator[None]:
        """With ``rl_dgemm.plan_vocabulary``, TRL's ``generate`` of this generation gets the constraint as a logits
        processor (each row's text opens with its given ids' text), through the unwrapped model that TRL's
        generation context yields (``accelerator.unwrap_model``, the same object on one process); else nothing."""
        if self.plan_vocabulary is None:
            yield
            return
        vocab = self.plan_vocabulary
        model = self.accelerator.unwrap_model(self.model_wrapped)
        processor = vocab.processor(["".join(vocab.pieces[i] for i in ids) for ids in given])
        model.generate = functools.partial(model.generate, logits_processor=LogitsProcessorList([processor]))
        try:
            yield
        finally:
            del model.generate  # the class's generate again

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        folder = Path(self._get_output_dir(trial=trial)) / f"checkpoint-{self.state.global_step}"
        folder.mkdir(parents=True, exist_ok=True)
        self.rollouts.curriculum.save(folder / SQD_STATE)
        self.rollouts.archive.save(folder / ARCHIVE)
        super()._save_checkpoint(model, trial)


@dataclass
class RLRun:
    """What ``build_rl_trainer`` assembled; ``close()`` stops the benchmark executor."""

    trainer: SQDGRPOTrainer
    rollouts: Rollouts
    executor: BenchBackend
    reward_funcs: list[Callable[..., Any]]

    def close(self) -> None:
        self.executor.close()


def build_rl_trainer(params: Params, data_dir: Path, sft_dir: Path, output_dir: Path, report_to: list[str],
                     settings: Settings | None = None) -> RLRun:
    """An SQDGRPOTrainer ready to ``train()``, with every check done before the first step.

    Raises:
        ConfigError: a bad ``rl_dgemm.trl`` name or loss type, an unknown reward name, no SFT model in ``sft_dir``.
        DataError: no DGEMM problems under ``data_dir``; with ``rl_dgemm.sft_anchor``, no usable SFT record in
            ``data_dir/dgemm/train.jsonl``. Every refusal comes before the benchmark executor starts.
    """
    rp = params.rl_dgemm
    corpus = data_dir / "dgemm" / "corpus.jsonl"
    args = grpo_config(rp, output_dir, report_to)
    factories = [get_reward(name) for name in rp.rewards]
    curriculum = load_curriculum(params, data_dir)
    model, tokenizer = load_saved_policy(sft_dir, trainable=True, key="sft_dir")
    dataset = fitting_prompt_rows(rl_dataset(curriculum), model, tokenizer, rp.max_completion_length, "rl_dgemm")
    needs = novelty_needs(params, data_dir, args.use_vllm)  # refuses every forcing lever with vLLM first
    plan_line, plan_permitted = params.prepare.dgemm.plan_line, params.prepare.dgemm.plan_permitted
    plans = plan_openings(corpus, plan_line, plan_permitted, "rl_dgemm.plan_vocabulary", rp.plan_vocabulary)
    vocab = OpeningVocabulary(tokenizer, plans) if plans else None
    kind_texts = kind_openings(corpus) if needs else {}
    anchor = (SFTAnchor(anchor_records(data_dir / "dgemm" / "train.jsonl", tokenizer, params.sft.max_length),
                        rp.sft_anchor, rp.sft_anchor_batch, rp.seed, int(tokenizer.pad_token_id or 0))
              if rp.sft_anchor > 0 else None)  # a missing or empty train file is refused before workers start
    settings = settings or Settings()
    kind = params.reward.reference if needs_reference(params.reward) else None
    executor = bench_backend(params.bench.for_many(), settings, reference=kind)  # every refusal above: none to stop
    try:
        # locally one node times everything: a tracker measures its reference; agents attach their node's to each
        # result
        reference = (ReferenceTracker(executor, kind, params.reward.reference_ttl_s)
                     if kind and isinstance(executor, LocalExecutor) else None)
        rollouts = Rollouts(curriculum, QDArchive(curriculum.problem_ids))
        ctx = RewardContext(params=params, executor=executor, reference=reference, observer=rollouts,
                            group_size=rp.num_generations)
        funcs = [factory(ctx) for factory in factories]
        trainer = SQDGRPOTrainer(model=model, reward_funcs=funcs, args=args, train_dataset=dataset,
                                 processing_class=tokenizer, rollouts=rollouts, elite_replay=rp.elite_replay,
                                 elite_replay_behind=rp.elite_replay_behind, plan_novelty=rp.plan_novelty,
                                 kind_needs=needs, kind_texts=kind_texts, seed=rp.seed, fence_given=rp.fence_given,
                                 plan_vocabulary=vocab, anchor=anchor)
        use_hpcrl_mlflow(trainer)
    except BaseException:
        executor.close()  # the trainer refused: nothing else would stop the executor's workers
        raise
    return RLRun(trainer, rollouts, executor, funcs)


def novelty_needs(params: Params, data_dir: Path, use_vllm: bool) -> dict[str, frozenset[Technique]]:
    """What elite replay, plan novelty, the given fence and the plan vocabulary need before the first step: the
    kinds' required techniques from the corpus when ``rl_dgemm.plan_novelty`` > 0 (else none), and generation by
    transformers.

    Raises:
        ConfigError: replay, novelty, a given fence or the plan vocabulary with vLLM (its sampling
            log-probabilities would not match a replaced or forced row; the vocabulary is a transformers logits
            processor), or novelty on SFT data without plan lines or with the permitted line before them.
        DataError: the corpus is missing or malformed.
    """
    rp = params.rl_dgemm
    plan_line, plan_permitted = params.prepare.dgemm.plan_line, params.prepare.dgemm.plan_permitted
    for name, on, off in (("elite_replay", rp.elite_replay > 0, "0"), ("plan_novelty", rp.plan_novelty > 0, "0"),
                          ("fence_given", rp.fence_given, "false"),
                          ("plan_vocabulary", rp.plan_vocabulary != "none", "none")):
        if on and use_vllm:
            raise ConfigError(f"rl_dgemm.{name} needs generation by transformers: vLLM's sampling log-probabilities "
                              f"would not match a replaced or forced row; set rl_dgemm.{name}: {off} or drop "
                              "trl.use_vllm")
    if rp.plan_novelty <= 0:
        return {}
    if not plan_line or plan_permitted:
        raise ConfigError("rl_dgemm.plan_novelty forces completions to open with a plan line, which the SFT policy "
                          "learnt only with prepare.dgemm.plan_line: true and plan_permitted: false (got "
                          f"plan_line {plan_line}, plan_permitted {plan_permitted}); set "
                          "rl_dgemm.plan_novelty: 0 or prepare the data with those")
    return kind_requirements(data_dir / "dgemm" / "corpus.jsonl")


def run_rl(params: Params, data_dir: Path, sft_dir: Path, output_dir: Path, report_to: list[str],
           settings: Settings | None = None) -> dict[str, Any]:
    """Train (resuming from the last complete checkpoint with its curriculum and archive), save ``final``.

    Returns:
        ``global_step``, ``train_loss``, ``resumed_from``, ``final_dir``, ``promotions`` (this run's),
        the curriculum's and the archive's final statistics.
    """
    resume = last_checkpoint(output_dir)
    run = build_rl_trainer(params, data_dir, sft_dir, output_dir, report_to, settings)
    final = output_dir / FINAL_DIR
    done = finished_state(resume, final, run.trainer.args.max_steps)
    if done is not None:  # reached its budget before: keep final as it is (resuming would train one more step)
        run.close()
        run.rollouts.curriculum.load(final / SQD_STATE)
        archive = QDArchive.load(final / ARCHIVE, problem_ids=run.rollouts.curriculum.problem_ids)
        return {"global_step": int(done["global_step"]), "train_loss": last_logged(done, "train_loss"),
                "resumed_from": str(resume), "final_dir": str(final), "promotions": 0,
                **run.rollouts.curriculum.stats(), **archive.stats()}
    try:
        if resume is not None:
            run.rollouts.curriculum.load(resume / SQD_STATE)
            run.rollouts.archive = QDArchive.load(resume / ARCHIVE, problem_ids=run.rollouts.curriculum.problem_ids)
        result = run.trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    finally:
        run.close()
    save_policy(run.trainer, final)
    run.rollouts.curriculum.save(final / SQD_STATE)
    run.rollouts.archive.save(final / ARCHIVE)
    run.rollouts.archive.heatmap(final / HEATMAP)
    save_log_history(run.trainer, final)
    return {"global_step": int(run.trainer.state.global_step), "train_loss": float(result.training_loss),
            "resumed_from": str(resume) if resume else None, "final_dir": str(final),
            "promotions": len(run.rollouts.promotions), **run.rollouts.curriculum.stats(),
            **run.rollouts.archive.stats()}


def main(argv: list[str]) -> None:
    params = load_params(argv[0] if argv else "params.yaml")
    data_dir = Path(argv[1] if len(argv) > 1 else "data")
    sft_dir = Path(argv[2] if len(argv) > 2 else "checkpoints/sft/final")
    output_dir = Path(argv[3] if len(argv) > 3 else "checkpoints/rl_dgemm")
    print(run_rl(params, data_dir, sft_dir, output_dir, report_to=[]))


if __name__ == "__main__":
    main(sys.argv[1:])
