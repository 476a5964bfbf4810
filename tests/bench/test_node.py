"""Tests of node facts and the peak estimate. Run: pytest tests/bench/test_node.py"""

from __future__ import annotations

from hpcrl_core.bench.cpuload import busy_ticks, foreign_load
from hpcrl_core.bench.node import NodeInfo, clock_ghz, node_info, parse_cpuinfo, vector_registers

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9654 96-Core Processor
cpu MHz\t\t: 3650.000
flags\t\t: fpu sse2 avx avx2 fma avx512f

processor\t: 1
vendor_id\t: AuthenticAMD
"""


def test_parse_cpuinfo_and_zen4_peak() -> None:
    model, vendor, flags, mhz = parse_cpuinfo(CPUINFO)
    assert model.startswith("AMD EPYC") and vendor == "AuthenticAMD" and "avx512f" in flags and mhz == 3650.0
    ghz, src = clock_ghz(model, mhz, None)
    node = NodeInfo("h", model, vendor, 2, flags, ghz, src)
    assert node.flops_per_cycle == 16  # Zen 4 double-pumps AVX-512
    assert node.peak_gflops() == 2 * 3.65 * 16  # the 117 GFLOPS measured on such nodes


def test_intel_avx512_and_avx2_and_clock_sources() -> None:
    intel = NodeInfo("h", "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", "GenuineIntel", 4,
                     frozenset({"avx2", "fma", "avx512f"}), 2.0, "model name")
    assert intel.flops_per_cycle == 32 and intel.peak_gflops(1) == 64.0
    assert NodeInfo("h", "x", "v", 1, frozenset({"avx2", "fma"}), 3.0, "").flops_per_cycle == 16
    assert NodeInfo("h", "x", "v", 1, frozenset({"sse2"}), None, "").peak_gflops() is None
    assert clock_ghz("Xeon @ 2.00GHz", 2900.0, 3_500_000) == (3.5, "cpufreq max")


def test_this_node_has_a_fingerprint() -> None:
    node = node_info()
    assert node.cores >= 1 and len(node.fingerprint) == 16


def test_foreign_load_arithmetic() -> None:
    stat = "cpu  1 2 3 4\ncpu0 100 0 50 1000 0 0 0 10\ncpu1 7 0 0 0 0 0 0 0\n"
    assert busy_ticks([0], stat) == {0: 160}
    # 2 s on one core: 150 busy ticks (1.5 s) of which our child used 0.5 s -> 1.0 s - 1 tick slack foreign
    load = foreign_load({0: 0}, {0: 150}, own_cpu_s=0.5, wall_s=2.0)
    assert load is not None and abs(load - 0.495) < 1e-9
    assert foreign_load({0: 0}, {0: 10}, own_cpu_s=1.0, wall_s=1.0) == 0.0
    assert foreign_load({}, {}, 0.0, 1.0) is None


def test_vector_registers_follow_avx512_and_its_vector_length_extension() -> None:
    avx2 = frozenset({"avx2", "fma"})
    assert vector_registers(4, avx2) == 16
    assert vector_registers(8, avx2 | {"avx512f"}) == 32
    assert vector_registers(4, avx2 | {"avx512f"}) == 16  # ymm16-31 need AVX-512VL
    assert vector_registers(4, avx2 | {"avx512f", "avx512vl"}) == 32
    assert vector_registers(4) in (16, 32)
