"""Technique rules over the loop tree: ``cache_blocking``, ``register_blocking`` (loop structure) and
``loop_reorder``, as defined in the ``hpcrl_core.bench.techniques`` package docstring.

Test: ``python3 -m pytest tests/bench/test_techniques.py -q``.
"""

from __future__ import annotations

from collections.abc import Sequence

from hpcrl_core.bench.ctokens import Token
from hpcrl_core.bench.techniques.consteval import _eval
from hpcrl_core.bench.techniques.dataflow import _derived, _offsets
from hpcrl_core.bench.techniques.looptree import ForLoop, _Inst, _Root
from hpcrl_core.bench.techniques.technique import Technique


def _offset_use(loop: ForLoop, derived: set[str], step: int) -> bool:
    """Whether the loop body (not ``if`` conditions) uses a variable with a constant offset inside one
    iteration's stride: a derived variable with 1 <= c < step (``i + 1``, ``(i+3)*n``, ``p[2]``), or a pointer the
    loop steps by s per iteration (``a += 2 * MR``) with 1 <= c < s (``a + MR``)."""
    strides: dict[str, int] = {}
    for it in loop.items():
        if it.target is not None and it.op in ("+=", "-=") and not it.declared:
            value = _eval(it.rhs, it.inst.consts)
            if value is not None and value != 0:
                strides[it.inst.own(it.target)] = abs(value)
    for it in loop.all_items():
        if it.is_condition:
            continue
        for syms, value in _offsets(it):
            if value < step and not syms.isdisjoint(derived):
                return True
            if any(value < strides.get(s, 0) for s in syms):
                return True
    return False


def _has_small_loop_accumulation(loop: ForLoop, local_arrays: set[str]) -> bool:
    """Rule register_blocking (3) for one loop; ``local_arrays``: symbols of constant-size local arrays."""
    if not loop.small_const_bounds or loop.parent is None:
        return False
    outer: ForLoop | None = loop.parent
    while outer is not None and outer.small_const_bounds:
        outer = outer.parent
    step_one_outer = outer is not None and outer.step == 1
    for it in loop.all_items():
        if not it.accum:
            continue
        if step_one_outer:
            return True
        base = it.lhs[0] if it.lhs else None
        if base is not None and base.kind == "ident" and not it.inst.syms(base.text).isdisjoint(local_arrays):
            return True  # also through a helper's array parameter
    return False


def _distinct_accumulations(loop: ForLoop) -> int:
    targets = {tuple(t.text for t in it.lhs) for it in loop.items() if it.accum and it.product and it.op != "store"}
    targets |= {("store",) + tuple(t.text for t in it.lhs) for it in loop.items()
                if it.op == "store" and it.accum}
    return len(targets)


def _reordered(loop: ForLoop, derived: set[str]) -> int | None:
    """Rule loop_reorder for the statements directly in ``loop``: the line of the first match, or None."""
    direct = list(loop.items())
    accumulated = {s for it in direct if it.accum and it.product and it.target is not None for s in it.lhs_syms}
    for it in direct:
        if not it.indexed or not (it.lhs_syms & derived):
            continue
        if (it.accum and it.product) or (it.op in ("=", "store") and it.rhs_syms & accumulated):
            return it.line
    return None


def _where(loop: ForLoop) -> str:
    return f"line {loop.line}: {loop.kind} loop over {loop.var or '?'} (step {loop.step}) in {loop.function}"


def _scales(tokens: Sequence[Token], inst: _Inst, derived: set[str] | frozenset[str]) -> bool:
    """Whether the tokens multiply a derived variable (or a parenthesised group using one) by a constant >= 2."""
    for m, tok in enumerate(tokens):
        if tok.kind != "punct" or tok.text != "*" or m == 0 or m + 1 >= len(tokens):
            continue
        for const_side, other_side in ((m + 1, m - 1), (m - 1, m + 1)):
            value = _eval([tokens[const_side]], inst.consts)
            if value is None or value < 2:
                continue
            operand = _operand(tokens, other_side, -1 if other_side < m else 1)
            if inst.syms_of(operand) & derived:
                return True
    return False


