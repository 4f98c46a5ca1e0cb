"""`Program`: parse + check once, run many times against a fact database; `Result`: the derived relations."""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anchorlog.errors import AnchorlogError, RuleError

from .analysis import Stratum, check_program
from .syntax import (
    Aggregate,
    Atom,
    BinOp,
    Call,
    Compare,
    Const,
    Negation,
    ProgramAST,
    Rule,
    Term,
    UnOp,
    Var,
    format_rule,
    parse_program,
)

if TYPE_CHECKING:
    import pandas

ENGINES = ("sqlite", "duckdb", "pydatalog")

_run_counter = itertools.count(1)


def _sort_key(row: tuple) -> tuple:
    # rows may mix numbers, strings and NULLs: order by (kind, value) per column
    return tuple((0, 0) if v is None else (1, v) if isinstance(v, (int, float)) else (2, str(v)) for v in row)


def _sort_rows(rows: list[tuple]) -> list[tuple]:
    """Rows in :func:`_sort_key` order. Plain tuple comparison gives that order whenever it succeeds: a
    comparison sort compares every pair of neighbours in its output, so a column mixing None, numbers and
    strings among otherwise equal rows raises TypeError, and then the key function sorts instead."""
    try:
        if not any(type(v) is bytes for r in rows[:1] for v in r):
            return sorted(rows)
    except TypeError:
        pass
    return sorted(rows, key=_sort_key)


class Result(Mapping):
    """Relations computed by one run: ``res["rel"]`` is a DataFrame (columns as declared), ``res.rows("rel")``
    the tuples (sorted), ``res.relations`` the names available."""

    def __init__(self, columns: dict[str, list[str]], rows: dict[str, list[tuple]], explain: str = "") -> None:
        self._columns = columns
        self._rows = rows  # sorted on first access (results can be large; many callers only count or filter)
        self._sorted: set[str] = set()
        self._frames: dict[str, pandas.DataFrame] = {}
        self.explain = explain

    @property
    def relations(self) -> list[str]:
        return list(self._rows)

    def _check(self, rel: str) -> None:
        if rel not in self._rows:
            raise KeyError(
                f"relation {rel!r} is not in the result (available: {', '.join(self._rows) or 'none'}; "
                "with .output directives only those are kept, pass outputs=[...] to run() for others)"
            )

    def _sorted_rows(self, rel: str) -> list[tuple]:
        self._check(rel)
        if rel not in self._sorted:
            self._rows[rel] = _sort_rows(self._rows[rel])
            self._sorted.add(rel)
        return self._rows[rel]

    def rows(self, rel: str, sort: bool = True) -> list[tuple]:
        """The tuples of `rel`, sorted (NULLs, then numbers, then strings per column); ``sort=False`` returns
        them in the order the engine produced them, without paying for the sort (callers that build a dict or
        a set, or only iterate)."""
        if not sort:
            self._check(rel)
            return list(self._rows[rel])
        return list(self._sorted_rows(rel))

    def count(self, rel: str) -> int:
        self._check(rel)
        return len(self._rows[rel])

    def columns(self, rel: str) -> list[str]:
        self._check(rel)
        return list(self._columns[rel])

    def set(self, rel: str) -> set[tuple]:
        self._check(rel)
        return set(self._rows[rel])

    def __getitem__(self, rel: str) -> pandas.DataFrame:
        import pandas

        self._check(rel)
        if rel not in self._frames:
            self._frames[rel] = pandas.DataFrame(self._sorted_rows(rel), columns=self._columns[rel])
        return self._frames[rel].copy()

    def __contains__(self, rel: object) -> bool:
        # Mapping's default calls __getitem__, which would build (and copy) a DataFrame just to answer this.
        return rel in self._rows

    def __iter__(self):
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __repr__(self) -> str:
        return "Result(" + ", ".join(f"{r}: {len(v)} rows" for r, v in self._rows.items()) + ")"


# ----------------------------------------------------------------------------------------------- typing

TYPE_SQLITE = {"symbol": "TEXT", "number": "INTEGER", "unsigned": "INTEGER", "float": "REAL", None: ""}
TYPE_DUCKDB = {"symbol": "VARCHAR", "number": "BIGINT", "unsigned": "BIGINT", "float": "DOUBLE", None: "VARCHAR"}


