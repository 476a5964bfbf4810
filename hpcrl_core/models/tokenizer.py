"""The tiny model's tokenizer: a byte-level BPE trained on the prepared corpora, with a ChatML chat template.

Merges may span spaces within a line but never a newline: every pre-token is one line including its ``\\n``
(``Split("\\n", "merged_with_previous")`` before a regex-free ``ByteLevel``), so a whole statement such as
``for (int i = 0; i < n; i++) {`` can become one token, and a line boundary is always a token boundary. The second
property is what TRL's completion-only loss needs: the prompt rendered with ``add_generation_prompt=True`` ends with
``<|im_start|>assistant\\n`` and tokenizes to an exact prefix of the rendered prompt + completion.

Tokens per DGEMM kernel (mean over 320 generated variants of ~2050 characters; in brackets 100 variants of another
seed, never trained on), tokenizer trained on a stand-in corpus of 960 DGEMM prompt-kernel pairs plus the synthetic
race, MLPerf and PLP items (3852 texts), min_frequency 2:

=================================================  ============  ============  ============
pre-tokenizer                                      vocab 1500    vocab 4096    vocab 8192
=================================================  ============  ============  ============
gpt2: GPT-2's word regex (plain byte-level BPE)    749 (729)     746 (726) (*) -
lines: one pre-token per line (default)            426 (410)     144 (146)     84 (91)
lines_digits: lines, digit runs split out          450 (434)     194 (192)     160 (162)
lines, every digit split out (measured only)      461 (442)     211 (207)     -
newline as its own pre-token (measured only)      476 (461)     196 (197)     -
=================================================  ============  ============  ============

(*) stops at 3370 tokens: no pair left to merge within its words. A whole DGEMM record (prompt + kernel, ChatML)
is 163 tokens with ``lines`` at 4096 against 1053 with ``gpt2``. Rerun with ``train_tokenizer(...,
pre_tokenizer=NAME)`` and ``tokens_per_text``. Byte-level BPE round-trips any text (tabs, unicode) exactly.

Special tokens: ``<|endoftext|>`` (0), ``<|im_start|>`` (1), ``<|im_end|>`` (2, eos: ends an assistant turn),
``<|pad|>`` (3).

Test: ``pytest tests/models/test_tokenizer.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from hpcrl_core.data.schema import FAMILIES, read_jsonl
from hpcrl_core.errors import ConfigError, DataError

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
PAD = "<|pad|>"
SPECIAL_TOKENS: tuple[str, ...] = (ENDOFTEXT, IM_START, IM_END, PAD)

# ChatML as Qwen2 renders it (without Qwen's default system prompt). The assistant's content and its <|im_end|> sit
# inside {% generation %} so TRL's assistant_only_loss (if ever used) trains the model to stop; the newline after
# <|im_end|> sits outside. With add_generation_prompt the prompt ends in "<|im_start|>assistant\n", which is also
# how prompt + completion continues: the prompt's text is an exact prefix.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['role'] == 'assistant' -%}"
    "{%- generation -%}{{- message['content'] + '<|im_end|>' -}}{%- endgeneration -%}{{- '\\n' -}}"
    "{%- else -%}"
    "{{- message['content'] + '<|im_end|>' + '\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

PRE_TOKENIZERS: tuple[str, ...] = ("gpt2", "lines", "lines_digits")
DEFAULT_PRE_TOKENIZER = "lines"


def make_pre_tokenizer(kind: str = DEFAULT_PRE_TOKENIZER) -> pre_tokenizers.PreTokenizer:
    """The pre-tokenizer by name: ``gpt2`` (words, GPT-2's regex), ``lines`` (one pre-token per line),
    ``lines_digits`` (lines, with digit runs split out).

    Raises:
        ConfigError: an unknown name.
    """
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=kind == "gpt2")
    lines = pre_tokenizers.Split(Regex("\n"), behavior="merged_with_previous")
    if kind == "gpt2":
        return byte_level
    if kind == "lines":
        return pre_tokenizers.Sequence([lines, byte_level])
    if kind == "lines_digits":
        return pre_tokenizers.Sequence([lines, pre_tokenizers.Digits(individual_digits=False), byte_level])
    raise ConfigError(f"unknown pre-tokenizer {kind!r}; allowed: {', '.join(PRE_TOKENIZERS)}")


def train_tokenizer(texts: Iterable[str], vocab_size: int, min_frequency: int,
                    pre_tokenizer: str = DEFAULT_PRE_TOKENIZER) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on ``texts`` and wrap it for transformers, with the chat template and special tokens.

    Args:
        texts: training text; for chat data, the text between special tokens (``texts_from_data``).
        vocab_size: target vocabulary including the 256 byte symbols and the special tokens.
        min_frequency: a pair must occur this often to be merged.
        pre_tokenizer: one of ``PRE_TOKENIZERS`` (the default won the measurement in the module docstring).

    Returns:
        A fast tokenizer: eos ``<|im_end|>``, pad ``<|pad|>``, no bos, ChatML ``chat_template``.
    """
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = make_pre_tokenizer(pre_tokenizer)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=IM_END, pad_token=PAD,
                                   extra_special_tokens=[ENDOFTEXT, IM_START], clean_up_tokenization_spaces=False)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def record_texts(messages: Sequence[dict[str, str]]) -> Iterator[str]:
    """The text a chat renders between special tokens: ``role\\ncontent`` per message (see ``CHAT_TEMPLATE``)."""
    for m in messages:
        yield f"{m['role']}\n{m['content']}"


