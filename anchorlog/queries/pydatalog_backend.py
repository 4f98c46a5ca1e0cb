"""The pyDatalog backend: the same rules translated into pyDatalog clauses (interactive use, cross-checking).

Translation: relation `r` becomes predicate `r_r`, variable `X` becomes `V_X` (pyDatalog wants capitalised
variables and lower-case predicates), `_` a fresh variable, a nullary relation gets one dummy argument 1.
pyDatalog comparisons need a variable on the left, so other left-hand sides are first bound to a fresh variable.
Aggregates become pyDatalog aggregate functions keyed by the variables shared with the rule:
`count` and `sum` use `sum_(.., for_each=(all body variables))` (Soufflé counts body tuples, pyDatalog's `len_`
would count distinct values), `min`/`max` use `min_`/`max_`; an empty count/sum is 0 through a second rule with
a negated "exists" helper. Integer division is Python's `//` (floors where SQL truncates towards zero).
Not expressible here (raise RuleError with kind "unsupported"): string functors other than `cat`, bitwise and
logical operators, `contains`/`match`, `mean`.
Evaluation goes stratum by stratum (the program's strata, dependencies first): pyDatalog holds one stratum's
clauses at a time, with the relations it reads from outside asserted as plain facts.
"""

from __future__ import annotations

import itertools
import multiprocessing
import re
import sqlite3
from typing import TYPE_CHECKING, Any

from anchorlog.errors import AnchorlogError

from .analysis import all_atoms, rule_error
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

if TYPE_CHECKING:
    from .program import Program, Result


def pred(rel: str) -> str:
    return "r_" + re.sub(r"[^A-Za-z0-9_]", lambda m: f"_{ord(m.group()):x}_", rel)


def var(name: str) -> str:
    return "V_" + re.sub(r"[^A-Za-z0-9_]", lambda m: f"_{ord(m.group()):x}_", name)


