"""Prefect flows: one per stage (prepare, sft, rl_dgemm, evaluate, register) plus the train-dgemm pipeline, its
deployment (deploy.py) and the local server + worker (serve.py). Flows load and validate params.yaml once, then
call tasks; they stay thin.
"""

from hpcrl_core.runtime_env import apply_defaults

apply_defaults()
