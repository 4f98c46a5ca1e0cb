"""Static checks and stratification of a parsed program.

Checks (each a RuleError with the file:line:col of the offending text, and a `kind` attribute naming the check):
syntax (parser), arity_mismatch, unbound_variable (head / comparison / functor), unsafe_negation,
wildcard_in_head, unstratifiable (negation or aggregation through recursion), unknown_relation (at run time,
once the fact database is known).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from anchorlog.errors import RuleError

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
    ProgramAST,
    Rule,
    Term,
    UnOp,
    Var,
    Wildcard,
    aggregates_in,
    term_vars,
)


def rule_error(kind: str, message: str, place: object) -> RuleError:
    err = RuleError(message, str(place))
    err.kind = kind  # type: ignore[attr-defined]
    return err


@dataclass
class Stratum:
    index: int
    relations: list[str]
    rules: list[Rule]
    recursive: bool  # some rule reads a relation of this stratum
    # for each rule (same order): indexes of body literals that are atoms over this stratum's relations
    recursive_atoms: list[list[int]] = field(default_factory=list)

    @property
    def linear(self) -> bool:
        """One relation, each rule reading it at most once: evaluable as a single recursive CTE."""
        return len(self.relations) == 1 and all(len(r) <= 1 for r in self.recursive_atoms)


def _walk_atoms(lits: list[Literal], negative: bool = False):
    """Yield (atom, is_negative_dependency) for every atom of a body, including those in aggregates."""
    for lit in lits:
        if isinstance(lit, Atom):
            yield lit, negative
            for a in lit.args:
                for agg in aggregates_in(a):
                    yield from _walk_atoms(agg.body, True)
        elif isinstance(lit, Negation):
            yield lit.atom, True
        elif isinstance(lit, Compare):
            for t in (lit.left, lit.right):
                for agg in aggregates_in(t):
                    yield from _walk_atoms(agg.body, True)


def all_atoms(rule: Rule) -> Iterator[tuple[Atom, bool]]:
    """Every atom of ``rule`` (body and head aggregates) with whether it is a negative dependency."""
    yield from _walk_atoms(rule.body)
    for a in rule.head.args:
        for agg in aggregates_in(a):
            yield from _walk_atoms(agg.body, True)


def check_arities(ast: ProgramAST) -> dict[str, int]:
    arity: dict[str, int] = {}
    first: dict[str, object] = {}
    for name, d in ast.decls.items():
        arity[name] = len(d.columns)
        first[name] = d.place

    def see(atom: Atom) -> None:
        n = len(atom.args)
        if atom.rel in arity:
            if arity[atom.rel] != n:
                raise rule_error(
                    "arity_mismatch",
                    f"arity mismatch: {atom.rel!r} has {arity[atom.rel]} columns (first seen at {first[atom.rel]}) "
                    f"but is used here with {n}",
                    atom.place,
                )
        else:
            arity[atom.rel] = n
            first[atom.rel] = atom.place

    for r in ast.rules:
        see(r.head)
        for atom, _neg in all_atoms(r):
            see(atom)
    for d in ast.directives:
        if d.rel not in ast.decls:
            raise rule_error("unknown_relation", f".{d.kind} of undeclared relation {d.rel!r}", d.place)
    return arity


# ------------------------------------------------------------------------------------------- groundedness


def _bound_by_body(body: list[Literal], outer: set[str]) -> set[str]:
    """Variables grounded by a conjunction: plain variable arguments of positive atoms, then `X = expr` with a
    grounded right-hand side (or an aggregate), repeated to a fixpoint."""
    bound = set(outer)
    for lit in body:
        if isinstance(lit, Atom):
            for a in lit.args:
                if isinstance(a, Var):
                    bound.add(a.name)
    changed = True
    while changed:
        changed = False
        for lit in body:
            if isinstance(lit, Compare) and lit.op == "=":
                for x, e in ((lit.left, lit.right), (lit.right, lit.left)):
                    if isinstance(x, Var) and x.name not in bound and _term_ground(e, bound):
                        bound.add(x.name)
                        changed = True
    return bound


def _term_ground(t: Term, bound: set[str]) -> bool:
    if isinstance(t, Var):
        return t.name in bound
    if isinstance(t, Const):
        return True
    if isinstance(t, Wildcard):
        return False
    if isinstance(t, BinOp):
        return _term_ground(t.left, bound) and _term_ground(t.right, bound)
    if isinstance(t, UnOp):
        return _term_ground(t.arg, bound)
    if isinstance(t, Call):
        return all(_term_ground(a, bound) for a in t.args)
    if isinstance(t, Aggregate):
        # the aggregate's own value is always defined once the variables it shares with the outside are bound
        return True
    return False


def _vars_outside(rule: Rule, agg: Aggregate) -> set[str]:
    """Variable names used in the rule outside of the given aggregate."""
    names: set[str] = set()

    def term(t: Term) -> None:
        if t is agg:
            return
        if isinstance(t, Var):
            names.add(t.name)
        elif isinstance(t, BinOp):
            term(t.left)
            term(t.right)
        elif isinstance(t, UnOp):
            term(t.arg)
        elif isinstance(t, Call):
            for a in t.args:
                term(a)
        elif isinstance(t, Aggregate):
            if t.target is not None:
                term(t.target)
            lits(t.body)

    def lits(body: list[Literal]) -> None:
        for lit in body:
            if isinstance(lit, Atom):
                for a in lit.args:
                    term(a)
            elif isinstance(lit, Negation):
                for a in lit.atom.args:
                    term(a)
            elif isinstance(lit, Compare):
                term(lit.left)
                term(lit.right)

    for a in rule.head.args:
        term(a)
    lits(rule.body)
    return names


def _check_body(rule: Rule, body: list[Literal], outer: set[str], shared: set[str]) -> set[str]:
    """Check a conjunction's safety; `outer` are variables bound outside (for aggregate bodies)."""
    bound = _bound_by_body(body, outer)

    def need(t: Term, what: str) -> None:
        for v in term_vars(t):
            if v.name not in bound:
                raise rule_error("unbound_variable", f"variable {v.name!r} is not bound ({what})", v.place)
        for agg in aggregates_in(t):
            check_aggregate(agg)

    def check_aggregate(agg: Aggregate) -> None:
        inner_shared = _vars_outside(rule, agg)
        corr = {n for n in inner_shared if n in bound}
        for lit in agg.body:
            if isinstance(lit, Negation):
                continue
        # variables of the aggregate body that also occur outside must be grounded outside
        for atom_var in _body_vars(agg.body):
            if atom_var.name in inner_shared and atom_var.name not in bound:
                raise rule_error(
                    "unbound_variable",
                    f"variable {atom_var.name!r} is shared with an aggregate but not bound outside it",
                    atom_var.place,
                )
        inner_bound = _check_body(rule, agg.body, corr, inner_shared)
        if agg.target is not None:
            for v in term_vars(agg.target):
                if v.name not in inner_bound:
                    raise rule_error("unbound_variable", f"variable {v.name!r} of the aggregate is not bound", v.place)

    for lit in body:
        if isinstance(lit, Atom):
            for a in lit.args:
                if not isinstance(a, (Var, Wildcard)):
                    need(a, "in an argument expression")
        elif isinstance(lit, Negation):
            for a in lit.atom.args:
                for v in term_vars(a):
                    if v.name not in bound:
                        raise rule_error(
                            "unsafe_negation",
                            f"variable {v.name!r} occurs only in the negated atom {lit.atom.rel!r}: unsafe negation",
                            v.place,
                        )
                for agg in aggregates_in(a):
                    raise rule_error("unsupported", "aggregate inside a negated atom", agg.place)
        elif isinstance(lit, Compare):
            for t in (lit.left, lit.right):
                if isinstance(t, Wildcard):
                    raise rule_error("unbound_variable", "'_' cannot be used in a comparison", t.place)
                need(t, "in a comparison")
        elif isinstance(lit, BoolLit):
            pass
    return bound


