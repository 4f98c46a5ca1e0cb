"""Compile rules to SQL SELECT statements (dialects: sqlite, duckdb).

A rule body becomes a join: each positive atom a table alias, the first occurrence of a variable binds it to a
column, later occurrences become equalities; `X = expr` binds X to an expression; comparisons become WHERE
conditions; a negated atom becomes NOT EXISTS; an aggregate becomes a correlated scalar subquery.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .analysis import rule_error
from .syntax import (
    Aggregate,
    Atom,
    BinOp,
    BoolLit,
    Call,
    Compare,
    Const,
    Literal,
    Negation,
    Rule,
    Term,
    UnOp,
    Var,
    Wildcard,
    term_vars,
)


def quote(ident: str) -> str:
    return '"' + ident.replace('"', '""') + '"'


@dataclass
class TableRef:
    """Where a relation lives for one evaluation: SQL table expression and its column names."""

    sql: str
    columns: list[str]  # storage columns (a nullary relation has one dummy column)
    arity: int


UNIT_COLUMN = "_unit"


class SQLCompiler:
    def __init__(self, dialect: str, tables: dict[str, TableRef]) -> None:
        self.dialect = dialect
        self.tables = tables
        self._alias = 0

    # -- values --------------------------------------------------------------------------------------------
    def literal(self, v: object) -> str:
        if isinstance(v, bool):
            return "1" if v else "0"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            return repr(v)
        if v is None:
            return "NULL"
        return "'" + str(v).replace("'", "''") + "'"

    def new_alias(self, prefix: str = "t") -> str:
        self._alias += 1
        return f"{prefix}{self._alias}"

    def term(self, t: Term, env: dict[str, str]) -> str:
        if isinstance(t, Var):
            if t.name not in env:
                raise rule_error("unbound_variable", f"variable {t.name!r} is not bound", t.place)
            return env[t.name]
        if isinstance(t, Const):
            return self.literal(t.value)
        if isinstance(t, Wildcard):
            raise rule_error("unbound_variable", "'_' cannot be used in an expression", t.place)
        if isinstance(t, BinOp):
            a, b = self.term(t.left, env), self.term(t.right, env)
            return self.binop(t.op, a, b)
        if isinstance(t, UnOp):
            a = self.term(t.arg, env)
            if t.op == "-":
                return f"(-{a})"
            if t.op == "bnot":
                return f"(~{a})"
            if t.op == "lnot":
                return f"(CASE WHEN {a} = 0 THEN 1 ELSE 0 END)"
        if isinstance(t, Call):
            return self.call(t, [self.term(a, env) for a in t.args])
        if isinstance(t, Aggregate):
            return self.aggregate(t, env)
        raise rule_error("unsupported", f"unsupported term {t!r}", t.place)

    def binop(self, op: str, a: str, b: str) -> str:
        duck = self.dialect == "duckdb"
        if op in ("+", "-", "*", "%"):
            return f"({a} {op} {b})"
        if op == "/":
            if duck:  # integer division like Soufflé/SQLite when both sides are integers
                return f"(CASE WHEN typeof({a}) IN ('BIGINT','INTEGER','HUGEINT') AND typeof({b}) IN ('BIGINT','INTEGER','HUGEINT') THEN ({a}) // ({b}) ELSE ({a}) / ({b}) END)"
            return f"({a} / {b})"
        if op == "^":
            return f"al_pow({a}, {b})" if not duck else f"CAST(pow({a}, {b}) AS BIGINT)"
        if op == "band":
            return f"({a} & {b})"
        if op == "bor":
            return f"({a} | {b})"
        if op == "bxor":
            return f"xor({a}, {b})" if duck else f"(({a} | {b}) - ({a} & {b}))"
        if op == "bshl":
            return f"({a} << {b})"
        if op in ("bshr", "bshru"):
            return f"({a} >> {b})"
        if op == "land":
            return f"(CASE WHEN {a} <> 0 AND {b} <> 0 THEN 1 ELSE 0 END)"
        if op == "lor":
            return f"(CASE WHEN {a} <> 0 OR {b} <> 0 THEN 1 ELSE 0 END)"
        if op == "lxor":
            return f"(CASE WHEN ({a} <> 0) <> ({b} <> 0) THEN 1 ELSE 0 END)"
        raise ValueError(op)

    def call(self, c: Call, args: list[str]) -> str:
        duck = self.dialect == "duckdb"
        n = c.name
        if n == "cat":
            return "(" + " || ".join(f"CAST({a} AS {'VARCHAR' if duck else 'TEXT'})" for a in args) + ")"
        if n == "strlen":
            return f"length({args[0]})"
        if n == "substr":  # Soufflé: 0-based start
            return f"substr({args[0]}, ({args[1]}) + 1, {args[2]})"
        if n in ("to_number", "to_unsigned"):
            return f"CAST({args[0]} AS {'BIGINT' if duck else 'INTEGER'})"
        if n == "to_float":
            return f"CAST({args[0]} AS {'DOUBLE' if duck else 'REAL'})"
        if n == "to_string":
            return f"CAST({args[0]} AS {'VARCHAR' if duck else 'TEXT'})"
        if n == "ord":
            return f"unicode({args[0]})" if not duck else f"unicode({args[0]})"
        if n in ("min", "max"):
            f = {"min": "least", "max": "greatest"}[n] if duck else n
            return f"{f}({', '.join(args)})"
        if n == "abs":
            return f"abs({args[0]})"
        raise rule_error("unsupported", f"unsupported functor {n!r}", c.place)

    def compare(self, lit: Compare, env: dict[str, str]) -> str:
        a, b = self.term(lit.left, env), self.term(lit.right, env)
        if lit.op == "contains":  # contains(needle, haystack)
            return f"(instr({b}, {a}) > 0)" if self.dialect == "sqlite" else f"(strpos({b}, {a}) > 0)"
        if lit.op == "match":  # match(regex, string): full match
            return f"al_match({a}, {b})" if self.dialect == "sqlite" else f"regexp_full_match({b}, {a})"
        op = "<>" if lit.op == "!=" else lit.op
        return f"({a} {op} {b})"

    # -- bodies --------------------------------------------------------------------------------------------
    def atom_source(self, atom: Atom, override: str | None) -> TableRef:
        ref = self.tables.get(atom.rel)
        if ref is None:
            raise rule_error("unknown_relation", f"unknown relation {atom.rel!r}", atom.place)
        if len(atom.args) != ref.arity:
            raise rule_error(
                "arity_mismatch",
                f"arity mismatch: {atom.rel!r} has {ref.arity} columns but is used with {len(atom.args)}",
                atom.place,
            )
        return ref if override is None else TableRef(override, ref.columns, ref.arity)

    def body(
        self,
        lits: list[Literal],
        env: dict[str, str],
        overrides: dict[int, str] | None = None,
        order: list[int] | None = None,
        forced: bool = False,
    ) -> tuple[list[str], list[str], dict[str, str], list[str]]:
        """Returns (from items, conditions, environment, extra not-null conditions)."""
        overrides = overrides or {}
        env = dict(env)
        froms: list[str] = []
        conds: list[str] = []
        deferred: list[tuple[str, Term]] = []
        atom_idx = [i for i, lit in enumerate(lits) if isinstance(lit, Atom)]
        if order is not None:
            atom_idx = order + [i for i in atom_idx if i not in order]
        for i in atom_idx:
            atom = lits[i]
            assert isinstance(atom, Atom)
            ref = self.atom_source(atom, overrides.get(i))
            alias = self.new_alias()
            froms.append(f"{ref.sql} AS {alias}")
            for col, arg in zip(ref.columns, atom.args):
                c = f"{alias}.{quote(col)}"
                if isinstance(arg, Var):
                    if arg.name in env:
                        conds.append(f"{c} = {env[arg.name]}")
                    else:
                        env[arg.name] = c
                elif isinstance(arg, Wildcard):
                    pass
                elif isinstance(arg, Const):
                    conds.append(f"{c} = {self.literal(arg.value)}")
                else:
                    deferred.append((c, arg))
        # assignments X = expr, to a fixpoint (an expression may need variables bound by another assignment)
        pending = [lit for lit in lits if isinstance(lit, Compare)]
        used: set[int] = set()
        changed = True
        while changed:
            changed = False
            for k, lit in enumerate(pending):
                if k in used or lit.op != "=":
                    continue
                for x, e in ((lit.left, lit.right), (lit.right, lit.left)):
                    if isinstance(x, Var) and x.name not in env and all(v.name in env for v in term_vars(e)):
                        env[x.name] = self.term(e, env)
                        used.add(k)
                        changed = True
                        break
        notnull: list[str] = []
        for c, arg in deferred:
            conds.append(f"{c} = {self.term(arg, env)}")
        for k, lit in enumerate(pending):
            if k not in used:
                conds.append(self.compare(lit, env))
        for lit in lits:
            if isinstance(lit, Negation):
                conds.append(self.negation(lit, env))
            elif isinstance(lit, BoolLit) and not lit.value:
                conds.append("(1 = 0)")
        return froms, conds, env, notnull

    def negation(self, lit: Negation, env: dict[str, str]) -> str:
        ref = self.atom_source(lit.atom, None)
        alias = self.new_alias("n")
        conds = []
        for col, arg in zip(ref.columns, lit.atom.args):
            if isinstance(arg, Wildcard):
                continue
            conds.append(f"{alias}.{quote(col)} = {self.term(arg, env)}")
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        return f"NOT EXISTS (SELECT 1 FROM {ref.sql} AS {alias}{where})"

    def aggregate(self, agg: Aggregate, env: dict[str, str]) -> str:
        froms, conds, inner, _ = self.body(agg.body, env)
        from_sql = f" FROM {', '.join(froms)}" if froms else ""
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        if agg.func == "count":
            return f"(SELECT COUNT(*){from_sql}{where})"
        assert agg.target is not None
        target = self.term(agg.target, inner)
        if agg.func == "sum":
            return f"(SELECT COALESCE(SUM({target}), 0){from_sql}{where})"
        func = {"min": "MIN", "max": "MAX", "mean": "AVG"}[agg.func]
        return f"(SELECT {func}({target}){from_sql}{where})"

    def select(
        self,
        rule: Rule,
        head_columns: list[str],
        overrides: dict[int, str] | None = None,
        order: list[int] | None = None,
        forced: bool = False,
        distinct: bool = True,
        head_filter: Callable[[list[str]], str] | None = None,
    ) -> str:
        """SELECT producing the head tuples of `rule` (columns named head_columns). `head_filter`, given the SQL
        expressions of the head columns, returns one more WHERE condition (e.g. "not derived yet")."""
        self._alias = 0  # aliases are unique per statement: the same rule compiles to the same text every run
        froms, conds, env, _ = self.body(rule.body, {}, overrides, order, forced)
        if rule.head.args:
            exprs = [self.term(a, env) for a in rule.head.args]
            cols = [f"{e} AS {quote(c)}" for e, c in zip(exprs, head_columns)]
        else:
            exprs = ["1"]
            cols = [f"1 AS {quote(head_columns[0])}"]
        if head_filter is not None:
            conds.append(head_filter(exprs))
        # min/max/mean over an empty body yield no tuple (Soufflé): require the aggregate values to be non-null
        for a in rule.head.args:
            if _has_nullable_aggregate(a):
                conds.append(f"{self.term(a, env)} IS NOT NULL")
        for lit in rule.body:
            if isinstance(lit, Compare):
                for t in (lit.left, lit.right):
                    if _has_nullable_aggregate(t):
                        conds.append(f"{self.term(t, env)} IS NOT NULL")
        joiner = " CROSS JOIN " if forced and self.dialect == "sqlite" else ", "
        sql = f"SELECT {'DISTINCT ' if distinct else ''}{', '.join(cols)}"
        if froms:
            sql += f" FROM {joiner.join(froms)}"
        if conds:
            sql += f" WHERE {' AND '.join(conds)}"
        return sql


def _has_nullable_aggregate(t: Term) -> bool:
    if isinstance(t, Aggregate):
        return t.func in ("min", "max", "mean")
    if isinstance(t, BinOp):
        return _has_nullable_aggregate(t.left) or _has_nullable_aggregate(t.right)
    if isinstance(t, UnOp):
        return _has_nullable_aggregate(t.arg)
    if isinstance(t, Call):
        return any(_has_nullable_aggregate(a) for a in t.args)
    return False


def join_order(
    rule: Rule,
    first: int,
    types: dict[str, list[str | None]] | None = None,
    sizes: dict[str, int] | None = None,
) -> list[int]:
    """Greedy join order starting with atom `first` (a delta table): next the atom sharing most bound variables
    (constants count as bound), ties in written order; this keeps every later atom an index lookup.

    With `types` (column types per relation) a bound symbol column counts twice: names identify a node or an
    anchor, while numbers (indexes, flags) match many rows, so `subgraph(G, N, _, SG)` with SG bound is a
    better lookup than `out_port(G, N, O)` with only O bound. With `sizes` (known row counts) ties go to the
    smaller relation."""
    atoms = [i for i, lit in enumerate(rule.body) if isinstance(lit, Atom)]
    order = [first]
    bound = {v.name for a in rule.body[first].args for v in term_vars(a)}  # type: ignore[union-attr]
    rest = [i for i in atoms if i != first]
    while rest:

        def key(i: int, bound: set[str] = bound) -> tuple:
            atom = rule.body[i]
            size = sizes.get(atom.rel) if sizes else None  # type: ignore[union-attr]
            return (
                _lookup_score(atom, bound, types.get(atom.rel) if types else None),  # type: ignore[arg-type]
                -(size if size is not None else 1 << 62),
                -rest.index(i),
            )

        best = max(rest, key=key)
        rest.remove(best)
        order.append(best)
        bound |= {v.name for a in rule.body[best].args for v in term_vars(a)}  # type: ignore[union-attr]
    return order


def _lookup_score(atom: Atom, bound: set[str], types: list[str | None] | None = None) -> int:
    score = 0
    for k, a in enumerate(atom.args):
        if isinstance(a, Const) or (isinstance(a, Var) and a.name in bound):
            score += 2 if types is not None and k < len(types) and types[k] == "symbol" else 1
    return score


def bound_columns(rule: Rule, order: list[int], columns: dict[str, list[str]]) -> list[tuple[str, tuple[str, ...]]]:
    """(relation, columns looked up) for each atom after the first in a join order: the indexes it needs."""
    need = []
    bound: set[str] = set()
    for pos, i in enumerate(order):
        atom = rule.body[i]
        assert isinstance(atom, Atom)
        cols = columns.get(atom.rel)
        if pos > 0 and cols:
            key = tuple(
                c for c, a in zip(cols, atom.args) if isinstance(a, Const) or (isinstance(a, Var) and a.name in bound)
            )
            if key:
                need.append((atom.rel, key))
        bound |= {v.name for a in atom.args for v in term_vars(a)}
    for lit in rule.body:
        if isinstance(lit, Negation):
            cols = columns.get(lit.atom.rel)
            if cols:
                key = tuple(c for c, a in zip(cols, lit.atom.args) if not isinstance(a, Wildcard))
                if key:
                    need.append((lit.atom.rel, key))
    return need


def probe_columns(rule: Rule, columns: dict[str, list[str]]) -> list[tuple[str, tuple[str, ...]]]:
    """(relation, columns) probed by the correlated subqueries of `rule`: each negated atom by its non-`_`
    columns, each atom of an aggregate body by the columns bound outside it or by the aggregate's earlier
    atoms. Without an index on them every probe scans the relation, which makes a stratum quadratic."""
    from .analysis import aggregates_in

    need: list[tuple[str, tuple[str, ...]]] = []

    def add(atom: Atom, bound: set[str], negated: bool) -> None:
        cols = columns.get(atom.rel)
        if not cols:
            return
        key = tuple(
            c
            for c, a in zip(cols, atom.args)
            if not isinstance(a, Wildcard)
            and (negated or isinstance(a, Const) or (isinstance(a, Var) and a.name in bound))
        )
        if key:
            need.append((atom.rel, key))

    def terms(lits: list[Literal]) -> list[Term]:
        out: list[Term] = []
        for lit in lits:
            if isinstance(lit, Atom):
                out.extend(lit.args)
            elif isinstance(lit, Compare):
                out.extend((lit.left, lit.right))
        return out

    def walk(lits: list[Literal], outer: set[str], extra_terms: list[Term]) -> None:
        bound = set(outer) | {v.name for lit in lits if isinstance(lit, Atom) for a in lit.args for v in term_vars(a)}
        for lit in lits:
            if isinstance(lit, Negation):
                add(lit.atom, bound, True)
        for t in terms(lits) + extra_terms:
            for agg in aggregates_in(t):
                inner = set(bound)
                for lit in agg.body:
                    if isinstance(lit, Atom):
                        add(lit, inner, False)
                        inner |= {v.name for a in lit.args for v in term_vars(a)}
                walk(agg.body, bound, [])

    walk(rule.body, set(), list(rule.head.args))
    return need