def value_type(v: object) -> str | None:
    if isinstance(v, bool) or isinstance(v, int):
        return "number"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "symbol"
    return None


def sqlite_decl_type(decl: str | None) -> str | None:
    """Our type for an SQLite declared column type (affinity rules, roughly)."""
    if not decl:
        return None
    d = decl.upper()
    if "INT" in d:
        return "number"
    if "CHAR" in d or "CLOB" in d or "TEXT" in d:
        return "symbol"
    if "REAL" in d or "FLOA" in d or "DOUB" in d:
        return "float"
    return None


def infer_types(
    ast: ProgramAST, known: dict[str, list[str | None]], arity: dict[str, int]
) -> dict[str, list[str | None]]:
    """Column types of every relation: declared, known (database / extra), else inferred from the rules."""
    types: dict[str, list[str | None]] = {rel: list(t) for rel, t in known.items()}
    for rel, d in ast.decls.items():
        types[rel] = [t for _, t in d.columns]
    for rel, n in arity.items():
        types.setdefault(rel, [None] * n)
    fixed = set(known) | set(ast.decls)

    def term_type(t: Term, env: dict[str, str | None]) -> str | None:
        if isinstance(t, Var):
            return env.get(t.name)
        if isinstance(t, Const):
            return value_type(t.value)
        if isinstance(t, BinOp):
            a, b = term_type(t.left, env), term_type(t.right, env)
            return "float" if "float" in (a, b) else "number"
        if isinstance(t, UnOp):
            return term_type(t.arg, env) or "number"
        if isinstance(t, Call):
            if t.name in ("cat", "to_string", "substr"):
                return "symbol"
            if t.name in ("min", "max", "abs"):
                return term_type(t.args[0], env)
            if t.name == "to_float":
                return "float"
            return "number"
        if isinstance(t, Aggregate):
            if t.func == "count":
                return "number"
            if t.func == "mean":
                return "float"
            inner = dict(env)
            bind(t.body, inner)
            return term_type(t.target, inner) if t.target is not None else "number"
        return None

    def bind(body: list, env: dict[str, str | None]) -> None:
        for lit in body:
            if isinstance(lit, Atom):
                for a, ty in zip(lit.args, types.get(lit.rel, [])):
                    if isinstance(a, Var) and env.get(a.name) is None and ty is not None:
                        env[a.name] = ty
        for _ in range(3):
            for lit in body:
                # a variable compared with a typed term has that term's type (`X <= 3`: X is a number)
                if isinstance(lit, Compare) and lit.op in ("<", "<=", ">", ">=", "!="):
                    for x, e in ((lit.left, lit.right), (lit.right, lit.left)):
                        if isinstance(x, Var) and env.get(x.name) is None:
                            ty = term_type(e, env)
                            if ty is not None:
                                env[x.name] = ty
                if isinstance(lit, Compare) and lit.op == "=":
                    for x, e in ((lit.left, lit.right), (lit.right, lit.left)):
                        if isinstance(x, Var) and env.get(x.name) is None:
                            ty = term_type(e, env)
                            if ty is not None:
                                env[x.name] = ty

    changed = True
    rounds = 0
    while changed and rounds < 50:
        changed = False
        rounds += 1
        for r in ast.rules:
            for lit in r.body:  # constants in body atoms type the columns they sit in
                atom = lit.atom if isinstance(lit, Negation) else lit
                if isinstance(atom, Atom) and atom.rel not in fixed:
                    for k, a in enumerate(atom.args):
                        if isinstance(a, Const) and types[atom.rel][k] is None:
                            types[atom.rel][k] = value_type(a.value)
                            changed = True
            env: dict[str, str | None] = {}
            bind(r.body, env)
            for lit in r.body:  # backwards: a column read into a typed variable has that type
                atom = lit.atom if isinstance(lit, Negation) else lit
                if isinstance(atom, Atom) and atom.rel not in fixed:
                    for k, a in enumerate(atom.args):
                        if isinstance(a, Var) and types[atom.rel][k] is None and env.get(a.name) is not None:
                            types[atom.rel][k] = env[a.name]
                            changed = True
            if r.head.rel in fixed:
                continue
            cur = types[r.head.rel]
            for k, a in enumerate(r.head.args):
                if cur[k] is None:
                    ty = term_type(a, env)
                    if ty is not None:
                        cur[k] = ty
                        changed = True
    return types


