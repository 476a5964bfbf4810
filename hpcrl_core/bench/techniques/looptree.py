"""The loop tree the technique rules walk: loops (``ForLoop``), the statements in them and function instances.

Built by ``builder._Builder``; each function body (and each inlined helper call) is an instance whose variables
are named by symbols ``"<instance id>:<name>"``, so a helper's parameters can stand for its call's arguments.

Test: ``python3 -m pytest tests/bench/test_techniques.py -q``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from hpcrl_core.bench.ctokens import Token
from hpcrl_core.bench.techniques.exprs import _variables

Step = int | Literal["symbolic"] | None


@dataclass(eq=False)
class _Inst:
    """One instance of a function body: standalone, or inlined at a call site."""

    uid: int
    name: str
    alias: dict[str, frozenset[str]]  # parameter -> symbols of the call's argument (plus its own symbol)
    consts: Mapping[str, int]

    def syms(self, name: str) -> frozenset[str]:
        """The symbols a name stands for in this instance."""
        alias = self.alias.get(name)
        return alias if alias is not None else frozenset((f"{self.uid}:{name}",))

    def own(self, name: str) -> str:
        """The symbol of the instance's own variable ``name`` (a parameter's local copy for a parameter)."""
        return f"{self.uid}:{name}"

    def syms_of(self, tokens: Iterable[Token]) -> frozenset[str]:
        out: set[str] = set()
        for name in _variables(tokens):
            out |= self.syms(name)
        return frozenset(out)


@dataclass(eq=False)
class _Item:
    """A statement (or one comma-separated part of one) as the rules see it."""

    inst: _Inst
    line: int
    tokens: list[Token]
    op: str | None = None  # assignment operator, "store" for a store intrinsic, None for a plain expression
    lhs: list[Token] = field(default_factory=list)
    rhs: list[Token] = field(default_factory=list)
    target: str | None = None  # plain variable assigned or declared
    indexed: bool = False  # the target is an array element / dereference / stored-to address
    accum: bool = False
    product: bool = False
    declared: bool = False
    local_array: bool = False  # declares an array with constant dimensions
    is_condition: bool = False  # the condition of an if/switch/transparent while
    lhs_syms: frozenset[str] = frozenset()
    rhs_syms: frozenset[str] = frozenset()
    stepped: frozenset[str] = frozenset()  # own symbols of variables incremented with ++/--
    offsets: list[tuple[frozenset[str], int]] | None = None  # cache of ``_offsets``


@dataclass(eq=False)
class ForLoop:
    """A loop found in the kernel (a ``for``, or a ``while``/``do`` with a recognisable loop variable).

    Attributes:
        kind: ``"for"``, ``"while"`` or ``"do"``.
        line: line of the loop keyword.
        function: the function whose body holds the loop.
        var: the loop variable, or None when none is recognisable.
        init: the tokens of the ``for`` init clause (for a ``while`` loop: the statement before it that sets the
            variable, if any).
        cond: the tokens of the condition.
        incr: the tokens of the increment clause (for a ``while`` loop: the statement of the body stepping it).
        step: 1 for ``i++``/``i += 1``/``i = i + 1`` (or the decrements), the absolute integer step for
            ``i += 8`` (constant expressions and known constants resolved), ``"symbolic"`` for a step that is not
            a constant (``i += bs``, ``i *= 2``), None when the variable is not stepped.
        trip_count: the number of iterations when init and bound are constants, else None.
        pragmas: texts of the pragmas attached to the loop.
        children: loops directly nested in this one (through inlined helper calls too).
        parent: the enclosing loop, or None.
    """

    kind: str
    line: int
    function: str
    var: str | None
    init: tuple[Token, ...]
    cond: tuple[Token, ...]
    incr: tuple[Token, ...]
    step: Step
    trip_count: int | None
    pragmas: tuple[str, ...] = ()
    children: list[ForLoop] = field(default_factory=list)
    parent: ForLoop | None = field(default=None, repr=False)
    _items: list[_Item | ForLoop] = field(default_factory=list, repr=False)
    _var_syms: frozenset[str] = field(default=frozenset(), repr=False)
    _header_syms: frozenset[str] = field(default=frozenset(), repr=False)
    _inst: _Inst | None = field(default=None, repr=False)

    @property
    def small_const_bounds(self) -> bool:
        """Constant bounds with a trip count of 2..32 (``for (r = 0; r < 4; r++)``)."""
        return self.trip_count is not None and 2 <= self.trip_count <= 32

    def descendants(self) -> Iterator[ForLoop]:
        """All loops nested in this one, at any depth."""
        stack = list(self.children)
        while stack:
            loop = stack.pop()
            yield loop
            stack.extend(loop.children)

    def items(self) -> Iterator[_Item]:
        """Statements directly in this loop (not in nested loops)."""
        return (it for it in self._items if isinstance(it, _Item))

    def all_items(self) -> Iterator[_Item]:
        """Statements in this loop and, recursively, in nested loops."""
        stack: list[_Item | ForLoop] = list(reversed(self._items))
        while stack:
            it = stack.pop()
            if isinstance(it, ForLoop):
                stack.extend(reversed(it._items))
            else:
                yield it


@dataclass(eq=False)
class _Root:
    """A function body's top level (a pseudo-loop without a variable)."""

    function: str
    children: list[ForLoop] = field(default_factory=list)
    _items: list[_Item | ForLoop] = field(default_factory=list)

    def all_items(self) -> Iterator[_Item]:
        """Every statement of the function (inlined helpers included)."""
        for it in self._items:
            if isinstance(it, ForLoop):
                yield from it.all_items()
            else:
                yield it


_Scope = ForLoop | _Root

