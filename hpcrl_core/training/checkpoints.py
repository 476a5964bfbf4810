"""Which checkpoints a training stage may resume: only those made from the same inputs.

DVC keeps ``checkpoints/<stage>`` between runs (``persist: true``) so that a killed run resumes; but a run whose
data or params changed must start over, not continue someone else's optimiser state. The stage writes a
fingerprint of its inputs next to its checkpoints and clears the folder when the fingerprint differs.

Test: ``pytest tests/training/test_checkpoints.py``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FINGERPRINT = "inputs.json"


def inputs_fingerprint(files: Iterable[Path], settings: dict[str, Any]) -> str:
    """sha256 over the given files' bytes (sorted by path) and the JSON of the settings that change results."""
    h = hashlib.sha256()
    for path in sorted(Path(p) for p in files):
        h.update(str(path).encode())
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return h.hexdigest()


def reset_if_stale(output_dir: Path, fingerprint: str) -> bool:
    """Clear ``output_dir`` when it holds checkpoints of other inputs; record the fingerprint.

    Returns:
        True when stale checkpoints were removed.
    """
    marker = output_dir / FINGERPRINT
    stale = output_dir.exists() and any(output_dir.iterdir()) and (
        not marker.exists() or json.loads(marker.read_text()).get("fingerprint") != fingerprint)
    if stale:
        shutil.rmtree(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"fingerprint": fingerprint}) + "\n")
    return stale
