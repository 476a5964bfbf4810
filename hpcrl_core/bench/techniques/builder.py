"""Loop-tree builder of the technique detector: walks parsed functions into ``ForLoop`` trees.

It recognises loop variables, steps and trip counts, classifies statements (assignments, accumulations, stores)
and follows calls of functions defined in the same source (inlined, up to a budget), binding the callee's
parameters to the symbols of the call's arguments.

Test: ``python3 -m pytest tests/bench/test_techniques.py -q``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hpcrl_core.bench.ctokens import Token
from hpcrl_core.bench.techniques.consteval import _eval
from hpcrl_core.bench.techniques.dataflow import _is_declaration, _step_of, _trip_count, _Update, _updates
from hpcrl_core.bench.techniques.exprs import (
    _ADD_RE,
    _ASSIGN_OPS,
    _NOT_VARIABLES,
    _STORE_RE,
    _contains_seq,
    _find_top,
    _has_product,
    _split_top,
    _strip_parens,
    _value_tokens,
    _variables,
)
from hpcrl_core.bench.techniques.looptree import ForLoop, Step, _Inst, _Item, _Root, _Scope
from hpcrl_core.bench.techniques.parser import _Function, _Stmt

_MAX_INSTANCES = 400  # function instances (roots plus inlined calls) per translation unit
_MAX_INLINE_DEPTH = 8
_MAX_WALK_DEPTH = 160
_MAX_ITEMS = 60_000



class _Builder:
    """Walks parsed functions into loop trees, inlining calls of functions defined in the same source."""

    def __init__(self, functions: list[_Function], consts: Mapping[str, int]) -> None:
        self.functions = functions
        self.by_name: dict[str, _Function] = {}
        for fn in functions:
            self.by_name.setdefault(fn.name, fn)
        self.consts = consts
        self.instances = 0
        self.items = 0

    def new_inst(self, fn_name: str, params: Sequence[str], alias: dict[str, frozenset[str]],
                 param_consts: Mapping[str, int]) -> _Inst:
        uid = self.instances
        self.instances += 1
        consts = {k: v for k, v in self.consts.items() if k not in params}
        consts.update(param_consts)
        return _Inst(uid, fn_name, {p: s | {f"{uid}:{p}"} for p, s in alias.items()}, consts)

    def roots(self, stray: list[_Stmt]) -> list[_Root]:
        roots: list[_Root] = []
        for fn in self.functions:
            root = _Root(fn.name)
            inst = self.new_inst(fn.name, fn.params, {}, {})
            self.walk(fn.body, inst, root, (fn.name,), 0, [], 0)
            roots.append(root)
        if stray:
            root = _Root("<top level>")
            inst = self.new_inst("<top level>", (), {}, {})
            for idx, stmt in enumerate(stray):
                self.walk(stmt, inst, root, (), 0, stray, idx)
            roots.append(root)
        return roots

    # -- walking -----------------------------------------------------------------------------------------------

    def walk(self, stmt: _Stmt, inst: _Inst, scope: _Scope, stack: tuple[str, ...], depth: int,
             siblings: list[_Stmt], index: int) -> None:
        if depth > _MAX_WALK_DEPTH or self.items > _MAX_ITEMS:
            return
        kind = stmt.kind
        if kind == "block":
            for idx, sub in enumerate(stmt.body):
                self.walk(sub, inst, scope, stack, depth + 1, stmt.body, idx)
        elif kind == "simple":
            self.simple(stmt.tokens, inst, scope, stack, depth)
        elif kind in ("if", "switch"):
            self.add_condition(stmt.tokens, stmt.line, inst, scope, stack, depth)
            for sub in stmt.body:
                self.walk(sub, inst, scope, stack, depth + 1, [], 0)
        elif kind in ("for", "while", "do"):
            self.loop(stmt, inst, scope, stack, depth, siblings, index)

    def add_condition(self, tokens: list[Token], line: int, inst: _Inst, scope: _Scope, stack: tuple[str, ...],
                      depth: int) -> None:
        if tokens:
            item = self.make_item(tokens, inst)
            item.is_condition = True
            scope._items.append(item)
            self.items += 1
            self.inline_calls(tokens, inst, scope, stack, depth)

    def loop(self, stmt: _Stmt, inst: _Inst, scope: _Scope, stack: tuple[str, ...], depth: int,
             siblings: list[_Stmt], index: int) -> None:
        body = stmt.body[0] if stmt.body else _Stmt("empty", stmt.line)
        init = list(stmt.init)
        cond = list(stmt.tokens)
        incr_parts = _split_top(stmt.incr, ",") if stmt.incr else []
        init_names = [u.name for part in _split_top(init, ",") for u in self.init_updates(part)]
        var, var_update, incr = self.loop_variable(incr_parts, list(stmt.incr), cond, init_names, body)
        if stmt.kind != "for" and var_update is None:  # not a counting loop: transparent
            self.add_condition(cond, stmt.line, inst, scope, stack, depth)
            self.walk(body, inst, scope, stack, depth + 1, [], 0)
            return
        if var is None and init_names:
            var = init_names[0]
        start_tokens: list[Token] | None = None
        for part in _split_top(init, ","):
            for u in self.init_updates(part):
                if u.name == var and u.how == "set":
                    start_tokens = u.expr
        if start_tokens is None and var is not None and stmt.kind != "for":
            init, start_tokens = self.preceding_init(var, siblings, index)
        step: Step = None
        sign = 0
        if var_update is not None:
            step, sign = _step_of(var_update, inst.consts)
        start = _eval(start_tokens, inst.consts) if start_tokens else None
        trips = _trip_count(var, start, cond, step, sign, inst.consts) if var is not None else None
        parent = scope if isinstance(scope, ForLoop) else None
        loop = ForLoop(stmt.kind, stmt.line, inst.name, var, tuple(init), tuple(cond), tuple(incr), step, trips,
                       tuple(stmt.pragmas), parent=parent)
        loop._inst = inst
        loop._var_syms = inst.syms(var) | {inst.own(var)} if var is not None else frozenset()
        loop._header_syms = inst.syms_of(init) | inst.syms_of(cond)
        scope.children.append(loop)
        scope._items.append(loop)
        # Calls in the header run in the enclosing scope; other increment parts (``j++, p += n``) in the loop.
        self.inline_calls(init + cond, inst, scope, stack, depth)
        for part in incr_parts:
            if not any(u.name == var for u in _updates(part)):
                self.simple(part, inst, loop, stack, depth)
        self.walk(body, inst, loop, stack, depth + 1, [], 0)

    def loop_variable(self, incr_parts: list[list[Token]], incr: list[Token], cond: list[Token],
                      init_names: list[str], body: _Stmt) -> tuple[str | None, _Update | None, list[Token]]:
        """The variable of a loop, its update and the tokens of the increment that steps it.

        The variable is the first one the increment clause updates that the condition or init uses (else the
        first one it updates); without an update there, a variable of the init or condition that a top-level
        statement of the body updates (a while loop, or a for loop with an empty increment), whose statement is
        then the increment.
        """
        updates = [(part, u) for part in incr_parts for u in _updates(part)]
        cond_vars = _variables(cond)
        var: str | None = None
        var_update: _Update | None = None
        for _, u in updates:
            if u.name in cond_vars or u.name in init_names:
                var, var_update = u.name, u
                break
        if var is None and updates:
            var, var_update = updates[0][1].name, updates[0][1]
        if var_update is None:  # stepped in the body (a while loop, or a for loop with an empty increment)
            candidates = [*(n for n in init_names if n in cond_vars), *self.cond_order(cond)]
            for tokens, u in self.body_updates(body):
                if u.name in candidates and (var is None or u.name == var):
                    var, var_update, incr = u.name, u, tokens
                    break
        return var, var_update, incr

    @staticmethod
    def init_updates(part: Sequence[Token]) -> list[_Update]:
        """Variables a for-init part sets (``int i = 0``, ``i = 0``, ``size_t i = ...``)."""
        pos = _find_top(part, frozenset({"="}))
        if pos <= 0:
            return []
        names = [t for t in part[:pos] if t.kind == "ident" and t.text not in _NOT_VARIABLES]
        return [_Update(names[-1].text, "set", list(part[pos + 1:]))] if names else []

    @staticmethod
    def cond_order(cond: Sequence[Token]) -> list[str]:
        return [t.text for t in cond if t.kind == "ident" and t.text not in _NOT_VARIABLES]

    @staticmethod
    def body_updates(body: _Stmt) -> list[tuple[list[Token], _Update]]:
        """Updates in the top-level simple statements of a loop body."""
        stmts = body.body if body.kind == "block" else [body]
        out: list[tuple[list[Token], _Update]] = []
        for s in stmts:
            if s.kind == "simple" and not _is_declaration(s.tokens):
                for part in _split_top(s.tokens, ","):
                    out.extend((part, u) for u in _updates(part) if u.how in ("add", "sub", "set", "other"))
        return out

    @staticmethod
    def preceding_init(var: str, siblings: list[_Stmt], index: int) -> tuple[list[Token], list[Token] | None]:
        """The statement before a while loop that sets its variable (``i = 0;`` / ``int i = 0;``)."""
        for s in reversed(siblings[:index]):
            if s.kind != "simple":
                continue
            for part in _split_top(s.tokens, ","):
                for u in _Builder.init_updates(part):
                    if u.name == var:
                        return list(s.tokens), u.expr
        return [], None

    # -- statements --------------------------------------------------------------------------------------------

    def simple(self, tokens: list[Token], inst: _Inst, scope: _Scope, stack: tuple[str, ...], depth: int) -> None:
        if not tokens:
            return
        if _is_declaration(tokens):
            if tokens[0].text == "typedef":
                return
            for part in _split_top(tokens, ","):
                item = self.declarator(part, inst)
                if item is not None:
                    scope._items.append(item)
                    self.items += 1
        else:
            for part in _split_top(tokens, ","):
                if part:
                    scope._items.append(self.make_item(part, inst))
                    self.items += 1
        self.inline_calls(tokens, inst, scope, stack, depth)

    def declarator(self, part: list[Token], inst: _Inst) -> _Item | None:
        """An item for one declarator (``double *restrict c = C + i*n``, ``acc[4][4] = {0}``, ``v4d c0``): the
        name is the last variable-like identifier outside brackets before the first ``[`` or ``=``."""
        pos = _find_top(part, frozenset({"="}))
        head = part if pos < 0 else part[:pos]
        depth = 0
        name: str | None = None
        dims: list[list[Token]] = []
        for tok in head:
            if tok.kind == "punct" and tok.text in ("[", "("):
                if tok.text == "[" and depth == 0:
                    dims.append([])
                depth += 1
            elif tok.kind == "punct" and tok.text in ("]", ")"):
                depth = max(0, depth - 1)
            elif depth == 0 and not dims and tok.kind == "ident" and tok.text not in _NOT_VARIABLES:
                name = tok.text
            elif depth == 1 and dims:
                dims[-1].append(tok)
        if name is None:  # ``double (*c)[n]``: the name is inside the parentheses
            name = next((t.text for t in head if t.kind == "ident" and t.text not in _NOT_VARIABLES), None)
            if name is None:
                return None
        rhs = list(part[pos + 1:]) if pos >= 0 else []
        item = _Item(inst, part[0].line, part, op="=" if pos >= 0 else None, lhs=head, rhs=rhs, target=name,
                     declared=True)
        item.local_array = bool(dims) and all(_eval(d, inst.consts) is not None for d in dims)
        item.rhs_syms = inst.syms_of(rhs)
        item.lhs_syms = frozenset({inst.own(name)})
        item.stepped = self.stepped(part, inst)
        item.product = _has_product(rhs)
        return item

    @staticmethod
    def stepped(tokens: Sequence[Token], inst: _Inst) -> frozenset[str]:
        out: set[str] = set()
        for i, tok in enumerate(tokens):
            if tok.kind == "punct" and tok.text in ("++", "--"):
                for j in (i - 1, i + 1):
                    if 0 <= j < len(tokens) and tokens[j].kind == "ident" and tokens[j].text not in _NOT_VARIABLES:
                        out.add(inst.own(tokens[j].text))
        return frozenset(out)

    def make_item(self, tokens: list[Token], inst: _Inst) -> _Item:
        """Classify an expression: assignment (plain or indexed target), store intrinsic, or other."""
        item = _Item(inst, tokens[0].line, tokens)
        item.stepped = self.stepped(tokens, inst)
        pos = _find_top(tokens, _ASSIGN_OPS)
        if pos > 0:
            lhs = _strip_parens(tokens[:pos])
            rhs = tokens[pos + 1:]
            op = tokens[pos].text
            item.op, item.lhs, item.rhs = op, lhs, rhs
            if len(lhs) == 1 and lhs[0].kind == "ident":
                item.target = lhs[0].text
                item.lhs_syms = frozenset({inst.own(lhs[0].text)})
            else:
                item.indexed = any(t.text == "[" for t in lhs) or lhs[0].text in ("*", "(")
                item.lhs_syms = inst.syms_of(lhs)
            item.rhs_syms = inst.syms_of(rhs)
            item.accum = op in ("+=", "-=") or (op == "=" and _contains_seq(rhs, lhs))
            item.product = _has_product(rhs)
            return item
        if (len(tokens) >= 3 and tokens[0].kind == "ident" and _STORE_RE.match(tokens[0].text)
                and tokens[1].text == "("):
            args = _split_top(tokens[2:-1] if tokens[-1].text == ")" else tokens[2:], ",")
            address, values = args[0], [t for a in args[1:] for t in a]
            item.op, item.lhs, item.rhs, item.indexed = "store", address, values, True
            item.lhs_syms = inst.syms_of(address)
            item.rhs_syms = inst.syms_of(values)
            item.product = _has_product(values)
            plain = _value_tokens(values)
            item.accum = item.product and (any(t.kind == "ident" and _ADD_RE.search(t.text) for t in plain)
                                           or any(t.text == "+" for t in plain) or _contains_seq(values, address))
        item.rhs_syms = item.rhs_syms or inst.syms_of(tokens)
        return item

    def inline_calls(self, tokens: Sequence[Token], inst: _Inst, scope: _Scope, stack: tuple[str, ...],
                     depth: int) -> None:
        """Walk the body of each function defined in the source and called in ``tokens``, in ``scope``."""
        for i, tok in enumerate(tokens):
            if tok.kind != "ident" or tok.text not in self.by_name or i + 1 >= len(tokens):
                continue
            if tokens[i + 1].text != "(" or (i > 0 and tokens[i - 1].text in (".", "->")):
                continue
            callee = self.by_name[tok.text]
            if (callee.name in stack or len(stack) > _MAX_INLINE_DEPTH or self.instances >= _MAX_INSTANCES
                    or self.items > _MAX_ITEMS):
                continue
            close = i + 1
            level = 0
            while close < len(tokens):
                if tokens[close].text == "(":
                    level += 1
                elif tokens[close].text == ")":
                    level -= 1
                    if level == 0:
                        break
                close += 1
            args = _split_top(tokens[i + 2:close], ",")
            alias: dict[str, frozenset[str]] = {}
            param_consts: dict[str, int] = {}
            for param, arg in zip(callee.params, args, strict=False):
                alias[param] = inst.syms_of(arg)
                value = _eval(arg, inst.consts)
                if value is not None:
                    param_consts[param] = value
            callee_inst = self.new_inst(callee.name, callee.params, alias, param_consts)
            self.walk(callee.body, callee_inst, scope, (*stack, callee.name), depth + 1, [], 0)