# ------------------------------------------------------------------------------------------------ program


# Program.cached: resolved path -> (newest rule-file mtime in its folder, program)
_FILE_CACHE: dict[Path, tuple[float, Program]] = {}


@dataclass
class Program:
    """A checked Datalog program. Build with :meth:`from_text` / :meth:`from_file`, evaluate with :meth:`run`."""

    ast: ProgramAST
    source: str = "<text>"
    arity: dict[str, int] = field(default_factory=dict)
    strata: list[Stratum] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.arity, self.strata = check_program(self.ast)

    # -- construction --------------------------------------------------------------------------------------
    @classmethod
    def from_text(cls, text: str, base_dir: str | os.PathLike[str] | None = None, name: str = "<text>") -> Program:
        """Parse program text; `.include "x.dl"` resolves against base_dir (default: the working directory)."""
        ast = parse_program(text, name, Path(base_dir) if base_dir is not None else None)
        return cls(ast, name)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Program:
        """Parse and check a rule file and what it includes, or load that work from the on-disk program cache
        (:mod:`anchorlog.queries.progcache`, keyed by the text of every file read; ANCHORLOG_CACHE_DIR=off
        turns it off)."""
        from . import progcache

        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise RuleError(f"cannot read rule file: {e.strerror or e}", str(path)) from None
        resolved = p.resolve()
        if progcache.cache_dir() is None:
            return cls(parse_program(text, str(p), resolved.parent), str(p))
        stored = progcache.load(str(p), resolved, text)
        if stored is not None:
            return cls._restored(stored[0], str(p), stored[1], stored[2])
        ast, includes = progcache.parse_recording(text, str(p), resolved.parent)
        prog = cls(ast, str(p))
        progcache.store(str(p), resolved, text, includes, prog.ast, prog.arity, prog.strata)
        return prog

    @classmethod
    def _restored(cls, ast: ProgramAST, source: str, arity: dict[str, int], strata: list[Stratum]) -> Program:
        """A program from already checked state (the program cache), without running the checks again."""
        prog = cls.__new__(cls)
        prog.ast, prog.source, prog.arity, prog.strata = ast, source, arity, strata
        return prog

    @classmethod
    def cached(cls, path: str | os.PathLike[str]) -> Program:
        """:meth:`from_file`, parsed and checked once per process and kept for the passes that run a rule file
        again and again (parsing one with its includes can cost a quarter of a second). Parsed again when a rule
        file beside it (an ``.include`` it may read) changed on disk. Across processes, :meth:`from_file` loads
        the program from the on-disk program cache instead of parsing it."""
        p = Path(path).resolve()
        stamp = max((f.stat().st_mtime for f in p.parent.glob("*.dl")), default=0.0)
        hit = _FILE_CACHE.get(p)
        if hit is None or hit[0] != stamp:
            hit = _FILE_CACHE[p] = (stamp, cls.from_file(p))
        return hit[1]

    # -- introspection -------------------------------------------------------------------------------------
    @property
    def idb(self) -> list[str]:
        """Relations defined by the program's rules and facts, in evaluation order."""
        return [rel for s in self.strata for rel in s.relations]

    @property
    def outputs(self) -> list[str]:
        return list(dict.fromkeys(d.rel for d in self.ast.directives if d.kind in ("output", "printsize")))

    @property
    def inputs(self) -> list[str]:
        return list(dict.fromkeys(d.rel for d in self.ast.directives if d.kind == "input"))

    @property
    def rules(self) -> list[Rule]:
        return list(self.ast.rules)

    def edb(self) -> list[str]:
        """Relations read but not defined by the program (from the database or `extra=`)."""
        idb = set(self.idb)
        return [rel for rel in self.arity if rel not in idb]

    def columns(self, rel: str) -> list[str] | None:
        """Declared column names; for an undeclared derived relation the head variables of its first rule when
        they are distinct plain variables, else c0, c1, ...; None for an undeclared input relation."""
        d = self.ast.decls.get(rel)
        if d is not None:
            return [c for c, _ in d.columns]
        for r in self.ast.rules:
            if r.head.rel == rel:
                names = [a.name if isinstance(a, Var) else "" for a in r.head.args]
                if all(names) and len(set(names)) == len(names):
                    return names
                return [f"c{i}" for i in range(len(r.head.args))]
        return None

    # -- evaluation ----------------------------------------------------------------------------------------
    def run(
        self,
        db: Any = None,
        engine: str = "sqlite",
        extra: Mapping[str, Iterable[Sequence[Any]]] | None = None,
        outputs: Iterable[str] | None = None,
        recursive_cte: bool = True,
        timeout: float | None = None,
    ) -> Result:
        """Evaluate against `db` (a FactDB, an sqlite3.Connection, a path to an SQLite file, or None for no
        database). `extra` supplies input relations as rows. The result keeps `outputs` if given, else the
        relations named by .output directives, else every relation the program derives."""
        if engine not in ENGINES:
            raise AnchorlogError(f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})")
        extra_rows = {rel: [tuple(r) for r in rows] for rel, rows in (extra or {}).items()}
        wanted = self._wanted(outputs)
        if engine == "pydatalog":
            from .pydatalog_backend import run_pydatalog

            return run_pydatalog(self, db, extra_rows, wanted, timeout=timeout)
        from .evaluate import SQLEvaluation

        with _connection(db) as conn:
            ev = SQLEvaluation(self, conn, engine, extra_rows, recursive_cte=recursive_cte)
            return ev.run(wanted)

    def _wanted(self, outputs: Iterable[str] | None) -> list[str]:
        if outputs is not None:
            wanted = list(outputs)
        elif self.outputs:
            wanted = self.outputs
        else:
            wanted = self.idb + [r for r in self.ast.decls if r not in self.idb and r not in self.inputs]
        for rel in wanted:
            if rel not in self.arity:
                raise AnchorlogError(f"no relation {rel!r} in the program")
        return wanted

    def explain(self, db: Any = None, engine: str = "sqlite", recursive_cte: bool = True) -> str:
        """Strata and the SQL statements an evaluation would run (against `db` when given, for column names)."""
        from .evaluate import SQLEvaluation

        lines = [f"program {self.source}: {len(self.ast.rules)} rules, {len(self.strata)} strata"]
        for s in self.strata:
            kind = "recursive" + (" linear" if s.linear else "") if s.recursive else "non-recursive"
            lines.append(f"stratum {s.index} [{kind}]: {', '.join(s.relations)}")
            for r in s.rules:
                lines.append(f"  {format_rule(r)}    % {r.place}")
        if engine == "pydatalog":
            from .pydatalog_backend import translate

            lines.append("pyDatalog clauses:")
            lines += ["  " + c for c in translate(self)]
            return "\n".join(lines)
        with _connection(db) as conn:
            ev = SQLEvaluation(self, conn, engine, {}, recursive_cte=recursive_cte, dry_run=True)
            lines.append(f"SQL ({engine}):")
            lines += ["  " + s for s in ev.plan_statements()]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Program({self.source!r}, rules={len(self.ast.rules)}, strata={len(self.strata)})"


class _connection:
    """Context manager: a sqlite3 connection for `db`; closes it only if we opened it."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.owned = False

    def __enter__(self) -> sqlite3.Connection:
        db = self.db
        if db is None:
            self.owned = True
            self.conn = sqlite3.connect(":memory:")
        elif isinstance(db, sqlite3.Connection):
            self.conn = db
        elif hasattr(db, "conn") and isinstance(db.conn, sqlite3.Connection):
            self.conn = db.conn
        elif isinstance(db, (str, os.PathLike)):
            p = Path(db)
            if not p.is_file():
                raise AnchorlogError(f"no such fact database: {str(p)!r}")
            try:
                self.conn = sqlite3.connect(f"file:{p.resolve()}?mode=ro", uri=True)
                self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except sqlite3.DatabaseError as e:
                raise AnchorlogError(f"not an SQLite fact database: {str(p)!r} ({e})") from None
            self.owned = True
        else:
            raise AnchorlogError(
                f"cannot use {type(db).__name__} as a fact database (FactDB, sqlite3.Connection or path)"
            )
        return self.conn

    def __exit__(self, *exc: object) -> None:
        if self.owned:
            self.conn.close()
