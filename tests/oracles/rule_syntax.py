"""ORACLE (tests only): the rule-file lexer and expression parser as ``anchorlog/queries/syntax.py`` had them
before Session 4b's speed-up (commit 754a4f4), kept verbatim so that ``tests/test_rule_parse.py`` can check the
faster ones build exactly the same tokens, syntax trees and error messages. One regex match per token or
whitespace run (with a Place built for each), and one recursive call per precedence level for every operand.
Not used by the package.
"""

from __future__ import annotations

import re
from pathlib import Path

from anchorlog.errors import RuleError
from anchorlog.queries import syntax
from anchorlog.queries.syntax import BinOp, Parser, Place, ProgramAST, Term, Token

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\r\f\v]+|\n)
  | (?P<lcomment>//[^\n]*)
  | (?P<bcomment>/\*.*?\*/)
  | (?P<directive>\.(?:decl|input|output|printsize|include|type|functor|pragma|comp|init|plan|limitsize|override)\b)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<number>0x[0-9a-fA-F]+|0b[01]+|\d+\.\d+(?:[eE][-+]?\d+)?|\d+[uU]?)
  | (?P<ident>[A-Za-z_?][A-Za-z0-9_?]*)
  | (?P<op>:-|<=|>=|!=|<:|\.|,|;|:|\(|\)|\{|\}|\[|\]|!|=|<|>|\+|-|\*|/|%|\^|\$|@)
    """,
    re.VERBOSE | re.DOTALL,
)


def tokenize(text: str, file: str) -> list[Token]:
    tokens: list[Token] = []
    pos, line, line_start = 0, 1, 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m:
            raise RuleError(
                f"syntax error: unexpected character {text[pos]!r}", str(Place(file, line, pos - line_start + 1))
            )
        kind = m.lastgroup
        chunk = m.group()
        place = Place(file, line, pos - line_start + 1)
        if kind not in ("ws", "lcomment", "bcomment"):
            tokens.append(Token(kind, chunk, place))  # type: ignore[arg-type]
        elif chunk.startswith("/*") and "*/" not in chunk:
            raise RuleError("syntax error: unterminated comment", str(place))
        newlines = chunk.count("\n")
        if newlines:
            line += newlines
            line_start = pos + chunk.rfind("\n") + 1
        pos = m.end()
    if "/*" in text[pos:]:
        raise RuleError("syntax error: unterminated comment", str(Place(file, line, pos - line_start + 1)))
    tokens.append(Token("eof", "", Place(file, line, pos - line_start + 1)))
    return tokens


class ReferenceParser(Parser):
    """The package's parser with the old lexer (no remembered tokens) and the old expression descent; its
    included files are parsed by a ReferenceParser too."""

    def __init__(self, text: str, file: str, base_dir: Path | None, ast: ProgramAST, included: set[str]) -> None:
        self.tokens = tokenize(text, file)
        self.seek(0)
        self.file = file
        self.base_dir = base_dir
        self.ast = ast
        self.included = included
        self._anon = 0

    def expr(self, level: int = 0) -> Term:
        if level == len(self._LEVELS):
            return self.power()
        left = self.expr(level + 1)
        while self.tok.kind in ("op", "ident") and self.tok.text in self._LEVELS[level]:
            op = self.advance()
            right = self.expr(level + 1)
            left = BinOp(op.text, left, right, op.place)
        return left


def parse_program(text: str, file: str = "<text>", base_dir: Path | None = None) -> ProgramAST:
    return syntax.parse_program(text, file, base_dir, parser=ReferenceParser)