def texts_from_data(data_dir: Path) -> Iterator[str]:
    """Texts of every family's ``train.jsonl`` under ``data_dir`` (prompt and completion messages).

    Raises:
        DataError: no family has a ``train.jsonl`` (run ``dvc repro prepare`` first), or a malformed record.
    """
    files = [data_dir / f / "train.jsonl" for f in FAMILIES if (data_dir / f / "train.jsonl").is_file()]
    if not files:
        raise DataError(f"{data_dir}: no <family>/train.jsonl to train a tokenizer on (families: "
                        f"{', '.join(FAMILIES)}); run `dvc repro prepare` or set model.tokenizer.path")
    for path in files:
        for record in read_jsonl(path):
            yield from record_texts(record.prompt + record.completion)


def save_tokenizer(tok: PreTrainedTokenizerBase, path: Path) -> None:
    """Write the tokenizer (vocabulary, merges, special tokens, chat template) into the folder ``path``."""
    path.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(str(path))


def _own_tokenizer(path: Path) -> bool:
    """Whether ``path`` holds a tokenizer saved by ``save_tokenizer`` (a plain tokenizers-backed class)."""
    try:
        config = json.loads((path / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        return False
    return config.get("tokenizer_class") in ("TokenizersBackend", "PreTrainedTokenizerFast")


def tokenizer_from_folder(path: Path, trust_remote_code: bool = False) -> PreTrainedTokenizerBase:
    """The tokenizer in a local folder, loaded as it was saved (never the hub).

    Ours (written by ``save_tokenizer``) load as ``PreTrainedTokenizerFast`` from tokenizer.json exactly: AutoTokenizer
    would pick the tokenizer class of the model type in a config.json next to it (a checkpoint folder:
    Qwen2Tokenizer), which rebuilds the pre-tokenizer with its own regex and so tokenizes every text differently
    from training. Any other folder loads through AutoTokenizer.

    Raises:
        OSError, ValueError, KeyError: from transformers, when the folder holds no loadable tokenizer.
    """
    if _own_tokenizer(path):
        return PreTrainedTokenizerFast.from_pretrained(str(path), local_files_only=True)
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=trust_remote_code)


def load_tokenizer(path: Path, key: str = "model.tokenizer.path") -> PreTrainedTokenizerBase:
    """Load a tokenizer saved by ``save_tokenizer`` (or any local transformers tokenizer folder); never the hub.

    Args:
        path: the folder.
        key: the params.yaml key the path came from, named in errors.

    Raises:
        ConfigError: the folder does not exist, holds no tokenizer, or the tokenizer has no chat template.
    """
    if not path.is_dir():
        raise ConfigError(f"{key}: the tokenizer folder {path} does not exist; give a folder written by "
                          f"save_tokenizer (e.g. checkpoints/sft/tokenizer) or set {key}: null to train one on data/")
    try:
        tok = tokenizer_from_folder(path)
    except (OSError, ValueError) as err:
        raise ConfigError(f"{key}: {path} holds no loadable tokenizer ({err}); expected tokenizer.json and "
                          f"tokenizer_config.json as written by save_tokenizer") from None
    if not tok.chat_template:
        raise ConfigError(f"{key}: the tokenizer in {path} has no chat template; the data are chat messages, so "
                          f"use a tokenizer written by save_tokenizer or an instruct model's tokenizer")
    return tok


def tokens_per_text(tok: PreTrainedTokenizerBase, texts: Iterable[str]) -> float:
    """Mean number of tokens per text (how long the model's sequences get; sampling cost grows with it)."""
    counts = [len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
    return sum(counts) / max(len(counts), 1)
