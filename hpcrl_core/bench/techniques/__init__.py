"""Static detection of the optimisation techniques a DGEMM kernel uses.

The curriculum (SQD) allows some techniques per problem and rejects a kernel that uses a forbidden one, so these
rules are the project's definition of each technique. The input is the kernel's tokens (``ctokens.tokenize``),
normally of the source after the C preprocessor ran (macros expanded, comments gone, ``#pragma`` lines kept);
raw source works too (``detect_techniques_in_source`` also reads ``#define NAME <integer>`` constants).

How it works: the tokens are parsed into functions and statements (``{}`` blocks, ``for``, ``while``,
``do``/``while``, ``if``/``else``, ``switch``, other statements up to ``;``; a pragma attaches to the statement
after it). Unbalanced or partial code is tolerated: the parser never raises and always advances. Each function
is then walked into a tree of loops (``ForLoop``). A call to a function defined in the same source is followed
(inlined, up to a budget), so a micro-kernel in a ``static inline`` helper is seen inside its caller's loops;
the callee's parameters stand for the identifiers of the call's arguments. For every loop the walk records the
loop variable, the init/condition/increment tokens, the step (``1`` for ``i++``/``i += 1``/``i = i + 1``, an
int for ``i += 8`` or ``i += BS`` when ``BS`` is a known constant, ``"symbolic"`` for ``i += bs``) and the trip
count when the bounds are constants (``r = 0; r < 4``). A ``while``/``do`` loop whose condition compares a
variable that its body steps is treated like a ``for`` loop; other ``while`` loops (``do { } while (0)``...)
are transparent. Known constants are ``enum`` members, variables assigned one constant value and never
changed, integer arguments of an inlined call, and raw-source ``#define`` constants. A name after a unary ``*``
or ``&`` (a pointer declarator ``int *p``/``int *const p``/``T *p``, a dereference, an address-of) is no
constant; after a binary one (``blk * BS``, ``n & MASK``: the operator follows a variable, a number, ``]`` or a
``)`` that does not end a cast) it can be.

"Derived from v" (below) means: v itself, a variable assigned (or declared) from an expression that uses a
derived variable, a helper parameter whose argument uses one, and a variable stepped (``p++``, ``p += n``)
inside the loop. An accumulation is ``x += e``, ``x -= e``, ``x = ... x ...`` (``x = x + a*b``,
``c0 = _mm256_fmadd_pd(a, b, c0)``) or a vector store intrinsic whose value adds/FMAs.

Rules:

- ``openmp``: a ``#pragma omp`` whose directive names a threading construct (parallel, for, do, loop, task,
  taskloop, sections, section, single, teams, distribute), or a call of ``omp_set_num_threads``.
  ``omp simd`` and ``omp declare simd`` alone are not openmp.
- ``simd``: a ``#pragma omp`` directive containing ``simd`` (``omp simd``, ``omp parallel for simd``,
  ``omp declare simd``), ``#pragma simd``/``#pragma vector``, ``#pragma clang loop vectorize(enable)`` or
  ``vectorize_width(N>1)``; an identifier that is an x86 intrinsic (``_mm_*``, ``_mm256_*``, ``_mm512_*``,
  except the non-vector helpers ``_mm_malloc``, ``_mm_free``, ``_mm_prefetch``, fences, ``_mm_pause``, the
  MXCSR accessors), an x86 vector type (``__m128d``, ``__m256d``, ``__m512d``, ``__m128``, ``__m256i``,
  ``__mmask8`` ...), an ``__builtin_ia32_*`` builtin, a NEON/SVE vector type; GCC/Clang vector extensions
  (``vector_size``, ``ext_vector_type``, ``__builtin_shufflevector``/``__builtin_convertvector``).
  ``#pragma GCC ivdep`` alone is not simd.
- ``cache_blocking``: (1) a loop L1 with step != 1 (an int >= 2 or symbolic) containing, at any depth, a loop
  L2 whose init or condition uses a variable derived from L1's variable (``for (i = ii; i < ii + 64 && i < n;
  i++)``, ``i < min(ii + BS, n)``, ``i < iend`` with ``iend = ii + 64``); or (2) a loop with a symbolic step
  or an int step >= 32 that contains a loop that contains a loop (a three-deep tile nest such as BLIS
  jc/pc/ic); or (3) a loop with step 1 over block indices: a nested loop's init or condition multiplies a
  variable derived from its variable by a constant >= 2 (``for (i = bi * 64; i < (bi + 1) * 64; i++)``), or
  uses a variable set in the loop from such a product (``int i0 = bi * BS; for (i = i0; i < i0 + BS; i++)``,
  also through ``iend = i0 + BS``); or (4) ``#pragma omp tile``. A loop with a small int step (2..31) none of
  whose inner loops uses its variable in init/condition is not cache blocking (see register blocking).
- ``register_blocking`` (register blocking / unrolling): (1) ``#pragma GCC unroll N`` (N >= 2), ``#pragma
  unroll`` (no N or N >= 2), ``#pragma clang loop unroll(enable|full)``/``unroll_count(N>=2)``, ``#pragma omp
  unroll``, ``#pragma GCC optimize`` or an ``optimize(...)`` attribute naming ``unroll-loops``; or (2) a loop
  with an int step s in 2..31 that is not cache blocking by (1) above and whose body (not counting conditions
  of ``if``) uses a variable derived from its loop variable with a constant offset c, 1 <= c < s (``i + 1``,
  ``j+2``, ``(i+3)*n``, ``k - 1``, ``p[1]`` for a derived pointer ``p``) or a pointer the loop steps by t per
  iteration with an offset 1 <= c < t (``f(a); f(a + MR); a += 2 * MR;``), or whose innermost loops accumulate
  with a product into 2 or more distinct targets (``c0 += a0[k]*b; c1 += a1[k]*b`` under ``i += 2``); or (3)
  a loop with constant bounds and a trip count of 2..32 (``for (r = 0; r < 4; r++)``), nested in another loop
  and containing an accumulation, when the accumulation's target is a local array with constant dimensions, also
  one passed to a helper (the accumulator-array micro-kernel, ``acc[r][c] += ...``) or the nearest enclosing loop
  without small constant bounds has step 1 (so the constant inner tile loops of a cache-blocked kernel, inside
  a tile loop with a step != 1, do not count); or (4) an innermost loop (helper bodies without loops included)
  whose body has accumulations with a product (``*`` or an FMA/mul intrinsic) into at least 4 distinct targets
  (``c00 += a0*b0; c01 += ...``, vector FMAs).
- ``loop_reorder``: a statement directly in a loop L (its innermost enclosing loop; ``if`` bodies and inlined
  loop-free helpers count as directly in) that writes an indexed target (``X[idx]``, ``*(p + j)``, ``*p++``, a
  vector store's address) whose index uses a variable derived from L's variable, where either the statement
  is itself an accumulation with a product (``C[i*n+j] += a * B[k*n+j]``, a store of an FMA), or it stores a
  variable that an accumulation with a product updates directly in L (``c = fmadd(a, b, c); store(&C[..j], c)``).
  So the reduction index is not innermost: i-k-j, j-k-i, k-i-j ..., or a micro-kernel updating ``acc[r][c]``
  inside its r/c loops. The textbook i-j-k (``sum += A[i*n+k]*B[k*n+j]``, or ``C[i*n+j] += ...`` with k
  innermost) is not reordered, nor is a write-back ``C[i*n+j] = sum`` / ``C[..] += c00`` (no product).

Package layout (one concern per module): ``technique`` (the ``Technique`` names), ``exprs`` (token-list
helpers), ``consteval`` (constant expressions and known constants), ``parser`` (statements), ``looptree`` (the
``ForLoop`` tree), ``dataflow`` (variable updates, steps, derived variables), ``builder`` (walking functions into
loop trees, following helper calls), ``token_rules`` (pragma/identifier rules), ``loop_rules`` (loop-structure
rules) and ``detect`` (the entry points).

Test: ``python3 -m pytest tests/bench/test_techniques.py -q``.
"""

from __future__ import annotations

from hpcrl_core.bench.techniques.consteval import constants_from_defines
from hpcrl_core.bench.techniques.detect import (
    detect_techniques,
    detect_techniques_in_source,
    explain_techniques,
    find_loops,
)
from hpcrl_core.bench.techniques.looptree import ForLoop
from hpcrl_core.bench.techniques.looptree import Step as Step
from hpcrl_core.bench.techniques.technique import ALL_TECHNIQUES, Technique, parse_techniques

__all__ = [
    "ALL_TECHNIQUES",
    "ForLoop",
    "Technique",
    "constants_from_defines",
    "detect_techniques",
    "detect_techniques_in_source",
    "explain_techniques",
    "find_loops",
    "parse_techniques",
]
