"""Evaluation of a checked program on an SQL backend (SQLite in the fact database's own connection, or DuckDB
in a private in-memory database fed with copies of the input tables).

Per stratum (dependencies first):
- non-recursive: one INSERT ... SELECT (UNION of the rules) into the relation's table;
- recursive and linear (one relation, each rule reading it at most once), SQLite: one WITH RECURSIVE statement
  whose UNION de-duplicates and which walks each new tuple once with index lookups; when the rules join large
  relations, rounds over the relation's own unique-indexed table instead (see `_linear_rounds`);
- otherwise semi-naive: every rule is run once per recursive atom with that atom reading the delta (the
  tuples new in the last round) and the rest the full tables, delta first in a forced join order so that every
  other table is an index lookup; new tuples not yet known become the next delta, until none appear.
All work tables are temporary (SQLite `temp` schema) and dropped at the end; the fact tables are only read.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
import time
from operator import itemgetter
from typing import Any

from anchorlog.errors import AnchorlogError, RuleError
from anchorlog.gcpause import paused_gc

from .analysis import Stratum, rule_error
from .program import TYPE_DUCKDB, TYPE_SQLITE, Program, Result, infer_types, sqlite_decl_type, value_type
from .sqlgen import UNIT_COLUMN, SQLCompiler, TableRef, bound_columns, join_order, probe_columns, quote
from .syntax import Aggregate, Atom, BinOp, Call, Compare, Const, UnOp, Var

_ids = itertools.count(1)
# id() of the SQLite connections an evaluation is running on: work tables are named without a run number (the
# same SQL text every run, so compiled statements can be reused), unless a run on the same connection is active
_ACTIVE: set[int] = set()
_MEMO_LIMIT = 64  # per program: cached type inferences / SQL layouts (distinct fact-database shapes)
_AFFINITY_CLASS: dict[str, type] = {"TEXT": str, "INTEGER": int, "REAL": float}
_SMALL_RELATION = 64  # rows below which a lookup scans instead of getting an index
_COMPOUND_CHUNK = 100  # SQLite caps compound SELECTs at 500 terms
_COVERING_MAX_COLUMNS = 4  # work tables up to this wide get covering lookup indexes (see create_index)


def _rule_atoms(program: Program, rule: Any) -> list[tuple[Atom, bool]]:
    """``all_atoms(rule)`` computed once per program (rules do not change; runs are many)."""
    cache = program.__dict__.get("_al_rule_atoms")
    if cache is None:
        cache = program.__dict__["_al_rule_atoms"] = {}
    atoms = cache.get(id(rule))
    if atoms is None:
        from .analysis import all_atoms

        atoms = cache[id(rule)] = list(all_atoms(rule))
    return atoms


def _affinity(decl: str) -> str:
    """SQLite's column affinity for a declared column type ("" for none), as SQLite derives it."""
    d = decl.upper()
    if not d:
        return ""
    if "INT" in d:
        return "INTEGER"
    if "CHAR" in d or "CLOB" in d or "TEXT" in d:
        return "TEXT"
    if "BLOB" in d:
        return ""
    if "REAL" in d or "FLOA" in d or "DOUB" in d:
        return "REAL"
    return "NUMERIC"


# Which values a head term can produce, for the affinity check of :meth:`SQLEvaluation._stored_set`: "text" (TEXT,
# NULL or BLOB, never a number), "num" (numbers, NULL, or text no numeric affinity would convert), "other".
_TEXT_CALLS = frozenset({"cat", "to_string", "substr"})
_NUM_CALLS = frozenset({"strlen", "to_number", "to_unsigned", "to_float", "ord", "abs"})
_AFFINITY_VALUES = {"TEXT": "text", "INTEGER": "num", "REAL": "num", "NUMERIC": "num"}


def _term_values(t: Any, var_values: dict[str, str]) -> str:
    if isinstance(t, Var):
        return var_values.get(t.name, "other")
    if isinstance(t, Const):
        v = t.value
        if v is None:
            return "any"
        if isinstance(v, str):
            return "text"
        return "num" if isinstance(v, (int, float)) else "other"
    if isinstance(t, (BinOp, UnOp)):
        return "num"  # SQL arithmetic, bit and logic operators: a number or NULL
    if isinstance(t, Call):
        return "text" if t.name in _TEXT_CALLS else "num" if t.name in _NUM_CALLS else "other"
    if isinstance(t, Aggregate):
        return "num" if t.func in ("count", "sum") else "other"
    return "other"


def _program_memo(program: Program, kind: str) -> dict:
    """A per-program cache (rules do not change; runs are many), emptied when it grows past _MEMO_LIMIT keys."""
    memo = program.__dict__.setdefault("_al_memo", {}).setdefault(kind, {})
    if len(memo) > _MEMO_LIMIT:
        memo.clear()
    return memo


def _al_pow(a: Any, b: Any) -> Any:
    try:
        r = a**b
    except (TypeError, ValueError, OverflowError, ZeroDivisionError):
        return None
    return int(r) if isinstance(r, float) and isinstance(a, int) and r.is_integer() else r


def _al_match(pattern: Any, s: Any) -> int:
    try:
        return 1 if re.fullmatch(str(pattern), str(s)) else 0
    except re.error:
        return 0


def _register_functions(conn: sqlite3.Connection) -> None:
    conn.create_function("al_pow", 2, _al_pow, deterministic=True)
    conn.create_function("al_match", 2, _al_match, deterministic=True)


def fetch_all(cur: Any) -> list:
    """``cur.fetchall()`` with the cyclic garbage collector paused. A large result allocates a tuple per row, and
    every 700 allocations trigger a collection; as the young tuples pile up, the older generations, finally the
    whole heap (in a pass: every object of the IR), are traversed too. Rows of plain values cannot form a cycle,
    so nothing is left for the collector to find."""
    with paused_gc():
        return cur.fetchall()