class _Translator:
    def __init__(self) -> None:
        self.fresh = itertools.count(1)
        self.helpers: list[str] = []
        self.agg_count = itertools.count(1)

    def new_var(self) -> str:
        return f"W{next(self.fresh)}"

    def const(self, v: object) -> str:
        if isinstance(v, str):
            return repr(v)
        return repr(v)

    def term(self, t: Term, env: dict[str, str], pre: list[str]) -> str:
        """Expression text; aggregate values are bound to fresh variables through `pre` (body additions)."""
        if isinstance(t, Var):
            return env.get(t.name, var(t.name))
        if isinstance(t, Const):
            return self.const(t.value)
        if isinstance(t, Wildcard):
            return self.new_var()
        if isinstance(t, BinOp):
            ops = {"+": "+", "-": "-", "*": "*", "/": "//", "%": "%", "^": "**"}
            if t.op not in ops:
                raise rule_error("unsupported", f"pyDatalog cannot express the operator {t.op!r}", t.place)
            return f"({self.term(t.left, env, pre)} {ops[t.op]} {self.term(t.right, env, pre)})"
        if isinstance(t, UnOp):
            if t.op != "-":
                raise rule_error("unsupported", f"pyDatalog cannot express the operator {t.op!r}", t.place)
            return f"(0 - {self.term(t.arg, env, pre)})"
        if isinstance(t, Call):
            if t.name == "cat":
                return "(" + " + ".join(self.term(a, env, pre) for a in t.args) + ")"
            raise rule_error("unsupported", f"pyDatalog cannot express the functor {t.name!r}", t.place)
        if isinstance(t, Aggregate):
            raise AssertionError("aggregates are bound before use")
        raise rule_error("unsupported", f"unsupported term {t!r}", t.place)

    def atom_args(self, atom: Atom, env: dict[str, str], after: list[str]) -> str:
        if not atom.args:
            return f"{pred(atom.rel)}(1)"
        args = []
        for a in atom.args:
            if isinstance(a, Var):
                args.append(var(a.name))
            elif isinstance(a, Wildcard):
                args.append(self.new_var())
            elif isinstance(a, Const):
                args.append(self.const(a.value))
            else:
                w = self.new_var()
                args.append(w)
                after.append(f"({w} == {self.term(a, env, after)})")
        return f"{pred(atom.rel)}({', '.join(args)})"

    def compare(self, lit: Compare, bound: set[str], pre: list[str]) -> str:
        if lit.op in ("contains", "match"):
            raise rule_error("unsupported", f"pyDatalog cannot express {lit.op}(...)", lit.place)
        op = {"=": "==", "!=": "!="}.get(lit.op, lit.op)
        left, right = lit.left, lit.right
        if not isinstance(left, Var) and isinstance(right, Var):
            flip = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}
            left, right, op = right, left, flip.get(op, op)
        if isinstance(left, Var):
            lv = var(left.name)
        else:
            lv = self.new_var()
            pre.append(f"({lv} == {self.term(left, {}, pre)})")
        return f"({lv} {op} {self.term(right, {}, pre)})"

    def rule(self, r: Rule) -> list[str]:
        """pyDatalog clauses for one rule (several when an empty count/sum needs its 0 variant)."""
        if any(isinstance(lit, BoolLit) and not lit.value for lit in r.body):
            return []
        # pull aggregates out: each becomes a fresh variable bound by a keyed aggregate function
        aggs: list[tuple[str, Aggregate]] = []

        def lift(t: Term) -> Term:
            if isinstance(t, Aggregate):
                name = f"AGG{len(aggs) + 1}_{next(self.fresh)}"
                aggs.append((name, t))
                return Var(name, t.place)
            if isinstance(t, BinOp):
                return BinOp(t.op, lift(t.left), lift(t.right), t.place)
            if isinstance(t, UnOp):
                return UnOp(t.op, lift(t.arg), t.place)
            if isinstance(t, Call):
                return Call(t.name, [lift(a) for a in t.args], t.place)
            return t

        body: list[Literal] = []
        for lit in r.body:
            if isinstance(lit, Compare):
                body.append(Compare(lit.op, lift(lit.left), lift(lit.right), lit.place))
            elif isinstance(lit, Atom):
                body.append(Atom(lit.rel, [lift(a) for a in lit.args], lit.place))
            else:
                body.append(lit)
        head = Atom(r.head.rel, [lift(a) for a in r.head.args], r.head.place)

        # variables bound by the positive atoms: these are the aggregate keys when shared
        outer_bound = {a.name for lit in body if isinstance(lit, Atom) for a in lit.args if isinstance(a, Var)}
        # assignments to a fixpoint (including aggregate variables)
        assigns: list[Compare] = []
        tests: list[Compare] = []
        bound = set(outer_bound) | {n for n, _ in aggs}
        pending = [lit for lit in body if isinstance(lit, Compare)]
        changed = True
        while changed:
            changed = False
            for lit in list(pending):
                if lit.op != "=":
                    continue
                for x, e in ((lit.left, lit.right), (lit.right, lit.left)):
                    if isinstance(x, Var) and x.name not in bound and all(v.name in bound for v in term_vars(e)):
                        assigns.append(Compare("=", x, e, lit.place))
                        bound.add(x.name)
                        pending.remove(lit)
                        changed = True
                        break
        tests = pending

        parts: list[str] = []
        after: list[str] = []
        for lit in body:
            if isinstance(lit, Atom):
                parts.append(self.atom_args(lit, {}, after))
        parts += after
        agg_parts: list[tuple[str, str, str | None]] = []  # (present literal, absent literal, zero binding)
        for name, agg in aggs:
            agg_parts.append(self.aggregate(name, agg, outer_bound | bound - {n for n, _ in aggs}))
        mid: list[str] = []
        for a in assigns:
            mid.append(f"({var(a.left.name)} == {self.term(a.right, {}, mid)})")  # type: ignore[union-attr]
        for t in tests:
            mid.append(self.compare(t, bound, mid))
        negs: list[str] = []
        for lit in body:
            if isinstance(lit, Negation):
                pre: list[str] = []
                args = []
                for a in lit.atom.args:
                    if isinstance(a, Var):
                        args.append(var(a.name))
                    elif isinstance(a, Wildcard):
                        args.append(self.new_var())
                    elif isinstance(a, Const):
                        args.append(self.const(a.value))
                    else:
                        w = self.new_var()
                        pre.append(f"({w} == {self.term(a, {}, pre)})")
                        args.append(w)
                negs += pre
                negs.append(f"~{pred(lit.atom.rel)}({', '.join(args) if args else '1'})")
        head_pre: list[str] = []
        hargs = []
        for a in head.args:
            if isinstance(a, Var):
                hargs.append(var(a.name))
            elif isinstance(a, Const):
                hargs.append(self.const(a.value))
            else:
                w = self.new_var()
                head_pre.append(f"({w} == {self.term(a, {}, head_pre)})")
                hargs.append(w)
        head_txt = f"{pred(head.rel)}({', '.join(hargs) if hargs else '1'})"
        if not body and not aggs and not head_pre:
            return ["+ " + head_txt]
        clauses = []
        for choice in itertools.product(*[[0, 1] if z is not None else [0] for _, _, z in agg_parts]):
            lits = list(parts)
            for (present, absent, zero), c in zip(agg_parts, choice):
                lits += [present] if c == 0 else [absent, zero]  # type: ignore[list-item]
            # the aggregate variables must be bound before assignments/tests use them
            lits = lits[: len(parts)] + lits[len(parts) :] + mid + negs + head_pre
            if not lits:
                lits = ["(W0 == 1)"]
            clauses.append(f"{head_txt} <= " + " & ".join(lits))
        return clauses

    def aggregate(self, name: str, agg: Aggregate, outer: set[str]) -> tuple[str, str, str | None]:
        """Helper clauses for one aggregate; returns the body literal binding `name`, and for count/sum the
        literal saying "no body tuple" and the zero binding."""
        if agg.func == "mean":
            raise rule_error("unsupported", "pyDatalog backend: 'mean' aggregate not supported", agg.place)
        inner_vars: list[str] = []
        for lit in agg.body:
            if isinstance(lit, Atom):
                for a in lit.args:
                    for v in term_vars(a):
                        if v.name not in inner_vars:
                            inner_vars.append(v.name)
        keys = [v for v in inner_vars if v in outer]
        k = next(self.agg_count)
        fn = f"a_{k}"
        ex = f"e_{k}"
        sub = _Translator()
        sub.fresh = self.fresh
        sub.agg_count = self.agg_count
        sub.helpers = self.helpers
        # body of the aggregate as a pseudo rule: helper relation over keys + all locals (wildcards named)
        named_body: list[Literal] = []
        locals_: list[str] = []
        for lit in agg.body:
            if isinstance(lit, Atom):
                args: list[Term] = []
                for a in lit.args:
                    if isinstance(a, Wildcard):
                        w = f"WILD{next(self.fresh)}"
                        locals_.append(w)
                        args.append(Var(w, a.place))
                    else:
                        args.append(a)
                named_body.append(Atom(lit.rel, args, lit.place))
            else:
                named_body.append(lit)
        for v in inner_vars:
            if v not in keys and v not in locals_:
                locals_.append(v)
        key_txt = ", ".join(var(v) for v in keys) if keys else "0"
        parts: list[str] = []
        after: list[str] = []
        for lit in named_body:
            if isinstance(lit, Atom):
                parts.append(sub.atom_args(lit, {}, after))
        parts += after
        for lit in named_body:
            if isinstance(lit, Compare):
                if lit.op == "=" and isinstance(lit.left, Var) and lit.left.name not in inner_vars:
                    parts.append(f"({var(lit.left.name)} == {sub.term(lit.right, {}, parts)})")
                    locals_.append(lit.left.name)
                else:
                    parts.append(sub.compare(lit, set(), parts))
        for lit in named_body:
            if isinstance(lit, Negation):
                args_txt = []
                for a in lit.atom.args:
                    args_txt.append(sub.term(a, {}, parts) if not isinstance(a, Wildcard) else self.new_var())
                parts.append(f"~{pred(lit.atom.rel)}({', '.join(args_txt) if args_txt else '1'})")
        if not keys:
            parts.append("(V__KEY == 0)")
            key_head = "V__KEY"
        else:
            key_head = key_txt
        each = "(" + ", ".join(var(v) for v in locals_) + ("," if len(locals_) == 1 else "") + ")" if locals_ else None
        if agg.func in ("count", "sum"):
            if agg.func == "count":
                target = "V__ONE"
                parts.append("(V__ONE == 1)")
            else:
                target = self.new_var()
                parts.append(f"({target} == {sub.term(agg.target, {}, parts)})")  # type: ignore[arg-type]
            if each is None:
                each = "(V__KEY2,)"
                parts.append("(V__KEY2 == 0)")
            fun = f"sum_({target}, for_each={each})"
        else:
            target = self.new_var()
            parts.append(f"({target} == {sub.term(agg.target, {}, parts)})")  # type: ignore[arg-type]
            fun = f"{agg.func}_({target}, order_by={target})"
        body_txt = " & ".join(parts) if parts else "(V__KEY == 0)"
        self.helpers.append(f"({fn}[{key_head}] == {fun}) <= {body_txt}")
        present = f"({fn}[{key_txt}] == {var(name)})"
        if agg.func in ("count", "sum"):
            self.helpers.append(f"{ex}({key_head}) <= {body_txt}")
            return present, f"~{ex}({key_txt})", f"({var(name)} == 0)"
        return present, "", None


