"""Prefect tasks: thin wrappers over one ``hpcrl_core`` function each, adding only Prefect concerns (names,
retries for ``BenchInfraError`` and other infrastructure faults). The benchmark task that CPU agents serve lives
here once the agents backend exists.
"""

from hpcrl_core.runtime_env import apply_defaults

apply_defaults()
