"""Result cache: a SQLite file keyed by ``Engine.key`` (normalised code, n, slot size, flags, compiler, harness,
node, engine parameters).

Safe with several processes and threads: WAL journal, a busy timeout, one connection per thread, and writes that
are single upserts. A hit costs well under 5 ms (``benchmarks/bench_throughput.py`` measures it).

Test: ``pytest tests/bench/test_cache.py``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

from hpcrl_core.bench.result import BenchResult
from hpcrl_core.errors import BenchInfraError

_SCHEMA = "CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, result TEXT NOT NULL, created REAL NOT NULL)"


class ResultCache:
    """Persistent map from cache key to ``BenchResult``, with hit/miss counters for this process."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            con = self._connect()
            con.execute("PRAGMA journal_mode=WAL")
            con.execute(_SCHEMA)
            con.commit()
            con.close()
        except (OSError, sqlite3.Error) as err:
            raise BenchInfraError(f"result cache {self.path} is not usable: {err}; set HPCRL_CACHE_DIR") from err
        self._local = threading.local()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        con.execute("PRAGMA busy_timeout=30000")
        con.execute("PRAGMA synchronous=NORMAL")
        return con

    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = self._connect()
            self._local.con = con
        return con

    def get(self, key: str) -> BenchResult | None:
        """The cached result (marked ``cached=True``), or None; counts the hit or miss."""
        row = self._con().execute("SELECT result FROM results WHERE key = ?", (key,)).fetchone()
        with self._lock:
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
        d = json.loads(row[0])
        d["cached"] = True
        return BenchResult.from_dict(d)

    def put(self, result: BenchResult) -> None:
        if not result.key:
            return
        self._con().execute("INSERT OR REPLACE INTO results (key, result, created) VALUES (?, ?, ?)",
                            (result.key, result.to_json(), time.time()))

    @property
    def hit_rate(self) -> float | None:
        total = self.hits + self.misses
        return self.hits / total if total else None

    def __len__(self) -> int:
        return int(self._con().execute("SELECT COUNT(*) FROM results").fetchone()[0])
