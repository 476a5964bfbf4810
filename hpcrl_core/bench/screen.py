"""Step 2: the static screen of a kernel's source.

The source is run through the real preprocessor first, with the system headers replaced by empty stubs of the
allowlisted headers (``-nostdinc``), so that:
- an include of anything else (another system header, a quoted or absolute path, a computed include, a digraph or
  trigraph spelling) fails or shows up in the include trace (``-H``) and is rejected;
- a forbidden name assembled by the preprocessor (``#define S sys##tem``, line splices) arrives as a plain
  identifier and is caught.
On the preprocessed tokens the screen rejects forbidden names (BLAS/LAPACK, process control, files, sockets,
environment, signals, non-local jumps, dynamic loading, system calls, timers), inline assembly, ``main``,
attributes outside an allowlist (constructor/destructor, section, alias, ifunc, weak ...), C2x ``[[...]]``
attributes and pragmas outside an allowlist. It then detects the optimisation techniques the kernel uses.

This is the first of two layers: ``compile.screen_object`` checks the compiled object's symbols, which catches
a forbidden function reached without naming it in a call.

Test: ``pytest tests/bench/test_adversarial.py tests/bench/test_engine.py``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hpcrl_core.bench.ctokens import Token, tokenize
from hpcrl_core.bench.procs import ToolLimits, run_tool
from hpcrl_core.bench.techniques import Technique, detect_techniques
from hpcrl_core.errors import BenchInfraError

ALLOWED_HEADERS: tuple[str, ...] = ("stdlib.h", "string.h", "math.h", "stdint.h", "stddef.h", "stdbool.h",
                                    "float.h", "limits.h", "omp.h", "immintrin.h")

_CALL_ONLY = {  # common words: forbidden only when called, so a variable named `time` is fine
    "time", "clock", "read", "write", "close", "open", "wait", "signal", "stat", "remove", "rename", "send",
    "bind", "connect", "listen", "accept", "kill", "raise", "exit", "abort", "sleep", "alarm", "pause", "link",
    "sync", "socket", "select", "poll", "dup", "pipe", "truncate",
}
_FORBIDDEN_GROUPS: dict[str, set[str]] = {
    "process control": {
        "system", "fork", "vfork", "clone", "clone3", "popen", "pclose", "wait", "waitpid", "wait3", "wait4",
        "kill", "killpg", "raise", "abort", "exit", "_exit", "_Exit", "quick_exit", "atexit", "at_quick_exit",
        "on_exit", "setsid", "setpgid", "setuid", "setgid", "ptrace", "prctl", "sched_setaffinity",
        "sched_setscheduler", "setpriority", "nice", "getpid", "getppid", "posix_spawn", "posix_spawnp",
        "daemon", "pause", "sleep", "usleep", "nanosleep", "clock_nanosleep", "sbrk", "brk", "setrlimit",
        "prlimit", "unshare", "setns", "chroot", "chdir",
    },
    "file access": {
        "fopen", "freopen", "fdopen", "fclose", "fwrite", "fread", "fputs", "fgets", "fputc", "fgetc", "fprintf",
        "fscanf", "fflush", "fseek", "ftell", "printf", "vprintf", "puts", "putchar", "getchar", "scanf", "perror",
        "sprintf", "snprintf", "vsprintf", "vsnprintf", "open", "openat", "creat", "read", "write", "pread",
        "pwrite", "readv", "writev", "close", "unlink", "unlinkat", "remove", "rename", "mkdir", "rmdir",
        "opendir", "readdir", "stat", "fstat", "lstat", "truncate", "ftruncate", "mmap", "munmap", "mprotect",
        "mremap", "dup", "dup2", "dup3", "pipe", "pipe2", "ioctl", "fcntl", "tmpfile", "tmpnam", "mkstemp",
        "link", "symlink", "chmod", "chown", "sync", "fsync", "sendfile", "splice", "memfd_create", "stdout",
        "stderr", "stdin", "FILE",
    },
    "network": {
        "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "send", "sendto", "sendmsg",
        "recv", "recvfrom", "recvmsg", "gethostbyname", "getaddrinfo", "select", "poll", "epoll_create",
    },
    "environment": {"getenv", "secure_getenv", "setenv", "putenv", "unsetenv", "clearenv", "environ", "__environ"},
    "signals": {"signal", "sigaction", "sigprocmask", "pthread_sigmask", "alarm", "setitimer", "timer_create"},
    "non-local jumps": {"setjmp", "longjmp", "_setjmp", "_longjmp", "sigsetjmp", "siglongjmp", "jmp_buf"},
    "dynamic loading": {"dlopen", "dlsym", "dlvsym", "dlclose", "dlerror", "dladdr"},
    "system calls": {"syscall", "__syscall"},
    "threads outside OpenMP": {"pthread_create", "pthread_join", "pthread_detach", "thrd_create"},
    "timers": {"clock_gettime", "gettimeofday", "time", "clock", "times", "getrusage", "omp_get_wtime",
               "omp_get_wtick", "__rdtsc", "_rdtsc", "__rdtscp", "__builtin_ia32_rdtsc", "__builtin_ia32_rdtscp"},
    "BLAS/LAPACK": {"cblas_dgemm", "dgemm_", "cblas_sgemm", "sgemm_", "cblas_dgemv", "dgemv_", "cblas_ddot",
                    "ddot_", "cblas_daxpy", "daxpy_", "dgesv_", "LAPACKE_dgesv", "mkl_malloc", "bli_dgemm"},
    "compiler builtins that reach the stack or control flow": {
        "__builtin_setjmp", "__builtin_longjmp", "__builtin_apply", "__builtin_apply_args", "__builtin_return",
        "__builtin_frame_address", "__builtin_return_address", "__builtin_extract_return_addr",
        "__builtin_frob_return_addr", "__builtin_eh_return", "__builtin_unwind_init", "__builtin_dwarf_cfa",
    },
}
_FORBIDDEN: dict[str, str] = {name: group for group, names in _FORBIDDEN_GROUPS.items() for name in names}
_FORBIDDEN_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^exec[lv]p?e?$|^fexecve$"), "process control"),
    (re.compile(r"^(cblas|lapacke?|clapack|mkl|bli|openblas|flexiblas)_", re.I), "BLAS/LAPACK"),
    (re.compile(r"^[sdcz](gemm|gemv|ger|syrk|trsm|trmm|axpy|dot|scal|copy|gesv|getrf)_?$"), "BLAS/LAPACK"),
    (re.compile(r"^__libc_|^__NR_|^SYS_"), "system calls"),
    (re.compile(r"^pthread_"), "threads outside OpenMP"),
)
_ASM = {"asm", "__asm", "__asm__"}
_ALLOWED_ATTRIBUTES = {
    "aligned", "vector_size", "always_inline", "noinline", "inline", "unused", "used", "hot", "cold", "target",
    "optimize", "may_alias", "flatten", "pure", "const", "nonnull", "noclone", "artificial", "returns_nonnull",
    "malloc", "alloc_size", "assume_aligned", "nothrow", "leaf", "packed", "maybe_unused", "fallthrough",
    "simd", "noipa", "gnu_inline", "warn_unused_result", "nonstring", "access",
}
_ALLOWED_PRAGMAS = re.compile(
    r"^(omp\b|STDC\b|unroll\b|ivdep\b|GCC\s+(unroll|ivdep|optimize|push_options|pop_options|reset_options|"
    r"target|diagnostic)\b)")
PREPROCESSED_LIMIT = 4 * 1024 * 1024
# an include with a quoted or absolute path, in any spelling of '#' (digraph, trigraph), possibly spliced
_QUOTED_INCLUDE = re.compile(r'^[ \t]*(?:#|%:|\?\?=)[ \t]*include(?:_next)?[ \t]*(?:"|<[ \t]*/)[^\n]*', re.MULTILINE)
_OMP_FORBIDDEN = re.compile(r"^omp\s+(target|requires|declare\s+target|declare\s+variant)\b")


@dataclass(frozen=True)
class ScreenResult:
    """``reason`` is None when the kernel passed; ``techniques`` are set either way when parsing got that far."""

    reason: str | None
    techniques: frozenset[Technique] = field(default_factory=frozenset)

    @property
    def ok(self) -> bool:
        return self.reason is None


def ensure_stub_headers(root: Path) -> Path:
    """Create (idempotently) a folder of empty headers named after the allowlist; returns it."""
    stub = root / "stub-include"
    stub.mkdir(parents=True, exist_ok=True)
    for name in ALLOWED_HEADERS:
        path = stub / name
        if not path.exists():
            path.write_text("/* hpcrl screen stub */\n")
    return stub


def _forbidden_name(tokens: Sequence[Token]) -> str | None:
    for i, tok in enumerate(tokens):
        if tok.kind != "ident":
            continue
        name = tok.text
        if name in _ASM:
            return f"inline assembly ('{name}' at line {tok.line}) is not allowed"
        if name == "main":
            return f"a kernel may not define or use main (line {tok.line})"
        group = _FORBIDDEN.get(name)
        if group is None:
            group = next((g for pat, g in _FORBIDDEN_PATTERNS if pat.search(name)), None)
        if group is None or name == "dgemm":
            continue
        if name in _CALL_ONLY and not (i + 1 < len(tokens) and tokens[i + 1].text == "("):
            continue
        return f"forbidden name '{name}' ({group}) at line {tok.line}"
    return None


def _attribute_names(tokens: Sequence[Token], start: int) -> tuple[list[str], int]:
    """Names inside ``__attribute__((a, b(x), c))`` starting at the keyword; returns names and the end index."""
    i, depth = start + 1, 0
    names: list[str] = []
    expect_name = False
    while i < len(tokens):
        t = tokens[i].text
        if t == "(":
            depth += 1
            expect_name = depth == 2
        elif t == ")":
            depth -= 1
            if depth == 0:
                return names, i
        elif t == "," and depth == 2:
            expect_name = True
        elif expect_name and tokens[i].kind == "ident":
            names.append(tokens[i].text.strip("_"))
            expect_name = False
        i += 1
    return names, i


def _forbidden_construct(tokens: Sequence[Token]) -> str | None:
    for i, tok in enumerate(tokens):
        if tok.kind == "pragma":
            text = tok.text.strip()
            if not _ALLOWED_PRAGMAS.match(text) or _OMP_FORBIDDEN.match(text):
                return f"pragma '#pragma {text}' at line {tok.line} is not allowed"
        elif tok.kind == "ident" and tok.text in ("__attribute__", "__attribute"):
            names, _ = _attribute_names(tokens, i)
            bad = [n for n in names if n not in _ALLOWED_ATTRIBUTES]
            if bad:
                return f"attribute '{bad[0]}' at line {tok.line} is not allowed"
        elif tok.text == "[" and i + 1 < len(tokens) and tokens[i + 1].text == "[":
            return f"C2x attributes '[[...]]' at line {tok.line} are not allowed"
    return None


def _bad_includes(trace: str, stub: Path) -> str | None:
    """Reject any header in the ``-H`` include trace that is not one of our stubs."""
    for line in trace.splitlines():
        m = re.match(r"^\.+ (.+)$", line)
        if not m:
            continue
        path = Path(m.group(1).strip())
        if path.parent.resolve() != stub.resolve() or path.name not in ALLOWED_HEADERS:
            return f"include of '{path}' is not allowed (allowed: {', '.join(ALLOWED_HEADERS)})"
    return None


def preprocess(code: str, workdir: Path, stub: Path, cflags: Sequence[str], compiler: str, timeout: float,
               cores: Sequence[int] | None = None) -> tuple[str | None, str]:
    """Run the real preprocessor against the stub headers. Returns (output or None, reason or include trace)."""
    m = _QUOTED_INCLUDE.search(code)
    if m:  # rejected before the preprocessor runs: "/dev/zero" would never end
        return None, f"include not allowed: {m.group(0).strip()} (only <header.h> from: {', '.join(ALLOWED_HEADERS)})"
    src = workdir / "screen.c"
    src.write_text(code)
    res = run_tool([compiler, "-E", "-P", "-H", "-nostdinc", "-fmax-include-depth=8", "-I", str(stub), *cflags,
                    str(src)], timeout=timeout, cwd=workdir, cores=cores, max_output=PREPROCESSED_LIMIT,
                   kill_on_overflow=True, limits=ToolLimits(memory_mb=1024, cpu_s=max(1, math.ceil(timeout))))
    if res.overflow:
        return None, f"the preprocessed kernel exceeds {PREPROCESSED_LIMIT // (1024 * 1024)} MB (runaway macros)"
    if res.timed_out:
        return None, f"the preprocessor did not finish within {timeout:g} s"
    if res.returncode != 0:
        msg = next((ln for ln in res.stderr.splitlines() if "error" in ln), res.stderr.strip()[:300])
        if "no include path" in msg or not stub.is_dir():
            raise BenchInfraError(f"the screen's stub headers are not reachable at {stub}: {msg.strip()}")
        if "No such file" in msg or "include" in msg:
            return None, f"include not allowed: {msg.strip()} (allowed: {', '.join(ALLOWED_HEADERS)})"
        return None, f"preprocessing failed: {msg.strip()}"
    return res.stdout, res.stderr


def screen_source(code: str, workdir: Path, stub: Path, cflags: Sequence[str], compiler: str,
                  timeout: float = 10.0, cores: Sequence[int] | None = None) -> ScreenResult:
    """Screen a kernel and detect its techniques.

    Args:
        code: the extracted C source.
        workdir: an empty scratch folder for this kernel.
        stub: folder of stub headers from ``ensure_stub_headers``.
        cflags: the compile flags (they set predefined macros such as ``_OPENMP`` and ``__AVX2__``).
        compiler: the C compiler used as preprocessor.
        timeout: seconds allowed to the preprocessor.
        cores: cores to pin the preprocessor to.

    Returns:
        A ``ScreenResult``; ``reason`` says why the kernel is a format violation, or is None.
    """
    pre, info = preprocess(code, workdir, stub, cflags, compiler, timeout, cores)
    if pre is None:
        return ScreenResult(info)
    reason = _bad_includes(info, stub)
    if reason:
        return ScreenResult(reason)
    try:
        tokens = tokenize(pre)
    except ValueError as err:
        return ScreenResult(f"cannot tokenize the preprocessed kernel: {err}")
    try:
        techniques = detect_techniques(tokens)
    except RecursionError:
        return ScreenResult("the kernel is nested too deeply to analyse")
    reason = _forbidden_name(tokens) or _forbidden_construct(tokens)
    return ScreenResult(reason, techniques)