def translate(program: Program) -> list[str]:
    """The program as pyDatalog clauses (helper aggregate clauses first)."""
    t = _Translator()
    clauses: list[str] = []
    for r in program.ast.rules:
        clauses += t.rule(r)
    return t.helpers + clauses


def translate_strata(program: Program) -> list[list[str]]:
    """The program as pyDatalog clauses, one list per stratum (dependencies first; each stratum's aggregate
    helper clauses before its rules)."""
    t = _Translator()
    out: list[list[str]] = []
    for s in program.strata:
        start = len(t.helpers)
        clauses: list[str] = []
        for r in s.rules:
            clauses += t.rule(r)
        out.append(t.helpers[start:] + clauses)
    return out


def _assert_rows(pyDatalog: Any, rel: str, n: int, rows: list[tuple]) -> None:
    """Make `rel` a relation of plain facts; an empty one is still made known (see _evaluate)."""
    p = pred(rel)
    for row in rows:
        pyDatalog.assert_fact(p, *(row if row else (1,)))
    if not rows:
        placeholder = tuple(f"__anchorlog_none_{i}" for i in range(n)) or (1,)
        pyDatalog.assert_fact(p, *placeholder)
        pyDatalog.retract_fact(p, *placeholder)


def _ask(pyDatalog: Any, rel: str, n: int) -> list[tuple]:
    vs = ", ".join(f"Q{i}" for i in range(n)) if n else "1"
    try:
        ans = pyDatalog.ask(f"{pred(rel)}({vs})")
    except AttributeError:  # "Predicate without definition": no fact, no rule
        ans = None
    rows = list(ans.answers) if ans is not None else []
    if n == 0:
        return [()] if rows or _nullary_true(pyDatalog, rel) else []
    return list(dict.fromkeys(tuple(r) for r in rows))


