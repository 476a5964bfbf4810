"""Prefect tasks: thin wrappers over one ``hpcrl_core`` function each, adding only Prefect concerns (names,
retries for ``BenchInfraError`` and other infrastructure faults). ``bench_agent.py`` holds the benchmark task CPU
agents serve; the task modules of stages that benchmark kernels (sft, rl_dgemm, evaluate) import
``agents_backend.py``, which registers the ``agents`` backend (``HPCRL_BENCH_BACKEND=agents``).
"""

from hpcrl_core.runtime_env import apply_defaults

apply_defaults()