def _scaled_symbols(loop: ForLoop, derived: set[str]) -> set[str]:
    """Variables set in ``loop`` from a derived variable scaled by a constant >= 2 (``int i0 = b * BS;``), and
    variables set from those (``int iend = i0 + BS;``)."""
    items = [it for it in loop.all_items() if it.target is not None and it.op == "="]
    scaled: set[str] = {s for it in items if _scales(it.rhs, it.inst, derived) for s in it.lhs_syms}
    for _ in range(4):
        new = {s for it in items if it.rhs_syms & scaled for s in it.lhs_syms} - scaled
        if not new:
            break
        scaled |= new
    return scaled


def _scaled_use(loop: ForLoop, derived: set[str]) -> ForLoop | None:
    """A loop nested in ``loop`` whose init or condition multiplies a derived variable by a constant >= 2
    (``for (i = bi * 64; i < (bi + 1) * 64; i++)``: ``bi`` steps over blocks of 64) or uses a variable set so
    (``int i0 = bi * 64; for (i = i0; i < i0 + 64; i++)``), or None."""
    scaled = _scaled_symbols(loop, derived)
    for sub in loop.descendants():
        inst = sub._inst
        if inst is None:
            continue
        if sub._header_syms & scaled or any(_scales(part, inst, derived) for part in (sub.init, sub.cond)):
            return sub
    return None


def _operand(tokens: Sequence[Token], i: int, direction: int) -> list[Token]:
    """The identifier or parenthesised group at ``i`` (scanning backwards when ``direction`` is -1)."""
    tok = tokens[i]
    if tok.kind == "ident":
        return [tok]
    opener, closer = ("(", ")") if direction > 0 else (")", "(")
    if tok.text != opener:
        return []
    depth = 0
    j = i
    while 0 <= j < len(tokens):
        if tokens[j].text == opener:
            depth += 1
        elif tokens[j].text == closer:
            depth -= 1
            if depth == 0:
                break
        j += direction
    lo, hi = (i, j) if direction > 0 else (j, i)
    return list(tokens[max(lo, 0):hi + 1])


def _innermost_multi_accumulation(loop: ForLoop) -> bool:
    """Whether an innermost loop in ``loop`` (or ``loop`` itself) accumulates into two or more targets."""
    candidates = [loop] if not loop.children else [sub for sub in loop.descendants() if not sub.children]
    return any(_distinct_accumulations(sub) >= 2 for sub in candidates)


def _structural_reasons(roots: Sequence[_Root], reasons: dict[Technique, list[str]]) -> None:
    """Apply the loop rules to every loop of every function instance tree."""

    def add(tech: Technique, why: str) -> None:
        reasons.setdefault(tech, []).append(why)

    for root in roots:
        local_arrays = {it.inst.own(it.target) for it in root.all_items() if it.local_array and it.target}
        loops = [loop for top in root.children for loop in (top, *top.descendants())]
        for loop in loops:
            step = loop.step
            derived = _derived(loop)
            blocked = False
            if step == "symbolic" or (isinstance(step, int) and step >= 2):
                inner = next((sub for sub in loop.descendants() if sub._header_syms & derived), None)
                if inner is not None:
                    blocked = True
                    add(Technique.CACHE_BLOCKING, f"{_where(loop)} bounds the loop at line {inner.line}")
                if (step == "symbolic" or (isinstance(step, int) and step >= 32)) and any(
                        sub.children for sub in loop.children):
                    add(Technique.CACHE_BLOCKING, f"{_where(loop)} holds a three-deep loop nest")
                if isinstance(step, int) and 2 <= step <= 31 and not blocked:
                    if _offset_use(loop, derived, step):
                        add(Technique.REGISTER_BLOCKING, f"{_where(loop)} uses its variable at constant offsets")
                    elif _innermost_multi_accumulation(loop):
                        add(Technique.REGISTER_BLOCKING, f"{_where(loop)} holds several accumulators")
            elif loop.children:
                inner = _scaled_use(loop, derived)
                if inner is not None:
                    add(Technique.CACHE_BLOCKING, f"{_where(loop)} scales the bounds of the loop at line {inner.line}")
            if _has_small_loop_accumulation(loop, local_arrays):
                add(Technique.REGISTER_BLOCKING, f"{_where(loop)} has {loop.trip_count} iterations and accumulates")
            if not loop.children and _distinct_accumulations(loop) >= 4:
                add(Technique.REGISTER_BLOCKING, f"{_where(loop)} accumulates into 4 or more targets")
            line = _reordered(loop, derived)
            if line is not None:
                add(Technique.LOOP_REORDER, f"line {line}: indexed accumulation in the innermost {_where(loop)}")
