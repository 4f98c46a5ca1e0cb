"""The Datalog engine: one rule language (a Soufflé subset), compiled to SQL (SQLite, DuckDB) or run on pyDatalog.

from anchorlog.queries import Program
prog = Program.from_file("rules.dl")
res = prog.run(db, engine="sqlite", extra={"rel": [(1, 2)]})
res["rel"]          # pandas DataFrame, columns as declared
res.rows("rel")     # sorted list of tuples
print(prog.explain())
"""

from .program import ENGINES, Program, Result

__all__ = ["ENGINES", "Program", "Result"]
