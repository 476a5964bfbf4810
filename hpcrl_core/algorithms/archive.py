"""The quality-diversity archive of SQD: the best verified kernel per niche, and its heatmap.

A niche is (problem id, the set of techniques the kernel used): 32 niches per problem, one per subset of the five
techniques. The archive keeps, per niche, the fastest verified kernel seen so far (GFLOPS, code, the training step
it was found at, the problem's stage then), and per problem the fastest such kernel its last visit wrote
(``record_visit``; 0.0 when that visit verified none), which elite replay compares with the elite. It measures
diversity as coverage (filled niches / all niches) and quality-diversity as the QD score (sum of the best GFLOPS
over filled niches). ``heatmap`` draws problems × technique combinations coloured by the best GFLOPS. Design:
``docs/sqd.md``.

Use::

    archive = QDArchive(curriculum.problem_ids)
    archive.add(pid, result.techniques, result.gflops, code, step=step, stage=curriculum.stage(pid))
    archive.save(out / ARCHIVE_FILE); archive.heatmap(out / "qd_heatmap.png")

Test: ``pytest tests/algorithms/test_archive.py``.
"""

from __future__ import annotations

import io
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hpcrl_core.bench.techniques import ALL_TECHNIQUES, Technique, parse_techniques
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.files import read_json_file, write_bytes_atomic, write_text_atomic

ARCHIVE_FILE = "qd_archive.json"  # the name of the archive inside a checkpoint folder
ARCHIVE_VERSION = 1
# All 32 technique sets: by size, then in ALL_TECHNIQUES order (the heatmap's columns, left to right).
COMBINATIONS: tuple[frozenset[Technique], ...] = tuple(
    frozenset(c) for size in range(len(ALL_TECHNIQUES) + 1) for c in combinations(ALL_TECHNIQUES, size))
INITIALS: dict[Technique, str] = {Technique.LOOP_REORDER: "L", Technique.CACHE_BLOCKING: "C",
                                  Technique.REGISTER_BLOCKING: "R", Technique.OPENMP: "O", Technique.SIMD: "S"}
_MAX_STAGE = len(ALL_TECHNIQUES)


def combination_label(techniques: Iterable[Technique]) -> str:
    """Compact label of a technique set: initials in ``ALL_TECHNIQUES`` order (``"CRS"``), ``"-"`` for none."""
    chosen = set(techniques)
    return "".join(INITIALS[t] for t in ALL_TECHNIQUES if t in chosen) or "-"


