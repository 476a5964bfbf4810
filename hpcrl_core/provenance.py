"""Where a model comes from: the git commit, content hashes of the data and of the model folder, the folder's kind.

Plain Python (no MLflow): ``tracking.py`` puts these on runs and registered versions as tags (``git_commit``,
``data_hash``, ``model_hash``, ``model_kind``), and the register flow finds an already registered model by its
``model_hash``. Hashes are computed from the files themselves, so anyone holding the files can recompute them.

Test: ``pytest tests/test_provenance.py``.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from hpcrl_core.errors import ConfigError, DataError


def git_commit(root: Path | None = None) -> str:
    """The current commit (with ``-dirty`` when the tree has changes), or ``unknown`` outside git."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if sha.returncode != 0:
        return "unknown"
    return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def data_hash(data_dir: Path, pattern: str | tuple[str, ...] = "dgemm/*.jsonl") -> str:
    """A content hash of the data a model was trained and evaluated on (by default the DGEMM files): ``sha256:<hex>``.

    Computed from the files themselves (sorted by relative path; each contributes its path, its size and its
    bytes), not read from ``dvc.lock``: the files are what the flow actually sees, the lock may be stale or absent
    (a checkout without DVC), and anyone holding the files can recompute the hash.

    Args:
        data_dir: the prepared data folder (``data``).
        pattern: the files to hash, relative to ``data_dir``: a glob, or several (their union).

    Raises:
        DataError: no file matches.
    """
    patterns = (pattern,) if isinstance(pattern, str) else pattern
    files = sorted({f for p in patterns for f in data_dir.glob(p)})
    if not files:
        raise DataError(f"data_dir: no {' or '.join(patterns)} under {data_dir}; pass the prepared data folder "
                        "(--data data), or produce it with `dvc pull data` or `dvc repro prepare`")
    digest = hashlib.sha256()
    for f in files:
        digest.update(f"{f.relative_to(data_dir).as_posix()}\0{f.stat().st_size}\0".encode())
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def model_hash(model_dir: Path) -> str:
    """sha256 over a model folder's files (relative path + bytes, sorted): the same weights give the same hash."""
    h = hashlib.sha256()
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(model_dir)).encode() + b"\0")
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return "sha256:" + h.hexdigest()


def check_model_dir(model_dir: Path) -> str:
    """Check that ``model_dir`` holds a saved model; returns its kind: ``hf_model`` or ``lora_adapter``.

    Raises:
        ConfigError: the folder is missing or holds neither ``config.json`` nor ``adapter_config.json``.
    """
    if (model_dir / "adapter_config.json").is_file():
        return "lora_adapter"
    if (model_dir / "config.json").is_file():
        return "hf_model"
    state = "does not exist" if not model_dir.exists() else "holds no config.json or adapter_config.json"
    raise ConfigError(f"model_dir: {model_dir} {state}; pass a saved Hugging Face model or LoRA adapter folder "
                      "(--model checkpoints/rl_dgemm/final), or produce it with `dvc repro rl_dgemm`")


def model_tags(model_dir: Path, data_dir: Path,
               data_files: str | tuple[str, ...] = "dgemm/*.jsonl") -> dict[str, str]:
    """The provenance tags of a model version: ``git_commit``, ``data_hash``, ``model_kind`` and ``model_hash``.

    The model folder is checked first, then the data: a bad input fails before anything is hashed or logged.

    Raises:
        ConfigError: ``model_dir`` holds no saved model (``check_model_dir``).
        DataError: ``data_dir`` holds none of ``data_files`` (``data_hash``).
    """
    kind = check_model_dir(model_dir)
    return {"git_commit": git_commit(), "data_hash": data_hash(data_dir, data_files), "model_kind": kind,
            "model_hash": model_hash(model_dir)}
