"""Evaluators for the `datalog-conformance` suites (protocol `DatalogEvaluator.evaluate(program) -> Model`).

A suite program is a mapping of facts plus rule strings; we run the rules with our engine, the facts given as
input relations (`extra=`), and return every relation (facts and derived). Engine errors are re-raised as
:class:`ConformanceError` carrying the suite's error vocabulary as `code` (the runner matches the class name,
the message or `code`).
"""

from __future__ import annotations

from typing import Any

from anchorlog.errors import RuleError

from .program import Program

# our check names -> the error codes the suites use
SUITE_CODES = {
    "unbound_variable": "unbound_variable",
    "unsafe_negation": "unsafe_negation",
    "wildcard_in_head": "safety_violations",
    "unstratifiable": "cyclic_negation",
    "arity_mismatch": "arity_mismatch",
    "unknown_relation": "unknown_relation",
    "syntax": "syntax_error",
    "unsupported": "unsupported",
}


class ConformanceError(RuleError):
    """A RuleError translated for the conformance runner."""

    def __init__(self, err: RuleError) -> None:
        super().__init__(err.message, err.place)
        self.kind = getattr(err, "kind", "error")
        self.code = SUITE_CODES.get(self.kind, self.kind)


class SafetyViolationError(ConformanceError):
    """Unsafe rule: unbound head variable, variable only under negation, `_` in a head."""


_SAFETY = {"unbound_variable", "unsafe_negation", "wildcard_in_head"}


def program_text(rules: list[str]) -> str:
    """Suite rules may omit the final period."""
    return "\n".join(r if r.rstrip().endswith(".") else r.rstrip() + "." for r in rules)


class _SQLBase:
    engine = "sqlite"

    def evaluate(self, program: Any) -> Any:
        from datalog_conformance import Model

        facts: dict[str, list[tuple]] = {rel: [tuple(r) for r in rows] for rel, rows in program.facts.items()}
        try:
            for rel, rows in facts.items():
                if len({len(r) for r in rows}) > 1:
                    err = RuleError(f"arity mismatch: facts of {rel!r} have different lengths", "<facts>")
                    err.kind = "arity_mismatch"  # type: ignore[attr-defined]
                    raise err
            prog = Program.from_text(program_text(program.rules), name="<conformance>")
            for rel, rows in facts.items():
                if rows and rel in prog.arity and len(rows[0]) != prog.arity[rel]:
                    err = RuleError(
                        f"arity mismatch: facts of {rel!r} have {len(rows[0])} values, rules use {prog.arity[rel]}",
                        "<facts>",
                    )
                    err.kind = "arity_mismatch"  # type: ignore[attr-defined]
                    raise err
            used = {rel: rows for rel, rows in facts.items() if rel in prog.arity}
            # a suite declares its input relations only through facts: one without facts is empty
            for rel in prog.edb():
                used.setdefault(rel, [])
            wanted = list(dict.fromkeys(prog.idb + [r for r in prog.arity if r not in prog.idb]))
            res = prog.run(None, engine=self.engine, extra=used, outputs=wanted, **self.run_options())
        except RuleError as e:
            cls = SafetyViolationError if getattr(e, "kind", "") in _SAFETY else ConformanceError
            raise cls(e) from None
        out: dict[str, set[tuple]] = {rel: set(rows) for rel, rows in facts.items()}
        for rel in res.relations:
            out.setdefault(rel, set()).update(res.set(rel))
        return Model(out)

    def run_options(self) -> dict[str, Any]:
        return {}


class SQLiteEvaluator(_SQLBase):
    """The rules compiled to SQL on SQLite (recursive CTEs for linear recursion, semi-naive otherwise)."""

    engine = "sqlite"


class SQLiteSemiNaiveEvaluator(_SQLBase):
    """SQLite with semi-naive evaluation only (no recursive CTEs): exercises the other code path."""

    engine = "sqlite"

    def run_options(self) -> dict[str, Any]:
        return {"recursive_cte": False}


class DuckDBEvaluator(_SQLBase):
    engine = "duckdb"


class PyDatalogEvaluator(_SQLBase):
    """pyDatalog, each program in a forked process capped at `timeout` seconds."""

    engine = "pydatalog"

    def __init__(self, timeout: float | None = 60.0) -> None:
        self.timeout = timeout

    def run_options(self) -> dict[str, Any]:
        return {"timeout": self.timeout}
