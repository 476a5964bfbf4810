"""RL algorithms that sit above the trainer: the SQD curriculum (``sqd.py``), its quality-diversity archive
(``archive.py``) and the advantage estimators (``advantages.py``: grpo, dr_grpo, hargo and its ablations;
ADVANTAGES registry).

Nothing here knows C or Prefect: rewards arrive as numbers, kernels as text. Design: ``docs/sqd.md``.

Test: ``pytest tests/algorithms``.
"""