def _finite_number(value: object) -> bool:
    """True for a finite int or float (a bool is not a number here)."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


@dataclass(frozen=True)
class Elite:
    """The best verified kernel of one niche."""

    problem_id: str
    techniques: frozenset[Technique]
    gflops: float
    code: str
    step: int
    stage: int

    def to_json(self) -> dict[str, Any]:
        return {"problem_id": self.problem_id, "techniques": sorted(t.value for t in self.techniques),
                "gflops": self.gflops, "code": self.code, "step": self.step, "stage": self.stage}


class QDArchive:
    """Best verified kernel per (problem, technique set) niche over a fixed list of problems.

    Args:
        problem_ids: the problems (the heatmap's rows, in this order); at least one, each once.

    Raises:
        ConfigError: no problems, or an id listed twice.
    """

    def __init__(self, problem_ids: Iterable[str]) -> None:
        ids = list(problem_ids)
        if not ids:
            raise ConfigError("a QD archive needs at least one problem id; got none")
        if len(set(ids)) != len(ids):
            dupes = sorted(p for p, c in Counter(ids).items() if c > 1)
            raise ConfigError(f"QD archive problem ids must be unique; listed more than once: {dupes[:5]}")
        self._ids = ids
        self._elites: dict[tuple[str, frozenset[Technique]], Elite] = {}
        self._last_visit: dict[str, float] = {}  # problem -> fastest verified kernel of its last visit (0.0: none)

    @property
    def problem_ids(self) -> list[str]:
        return list(self._ids)

    def add(self, pid: str, techniques: Iterable[Technique | str], gflops: float, code: str, step: int,
            stage: int) -> bool:
        """Offer a verified kernel to its niche.

        Args:
            pid: the problem.
            techniques: the techniques the kernel used (as detected), names or ``Technique`` values.
            gflops: its measured GFLOPS (finite, > 0).
            code: the kernel source.
            step: the training step it was generated at (>= 0).
            stage: the problem's stage at that step (0..5).

        Returns:
            True when it became the niche's best (first kernel, or strictly faster than the one held).

        Raises:
            KeyError: an unknown problem id.
            ValueError: gflops not finite or not positive, an unknown technique, step or stage out of range.
        """
        self._check_known(pid)
        techs = parse_techniques(str(t) for t in techniques)
        if not _finite_number(gflops) or gflops <= 0:
            raise ValueError(f"problem {pid}: gflops must be a finite number > 0 (a verified kernel), got {gflops!r}")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"problem {pid}: step must be an integer >= 0, got {step!r}")
        if isinstance(stage, bool) or not isinstance(stage, int) or not 0 <= stage <= _MAX_STAGE:
            raise ValueError(f"problem {pid}: stage must be an integer 0..{_MAX_STAGE}, got {stage!r}")
        held = self._elites.get((pid, techs))
        if held is not None and gflops <= held.gflops:
            return False
        self._elites[(pid, techs)] = Elite(pid, techs, float(gflops), str(code), step, stage)
        return True

    def _check_known(self, pid: str) -> None:
        if pid not in self._ids:
            raise KeyError(f"unknown problem id {pid!r}: not one of the archive's {len(self._ids)} problems")

    def record_visit(self, pid: str, best_gflops: float) -> None:
        """Note the fastest verified kernel a visit of ``pid`` wrote (0.0 when it verified none); replaces the
        previous visit's.

        Raises:
            KeyError: an unknown problem id.
            ValueError: ``best_gflops`` not finite or negative.
        """
        self._check_known(pid)
        if not _finite_number(best_gflops) or best_gflops < 0:
            raise ValueError(f"problem {pid}: a visit's best GFLOPS must be a finite number >= 0, got {best_gflops!r}")
        self._last_visit[pid] = float(best_gflops)

    def last_visit(self, pid: str) -> float | None:
        """The fastest verified kernel of ``pid``'s last visit (0.0: it verified none), None before any visit."""
        return self._last_visit.get(pid)

    def niche(self, pid: str, techniques: Iterable[Technique | str]) -> Elite | None:
        """The best kernel of one niche, or None when it is empty."""
        return self._elites.get((pid, parse_techniques(str(t) for t in techniques)))

    def best(self, pid: str) -> Elite | None:
        """The fastest kernel of a problem over all its niches, or None when it has none."""
        held = [e for (p, _), e in self._elites.items() if p == pid]
        return max(held, key=lambda e: e.gflops, default=None)

    def best_within(self, pid: str, permitted: Iterable[Technique | str]) -> Elite | None:
        """The fastest kernel of a problem whose techniques are all in ``permitted``, or None when it has none."""
        allowed = parse_techniques(str(t) for t in permitted)
        held = [e for (p, techs), e in self._elites.items() if p == pid and techs <= allowed]
        return max(held, key=lambda e: e.gflops, default=None)

    def niches(self) -> list[Elite]:
        """The filled niches' elites, by problem (in the archive's order), then by technique combination."""
        row = {pid: i for i, pid in enumerate(self._ids)}
        col = {c: i for i, c in enumerate(COMBINATIONS)}
        return sorted(self._elites.values(), key=lambda e: (row[e.problem_id], col[e.techniques]))

    def coverage(self) -> float:
        """Filled niches / (problems × 32)."""
        return len(self._elites) / (len(self._ids) * len(COMBINATIONS))

    def qd_score(self) -> float:
        """Sum of the best GFLOPS over the filled niches."""
        return math.fsum(e.gflops for e in self._elites.values())

    def stats(self) -> dict[str, float]:
        """Numbers to log: ``archive/niches`` (filled), ``archive/coverage``, ``archive/qd_score`` and
        ``archive/best_gflops`` (the fastest kernel overall; 0 when empty)."""
        return {"archive/niches": float(len(self._elites)), "archive/coverage": self.coverage(),
                "archive/qd_score": self.qd_score(),
                "archive/best_gflops": max((e.gflops for e in self._elites.values()), default=0.0)}

    def state_dict(self) -> dict[str, Any]:
        """The archive as a JSON-serialisable dict."""
        return {"version": ARCHIVE_VERSION, "problems": list(self._ids),
                "elites": [e.to_json() for e in self.niches()],
                "last_visit": {pid: self._last_visit[pid] for pid in self._ids if pid in self._last_visit}}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any], source: str = "QD archive") -> QDArchive:
        """Rebuild an archive from ``state_dict()``.

        Raises:
            DataError: a malformed state (the message names ``source`` and the offending entry).
        """
        if not isinstance(state, dict) or state.get("version") != ARCHIVE_VERSION:
            raise DataError(f"{source}: not a QD archive of version {ARCHIVE_VERSION}")
        if not isinstance(state.get("problems"), list) or not isinstance(state.get("elites"), list):
            raise DataError(f"{source}: a QD archive needs lists 'problems' and 'elites'")
        try:
            archive = cls(state["problems"])
            for i, e in enumerate(state["elites"]):
                try:
                    archive.add(e["problem_id"], e["techniques"], e["gflops"], e["code"], e["step"], e["stage"])
                except (KeyError, TypeError, ValueError) as err:
                    raise DataError(f"{source}: elite #{i} is malformed ({type(err).__name__}: {err})") from None
            visits = state.get("last_visit", {})  # absent in archives written before it was kept
            if not isinstance(visits, dict):
                raise DataError(f"{source}: 'last_visit' must map problem ids to GFLOPS")
            for pid, best in visits.items():
                try:
                    archive.record_visit(pid, best)
                except (KeyError, ValueError) as err:
                    raise DataError(f"{source}: last visit of {pid!r} is malformed ({err})") from None
        except (ConfigError, KeyError, TypeError) as err:
            raise DataError(f"{source}: malformed QD archive ({type(err).__name__}: {err})") from None
        return archive

    def save(self, path: Path) -> None:
        """Write the archive as JSON, atomically."""
        write_text_atomic(path, json.dumps(self.state_dict(), indent=1, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: Path, problem_ids: Sequence[str] | None = None) -> QDArchive:
        """Read an archive written by ``save``.

        Args:
            path: the JSON file.
            problem_ids: when given, the problems this run trains on; the saved archive must cover the same set.

        Raises:
            DataError: a missing, non-JSON or malformed file.
            ConfigError: the saved archive is over other problems than ``problem_ids`` (resume must not mix runs).
        """
        archive = cls.from_state_dict(read_json_file(path, "QD archive"), source=str(path))
        if problem_ids is not None and set(problem_ids) != set(archive.problem_ids):
            only_here = sorted(set(problem_ids) - set(archive.problem_ids))
            only_saved = sorted(set(archive.problem_ids) - set(problem_ids))
            raise ConfigError(f"{path}: cannot resume: the saved archive is over other problems; start a fresh run",
                              [f"only in this run ({len(only_here)}): {only_here[:3]}",
                               f"only in the saved archive ({len(only_saved)}): {only_saved[:3]}"])
        return archive

    def heatmap(self, path: Path) -> None:
        """Write a PNG heatmap: rows = problems, columns = the 32 technique sets, colour = best GFLOPS.

        Empty niches stay white; the title gives coverage and QD score. An empty archive gives an empty grid
        with a note. Rendered with matplotlib's Agg canvas (no display, no global backend change).
        """
        write_bytes_atomic(path, _render_heatmap(self))


def _grid(archive: QDArchive) -> npt.NDArray[np.float64]:
    """Best GFLOPS as a (problems, 32) float array, NaN for empty niches."""
    grid = np.full((len(archive.problem_ids), len(COMBINATIONS)), np.nan)
    row = {pid: i for i, pid in enumerate(archive.problem_ids)}
    col = {c: i for i, c in enumerate(COMBINATIONS)}
    for e in archive.niches():
        grid[row[e.problem_id], col[e.techniques]] = e.gflops
    return grid


def _render_heatmap(archive: QDArchive) -> bytes:
    """The heatmap PNG's bytes (see ``QDArchive.heatmap``)."""
    # matplotlib is imported here: it is slow to import and only the heatmap needs it.
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import LogNorm, Normalize
    from matplotlib.figure import Figure

    ids = archive.problem_ids
    rows = len(ids)
    grid = _grid(archive)
    values = grid[np.isfinite(grid)]
    norm: Normalize = Normalize(0.0, 1.0)
    label = "best GFLOPS"
    if values.size:
        lo, hi = float(values.min()), float(values.max())
        # GFLOPS span orders of magnitude between a plain kernel and OpenMP+SIMD: a log scale keeps both visible.
        norm, label = (LogNorm(lo, hi), "best GFLOPS (log scale)") if hi >= 100 * lo else (Normalize(0.0, hi), label)

    height = min(max(2.0 + 0.22 * rows, 3.5), 24.0)  # capped: thousands of problems still give a sane PNG
    fig = Figure(figsize=(11.0, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    cmap = colormaps["viridis"].with_extremes(bad="white")
    image = ax.imshow(np.ma.masked_invalid(grid), aspect="auto", cmap=cmap, norm=norm, interpolation="nearest")
    bar = fig.colorbar(image, ax=ax, label=label, aspect=max(20.0, 4.0 * height))  # a slim bar in tall figures
    if not values.size:
        bar.set_ticks([])
    ax.set_xticks(range(len(COMBINATIONS)), [combination_label(c) for c in COMBINATIONS], rotation=90, fontsize=7)
    every = max(1, math.ceil(rows / 60))  # at most ~60 row labels
    ax.set_yticks(range(0, rows, every), ids[::every], fontsize=6 if rows > 20 else 8)
    ax.set_xticks(np.arange(-0.5, len(COMBINATIONS)), minor=True)
    if rows <= 100:
        ax.set_yticks(np.arange(-0.5, rows), minor=True)
    ax.grid(which="minor", color="0.85", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("techniques used (L loop_reorder, C cache_blocking, R register_blocking, O openmp, S simd; "
                  "- none)", fontsize=8)
    ax.set_ylabel("problem")
    filled, total = len(archive.niches()), rows * len(COMBINATIONS)
    ax.set_title(f"QD archive: coverage {archive.coverage():.1%} ({filled}/{total} niches), "
                 f"QD score {archive.qd_score():,.1f} GFLOPS", fontsize=10)
    if not values.size:
        ax.text(0.5, 0.5, "no verified kernels yet", transform=ax.transAxes, ha="center", va="center",
                fontsize=12, color="0.4")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
