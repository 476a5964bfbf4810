"""Facts about this node: a fingerprint for cache keys and a theoretical DGEMM peak estimate.

The peak is ``cores x clock x double-precision flops per cycle``. Flops per cycle come from the CPU's flags and
vendor: AVX-512 with two FMA units (Intel server cores) 32; AVX-512 on AMD Zen 4 (double-pumped 256-bit units) 16;
AVX2+FMA 16; AVX 8; SSE2 4. The clock is the highest of cpufreq's maximum, the model name's "@ x.xxGHz" and
/proc/cpuinfo's "cpu MHz". It is an estimate, labelled as such wherever it is shown.

Test: ``pytest tests/bench/test_node.py``.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import socket
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class NodeInfo:
    hostname: str
    model: str
    vendor: str
    cores: int
    flags: frozenset[str]
    clock_ghz: float | None
    clock_source: str

    @property
    def flops_per_cycle(self) -> int:
        f = self.flags
        if "avx512f" in f:
            return 16 if "AMD" in self.vendor else 32
        if "avx2" in f and "fma" in f:
            return 16
        if "avx" in f:
            return 8
        return 4

    def peak_gflops(self, cores: int | None = None) -> float | None:
        """Theoretical DP peak for ``cores`` cores (all of the node's by default); None without a clock."""
        if self.clock_ghz is None:
            return None
        return (cores or self.cores) * self.clock_ghz * self.flops_per_cycle

    @property
    def fingerprint(self) -> str:
        text = f"{self.hostname}|{self.model}|{self.cores}|{','.join(sorted(self.flags))}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def parse_cpuinfo(text: str) -> tuple[str, str, frozenset[str], float | None]:
    """(model name, vendor, flags, cpu MHz) of the first processor block."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    mhz = fields.get("cpu MHz")
    return (fields.get("model name", platform.processor() or "unknown"), fields.get("vendor_id", "unknown"),
            frozenset(fields.get("flags", "").split()), float(mhz) if mhz else None)


def clock_ghz(model: str, cpuinfo_mhz: float | None, cpufreq_max_khz: int | None) -> tuple[float | None, str]:
    """The best clock estimate and where it came from."""
    found: list[tuple[float, str]] = []
    if cpufreq_max_khz:
        found.append((cpufreq_max_khz / 1e6, "cpufreq max"))
    m = re.search(r"@\s*([0-9.]+)\s*GHz", model)
    if m:
        found.append((float(m.group(1)), "model name"))
    if cpuinfo_mhz:
        found.append((cpuinfo_mhz / 1000, "cpu MHz"))
    if not found:
        return None, "unknown"
    return max(found)


@lru_cache(maxsize=1)
def node_info() -> NodeInfo:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    model, vendor, flags, mhz = parse_cpuinfo(text)
    try:
        khz: int | None = int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text())
    except (OSError, ValueError):
        khz = None
    ghz, source = clock_ghz(model, mhz, khz)
    return NodeInfo(socket.gethostname(), model, vendor, len(os.sched_getaffinity(0)), flags, ghz, source)


def vector_doubles() -> int:
    """Doubles per hardware vector register on this node: 8 with AVX-512, else 4 (AVX2). Kernels written for the
    node (the corpus generator's vector kinds, ``-march=native``) use this width: AVX-512 intrinsics do not compile
    without it, and 8-wide GCC vectors on AVX2 spill a register tile sized for 32 registers."""
    return 8 if "avx512f" in node_info().flags else 4


def vector_registers(width: int, flags: frozenset[str] | None = None) -> int:
    """Vector registers of ``width`` doubles that ``-march=native`` code may allocate on a node with ``flags`` (this
    node's by default): 32 with AVX-512 (zmm0-31; 4-wide ymm16-31 need AVX-512VL as well), else 16 (AVX2's
    ymm0-15). A register tile larger than this spills to the stack on every update."""
    flags = node_info().flags if flags is None else flags
    return 32 if "avx512f" in flags and (width == 8 or "avx512vl" in flags) else 16

