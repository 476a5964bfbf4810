"""Tests of hpcrl_core.models, and the small shared pieces they build on (a sample corpus, tiny sizes).

Run: ``.venv/bin/python -m pytest tests/models -q``.
"""

from __future__ import annotations

from functools import cache

from transformers import PreTrainedTokenizerFast

from hpcrl_core.config import TinyModelParams
from hpcrl_core.data.dgemm.problems import make_problems, problem_prompt
from hpcrl_core.data.dgemm.variants import generate_variants
from hpcrl_core.data.qa.mlperf import generate_mlperf_items
from hpcrl_core.data.schema import Record, assistant
from hpcrl_core.models.tokenizer import record_texts, train_tokenizer

# Small enough that a forward pass, a generation or a training step takes milliseconds.
TINY = TinyModelParams(hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=64)

# Code with what a byte-level round trip could lose: tabs, CRLF, blank lines, trailing spaces, non-ASCII, emoji.
AWKWARD = (
    "for (int i = 0; i < n; i++) {\n\tC[i] = 0.0;\t// tab\n}\n",
    "  \n\n\r\n    x += y;   \n",
    "/* größe: µs → λ, 矩阵乘法, 😀 */\nint ñ = 1;\n",
    "#pragma omp parallel for collapse(2) schedule(static)\n",
    "",
)


@cache
def dgemm_records(count: int = 24) -> tuple[Record, ...]:
    """Prompt-completion records shaped like data/dgemm/train.jsonl (generated kernels, not benchmarked)."""
    kernels = generate_variants(0, count)
    problems = make_problems("train", 0, count)
    return tuple(Record(family="dgemm", prompt=problem_prompt(p), completion=assistant("```c\n" + k.code + "```"),
                        answer="") for p, k in zip(problems, kernels, strict=True))


@cache
def qa_records() -> tuple[Record, ...]:
    """MLPerf question-answer records (with a system message)."""
    return tuple(generate_mlperf_items(0, 2))


def sample_texts() -> list[str]:
    """A few hundred training strings: rendered DGEMM and QA records plus the awkward snippets."""
    texts = [t for r in dgemm_records() + qa_records() for t in record_texts(r.prompt + r.completion)]
    return texts + list(AWKWARD)


@cache
def sample_tokenizer(vocab_size: int = 800) -> PreTrainedTokenizerFast:
    """A tokenizer trained on ``sample_texts`` (cached: treat it as read-only)."""
    return train_tokenizer(sample_texts(), vocab_size=vocab_size, min_frequency=2)
