"""A GRPO run prints its progress bar and metrics, not a FutureWarning per step about TRL's use of transformers'
deprecated gradient-checkpointing names (the filter in hpcrl_core/training/__init__.py).

Run: pytest tests/training/test_warnings.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from hpcrl_core.config import Settings

ROOT = Path(__file__).resolve().parents[2]

# a few GRPO steps of an untrained policy, as the rl_dgemm stage runs them, in a fresh interpreter (pytest would
# otherwise reset the warning filters between tests and hide what a real run prints)
RUN = textwrap.dedent("""
    import sys
    from pathlib import Path
    from hpcrl_core.training.rl import run_rl
    from tests.training.test_rl import rl_inputs, rl_params

    root = Path(sys.argv[1])
    data, sft = rl_inputs(root, 2)
    print("steps", run_rl(rl_params(max_steps=3, save_steps=2), data, sft, root / "out", report_to=[])["global_step"])
""")


def test_grpo_steps_print_progress_and_no_checkpointing_deprecation(tmp_path: Path, bench_dirs: Settings) -> None:
    # PYTHONWARNINGS=default: every warning shown, as in a plain `python -m flows.rl_dgemm`
    env = {**os.environ, "HPCRL_CACHE_DIR": str(bench_dirs.cache_dir),
           "HPCRL_SCRATCH_DIR": str(bench_dirs.scratch_dir), "PYTHONWARNINGS": "default"}
    out = subprocess.run([sys.executable, "-c", RUN, str(tmp_path)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "steps 3" in out.stdout
    assert "3/3 [" in out.stderr  # the progress bar stays
    assert "gradient_checkpointing" not in out.stderr, out.stderr[-3000:]