def _evaluate(program: Program, inputs: dict[str, list[tuple]], wanted: list[str]) -> dict[str, list[tuple]]:
    """Stratum by stratum, dependencies first: pyDatalog holds only the current stratum's clauses, and every
    relation it reads from outside (inputs, relations of earlier strata) as plain facts. pyDatalog resolving
    the whole program top-down lets an aggregate over a relation of a recursive component miss its rows."""
    from pyDatalog import pyDatalog

    arity = program.arity
    per_stratum = translate_strata(program)
    known: dict[str, list[tuple]] = {rel: list(dict.fromkeys(rows)) for rel, rows in inputs.items()}
    pyDatalog.clear()
    try:
        for s, clauses in zip(program.strata, per_stratum):
            members = set(s.relations)
            read: list[str] = []
            for r in s.rules:
                for atom, _ in all_atoms(r):
                    if atom.rel not in members and atom.rel not in read:
                        read.append(atom.rel)
            # pyDatalog fails every negated literal over a predicate it has never seen (no fact, no clause yet):
            # each still-empty relation is made known by asserting and retracting one placeholder row.
            for rel in s.relations + read:
                _assert_rows(pyDatalog, rel, arity[rel], known.get(rel, []))
            try:
                pyDatalog.load("\n".join(clauses))
            except Exception as e:  # noqa: BLE001 - pyDatalog raises bare exceptions for what it cannot parse
                raise AnchorlogError(f"pyDatalog rejected the translated program: {e}") from None
            for rel in s.relations:
                known[rel] = _ask(pyDatalog, rel, arity[rel])
            pyDatalog.clear()
        return {rel: list(known.get(rel, [])) for rel in wanted}
    finally:
        pyDatalog.clear()


