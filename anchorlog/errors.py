"""User-facing errors. Each carries one line naming the place (file:line:col, graph/node); the CLI prints it
and exits with status 2 — never a traceback, never a partial output file."""

from __future__ import annotations


class AnchorlogError(Exception):
    """An error the user caused and can fix: bad input, bad option, unsupported request."""

    exit_status = 2

    def __init__(self, message: str, place: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.place = place

    def __str__(self) -> str:
        return f"{self.place}: {self.message}" if self.place else self.message


class InputError(AnchorlogError):
    """Malformed or inconsistent input graph (syntax, dangling edge, cycle, bad index ...)."""


class OptionError(AnchorlogError):
    """Unknown pass or option, or an option value that does not parse."""


class RuleError(AnchorlogError):
    """A Datalog program that does not parse or check (place is file:line:col)."""


class PassFailure(AnchorlogError):
    """A pass reached a state where GE fails the compile; no output is written."""
