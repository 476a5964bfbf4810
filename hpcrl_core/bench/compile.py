"""Step 3: compile a kernel, screen the object, link it with the project's runner; build the monitor.

- The runner (``csrc/runner.c``: the project's code inside the kernel's process) and the monitor
  (``csrc/monitor.c``: inputs, clock, checks, report, in a process of its own) are built once per (compiler,
  harness sources, node) into the cache folder and reused; the kernel is compiled alone with the contract header
  force-included, so a definition with another signature is a "conflicting types" error, reported as a format
  violation.
- The link-level screen reads the kernel object: it may define only ``dgemm`` globally (static helpers are
  fine), may reference only an allowlist of libc/libm/OpenMP/libgcc symbols, and may carry no constructor,
  destructor or init sections.

Test: ``pytest tests/bench/test_engine.py tests/bench/test_adversarial.py``.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from hpcrl_core.bench.procs import ToolLimits, run_tool
from hpcrl_core.errors import BenchInfraError

CSRC = Path(str(resources.files("hpcrl_core.bench") / "csrc"))
HARNESS_FLAGS = ("-O3", "-march=native", "-fno-fast-math", "-std=gnu11")
COMPILER_MEMORY_MB = 2048  # address-space limit of one compile: a pathological kernel cannot exhaust the node

_ALLOWED_UNDEFINED = {
    "malloc", "calloc", "realloc", "free", "aligned_alloc", "posix_memalign", "memalign", "valloc",
    "memcpy", "memmove", "memset", "memcmp", "__memcpy_chk", "__memset_chk", "__memmove_chk", "abs", "labs",
    "qsort", "__stack_chk_fail", "_GLOBAL_OFFSET_TABLE_", "__cpu_model", "__cpu_features2",
    "__cpu_indicator_init", "__errno_location",
}
_ALLOWED_UNDEFINED_PATTERNS = (
    re.compile(r"^(GOMP|omp)_\w+$"),
    # libm
    re.compile(r"^(sqrt|cbrt|fabs|fma|fmin|fmax|floor|ceil|round|trunc|rint|nearbyint|lround|exp|exp2|expm1|log|"
               r"log2|log10|log1p|pow|sin|cos|tan|hypot|copysign|fmod|remainder|ldexp|frexp|modf)[fl]?$"),
    # libgcc arithmetic helpers the compiler may emit
    re.compile(r"^__(u?(div|mod|mul)[dt]i3|popcount[dst]i2|clz[dst]i2|ctz[dst]i2|(mul|div)[sdx]c3|"
               r"(pow|fix|float|trunc|extend)\w*[sdtx][fi]2?)$"),
)
_FORBIDDEN_SECTIONS = (".init_array", ".fini_array", ".preinit_array", ".ctors", ".dtors", ".init", ".fini")
_DISALLOWED_OMP = re.compile(r"^(omp_get_wtime|omp_get_wtick|omp_target_\w+|GOMP_target\w*)$")


@dataclass(frozen=True)
class Toolchain:
    compiler: str  # resolved path
    version: str  # first line of --version


@lru_cache(maxsize=8)
def toolchain(compiler: str) -> Toolchain:
    """Resolve and describe the compiler.

    Raises:
        BenchInfraError: the compiler, nm or readelf is missing.
    """
    path = shutil.which(compiler)
    if not path:
        raise BenchInfraError(f"compiler {compiler!r} not found on PATH; install it (make setup) or set "
                              "bench.compiler")
    for tool in ("nm", "readelf"):
        if not shutil.which(tool):
            raise BenchInfraError(f"{tool} not found on PATH; install binutils (make setup)")
    res = run_tool([path, "--version"], timeout=30)
    if res.returncode != 0:
        raise BenchInfraError(f"{path} --version failed: {res.stderr.strip()[:200]}")
    return Toolchain(path, res.stdout.splitlines()[0].strip() if res.stdout else "unknown")


_HARNESS_SOURCES = ("monitor.c", "checks.c", "checks.h", "runner.c", "protocol.h", "contract.h")


def harness_version() -> str:
    """Hash of the monitor, runner, protocol and contract sources and their flags; part of every cache key."""
    h = hashlib.sha256()
    for name in _HARNESS_SOURCES:
        h.update((CSRC / name).read_bytes())
    h.update(" ".join(HARNESS_FLAGS).encode())
    return h.hexdigest()[:16]


def _build_once(cache_dir: Path, tc: Toolchain, node: str, stem: str, suffix: str, argv_tail: list[str]) -> Path:
    """Build one harness part once per (compiler, harness sources, node); safe when processes race."""
    key = hashlib.sha256(f"{tc.version}|{tc.compiler}|{harness_version()}|{node}".encode()).hexdigest()[:16]
    out = cache_dir / f"{stem}-{key}{suffix}"
    if out.exists():
        return out
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = cache_dir / f".{stem}-{key}.{os.getpid()}{suffix}"
    res = run_tool([tc.compiler, *HARNESS_FLAGS, "-I", str(CSRC), *argv_tail, "-o", str(tmp)], timeout=120)
    if res.returncode != 0:
        raise BenchInfraError(f"the benchmark {stem} does not compile with {tc.version}: {res.stderr[:500]}")
    os.chmod(tmp, 0o755)
    os.replace(tmp, out)
    return out


def runner_object(cache_dir: Path, tc: Toolchain, node: str) -> Path:
    """The runner (the project's code inside the kernel's process), compiled to an object linked with kernels."""
    return _build_once(cache_dir, tc, node, "runner", ".o", ["-c", str(CSRC / "runner.c")])


def monitor_binary(cache_dir: Path, tc: Toolchain, node: str) -> Path:
    """The monitor (inputs, clock, checks, report; never linked with model code), compiled to an executable."""
    return _build_once(cache_dir, tc, node, "monitor", "", [str(CSRC / "monitor.c"), str(CSRC / "checks.c"), "-lm"])


@dataclass(frozen=True)
class CompileOutcome:
    """``kind`` is ``ok``, ``compile_error``, ``timeout`` or ``format_violation``."""

    kind: str
    detail: str = ""
    seconds: float = 0.0


def _first_error(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if "error" in ln]
    text = "\n".join(lines[:5]) if lines else stderr.strip()
    return text[:1500]


def compile_kernel(src: Path, obj: Path, tc: Toolchain, cflags: Sequence[str], timeout: float,
                   cores: Sequence[int] | None = None) -> CompileOutcome:
    """Compile the kernel alone into an object, the contract header force-included."""
    argv = [tc.compiler, *cflags, "-include", str(CSRC / "contract.h"), "-Werror=implicit-function-declaration",
            "-fno-common", "-c", str(src), "-o", str(obj)]
    res = run_tool(argv, timeout=timeout, cwd=src.parent, cores=cores,
                   limits=ToolLimits(memory_mb=COMPILER_MEMORY_MB, cpu_s=max(1, math.ceil(timeout))))
    if res.timed_out:
        return CompileOutcome("timeout", f"compilation did not finish within {timeout:g} s", res.seconds)
    if res.returncode != 0:
        err = _first_error(res.stderr)
        if re.search(r"conflicting types for .dgemm|static declaration of .dgemm", res.stderr):
            return CompileOutcome("format_violation", "wrong signature: dgemm must be "
                                  "void dgemm(int n, const double *A, const double *B, double *C)\n" + err,
                                  res.seconds)
        return CompileOutcome("compile_error", err, res.seconds)
    return CompileOutcome("ok", "", res.seconds)


def _allowed_undefined(name: str) -> bool:
    if _DISALLOWED_OMP.match(name):
        return False
    return name in _ALLOWED_UNDEFINED or any(p.match(name) for p in _ALLOWED_UNDEFINED_PATTERNS)


def screen_object(obj: Path, cores: Sequence[int] | None = None) -> str | None:
    """The link-level screen; returns a reason when the object breaks the contract, else None."""
    nm = run_tool(["nm", "-P", "--no-sort", str(obj)], timeout=30, cores=cores)
    if nm.returncode != 0:
        raise BenchInfraError(f"nm failed on a compiled kernel: {nm.stderr[:300]}")
    defined_dgemm = False
    for line in nm.stdout.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            if not _allowed_undefined(name):
                return f"the kernel references '{name}', which is not on the allowlist of libc/libm/OpenMP symbols"
        elif kind == "T" and name == "dgemm":
            defined_dgemm = True
        elif kind.isupper() or kind in ("u", "v", "w", "i"):
            return f"the kernel defines the global symbol '{name}' ({kind}); only dgemm may be global"
    if not defined_dgemm:
        return "the kernel does not define dgemm as a function"
    sections = run_tool(["readelf", "-SW", str(obj)], timeout=30, cores=cores)
    if sections.returncode != 0:
        raise BenchInfraError(f"readelf failed on a compiled kernel: {sections.stderr[:300]}")
    for line in sections.stdout.splitlines():
        m = re.search(r"\]\s+(\S+)", line)
        if not m:
            continue
        base = re.sub(r"^\.rela?(?=\.)", "", m.group(1))  # .rela.init_array relocates .init_array
        if base in _FORBIDDEN_SECTIONS or base.startswith(tuple(s + "." for s in _FORBIDDEN_SECTIONS)):
            return f"the kernel carries a '{m.group(1)}' section (constructors/destructors are not allowed)"
    return None


def link(obj: Path, runner: Path, exe: Path, tc: Toolchain, timeout: float,
         cores: Sequence[int] | None = None) -> CompileOutcome:
    """Link kernel object and runner; OpenMP and libm are always linked."""
    res = run_tool([tc.compiler, "-fopenmp", str(runner), str(obj), "-o", str(exe), "-lm"], timeout=timeout,
                   cwd=exe.parent, cores=cores)
    if res.timed_out:
        return CompileOutcome("timeout", f"linking did not finish within {timeout:g} s", res.seconds)
    if res.returncode != 0:
        return CompileOutcome("compile_error", "link failed: " + _first_error(res.stderr), res.seconds)
    return CompileOutcome("ok", "", res.seconds)