def _nullary_true(pyDatalog: Any, rel: str) -> bool:
    try:
        return bool(pyDatalog.ask(f"{pred(rel)}(1)"))
    except AttributeError:
        return False


def _child(conn: Any, program: Program, inputs: dict, wanted: list[str]) -> None:
    try:
        conn.send(("ok", _evaluate(program, inputs, wanted)))
    except AnchorlogError as e:
        conn.send(("err", str(e)))
    except Exception as e:  # noqa: BLE001
        conn.send(("err", f"pyDatalog failed: {type(e).__name__}: {e}"))


def gather_inputs(program: Program, conn: sqlite3.Connection, extra: dict[str, list[tuple]]) -> dict[str, list[tuple]]:
    from .program import _connection  # noqa: F401 - conn already open

    tables = {r[0] for r in conn.execute("SELECT name FROM main.sqlite_master WHERE type IN ('table','view')")}
    idb = set(program.idb)
    inputs: dict[str, list[tuple]] = {}
    first: dict[str, object] = {}
    for r in program.ast.rules:
        for atom, _ in all_atoms(r):
            first.setdefault(atom.rel, atom.place)
    for rel, n in program.arity.items():
        if rel in extra:
            inputs[rel] = list(extra[rel])
        elif rel in tables:
            cols = conn.execute(f'PRAGMA main.table_info("{rel}")').fetchall()
            if len(cols) != n:
                raise rule_error(
                    "arity_mismatch",
                    f"arity mismatch: table {rel!r} of the fact database has {len(cols)} columns, the program uses {n}",
                    first.get(rel),
                )
            inputs[rel] = [tuple(x) for x in conn.execute(f'SELECT * FROM main."{rel}"')]
        elif rel not in idb and rel not in program.ast.decls:
            raise rule_error(
                "unknown_relation",
                f"unknown relation {rel!r}: not declared, not derived by any rule and not a table of the fact database",
                first.get(rel),
            )
    return inputs


def run_pydatalog(
    program: Program, db: Any, extra: dict[str, list[tuple]], wanted: list[str], timeout: float | None = None
) -> Result:
    from .program import Result, _connection

    translate(program)  # report what pyDatalog cannot express before loading any data
    with _connection(db) as conn:
        inputs = gather_inputs(program, conn, extra)
    if timeout is None:
        rows = _evaluate(program, inputs, wanted)
    else:
        ctx = multiprocessing.get_context("fork")
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(child, program, inputs, wanted), daemon=True)
        proc.start()
        child.close()
        if not parent.poll(timeout):
            proc.kill()
            proc.join()
            raise AnchorlogError(f"pyDatalog did not finish within {timeout:g} s")
        status, payload = parent.recv()
        proc.join()
        if status != "ok":
            raise AnchorlogError(payload)
        rows = payload
    columns = {rel: program.columns(rel) or [f"c{i}" for i in range(program.arity[rel])] for rel in wanted}
    return Result(columns, rows)
