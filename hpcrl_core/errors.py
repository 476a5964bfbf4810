"""The project's error hierarchy.

Failures split three ways (see ARCHITECTURE.md): a model's mistake becomes a reward and a reason, never an
exception; "not applicable" is ``None``; an infrastructure fault raises one of these typed errors so that the
orchestrator can retry it. Never catch a ``BenchInfraError`` and turn it into a reward.

Test: no test file of its own; each error is tested where it is raised, e.g. ``pytest tests/test_config.py``
(``ConfigError`` lines) and ``pytest tests/rewards/test_dgemm_reward.py`` (a ``BenchInfraError`` is never a reward).
"""

from __future__ import annotations


class HPCRLError(Exception):
    """Base of every error hpcrl raises on purpose."""


class ConfigError(HPCRLError):
    """A configuration value is missing, malformed or out of range.

    Attributes:
        problems: one line per problem: ``key.path: received X; allowed Y``.
    """

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = list(problems or [])
        detail = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{message}\n{detail}" if detail else message)


class BenchInfraError(HPCRLError):
    """The benchmark machinery itself failed (compiler missing, scratch not writable, sandbox not startable).

    Retryable by an orchestrator; never the kernel's fault.
    """


class DataError(HPCRLError):
    """Input data is missing or malformed. The message names the file, the record and the field."""


class TrackingInfraError(HPCRLError):
    """The tracking store or server failed (unreachable, locked, timed out). Retryable; never the inputs' fault."""
