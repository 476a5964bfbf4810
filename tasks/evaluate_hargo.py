"""Prefect tasks of the evaluate_hargo stage: every policy of the comparison answers the held-out items
(``evaluate_model``), and the comparison with its intervals is computed and written with its table, samples and
plot (``comparison_report``).

No retries: generation is greedy and deterministic; a missing checkpoint is an error the operator must see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from hpcrl_core.config import Params
from hpcrl_core.data.schema import Record
from hpcrl_core.evaluation import hargo
from hpcrl_core.evaluation.hargo_report import write_comparison


@task(task_run_name="evaluate-{label}", cache_policy=NO_CACHE)
def evaluate_model(model_dir: Path, records: Sequence[Record], params: Params, label: str) -> list[dict[str, Any]]:
    """Greedy answers of the model in ``model_dir`` to ``records``, scored per item."""
    logger = get_run_logger()
    return hargo.evaluate_model(model_dir, records, params, progress=lambda line: logger.info("%s: %s", label, line))


@task(cache_policy=NO_CACHE)
def comparison_report(sft_rows: Sequence[dict[str, Any]], runs: Mapping[str, Mapping[int, Sequence[dict[str, Any]]]],
                     params: Params, notes: Mapping[str, str], report: Path,
                     provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write ``report`` (JSON), its samples, ``<report>.md`` (the table) and ``<report>.png``; return the report."""
    result = hargo.comparison_report(sft_rows, runs, params, notes, provenance)
    write_comparison(result, sft_rows, runs, report, title="HARGO comparison: held-out items")
    return result
