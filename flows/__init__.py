"""Prefect flows: one per stage (prepare, sft, rl_dgemm, rl_hargo, evaluate, register) plus the pipelines
(train-dgemm, train-hargo). Flows load and validate params.yaml once, then call tasks; they stay thin.

Each stage's flow arrives with its issue; the benchmark engine they build on is ``hpcrl_core.bench``.
"""

from hpcrl_core.runtime_env import apply_defaults

apply_defaults()
