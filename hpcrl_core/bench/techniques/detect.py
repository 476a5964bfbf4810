"""Public entry points of the technique detector: parse, build loop trees, apply the rules.

Test: ``python3 -m pytest tests/bench/test_techniques.py -q``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hpcrl_core.bench.ctokens import Token, tokenize
from hpcrl_core.bench.techniques.builder import _Builder
from hpcrl_core.bench.techniques.consteval import _constants, constants_from_defines
from hpcrl_core.bench.techniques.loop_rules import _structural_reasons
from hpcrl_core.bench.techniques.looptree import ForLoop, _Root
from hpcrl_core.bench.techniques.parser import _Parser
from hpcrl_core.bench.techniques.technique import ALL_TECHNIQUES, Technique
from hpcrl_core.bench.techniques.token_rules import _token_reasons


def _build(tokens: Sequence[Token], constants: Mapping[str, int] | None) -> list[_Root]:
    """Parse the tokens and walk every function (and stray top-level code) into a loop tree; the source's own
    constants take precedence over ``constants``."""
    functions, stray = _Parser(tokens).unit()
    consts = _constants(tokens, functions)
    if constants:
        consts = {**constants, **consts}
    return _Builder(functions, consts).roots(stray)


def find_loops(tokens: Sequence[Token], constants: Mapping[str, int] | None = None) -> list[ForLoop]:
    """The outermost loops of every function (each function analysed on its own, calls inlined), in order.

    Args:
        tokens: tokens from ``ctokens.tokenize``.
        constants: extra known integer constants (e.g. from ``constants_from_defines``).

    Returns:
        The loops at the top of each function body; nested loops are in ``children``.
    """
    return [loop for root in _build(tokens, constants) for loop in root.children]


def explain_techniques(tokens: Sequence[Token],
                       constants: Mapping[str, int] | None = None) -> dict[Technique, tuple[str, ...]]:
    """Detect techniques and say why: each technique found with the evidence (a line and the rule's subject).

    Args:
        tokens: tokens from ``ctokens.tokenize``.
        constants: extra known integer constants (see ``detect_techniques``).

    Returns:
        Technique to reasons, in ``ALL_TECHNIQUES`` order; techniques not found are absent.
    """
    reasons: dict[Technique, list[str]] = {}
    _token_reasons(tokens, reasons)
    _structural_reasons(_build(tokens, constants), reasons)
    return {tech: tuple(dict.fromkeys(reasons[tech])) for tech in ALL_TECHNIQUES if tech in reasons}


def detect_techniques(tokens: Sequence[Token], constants: Mapping[str, int] | None = None) -> frozenset[Technique]:
    """Detect the optimisation techniques a kernel uses (rules in the package docstring).

    Args:
        tokens: tokens from ``ctokens.tokenize``, normally of the preprocessed source. Broken or partial code is
            accepted.
        constants: extra known integer constants, for raw source whose ``#define`` lines the tokenizer skipped.

    Returns:
        The techniques detected.
    """
    return frozenset(explain_techniques(tokens, constants))


def detect_techniques_in_source(src: str) -> frozenset[Technique]:
    """Tokenize C source (raw or preprocessed) and detect its techniques.

    Args:
        src: the C source.

    Returns:
        The techniques detected.

    Raises:
        ValueError: the source cannot be tokenized (unterminated comment or literal).
    """
    return detect_techniques(tokenize(src), constants_from_defines(src))