def _body_vars(body: list[Literal]) -> list[Var]:
    out: list[Var] = []
    for lit in body:
        if isinstance(lit, Atom):
            for a in lit.args:
                out += term_vars(a)
        elif isinstance(lit, Negation):
            for a in lit.atom.args:
                out += term_vars(a)
        elif isinstance(lit, Compare):
            out += term_vars(lit.left) + term_vars(lit.right)
    return out


def check_rule(rule: Rule) -> None:
    for a in rule.head.args:
        if isinstance(a, Wildcard):
            raise rule_error("wildcard_in_head", "'_' cannot be used in a rule head", a.place)
    bound = _check_body(rule, rule.body, set(), set())
    for a in rule.head.args:
        for v in term_vars(a):
            if v.name not in bound:
                kind = "unbound_variable"
                raise rule_error(kind, f"head variable {v.name!r} is not bound in the body", v.place)
        for agg in aggregates_in(a):
            # an aggregate in the head is checked like one in the body
            _check_body(rule, [Compare("=", Var("_agg", agg.place), agg, agg.place)], bound, set())


# --------------------------------------------------------------------------------------------- stratify


def stratify(ast: ProgramAST) -> list[Stratum]:
    """Strongly connected components of the IDB dependency graph, dependencies first (Tarjan)."""
    idb: list[str] = []
    seen: set[str] = set()
    for r in ast.rules:
        if r.head.rel not in seen:
            seen.add(r.head.rel)
            idb.append(r.head.rel)
    idb_pos = {rel: k for k, rel in enumerate(idb)}
    rule_ids_by_head: dict[str, list[int]] = {rel: [] for rel in idb}
    for i, r in enumerate(ast.rules):
        rule_ids_by_head[r.head.rel].append(i)
    edges: dict[str, list[tuple[str, bool, object]]] = {rel: [] for rel in idb}
    for r in ast.rules:
        for atom, neg in all_atoms(r):
            if atom.rel in seen:
                edges[r.head.rel].append((atom.rel, neg, atom.place))

    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    sccs: list[list[str]] = []
    counter = 0
    for root in idb:
        if root in index:
            continue
        work = [(root, 0)]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, i = work[-1]
            if i < len(edges[v]):
                work[-1] = (v, i + 1)
                w = edges[v][i][0]
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    sccs.append(sorted(comp, key=idb_pos.__getitem__))

    strata: list[Stratum] = []
    for comp in sccs:
        members = set(comp)
        # the component's rules in program order, from the per-head lists (not a scan of every rule per component)
        rule_ids = (
            rule_ids_by_head[comp[0]] if len(comp) == 1 else sorted(i for rel in comp for i in rule_ids_by_head[rel])
        )
        rules = [ast.rules[i] for i in rule_ids]
        for rel in comp:
            for dep, neg, place in edges[rel]:
                if neg and dep in members:
                    raise rule_error(
                        "unstratifiable",
                        f"{rel!r} depends on {dep!r} through negation or aggregation within a recursive cycle "
                        f"({' -> '.join(comp + [comp[0]]) if len(comp) > 1 else rel + ' -> ' + rel}): not stratifiable",
                        place,
                    )
        rec_atoms = [[i for i, lit in enumerate(r.body) if isinstance(lit, Atom) and lit.rel in members] for r in rules]
        recursive = any(rec_atoms)
        strata.append(Stratum(len(strata), comp, rules, recursive, rec_atoms))
    return strata


def check_program(ast: ProgramAST) -> tuple[dict[str, int], list[Stratum]]:
    arity = check_arities(ast)
    for r in ast.rules:
        check_rule(r)
    return arity, stratify(ast)
