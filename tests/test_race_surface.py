"""The edits of benchmarks/race_surface.py leave programs that compile and run, and change what they say they do.

Run: pytest tests/test_race_surface.py (needs gcc).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.race_surface import EDITS, c_code
from hpcrl_core.data.race.generator import generate_race_items


@pytest.mark.integration
def test_every_edit_compiles_runs_and_changes_the_program(tmp_path: Path) -> None:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    records = [r for r in generate_race_items("c", 1, seed=5) if r.metadata["pattern"] in
               ("missing_private", "missing_reduction", "loop_carried", "locks", "missing_barrier",
                "sections", "task_depend", "function_state")]
    for k, r in enumerate(records):
        code = c_code(r)
        assert code is not None
        for name, edit in EDITS.items():
            new = edit(code)
            if name in ("as generated", "comments removed"):  # the generator's own programs: tested with it
                continue
            assert new != code, (name, code)
            src = tmp_path / f"p{k}-{name.replace(' ', '_')}.c"
            src.write_text(new)
            built = subprocess.run(["gcc", "-fopenmp", "-Wall", "-Werror", str(src), "-o", str(src.with_suffix(""))],
                                   capture_output=True, text=True, timeout=60)
            assert built.returncode == 0, (name, new, built.stderr)
            ran = subprocess.run([str(src.with_suffix(""))], capture_output=True, timeout=30,
                                 env={**os.environ, "OMP_NUM_THREADS": "1"})
            assert ran.returncode == 0, (name, new)