class SQLEvaluation:
    def __init__(
        self,
        program: Program,
        conn: sqlite3.Connection,
        engine: str,
        extra: dict[str, list[tuple]],
        recursive_cte: bool = True,
        dry_run: bool = False,
    ) -> None:
        self.p = program
        self.conn = conn
        self.engine = engine
        self.extra = extra
        self.recursive_cte = recursive_cte
        self.dry_run = dry_run
        self.run_id = next(_ids)
        self._tag = str(self.run_id) if engine == "sqlite" and id(conn) in _ACTIVE else ""
        self.statements: list[str] = []
        self.created: list[str] = []  # work tables to drop
        self.duck = None
        self.profile: list[tuple[float, str]] | None = None
        self._resolve()

    # -- naming --------------------------------------------------------------------------------------------
    def work_name(self, rel: str, kind: str = "") -> str:
        name = quote(f"_al{self._tag}{kind}_{rel}")
        return f"temp.{name}" if self.engine == "sqlite" else name

    @property
    def is_same(self) -> str:
        return "IS" if self.engine == "sqlite" else "IS NOT DISTINCT FROM"

    # -- relations -----------------------------------------------------------------------------------------
    def _db_tables(self) -> dict[str, list[tuple[str, str]]]:
        """Tables and views of the SQLite database: name -> [(column, declared type)]."""
        out: dict[str, list[tuple[str, str]]] = {}
        try:
            names = [
                r[0] for r in self.conn.execute("SELECT name FROM main.sqlite_master WHERE type IN ('table', 'view')")
            ]
        except sqlite3.DatabaseError as e:
            raise AnchorlogError(f"cannot read the fact database: {e}") from None
        for n in names:
            if n.startswith("sqlite_"):
                continue
            cols = self.conn.execute(f"PRAGMA main.table_info({quote(n)})").fetchall()
            out[n] = [(c[1], c[2] or "") for c in cols]
        return out

    def _resolve(self) -> None:
        p = self.p
        db_tables = self._db_tables()
        if self.dry_run and not db_tables:
            # explain without a database: assume the standard fact schema for undeclared relations
            try:
                from anchorlog.facts.relations import SCHEMA

                db_tables = {
                    rel: [(c, {"symbol": "TEXT", "number": "INTEGER"}.get(t, "")) for c, t in cols]
                    for rel, cols in SCHEMA.items()
                }
            except ImportError:
                db_tables = {}
            self._schema_only = True
        else:
            self._schema_only = False
        self.db_tables = db_tables
        idb = set(p.idb)
        self.refs: dict[str, TableRef] = {}
        self.columns: dict[str, list[str]] = {}
        self.sources: dict[str, str] = {}  # rel -> "db" | "extra" | "idb" | "empty"
        known_types: dict[str, list[str | None]] = {}
        first_use: dict[str, object] = {}
        for r in p.ast.rules:
            for atom, _ in _rule_atoms(p, r):
                first_use.setdefault(atom.rel, atom.place)
        for rel, rows in self.extra.items():
            if rel not in p.arity:
                continue
            n = p.arity[rel]
            if any(k != n for k in set(map(len, rows))):  # (the lengths collected in C: input relations are large)
                row = next(r for r in rows if len(r) != n)
                raise AnchorlogError(f"extra relation {rel!r}: row {row!r} has {len(row)} values, the program uses {n}")
        for rel, n in p.arity.items():
            decl = p.ast.decls.get(rel)
            if decl is not None:
                cols = [c for c, _ in decl.columns]
            elif rel in db_tables:
                cols = [c for c, _ in db_tables[rel]]
            else:
                cols = p.columns(rel) or [f"c{i}" for i in range(n)]
            if rel in db_tables and len(db_tables[rel]) != n:
                place = first_use.get(rel, decl.place if decl else None)
                raise rule_error(
                    "arity_mismatch",
                    f"arity mismatch: table {rel!r} of the fact database has {len(db_tables[rel])} columns "
                    f"({', '.join(c for c, _ in db_tables[rel])}), the program uses {n}",
                    place,
                )
            self.columns[rel] = cols
            store = cols if cols else [UNIT_COLUMN]
            if rel in self.extra:
                self.sources[rel] = "extra"
                ts: list[str | None] = [None] * n
                missing = n
                for row in self.extra[rel]:
                    if not missing:
                        break  # every column typed: the rest of a large input is not looked at
                    for k, v in enumerate(row):
                        if ts[k] is None:
                            ts[k] = value_type(v)
                            if ts[k] is not None:
                                missing -= 1
                known_types[rel] = ts
            elif rel in idb:
                self.sources[rel] = "idb"
            elif rel in db_tables:
                self.sources[rel] = "db"
                known_types[rel] = [sqlite_decl_type(t) for _, t in db_tables[rel]]
                if self.engine == "duckdb" and not self._schema_only:
                    known_types[rel] = [
                        t or self._stored_type(rel, c) for t, (c, _) in zip(known_types[rel], db_tables[rel])
                    ]
            elif decl is not None:
                self.sources[rel] = "empty"
            else:
                raise rule_error(
                    "unknown_relation",
                    f"unknown relation {rel!r}: not declared, not derived by any rule and not a table of the fact database",
                    first_use.get(rel),
                )
            if self.sources[rel] == "db" and self.engine == "sqlite":
                self.refs[rel] = TableRef(f"main.{quote(rel)}", store, n)
            else:
                self.refs[rel] = TableRef(self.work_name(rel), store, n)
        if rel_db_seed := [r for r in idb if r in db_tables]:
            self.db_seeded = set(rel_db_seed)
        else:
            self.db_seeded = set()
        # inferred types depend only on the program and the types known up front: computed once per such shape
        memo = _program_memo(p, "types")
        key = tuple(sorted((rel, tuple(t)) for rel, t in known_types.items()))
        types = memo.get(key)
        if types is None:
            types = memo[key] = infer_types(p.ast, known_types, p.arity)
        self.types = types

    def _stored_type(self, rel: str, col: str) -> str | None:
        """Type of an untyped SQLite column from the values it holds (DuckDB needs one type per column)."""
        kinds = {r[0] for r in self.conn.execute(f"SELECT DISTINCT typeof({quote(col)}) FROM main.{quote(rel)}")}
        kinds.discard("null")
        if kinds == {"integer"}:
            return "number"
        if kinds and kinds <= {"integer", "real"}:
            return "float"
        return "symbol" if kinds else None

    def column_types(self, rel: str) -> list[str]:
        types = self.types.get(rel) or []
        m = TYPE_SQLITE if self.engine == "sqlite" else TYPE_DUCKDB
        if not self.columns[rel]:
            return ["INTEGER"]
        decl = self.p.ast.decls.get(rel)
        if self.engine == "sqlite" and decl is None:
            return [""] * len(types)  # undeclared: no affinity, values keep their own type
        return [m[t] for t in types]

    # -- execution helpers ---------------------------------------------------------------------------------
    def exe(self, sql: str, params: Any = None) -> int:
        """Run a statement that changes something; returns the rows it wrote (when the backend says)."""
        if self.dry_run:
            self.statements.append(sql)
            return 0
        cur = self._run(sql, params)
        if self.duck is not None:
            if sql.startswith("INSERT"):
                row = cur.fetchone()
                return int(row[0]) if row else 0
            return 0
        return cur.rowcount

    def _run(self, sql: str, params: Any = None, fetch: bool = False) -> Any:
        """The one place a generated statement runs: recorded in `statements`, timed into `profile` when that is
        set, a backend error reported with the SQL. Returns the rows when `fetch`, else the cursor."""
        self.statements.append(sql)
        t0 = time.perf_counter() if self.profile is not None else 0.0
        try:
            db = self.duck if self.duck is not None else self.conn
            cur = db.execute(sql, params) if params is not None else db.execute(sql)
            return fetch_all(cur) if fetch else cur
        except AnchorlogError:
            raise
        except Exception as e:  # noqa: BLE001 - a backend error (SQLite, DuckDB) is reported with the SQL
            raise self._sql_failure(e, sql) from None
        finally:
            if self.profile is not None:
                self.profile.append((time.perf_counter() - t0, sql))

    def _sql_failure(self, e: BaseException, sql: str) -> AnchorlogError:
        """The error reported when the backend rejects generated SQL (the statement's start included)."""
        return AnchorlogError(f"{self.engine} failed on generated SQL: {e}; SQL: {sql[:300]}")

    def create_table(self, name: str, rel: str) -> None:
        cols = self.refs[rel].columns
        types = self.column_types(rel)
        defs = ", ".join(f"{quote(c)} {t}".rstrip() for c, t in zip(cols, types))
        kw = "CREATE TEMP TABLE" if self.engine == "sqlite" else "CREATE TABLE"
        bare = name.split(".", 1)[1] if name.startswith("temp.") else name
        self.exe(f"{kw} {bare} ({defs})")
        self.created.append(name)

    def insert_rows(self, name: str, rel: str, rows: list[tuple]) -> None:
        if not rows:
            return
        if not self.columns[rel]:
            rows = [(1,)]
        if self.duck is not None:
            self._duck_load(name, rel, rows)
            return
        marks = ", ".join("?" for _ in self.refs[rel].columns)
        self.statements.append(f"INSERT INTO {name} VALUES ({marks})  -- {len(rows)} rows")
        if not self.dry_run:
            self.conn.executemany(f"INSERT INTO {name} VALUES ({marks})", rows)

    def _duck_load(self, name: str, rel: str, rows: list[tuple]) -> None:
        import pandas

        cols = self.refs[rel].columns
        types = self.column_types(rel)
        data = {}
        for k, c in enumerate(cols):
            vals = [r[k] for r in rows]
            if types[k] == "VARCHAR":
                vals = [None if v is None else str(v) for v in vals]
            data[c] = pandas.Series(vals, dtype=object)
        frame = pandas.DataFrame(data)
        view = f"_al_load_{self.run_id}"
        self.statements.append(f"INSERT INTO {name} SELECT * FROM <{len(rows)} rows>")
        if self.dry_run:
            return
        self.duck.register(view, frame)
        try:
            casts = ", ".join(f"CAST({quote(c)} AS {t})" for c, t in zip(cols, types))
            self.duck.execute(f"INSERT INTO {name} SELECT {casts} FROM {view}")
        except Exception as e:  # noqa: BLE001
            raise AnchorlogError(f"duckdb: cannot load relation {rel!r}: {e}") from None
        finally:
            self.duck.unregister(view)

    def create_index(self, rel: str, table: str, cols: tuple[str, ...]) -> None:
        # an existing index whose leading columns are these serves the lookup as well (fewer indexes to update)
        if any(t == table and c[: len(cols)] == cols for t, c in self._indexed):
            return
        all_cols = tuple(self.refs[rel].columns) if rel in self.refs else ()
        if (
            self.engine == "sqlite"
            and not table.startswith("main.")
            and 0 < len(all_cols) <= _COVERING_MAX_COLUMNS
            and set(cols) <= set(all_cols)
        ):
            # a narrow work table gets a covering index (the looked-up columns, then the others): a lookup reads
            # the other columns from the index, not from the table, and one index serves every lookup by a prefix
            # of it (GE's node order: by graph, and by graph and node, one index)
            cols = cols + tuple(c for c in all_cols if c not in cols)
        key = (table, cols)
        self._indexed.add(key)
        if self.engine != "sqlite":
            return  # DuckDB joins by hashing; ART indexes would only slow inserts down
        bare = table.split(".", 1)[1] if table.startswith("temp.") else table
        iname = quote(f"{bare.strip(chr(34))}_i{len(self._indexed)}")
        self.exe(f"CREATE INDEX temp.{iname} ON {bare} ({', '.join(quote(c) for c in cols)})")

    # -- setup ---------------------------------------------------------------------------------------------
    def setup(self) -> None:
        self._indexed: set = set()
        self._sizes: dict[str, int] = {}
        self._nonempty: set[str] = set()
        self._colmap: dict[str, list[str]] | None = None
        self._deferred: set[str] = set()  # relations whose (empty) table is not created yet
        self._sets: set[str] = set()  # relations whose table is known to hold no tuple twice
        self._set_memo: dict[str, bool] = {}  # see _stored_set
        self._affinities: dict[str, list[str]] = {}  # see _column_affinity
        self._idb = set(self.p.idb)
        if self.engine == "duckdb" and not self.dry_run:
            try:
                import duckdb
            except ImportError:
                raise AnchorlogError(
                    "engine 'duckdb' needs the duckdb package (pip install 'anchorlog[duckdb]')"
                ) from None
            self.duck = duckdb.connect(":memory:")
        if self.engine == "sqlite" and not self.dry_run:
            _register_functions(self.conn)
            self._was_in_tx = self.conn.in_transaction
            # Work tables live in the temp schema: in memory (temp_store = MEMORY, also for SQLite's own
            # ephemeral tables) with a cache big enough for them (SQLite's default temp cache is 2 MB, which makes
            # large fixpoints spill and crawl). Changing temp_store deletes every temp table of the connection, so
            # it is switched only when the caller has none, and left at MEMORY afterwards (no reset per run).
            self._temp_free = self.conn.execute("SELECT 1 FROM temp.sqlite_master LIMIT 1").fetchone() is None
            if self._temp_free and not self._was_in_tx and self.conn.execute("PRAGMA temp_store").fetchone()[0] != 2:
                self.conn.execute("PRAGMA temp_store = 2")
            self.conn.execute("PRAGMA temp.cache_size = -262144")
        # derived relations without seed rows get their table when a rule can first write or read them: a
        # small program run repeatedly (a pass re-deriving after each edit) often leaves most of them empty
        fact_heads = {
            r.head.rel for r in self.p.ast.rules if r.is_fact and all(isinstance(a, Const) for a in r.head.args)
        }
        lazy = self.engine == "sqlite" and not self.dry_run
        for rel, src in self.sources.items():
            if self.engine == "sqlite" and src == "db":
                continue
            empty_extra = src == "extra" and not self.extra[rel]
            if (
                lazy
                and (src in ("idb", "empty") or empty_extra)
                and rel not in self.db_seeded
                and rel not in fact_heads
            ):
                self._deferred.add(rel)
                continue
            self.create_table(self.refs[rel].sql, rel)
            if src == "extra":
                self.insert_rows(self.refs[rel].sql, rel, list(dict.fromkeys(self.extra[rel])))  # sets
            if src == "db" or rel in self.db_seeded:
                self.copy_from_db(rel)
        # facts of the program go straight into their tables
        facts: dict[str, list[tuple]] = {}
        for r in self.p.ast.rules:
            if r.is_fact and all(isinstance(a, Const) for a in r.head.args):
                facts.setdefault(r.head.rel, []).append(tuple(a.value for a in r.head.args))  # type: ignore[attr-defined]
        for rel, rows in facts.items():
            existing = self.sources[rel] == "extra" or rel in self.db_seeded
            self._insert_dedup_rows(rel, list(dict.fromkeys(rows)), existing)
        self.fact_rules = {
            id(r) for r in self.p.ast.rules if r.is_fact and all(isinstance(a, Const) for a in r.head.args)
        }
        self._fact_heads = {r.head.rel for r in self.p.ast.rules if id(r) in self.fact_rules}
        self.compiler = SQLCompiler(self.engine, self.refs)
        # compiled SQL and index needs depend on the rules and where each relation lives (table names, columns):
        # kept per program for this layout, so a program run again and again compiles each statement once
        layout = (self.engine, tuple((rel, ref.sql, tuple(ref.columns)) for rel, ref in self.refs.items()))
        self._memo: dict = _program_memo(self.p, "sql").setdefault(layout, {})

    def select_sql(
        self,
        r: Any,
        cols: list[str],
        overrides: dict[int, str] | None = None,
        order: list[int] | None = None,
        forced: bool = False,
        distinct: bool = True,
    ) -> str:
        """:meth:`SQLCompiler.select`, compiled once per rule, variant and table layout."""
        key = (
            "sel",
            id(r),
            tuple(cols),
            tuple(sorted((overrides or {}).items())),
            tuple(order or ()),
            forced,
            distinct,
        )
        sql = self._memo.get(key)
        if sql is None:
            sql = self._memo[key] = self.compiler.select(r, cols, overrides, order, forced=forced, distinct=distinct)
        return sql

    def needs_bound(self, r: Any, order: list[int]) -> list[tuple[str, tuple[str, ...]]]:
        key = ("bound", id(r), tuple(order))
        need = self._memo.get(key)
        if need is None:
            need = self._memo[key] = bound_columns(r, order, self.columns_for_index())
        return need

    def needs_probe(self, r: Any) -> list[tuple[str, tuple[str, ...]]]:
        key = ("probe", id(r))
        need = self._memo.get(key)
        if need is None:
            need = self._memo[key] = probe_columns(r, self.columns_for_index())
        return need

    def _insert_dedup_rows(self, rel: str, rows: list[tuple], existing: bool) -> None:
        target = self.refs[rel].sql
        if not existing:
            self.insert_rows(target, rel, rows)
            return
        stage = self.work_name(rel, "s")
        self.create_table(stage, rel)
        self.insert_rows(stage, rel, rows)
        self.exe(f"INSERT INTO {target} {self.not_known(f'SELECT DISTINCT * FROM {stage}', rel, target)}")

    def copy_from_db(self, rel: str) -> None:
        target = self.refs[rel].sql
        if self.engine == "sqlite":
            self.exe(f"INSERT INTO {target} SELECT * FROM main.{quote(rel)}")
            return
        if self.dry_run:
            self.statements.append(f"INSERT INTO {target} <rows of sqlite table {rel}>")
            return
        rows = self.conn.execute(f"SELECT * FROM main.{quote(rel)}").fetchall()
        self.insert_rows(target, rel, rows)

    def not_known(self, select: str, rel: str, target: str) -> str:
        """Wrap a SELECT so it only yields tuples not yet in `target`."""
        cols = self.refs[rel].columns
        cond = " AND ".join(f"o.{quote(c)} {self.is_same} q.{quote(c)}" for c in cols)
        return f"SELECT * FROM ({select}) AS q WHERE NOT EXISTS (SELECT 1 FROM {target} AS o WHERE {cond})"

    def cleanup(self) -> None:
        if self.dry_run:
            return
        if self.duck is not None:
            self.duck.close()
            self.duck = None
            return
        if not getattr(self, "_was_in_tx", True) and self.conn.in_transaction:
            self.conn.commit()
        if self.created and getattr(self, "_temp_free", False) and not self.conn.in_transaction:
            # the temp schema holds only our work tables: one reset deletes them all (not a DROP per table)
            try:
                self.conn.execute("PRAGMA temp_store = 1")
                self.conn.execute("PRAGMA temp_store = 2")
                return
            except sqlite3.Error:
                pass
        for name in reversed(self.created):
            try:
                self.conn.execute(f"DROP TABLE IF EXISTS {name}")
            except sqlite3.Error:
                pass
        if not getattr(self, "_was_in_tx", True) and self.conn.in_transaction:
            self.conn.commit()

    # -- indexes for iterated joins ------------------------------------------------------------------------
    def _small(self, rel: str) -> bool:
        """A finished relation (earlier stratum or fact table) so small that scanning it per lookup costs less
        than creating an index (each CREATE INDEX is a schema change and a statement of its own)."""
        if self.engine != "sqlite" or self.dry_run or rel in getattr(self, "_current", ()):
            return False
        if rel in self._deferred:
            return True
        return self.relation_size(rel) < _SMALL_RELATION

    def ensure_lookup_indexes(self, needs: list[tuple[str, tuple[str, ...]]]) -> None:
        for rel, cols in needs:
            ref = self.refs[rel]
            if ref.sql.startswith("main."):
                # a fact table is only read: without an index of its own that serves the lookup, SQLite's automatic
                # index for the statement does (a TEMP index cannot be made on a main table). Its size is read all
                # the same, as before (join orders break ties by the sizes known).
                if not self._db_has_index(rel, cols):
                    self._small(rel)
                continue
            if self._small(rel):
                continue
            self.create_index(rel, ref.sql, cols)

    def _db_has_index(self, rel: str, cols: tuple[str, ...]) -> bool:
        if self.dry_run and self._schema_only:
            return True
        if not hasattr(self, "_db_index_cache"):
            self._db_index_cache: dict[str, list[list[str]]] = {}
        if rel not in self._db_index_cache:
            idx = []
            try:
                for row in self.conn.execute(f"PRAGMA main.index_list({quote(rel)})").fetchall():
                    info = self.conn.execute(f"PRAGMA main.index_info({quote(row[1])})").fetchall()
                    idx.append([r[2] for r in sorted(info)])
            except sqlite3.Error:
                pass
            self._db_index_cache[rel] = idx
        return any(ix and ix[0] in cols for ix in self._db_index_cache[rel])

    # -- strata --------------------------------------------------------------------------------------------
    def rule_rules(self, s: Stratum) -> list:
        return [r for r in s.rules if id(r) not in self.fact_rules]

    def eval_stratum(self, s: Stratum) -> None:
        members = set(s.relations)
        self._current = members
        rules = [
            (r, rec)
            for r, rec in zip(s.rules, s.recursive_atoms)
            if id(r) not in self.fact_rules and self._can_fire(r, members)
        ]
        if not rules:
            return  # the relations stay empty (and, if deferred, without a table)
        if self._deferred:
            for rel in s.relations:
                # a result read by no other stratum may go straight to Python, without a table
                if rel not in getattr(self, "_terminal", ()):
                    self.materialize(rel)
            for r, _ in rules:
                for atom, _neg in _rule_atoms(self.p, r):
                    self.materialize(atom.rel)
        # negations and aggregates are correlated subqueries probing earlier relations (derived ones are
        # plain work tables): index the probed columns, else each probe is a scan and the stratum quadratic
        for r, _ in rules:
            self.ensure_lookup_indexes(self.needs_probe(r))
        self._inserted: dict[str, int] = {}
        if not s.recursive:
            self.eval_nonrecursive(s.relations[0], [r for r, _ in rules])
        elif s.linear and self.recursive_cte:
            self.eval_cte(s, rules)
        else:
            self.eval_seminaive(s, rules)
        for rel in s.relations:
            self._sizes.pop(rel, None)
            self._nonempty.discard(rel)
            # a relation without seed rows written only by counted INSERTs: its size is known without a query
            n = self._inserted.get(rel)
            if n is not None and self.engine == "sqlite" and not self.dry_run and not self._seeded(rel):
                self._sizes[rel] = n

    def _union_insert(self, rel: str, selects: list[str], dedup: bool) -> None:
        self.materialize(rel)
        target = self.refs[rel].sql
        for k in range(0, len(selects), _COMPOUND_CHUNK):
            chunk = selects[k : k + _COMPOUND_CHUNK]
            union = " UNION ".join(chunk) if len(chunk) > 1 else chunk[0]
            if dedup or k > 0:
                n = self.exe(f"INSERT INTO {target} {self.not_known(union, rel, target)}")
            else:
                n = self.exe(f"INSERT INTO {target} {union}")
            self._inserted[rel] = self._inserted.get(rel, 0) + n

    def _seeded(self, rel: str) -> bool:
        return rel in self._fact_heads or self.sources[rel] == "extra" or rel in self.db_seeded

    def _can_fire(self, r: Any, stratum: set[str]) -> bool:
        """False when a positive body atom reads a relation of an earlier stratum (or the database) that is
        empty: the rule derives nothing, so its statement, join-order probes and indexes are skipped."""
        if self.engine != "sqlite" or self.dry_run:
            return True
        for lit in r.body:
            if isinstance(lit, Atom) and lit.rel not in stratum and self._is_empty(lit.rel):
                return False
        return True

    def materialize(self, rel: str) -> None:
        """Create the table of a relation whose creation was deferred (it is empty until a rule writes it)."""
        if rel in self._deferred:
            self._deferred.discard(rel)
            self.create_table(self.refs[rel].sql, rel)

    def _is_empty(self, rel: str) -> bool:
        if rel in self._deferred:
            return True
        size = self._sizes.get(rel)
        if size is not None:
            return size == 0
        if rel in self._nonempty:
            return False
        if self.conn.execute(f"SELECT 1 FROM {self.refs[rel].sql} LIMIT 1").fetchone() is None:
            self._sizes[rel] = 0
            return True
        self._nonempty.add(rel)
        return False

    def eval_nonrecursive(self, rel: str, rules: list) -> None:
        cols = self.refs[rel].columns
        selects = [self.planned_select(r, cols) for r in rules]
        if rel in getattr(self, "_terminal", ()) and len(selects) <= _COMPOUND_CHUNK:
            self._select_direct(rel, " UNION ".join(selects))
            return
        self._union_insert(rel, selects, self._seeded(rel))

    # -- tables that hold no tuple twice (SQLite) -----------------------------------------------------------
    # A result read from a table known to hold each tuple once needs no de-duplication in Python. (Rules keep
    # their DISTINCT even where a proof shows it removes nothing: without it SQLite may plan the query another way,
    # e.g. scan a table instead of its unique index, and return the rows in another order; callers read rule
    # results in order. Session 6 tried it: commits 669ebd9, 5ee8b5e.)
    def _column_affinity(self, rel: str, k: int) -> str:
        affs = self._affinities.get(rel)
        if affs is None:
            if not self.columns[rel]:
                affs = ["INTEGER"]
            elif self.refs[rel].sql.startswith("main."):
                affs = [_affinity(t) for _, t in self.db_tables[rel]]
            else:
                affs = self.column_types(rel)
            self._affinities[rel] = affs
        return affs[k]

    def _var_affinities(self, r: Any) -> dict[str, set[str]]:
        """Per variable: the affinities of the positive-atom columns it appears in."""
        out: dict[str, set[str]] = {}
        for lit in r.body:
            if isinstance(lit, Atom):
                for k, t in enumerate(lit.args):
                    if isinstance(t, Var):
                        out.setdefault(t.name, set()).add(self._column_affinity(lit.rel, k))
        return out

    def _affinity_safe(self, rel: str) -> bool:
        """True when no two distinct tuples `rel`'s rules derive can become equal in its table (1 and '1' in a number
        column): every head value comes from columns of one affinity of the same kind as the head column's, a
        constant or an expression that affinity leaves unchanged (a column without affinity converts nothing)."""
        rules = self.p.__dict__.setdefault("_al_rules_of", {})
        if not rules:
            for r in self.p.ast.rules:
                rules.setdefault(r.head.rel, []).append(r)
        targets = self.column_types(rel) if self.columns[rel] else []
        for r in rules.get(rel, ()):
            values: dict[str, str] = {}
            for name, affs in self._var_affinities(r).items():
                values[name] = _AFFINITY_VALUES.get(next(iter(affs)), "other") if len(affs) == 1 else "other"
            for lit in r.body:  # variables bound by an assignment X = expr
                if isinstance(lit, Compare) and lit.op == "=":
                    for x, e in ((lit.left, lit.right), (lit.right, lit.left)):
                        if isinstance(x, Var) and x.name not in values:
                            values[x.name] = _term_values(e, values)
            for t, arg in zip(targets, r.head.args):
                kind = _term_values(arg, values)
                if t and kind != "any" and kind != _AFFINITY_VALUES.get(t):
                    return False
        return True

    def _extra_is_set(self, rel: str) -> bool:
        """Input rows (de-duplicated in Python) stay distinct in the table: each value already has its column's
        storage class (no affinity conversion) and no float is NaN (stored as NULL)."""
        rows = self.extra[rel]
        if not rows or not self.columns[rel]:
            return True
        for k, t in enumerate(self.column_types(rel)):
            kinds = set(map(type, map(itemgetter(k), rows)))
            cls = _AFFINITY_CLASS.get(t)
            if cls is not None and not kinds <= {cls, type(None)}:
                return False
            if float in kinds and any(v != v for v in map(itemgetter(k), rows) if type(v) is float):
                return False
        return True

    def _stored_set(self, rel: str) -> bool:
        """True when the table of `rel` (a finished relation) holds no tuple twice: derived by the rules (every
        way of writing a derived table de-duplicates) with values its column affinities leave as they are, or
        input rows that stay distinct. Fact-database tables and relations seeded from them or with program facts
        may repeat a tuple."""
        if rel in self._deferred:
            return True  # no table yet: empty
        known = self._set_memo.get(rel)
        if known is None:
            src = self.sources[rel]
            if src == "db" or rel in self.db_seeded or rel in self._fact_heads:
                known = False
            elif src == "extra" and not self._extra_is_set(rel):
                known = False
            else:
                known = rel not in self._idb or self._affinity_safe(rel)
            self._set_memo[rel] = known
        return known

    # -- join order from relation sizes (SQLite) -----------------------------------------------------------
    def relation_size(self, rel: str) -> int:
        """Row count of a relation's current table (cached until the relation's stratum writes it)."""
        if rel not in self._sizes:
            self._sizes[rel] = self.conn.execute(f"SELECT count(*) FROM {self.refs[rel].sql}").fetchone()[0]
        return self._sizes[rel]

    def planned_select(self, r: Any, cols: list[str]) -> str:
        """SELECT for a rule evaluated once (not per delta). On SQLite the join order is forced: the atom with
        the fewest expected rows first (constants divide its size by ten each), then the greedy order of
        :func:`join_order`, every later atom an index lookup. SQLite's own planner has no statistics for the
        work tables and, guessing, may scan a large table per row of another: quadratic on big graphs."""
        atoms = [i for i, lit in enumerate(r.body) if isinstance(lit, Atom)]
        if self.engine != "sqlite" or self.dry_run or len(atoms) < 2:
            return self.select_sql(r, cols)

        def expected_rows(i: int) -> float:
            atom = r.body[i]
            consts = sum(1 for a in atom.args if isinstance(a, Const))
            return self.relation_size(atom.rel) / (10**consts)

        first = min(atoms, key=lambda i: (expected_rows(i), atoms.index(i)))
        order = self.order(r, first)
        self.ensure_lookup_indexes(self.needs_bound(r, order))
        return self.select_sql(r, cols, None, order, forced=True)

    def eval_cte(self, s: Stratum, rules: list) -> None:
        if self.engine == "sqlite" and not self.dry_run and self._linear_rounds(s, rules):
            return
        rel = s.relations[0]
        target = self.refs[rel].sql
        cols = self.refs[rel].columns
        cte = quote(f"_al{self._tag}_rec_{rel}")
        base = [self.planned_select(r, cols) for r, rec in rules if not rec]
        recursive = []
        for r, rec in rules:
            if rec:
                order = self.order(r, rec[0])
                self.ensure_lookup_indexes(self.needs_bound(r, order))
                recursive.append(self.select_sql(r, cols, {rec[0]: cte}, order, forced=True, distinct=False))
        seeded = self._seeded(rel)
        if seeded:
            base.insert(0, f"SELECT * FROM {target}")
        if not base:
            return  # nothing to start from: the relation stays empty
        if self.engine == "duckdb":
            # DuckDB allows one recursive term: the recursive rules go into one derived table
            rec_sql = " UNION ".join(recursive)
            body = f"SELECT * FROM ({' UNION '.join(base)}) UNION SELECT * FROM ({rec_sql})"
        else:
            body = " UNION ".join(base + recursive)
        col_list = ", ".join(quote(c) for c in cols)
        select = f"SELECT * FROM {cte}"
        if seeded:
            select = self.not_known(select, rel, target)
        elif rel in getattr(self, "_terminal", ()):
            self._select_direct(rel, f"WITH RECURSIVE {cte}({col_list}) AS ({body}) {select}")
            return
        self.materialize(rel)
        self.exe(f"INSERT INTO {target} WITH RECURSIVE {cte}({col_list}) AS ({body}) {select}")

    # Linear recursion on SQLite, set at a time. The relation's table gets a unique index over all its columns and
    # its rowids number the tuples in the order they were found, so the delta of a round is a rowid range and
    # one INSERT OR IGNORE per recursive rule and round both joins the delta and drops what is known already.
    # Per derived tuple this is an index probe, a unique-index insert and an append: about a third cheaper than
    # WITH RECURSIVE, whose UNION keeps a separate distinct-set and a queue (insert + delete) per tuple. Rounds
    # cost a statement each, so a recursion that stays thin (a long chain: one tuple per round) hands the rest
    # to one WITH RECURSIVE statement started from the current delta. Small inputs keep the single statement.
    linear_rounds_min_rows = 1024  # rows of the largest relation the recursive rules join with
    linear_thin_rounds = 8  # consecutive rounds adding fewer than linear_thin_delta tuples before the switch
    linear_thin_delta = 32

    def _linear_rounds(self, s: Stratum, rules: list) -> bool:
        """Evaluate a linear stratum in rounds (see above); False when the stratum is left to :meth:`eval_cte`."""
        rel = s.relations[0]
        ref = self.refs[rel]
        recursive = [(r, rec[0]) for r, rec in rules if rec]
        if not recursive or ref.arity == 0 or rel in self.db_seeded:  # copied fact rows may repeat
            return False
        if not all(self.column_types(rel)):
            # an undeclared relation has untyped columns: the single statement keeps its exact semantics
            return False
        joined = [
            self.relation_size(lit.rel)
            for r, pos in recursive
            for i, lit in enumerate(r.body)
            if isinstance(lit, Atom) and i != pos and lit.rel != rel
        ]
        if max(joined, default=0) < self.linear_rounds_min_rows:
            return False
        self.materialize(rel)
        target, cols = ref.sql, ref.columns
        qcols = [quote(c) for c in cols]
        bare = target.split(".", 1)[1]
        keep_first = (
            f"DELETE FROM {target} WHERE rowid NOT IN (SELECT min(rowid) FROM {target} GROUP BY {', '.join(qcols)})"
        )
        if self._seeded(rel):
            # seed rows distinct in Python can be equal after the column's affinity (1 and '1' in a number column)
            self.exe(keep_first)
        self.exe(f"CREATE UNIQUE INDEX temp.{quote(bare.strip(chr(34)) + '_u')} ON {bare} ({', '.join(qcols)})")
        self._indexed.add((target, tuple(cols)))
        # a tuple with a NULL is never a unique-index conflict: such tuples are checked against the table (IS)
        fresh = (
            "((" + " AND ".join(f"s.{c} IS NOT NULL" for c in qcols) + f") OR NOT EXISTS (SELECT 1 FROM {target} AS o "
            "WHERE " + " AND ".join(f"o.{c} IS s.{c}" for c in qcols) + "))"
        )
        base = [self.planned_select(r, cols) for r, rec in rules if not rec]
        has_rows = self._seeded(rel)
        for k in range(0, len(base), _COMPOUND_CHUNK):
            union = " UNION ".join(base[k : k + _COMPOUND_CHUNK])
            where = f" WHERE {fresh}" if has_rows else ""
            self.exe(f"INSERT OR IGNORE INTO {target} SELECT * FROM ({union}) AS s{where}")
            has_rows = True
        hi = self.conn.execute(f"SELECT max(rowid) FROM {target}").fetchone()[0] or 0
        if not hi:
            return True  # nothing to start from
        # the planner has no statistics for the work table: told nothing, it expects a big delta and builds a bloom
        # filter over the (analyzed) fact table joined next, a full scan per round
        delta = f"(SELECT * FROM {target} WHERE likelihood(rowid > ?1, 0.000001) AND rowid <= ?2)"
        steps = []
        for r, pos in recursive:
            order = self.order(r, pos)
            self.ensure_lookup_indexes(self.needs_bound(r, order))
            sel = self.select_sql(r, cols, {pos: delta}, order, forced=True, distinct=False)
            steps.append(f"INSERT OR IGNORE INTO {target} SELECT * FROM ({sel}) AS s WHERE {fresh}")
        lo, thin, rounds = 0, 0, 0
        while hi > lo:
            if thin >= self.linear_thin_rounds:
                self._linear_finish(rel, recursive, lo, hi, fresh)
                break
            rounds += 1
            top = hi
            for sql in steps:
                cur = self._run(sql, (lo, hi))
                if cur.rowcount > 0:
                    top = max(top, cur.lastrowid)  # rowids grow: the last insert is the newest tuple
            thin = thin + 1 if top - hi < self.linear_thin_delta else 0
            lo, hi = hi, top
        self.rounds = getattr(self, "rounds", 0) + rounds
        if rel not in self._direct:
            # one statement may derive a tuple with a NULL twice (no index conflict): keep one of each. Then the
            # table is a set and a result read from it needs no de-duplication.
            has_null = " OR ".join(f"{c} IS NULL" for c in qcols)
            if self.conn.execute(f"SELECT 1 FROM {target} WHERE {has_null} LIMIT 1").fetchone() is not None:
                self.exe(keep_first)
            self._sets.add(rel)
        return True

    def _linear_finish(self, rel: str, recursive: list, lo: int, hi: int, fresh: str) -> None:
        """The rest of a thin linear recursion as one WITH RECURSIVE from the delta (rowids lo < r <= hi). Tuples
        already in the table are not walked again when the table is large (their successors are known)."""
        ref = self.refs[rel]
        target, cols = ref.sql, ref.columns
        qcols = [quote(c) for c in cols]
        cte = quote(f"_al_rec_{rel}")

        def unknown(exprs: list[str]) -> str:
            cond = " AND ".join(f"o.{c} = {e}" for c, e in zip(qcols, exprs))
            return f"NOT EXISTS (SELECT 1 FROM {target} AS o WHERE {cond})"

        prune = unknown if hi > 4 * self.linear_rounds_min_rows else None
        parts = [
            f"SELECT {', '.join(qcols)} FROM {target} WHERE likelihood(rowid > {int(lo)}, 0.000001) AND rowid <= {int(hi)}"
        ]
        for r, pos in recursive:
            order = self.order(r, pos)
            parts.append(
                self.compiler.select(r, cols, {pos: cte}, order, forced=True, distinct=False, head_filter=prune)
            )
        with_sql = f"WITH RECURSIVE {cte}({', '.join(qcols)}) AS ({' UNION '.join(parts)})"
        if rel not in self._terminal:
            self.exe(f"INSERT OR IGNORE INTO {target} {with_sql} SELECT * FROM {cte} AS s WHERE {fresh}")
            return
        # a result relation: the new tuples go straight to the result with the table's (no second insert)
        rows = self._run(f"{with_sql} SELECT * FROM {cte}", fetch=True)
        if not self._affinity_ok(rel, rows):
            self._insert_dedup_rows(rel, rows, existing=True)
            return
        self._direct[rel] = list(dict.fromkeys(self.conn.execute(f"SELECT * FROM {target}").fetchall() + rows))

    def _affinity_ok(self, rel: str, rows: list[tuple]) -> bool:
        """False when a value has another storage class than its declared column: the column's affinity would have
        converted it on INSERT (and equal tuples merged after that), so such rows must go through the table."""
        if not rows:
            return True
        for k, t in enumerate(self.column_types(rel)):
            cls = _AFFINITY_CLASS.get(t)
            if cls is not None and not set(map(type, map(itemgetter(k), rows))) <= {cls, type(None)}:
                return False
        return True

    def columns_for_index(self) -> dict[str, list[str]]:
        if getattr(self, "_colmap", None) is None:
            self._colmap = {rel: ref.columns for rel, ref in self.refs.items() if ref.arity > 0}
        return self._colmap

    def order(self, r: Any, first: int) -> list[int]:
        """Join order of rule `r` starting at atom `first` (see :func:`join_order`): column types and the
        row counts known so far break ties."""
        return join_order(r, first, self.types, self._sizes)

    def eval_seminaive(self, s: Stratum, rules: list) -> None:
        if self.engine == "sqlite":
            self._seminaive_sqlite(s, rules)
        else:
            self._seminaive_bulk(s, rules)

    def _variants(self, rules: list, delta: dict[str, str]) -> dict[str, list[str]]:
        """Per head relation: each recursive rule once per recursive atom, that atom reading `delta`."""
        variants: dict[str, list[str]] = {}
        for r, rec in rules:
            for pos in rec:
                order = self.order(r, pos)
                self.ensure_lookup_indexes(self.needs_bound(r, order))
                atom = r.body[pos]
                assert isinstance(atom, Atom)
                sql = self.select_sql(
                    r, self.refs[r.head.rel].columns, {pos: delta[atom.rel]}, order, forced=True, distinct=False
                )
                variants.setdefault(r.head.rel, []).append(sql)
        return variants

    def _initial_round(self, members: list[str], rules: list, delta: dict[str, str] | None = None) -> bool:
        """The non-recursive rules; then everything known so far is the first delta (when `delta` is given).
        Returns False when the stratum's relations are all empty after it (nothing to iterate from)."""
        for rel in members:
            base = [self.planned_select(r, self.refs[rel].columns) for r, rec in rules if not rec and r.head.rel == rel]
            if base:
                self._union_insert(rel, base, self._seeded(rel))
            if delta is not None:
                self.exe(f"INSERT INTO {delta[rel]} SELECT * FROM {self.refs[rel].sql}")
        if self.engine != "sqlite" or self.dry_run:
            return True
        return any(
            self.conn.execute(f"SELECT 1 FROM {self.refs[rel].sql} LIMIT 1").fetchone() is not None for rel in members
        )

    def _seminaive_sqlite(self, s: Stratum, rules: list) -> None:
        """Two work tables per relation alternate as delta and new. `new` has a unique index, so a derivation
        costs one probe of the full table (NOT EXISTS) and one INSERT OR IGNORE: no DISTINCT passes."""
        members = s.relations
        for rel in members:
            self.materialize(rel)
            if self._seeded(rel):  # the initial round's NOT EXISTS probes the seeded rows
                self.create_index(rel, self.refs[rel].sql, tuple(self.refs[rel].columns))
        if not self._initial_round(members, rules):
            return  # no tuple to start from: no work tables, indexes or rounds
        work = [{rel: self.work_name(rel, k) for rel in members} for k in ("a", "b")]
        for rel in members:
            cols = tuple(self.refs[rel].columns)
            self.create_index(rel, self.refs[rel].sql, cols)  # the NOT EXISTS probe
            for w in work:
                self.create_table(w[rel], rel)
                bare = w[rel].split(".", 1)[1]
                iname = quote(f"{bare.strip(chr(34))}_u")
                self.exe(f"CREATE UNIQUE INDEX temp.{iname} ON {bare} ({', '.join(quote(c) for c in cols)})")
        variants = [self._variants(rules, w) for w in work]
        for rel in members:
            self.exe(f"INSERT INTO {work[0][rel]} SELECT * FROM {self.refs[rel].sql}")
        loop_start = len(self.statements)
        rounds = 0
        cur = 0
        while True:
            rounds += 1
            delta, new = work[cur], work[1 - cur]
            added = 0
            for rel in members:
                for sql in variants[cur].get(rel, []):
                    added += self.exe(
                        f"INSERT OR IGNORE INTO {new[rel]} {self.not_known(sql, rel, self.refs[rel].sql)}"
                    )
            for rel in members:
                n = self.exe(f"INSERT INTO {self.refs[rel].sql} SELECT * FROM {new[rel]}")
                if rel in self._inserted:  # the size the later strata see counts every round, not the first alone
                    self._inserted[rel] += n
                self.exe(f"DELETE FROM {delta[rel]}")
            cur = 1 - cur
            if self.dry_run:
                self.statements.insert(
                    loop_start, "-- repeat, the two work tables swapping roles, until no new tuples:"
                )
                break
            if added == 0:
                break
        self.rounds = getattr(self, "rounds", 0) + rounds

    def _seminaive_bulk(self, s: Stratum, rules: list) -> None:
        """Set-at-a-time variant for DuckDB (hash joins, hash DISTINCT and anti-joins are cheap there)."""
        members = s.relations
        delta = {rel: self.work_name(rel, "d") for rel in members}
        new = {rel: self.work_name(rel, "n") for rel in members}
        for rel in members:
            self.create_table(delta[rel], rel)
            self.create_table(new[rel], rel)
        variants = self._variants(rules, delta)
        self._initial_round(members, rules, delta)
        loop_start = len(self.statements)
        rounds = 0
        while True:
            rounds += 1
            for rel in members:
                self.exe(f"DELETE FROM {new[rel]}")
            for rel in members:
                for sql in variants.get(rel, []):
                    self.exe(f"INSERT INTO {new[rel]} {sql}")
            added = 0
            for rel in members:
                self.exe(f"DELETE FROM {delta[rel]}")
                target = self.refs[rel].sql
                added += self.exe(
                    f"INSERT INTO {delta[rel]} {self.not_known(f'SELECT DISTINCT * FROM {new[rel]}', rel, target)}"
                )
                self.exe(f"INSERT INTO {target} SELECT * FROM {delta[rel]}")
            if self.dry_run:
                self.statements.insert(loop_start, "-- repeat until no new tuples:")
                break
            if added == 0:
                break
        self.rounds = getattr(self, "rounds", 0) + rounds

    # -- driver --------------------------------------------------------------------------------------------
    def run(self, wanted: list[str]) -> Result:
        active = self.engine == "sqlite" and not self._tag
        if active:
            _ACTIVE.add(id(self.conn))
        try:
            self.setup()
            strata = self.needed_strata(wanted)
            self._mark_terminal(strata, wanted)
            for s in strata:
                self.eval_stratum(s)
            rows = {rel: self.fetch(rel) for rel in wanted}
        except RuleError:
            raise
        finally:
            try:
                self.cleanup()
            finally:
                if active:
                    _ACTIVE.discard(id(self.conn))
        return Result({rel: self.columns[rel] for rel in wanted}, rows)

    def _mark_terminal(self, strata: list[Stratum], wanted: list[str]) -> None:
        """Wanted relations no other stratum reads: their tuples can go straight to the result (one SELECT, no
        INSERT into a work table and second read). SQLite only, never for relations with seed rows."""
        self._direct: dict[str, list[tuple]] = {}
        self._terminal: set[str] = set()
        if self.engine != "sqlite" or self.dry_run:
            return
        read: dict[str, set[int]] = {}
        for s in strata:
            for r in s.rules:
                for atom, _neg in _rule_atoms(self.p, r):
                    read.setdefault(atom.rel, set()).add(s.index)
        for s in strata:
            if len(s.relations) != 1:
                continue
            rel = s.relations[0]
            if rel in wanted and not (read.get(rel, set()) - {s.index}) and not self._seeded(rel):
                self._terminal.add(rel)

    def _select_direct(self, rel: str, sql: str) -> None:
        """Run a terminal relation's SELECT (distinct rows) and keep the rows as its result."""
        rows = self._run(sql, fetch=True)
        if not self._affinity_ok(rel, rows):  # store them as before and read back
            self.materialize(rel)
            self.insert_rows(self.refs[rel].sql, rel, rows)
            return
        self._direct[rel] = rows

    def needed_strata(self, wanted: list[str]) -> list[Stratum]:
        """The strata the wanted relations depend on (transitively); the others are not evaluated."""
        needed = set(wanted)
        keep: list[Stratum] = []
        for s in reversed(self.p.strata):
            if not needed.intersection(s.relations):
                continue
            keep.append(s)
            for r in s.rules:
                needed.update(atom.rel for atom, _ in _rule_atoms(self.p, r))
        return keep[::-1]

    def fetch(self, rel: str) -> list[tuple]:
        direct = getattr(self, "_direct", {}).get(rel)
        if direct is not None:
            if self.refs[rel].arity == 0:
                return [()] if direct else []
            return direct if not direct or type(direct[0]) is tuple else [tuple(r) for r in direct]
        if rel in getattr(self, "_deferred", ()):
            return []
        ref = self.refs[rel]
        if self.duck is not None:
            rows = fetch_all(self.duck.execute(f"SELECT DISTINCT * FROM {ref.sql}"))
        else:
            rows = fetch_all(self.conn.execute(f"SELECT * FROM {ref.sql}"))
            if rel not in self._sets and not (self.engine == "sqlite" and self._stored_set(rel)):
                # fact tables may repeat a tuple, and a column's affinity can make two derived tuples equal:
                # de-duplicate in Python (a dict keeps the first of equal tuples, as DISTINCT does, at a fraction
                # of SQLite's sorting cost)
                rows = list(dict.fromkeys(rows))
        if ref.arity == 0:
            return [()] if rows else []
        if rows and type(rows[0]) is not tuple:  # a connection with a row factory
            rows = [tuple(r) for r in rows]
        return rows

    def plan_statements(self) -> list[str]:
        self.setup()
        for s in self.p.strata:
            self.statements.append(f"-- stratum {s.index}: {', '.join(s.relations)}")
            self.eval_stratum(s)
        return self.statements
