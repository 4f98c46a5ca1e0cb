"""``anchorlog query DB "SQL"`` and ``anchorlog query DB --datalog FILE.dl|TEXT --output REL``: ask the fact
database (an SQLite file written by ``anchorlog facts IN --db OUT.sqlite``) with SQL or with Datalog rules."""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sqlite3
import sys
from pathlib import Path
from typing import Any

from anchorlog.errors import AnchorlogError, OptionError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "query",
        help="query a fact database with SQL or Datalog",
        description="Query a fact database (SQLite file from 'anchorlog facts IN --db OUT.sqlite'): either one SQL "
        "statement, or a Datalog program (a rule file or inline rule text) whose relations are printed.",
    )
    p.add_argument("db", metavar="DB", help="SQLite fact database file")
    p.add_argument("sql", metavar="SQL", nargs="?", help="an SQL query (omit when using --datalog)")
    p.add_argument("--datalog", metavar="FILE.dl|TEXT", help="rule file, or inline rule text")
    p.add_argument(
        "--output",
        metavar="REL",
        action="append",
        help="relation to print (repeatable; default: the program's .output relations, else all it derives)",
    )
    p.add_argument("--engine", choices=("sqlite", "duckdb", "pydatalog"), default="sqlite", help="default sqlite")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table", help="default table")
    p.add_argument("--explain", action="store_true", help="print the strata and SQL of the Datalog program instead")
    p.set_defaults(func=run)


def _open_db(path: str) -> sqlite3.Connection:
    p = Path(path)
    if p.is_dir():
        raise AnchorlogError(f"{path}: is a directory, not a fact database (write one with 'anchorlog facts')")
    if not p.exists():
        raise AnchorlogError(f"no such fact database: {path!r}")
    if not p.is_file():
        raise AnchorlogError(f"{path}: not a regular file, so not a fact database")
    try:
        conn = sqlite3.connect(f"file:{p.resolve()}?mode=ro", uri=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as e:
        raise AnchorlogError(f"not an SQLite database: {path!r} ({e})") from None
    return conn


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        return repr(v)
    return str(v)


def format_table(columns: list[str], rows: list[tuple]) -> str:
    cells = [[_cell(v) for v in r] for r in rows]
    widths = [len(c) for c in columns]
    for r in cells:
        for k, v in enumerate(r):
            widths[k] = max(widths[k], len(v))
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for r in cells:
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(lines)


def format_csv(columns: list[str], rows: list[tuple]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow(["" if v is None else v for v in r])
    return buf.getvalue().rstrip("\n")


def _jsonable(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.hex()
    return v


def records(columns: list[str], rows: list[tuple]) -> list[dict[str, Any]]:
    return [{c: _jsonable(v) for c, v in zip(columns, r)} for r in rows]


def run(args: argparse.Namespace) -> int:
    if args.datalog is None and args.sql is None:
        raise OptionError("give an SQL query or --datalog FILE.dl|TEXT")
    if args.datalog is not None and args.sql is not None:
        raise OptionError("give either an SQL query or --datalog, not both")
    conn = _open_db(args.db)
    try:
        if args.datalog is None:
            tables = {"query": _run_sql(conn, args.sql)}
        else:
            tables = _run_datalog(conn, args)
            if tables is None:
                return 0
    finally:
        conn.close()
    out = sys.stdout
    if args.format == "json":
        if len(tables) == 1:
            payload: Any = records(*next(iter(tables.values())))
        else:
            payload = {rel: records(*t) for rel, t in tables.items()}
        out.write(json.dumps(payload, indent=1, default=str) + "\n")
    elif args.format == "csv":
        if len(tables) != 1:
            raise OptionError(f"csv prints one relation: choose one with --output (have {', '.join(tables)})")
        out.write(format_csv(*next(iter(tables.values()))) + "\n")
    else:
        parts = []
        for rel, (cols, rows) in tables.items():
            text = format_table(cols, rows)
            parts.append(text if len(tables) == 1 else f"{rel}:\n{text}")
        out.write("\n\n".join(parts) + "\n")
    return 0


def _run_sql(conn: sqlite3.Connection, sql: str) -> tuple[list[str], list[tuple]]:
    try:
        cur = conn.execute(sql)
        rows = cur.fetchall()
    except (sqlite3.Error, sqlite3.Warning) as e:
        raise AnchorlogError(f"SQL error: {e}") from None
    cols = [d[0] for d in cur.description] if cur.description else []
    return cols, [tuple(r) for r in rows]


def _run_datalog(conn: sqlite3.Connection, args: argparse.Namespace) -> dict[str, tuple[list[str], list[tuple]]] | None:
    from anchorlog.queries import Program

    src = args.datalog
    path = Path(src)
    looks_like_file = "\n" not in src and ":-" not in src and len(src) < 4096 and src.rstrip().endswith(".dl")
    if looks_like_file or ("\n" not in src and len(src) < 4096 and path.is_file()):
        prog = Program.from_file(path)
    else:
        prog = Program.from_text(src, base_dir=Path.cwd(), name="<--datalog>")
    if args.explain:
        sys.stdout.write(prog.explain(conn, engine=args.engine) + "\n")
        return None
    outputs = args.output
    res = prog.run(conn, engine=args.engine, outputs=outputs)
    return {rel: (res.columns(rel), res.rows(rel)) for rel in res.relations}
