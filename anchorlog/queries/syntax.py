"""The rule language: abstract syntax, lexer and parser.

The dialect is a subset of Soufflé's: as in Soufflé, every identifier in an argument position is a variable
(case does not matter); constants are string literals ("...") and numbers.  Every syntax node carries its
place (file:line:col) so later checks can point at the offending text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from anchorlog.errors import RuleError

# --------------------------------------------------------------------------------------------- syntax tree


@dataclass(frozen=True)
class Place:
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class Term:
    place: Place


@dataclass(eq=False)
class Var(Term):
    name: str
    place: Place


@dataclass(eq=False)
class Wildcard(Term):
    place: Place


@dataclass(eq=False)
class Const(Term):
    value: object  # str | int | float
    place: Place


@dataclass(eq=False)
class BinOp(Term):
    op: str  # + - * / % ^ band bor bxor bshl bshr land lor
    left: Term
    right: Term
    place: Place


@dataclass(eq=False)
class UnOp(Term):
    op: str  # - bnot lnot
    arg: Term
    place: Place


@dataclass(eq=False)
class Call(Term):
    """A built-in functor: cat, strlen, substr, to_number, to_string, ord, min, max, abs."""

    name: str
    args: list[Term]
    place: Place


@dataclass(eq=False)
class Aggregate(Term):
    """`count : { body }`, `sum X : { body }`, `min X : { body }`, `max X : { body }`."""

    func: str
    target: Term | None
    body: list[Literal]
    place: Place


@dataclass(eq=False)
class Atom:
    rel: str
    args: list[Term]
    place: Place


@dataclass(eq=False)
class Negation:
    atom: Atom
    place: Place


@dataclass(eq=False)
class Compare:
    op: str  # = != < <= > >=
    left: Term
    right: Term
    place: Place


@dataclass(eq=False)
class BoolLit:
    value: bool
    place: Place


Literal = Atom | Negation | Compare | BoolLit


@dataclass(eq=False)
class Rule:
    head: Atom
    body: list[Literal]  # a conjunction; disjunctions are expanded into several rules by the parser
    place: Place

    @property
    def is_fact(self) -> bool:
        return not self.body


@dataclass(eq=False)
class Decl:
    rel: str
    columns: list[tuple[str, str]]  # (name, type)
    place: Place


@dataclass
class Directive:
    kind: str  # input / output / printsize
    rel: str
    place: Place


@dataclass
class ProgramAST:
    decls: dict[str, Decl] = field(default_factory=dict)
    rules: list[Rule] = field(default_factory=list)
    directives: list[Directive] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)  # user type name -> base type (symbol/number/...)


# ------------------------------------------------------------------------------------------------ lexer

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\r\n\f\v]+)
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


@dataclass
class Token:
    kind: str  # directive string number ident op eof
    text: str
    place: Place


def tokenize(text: str, file: str) -> list[Token]:
    """The tokens of `text`, then an ``eof`` token. One pass of the master pattern over the whole text
    (``finditer``): a match that does not start where the previous one ended means no token fits there.
    Whitespace and comments only move the line count; a :class:`Place` is built for real tokens only (most
    matches are whitespace, and building places was most of the lexer's time)."""
    tokens: list[Token] = []
    append = tokens.append
    new_place = object.__new__
    pos, line, line_start = 0, 1, 0
    for m in _TOKEN_RE.finditer(text):
        start = m.start()
        if start != pos:
            break
        kind = m.lastgroup
        pos = m.end()
        if kind == "ws" or kind == "bcomment":
            chunk = m.group()
            newlines = chunk.count("\n")
            if newlines:
                line += newlines
                line_start = start + chunk.rfind("\n") + 1
        elif kind != "lcomment":
            # Place(file, line, col) without the frozen dataclass's __init__ (one object.__setattr__ per field
            # costs more than the rest of the token): the same fields, equality, hash and repr
            place = new_place(Place)
            fields = place.__dict__
            fields["file"], fields["line"], fields["col"] = file, line, start - line_start + 1
            append(Token(kind, m.group(), place))  # type: ignore[arg-type]
    if pos < len(text):
        raise RuleError(
            f"syntax error: unexpected character {text[pos]!r}", str(Place(file, line, pos - line_start + 1))
        )
    tokens.append(Token("eof", "", Place(file, line, pos - line_start + 1)))
    return tokens


# ----------------------------------------------------------------------------------------------- parser

BASE_TYPES = {"symbol", "number", "unsigned", "float"}
FUNCTORS = {"cat": None, "strlen": 1, "substr": 3, "to_number": 1, "to_string": 1, "to_float": 1, "ord": 1,
            "min": None, "max": None, "abs": 1, "to_unsigned": 1}  # fmt: skip
WORD_BINOPS = {"band", "bor", "bxor", "bshl", "bshr", "bshru", "land", "lor", "lxor"}
WORD_UNOPS = {"bnot", "lnot"}
AGGREGATES = {"count", "sum", "min", "max", "mean"}
CONSTRAINT_FUNCS = {"contains", "match"}  # predicates usable as body literals


def _unescape(lit: str) -> str:
    body = lit[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r"}.get(m.group(1), m.group(1)), body)


# (file name, text) -> its tokens, for the rule files a process parses more than once: passes load programs
# that include the same files (rw_types.dl, symbols.dl, reach.dl, tm_trace.dl ...). Keyed by the whole text,
# so an edited file is tokenized afresh; tokens are never modified by the parser, so sharing them is safe.
_TOKENS_SEEN: dict[tuple[str, str], list[Token]] = {}
_TOKENS_SEEN_MAX = 64


def tokens_of(text: str, file: str) -> list[Token]:
    """:func:`tokenize`, remembered for the last few distinct (file, text) pairs."""
    key = (file, text)
    tokens = _TOKENS_SEEN.get(key)
    if tokens is None:
        tokens = tokenize(text, file)
        if len(_TOKENS_SEEN) >= _TOKENS_SEEN_MAX:
            del _TOKENS_SEEN[next(iter(_TOKENS_SEEN))]  # the oldest
        _TOKENS_SEEN[key] = tokens
    return tokens


class Parser:
    def __init__(self, text: str, file: str, base_dir: Path | None, ast: ProgramAST, included: set[str]) -> None:
        self.tokens = tokens_of(text, file)
        self.i = 0
        self.tok = self.tokens[0]  # the current token, tokens[i] (read hundreds of thousands of times per file)
        self.file = file
        self.base_dir = base_dir
        self.ast = ast
        self.included = included
        self._anon = 0

    # token helpers
    def seek(self, i: int) -> None:
        self.i = i
        self.tok = self.tokens[i]

    def peek(self, k: int = 1) -> Token:
        i = self.i + k
        return self.tokens[i] if i < len(self.tokens) else self.tokens[-1]

    def at(self, text: str) -> bool:
        t = self.tok
        return t.text == text and (t.kind == "op" or t.kind == "ident")

    def advance(self) -> Token:
        t = self.tok
        self.i += 1
        if t.kind != "eof":  # only skip_parens steps past the end, and it reports the eof token it got
            self.tok = self.tokens[self.i]
        return t

    def expect(self, text: str) -> Token:
        if not self.at(text):
            self.error(f"expected {text!r}")
        return self.advance()

    def error(self, msg: str, tok: Token | None = None) -> None:
        tok = tok or self.tok
        found = "end of input" if tok.kind == "eof" else repr(tok.text)
        raise RuleError(f"syntax error: {msg}, found {found}", str(tok.place))

    def ident(self) -> Token:
        if self.tok.kind != "ident":
            self.error("expected a name")
        return self.advance()

    def relname(self) -> Token:
        """Relation names may be qualified with dots in Soufflé (a.b); we accept plain names only."""
        return self.ident()

    # program
    def parse(self) -> None:
        while self.tok.kind != "eof":
            if self.tok.kind == "directive":
                self.directive()
            else:
                self.clause()

    def directive(self) -> None:
        d = self.advance()
        name = d.text[1:]
        if name == "decl":
            self.decl(d)
        elif name in ("input", "output", "printsize"):
            while True:
                rel = self.relname()
                self.ast.directives.append(Directive(name, rel.text, rel.place))
                if self.at("("):  # IO parameters (filename=..., IO=...) are irrelevant here
                    self.skip_parens()
                if not self.at(","):
                    break
                self.advance()
        elif name == "include":
            if self.tok.kind != "string":
                self.error("expected a file name string after .include")
            tok = self.advance()
            self.include(_unescape(tok.text), tok)
        elif name == "type":
            self.typedecl()
        else:
            raise RuleError(f"unsupported directive .{name}", str(d.place))

    def skip_parens(self) -> None:
        depth = 0
        while True:
            t = self.advance()
            if t.kind == "eof":
                self.error("unbalanced parentheses", t)
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                depth -= 1
                if depth == 0:
                    return

    def typedecl(self) -> None:
        name = self.ident()
        if self.at("<:") or self.at("="):
            self.advance()
            base = self.ident()
            # unions of types (`A | B`) are not supported; a subtype/alias maps onto its base type
            self.ast.types[name.text] = self.resolve_type(base)
        else:
            self.error("expected '<:' or '=' in .type")

    def resolve_type(self, tok: Token) -> str:
        t = tok.text
        seen = set()
        while t not in BASE_TYPES:
            if t in seen or t not in self.ast.types:
                raise RuleError(f"unknown type {tok.text!r}", str(tok.place))
            seen.add(t)
            t = self.ast.types[t]
        return t

    def decl(self, d: Token) -> None:
        names = [self.relname()]
        while self.at(","):
            self.advance()
            names.append(self.relname())
        self.expect("(")
        cols: list[tuple[str, str]] = []
        if not self.at(")"):
            while True:
                cname = self.ident()
                self.expect(":")
                ctype = self.ident()
                if any(c == cname.text for c, _ in cols):
                    raise RuleError(f"duplicate attribute {cname.text!r}", str(cname.place))
                cols.append((cname.text, self.resolve_type(ctype)))
                if not self.at(","):
                    break
                self.advance()
        self.expect(")")
        # representation qualifiers (btree, brie, eqrel, inline, ...) are accepted and ignored
        while self.tok.kind == "ident" and self.tok.text in ("btree", "brie", "eqrel", "inline", "magic", "no_magic",
                                                              "overridable", "no_inline", "btree_delete"):  # fmt: skip
            if self.tok.text == "eqrel":
                raise RuleError("eqrel relations are not supported", str(self.tok.place))
            self.advance()
        for n in names:
            if n.text in self.ast.decls:
                raise RuleError(f"relation {n.text!r} declared twice", str(n.place))
            self.ast.decls[n.text] = Decl(n.text, cols, n.place)

    def include(self, name: str, tok: Token) -> None:
        base = self.base_dir if self.base_dir is not None else Path.cwd()
        path = (base / name).resolve()
        if not path.is_file():
            raise RuleError(f"cannot include {name!r}: no such file {str(path)!r}", str(tok.place))
        key = str(path)
        if key in self.included:  # include each file once (guards against include cycles)
            return
        self.included.add(key)
        type(self)(path.read_text(encoding="utf-8"), str(path), path.parent, self.ast, self.included).parse()

    def clause(self) -> None:
        start = self.tok
        heads = [self.atom()]
        while self.at(","):
            self.advance()
            heads.append(self.atom())
        body_alts: list[list[Literal]] = [[]]
        if self.at(":-"):
            self.advance()
            body_alts = self.disjunction()
        elif not self.at("."):
            self.error("expected ':-' or '.'")
        self.expect(".")
        for head in heads:
            for alt in body_alts:
                self.ast.rules.append(Rule(head, list(alt), start.place))

    # bodies: returns the disjunctive normal form: a list of conjunctions
    def disjunction(self) -> list[list[Literal]]:
        alts = self.conjunction()
        while self.at(";"):
            self.advance()
            alts = alts + self.conjunction()
        return alts

    def conjunction(self) -> list[list[Literal]]:
        alts = self.literal()
        while self.at(","):
            self.advance()
            right = self.literal()
            alts = [a + b for a in alts for b in right]
        return alts

    def literal(self) -> list[list[Literal]]:
        t = self.tok
        if self.at("!") or (t.kind == "ident" and t.text == "not" and self.peek().kind == "ident"):
            # `!p(X)` (Soufflé); `not p(X)` is accepted as well (Nemo/crepe-style programs)
            self.advance()
            if self.at("("):
                self.error("negation of a parenthesised formula is not supported; negate a single atom")
            a = self.atom()
            return [[Negation(a, t.place)]]
        if self.at("("):
            # a parenthesised disjunction, or a constraint whose left side starts with '('
            save = self.i
            self.advance()
            try:
                inner = self.disjunction()
                self.expect(")")
                if self.tok.text not in ("=", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "^"):
                    return inner
            except RuleError:
                pass
            self.seek(save)
            return [[self.constraint()]]
        if t.kind == "ident" and t.text in ("true", "false") and not self.peek().text == "(":
            self.advance()
            return [[BoolLit(t.text == "true", t.place)]]
        if t.kind == "ident" and self.peek().text == "(" and t.text not in FUNCTORS and t.text not in AGGREGATES:
            if t.text in CONSTRAINT_FUNCS:
                self.advance()
                self.expect("(")
                a = self.expr()
                self.expect(",")
                b = self.expr()
                self.expect(")")
                return [[Compare(t.text, a, b, t.place)]]
            return [[self.atom()]]
        if (
            t.kind == "ident"
            and t.text not in AGGREGATES
            and self.peek().text in (",", ".", ";", ")")
            and not t.text.startswith("_")
        ):
            # a zero-arity atom written without parentheses
            self.advance()
            return [[Atom(t.text, [], t.place)]]
        return [[self.constraint()]]

    def constraint(self) -> Compare:
        t = self.tok
        left = self.expr()
        if self.tok.text not in ("=", "!=", "<", "<=", ">", ">="):
            self.error("expected an atom or a comparison", t if self.tok.kind == "eof" else None)
        op = self.advance().text
        right = self.expr()
        return Compare(op, left, right, t.place)

    def atom(self) -> Atom:
        name = self.relname()
        args: list[Term] = []
        if self.at("("):
            self.advance()
            if not self.at(")"):
                while True:
                    args.append(self.expr())
                    if not self.at(","):
                        break
                    self.advance()
            self.expect(")")
        return Atom(name.text, args, name.place)

    # expressions, lowest precedence first (Soufflé: lor < land < bor < bxor < band < shifts < + - < * / % < ^)
    _LEVELS: list[tuple[str, ...]] = [
        ("lor",),
        ("lxor",),
        ("land",),
        ("bor",),
        ("bxor",),
        ("band",),
        ("bshl", "bshr", "bshru"),
        ("+", "-"),
        ("*", "/", "%"),
    ]

    _LEVEL_OF: dict[str, int] = {op: level for level, ops in enumerate(_LEVELS) for op in ops}

    def expr(self, level: int = 0) -> Term:
        """An expression whose binary operators are all of `level` or tighter. Precedence climbing: the same
        left-associative trees as one recursive call per level would build, without descending through all
        nine levels for every operand (most operands are a single variable)."""
        left = self.power()
        level_of = self._LEVEL_OF
        while True:
            t = self.tok
            op_level = level_of.get(t.text)
            if op_level is None or op_level < level or not (t.kind == "op" or t.kind == "ident"):
                return left
            self.advance()
            left = BinOp(t.text, left, self.expr(op_level + 1), t.place)

    def power(self) -> Term:
        base = self.unary()
        if self.at("^"):
            op = self.advance()
            return BinOp("^", base, self.power(), op.place)  # right associative
        return base

    def unary(self) -> Term:
        t = self.tok
        if self.at("-"):
            self.advance()
            arg = self.unary()
            if isinstance(arg, Const) and isinstance(arg.value, (int, float)):
                return Const(-arg.value, t.place)
            return UnOp("-", arg, t.place)
        if t.kind == "ident" and t.text in WORD_UNOPS:
            self.advance()
            return UnOp(t.text, self.unary(), t.place)
        return self.primary()

    def primary(self) -> Term:
        t = self.tok
        if t.kind == "number":
            self.advance()
            txt = t.text.rstrip("uU")
            if txt.startswith(("0x", "0b")):
                return Const(int(txt, 0), t.place)
            return Const(float(txt) if "." in txt else int(txt), t.place)
        if t.kind == "string":
            self.advance()
            return Const(_unescape(t.text), t.place)
        if self.at("("):
            self.advance()
            e = self.expr()
            self.expect(")")
            return e
        if self.at("$"):
            raise RuleError("the counter functor '$' is not supported", str(t.place))
        if t.kind == "ident":
            if self._is_aggregate():
                return self.aggregate()
            if t.text == "_":
                self.advance()
                return Wildcard(t.place)
            if t.text == "nil":
                raise RuleError("records (nil) are not supported", str(t.place))
            self.advance()
            if self.at("("):
                if t.text not in FUNCTORS:
                    raise RuleError(f"unknown functor {t.text!r}", str(t.place))
                self.advance()
                args = []
                if not self.at(")"):
                    while True:
                        args.append(self.expr())
                        if not self.at(","):
                            break
                        self.advance()
                self.expect(")")
                arity = FUNCTORS[t.text]
                if (arity is not None and len(args) != arity) or (arity is None and len(args) < 2):
                    raise RuleError(
                        f"functor {t.text!r} takes {arity or 'at least 2'} arguments, got {len(args)}", str(t.place)
                    )
                return Call(t.text, args, t.place)
            return Var(t.text, t.place)
        if self.at("["):
            raise RuleError("records are not supported", str(t.place))
        self.error("expected a term")
        raise AssertionError  # unreachable

    def _is_aggregate(self) -> bool:
        # `count : {..}`, `sum X : {..}`; a variable that happens to be called `sum` or the functor `min(a, b)`
        # is followed by something else.
        t, nxt = self.tok, self.peek()
        if t.text not in AGGREGATES:
            return False
        if t.text == "count":
            return nxt.text == ":"
        return nxt.kind in ("ident", "number", "string") or nxt.text == "-"

    def aggregate(self) -> Aggregate:
        f = self.advance()
        target: Term | None = None
        if f.text != "count":
            target = self.expr()
        self.expect(":")
        if self.at("{"):
            self.advance()
            alts = self.disjunction()
            self.expect("}")
            if len(alts) != 1:
                raise RuleError("disjunction inside an aggregate body is not supported", str(f.place))
            body = alts[0]
        else:
            body = [self.atom()]
        return Aggregate(f.text, target, body, f.place)


def parse_program(
    text: str, file: str = "<text>", base_dir: Path | None = None, *, parser: type[Parser] = Parser
) -> ProgramAST:
    """The syntax tree of `text` and the files it includes; `parser` lets tests parse with a reference
    subclass (tests/oracles/rule_syntax.py)."""
    ast = ProgramAST()
    included: set[str] = set()
    if file != "<text>":
        included.add(str(Path(file).resolve()))
    try:
        parser(text, file, base_dir, ast, included).parse()
    except RuleError as e:
        if not hasattr(e, "kind"):
            e.kind = "syntax"  # type: ignore[attr-defined]
        raise
    return ast


# --------------------------------------------------------------------------------------------- helpers


def term_vars(t: Term) -> list[Var]:
    """Variables of a term, excluding those local to an aggregate body."""
    if isinstance(t, Var):
        return [t]
    if isinstance(t, BinOp):
        return term_vars(t.left) + term_vars(t.right)
    if isinstance(t, UnOp):
        return term_vars(t.arg)
    if isinstance(t, Call):
        return [v for a in t.args for v in term_vars(a)]
    return []


def contains_aggregate(t: Term) -> bool:
    if isinstance(t, Aggregate):
        return True
    if isinstance(t, BinOp):
        return contains_aggregate(t.left) or contains_aggregate(t.right)
    if isinstance(t, UnOp):
        return contains_aggregate(t.arg)
    if isinstance(t, Call):
        return any(contains_aggregate(a) for a in t.args)
    return False


def aggregates_in(t: Term) -> list[Aggregate]:
    if isinstance(t, Aggregate):
        return [t]
    if isinstance(t, BinOp):
        return aggregates_in(t.left) + aggregates_in(t.right)
    if isinstance(t, UnOp):
        return aggregates_in(t.arg)
    if isinstance(t, Call):
        return [a for x in t.args for a in aggregates_in(x)]
    return []


def format_term(t: Term) -> str:
    if isinstance(t, Var):
        return t.name
    if isinstance(t, Wildcard):
        return "_"
    if isinstance(t, Const):
        return (
            '"' + t.value.replace("\\", "\\\\").replace('"', '\\"') + '"' if isinstance(t.value, str) else repr(t.value)
        )
    if isinstance(t, BinOp):
        return f"({format_term(t.left)} {t.op} {format_term(t.right)})"
    if isinstance(t, UnOp):
        return f"{t.op}({format_term(t.arg)})" if t.op != "-" else f"-({format_term(t.arg)})"
    if isinstance(t, Call):
        return f"{t.name}({', '.join(format_term(a) for a in t.args)})"
    if isinstance(t, Aggregate):
        tgt = f" {format_term(t.target)}" if t.target is not None else ""
        return f"{t.func}{tgt} : {{ {', '.join(format_literal(lit) for lit in t.body)} }}"
    raise TypeError(t)


def format_literal(lit: Literal) -> str:
    if isinstance(lit, Atom):
        return f"{lit.rel}({', '.join(format_term(a) for a in lit.args)})"
    if isinstance(lit, Negation):
        return "!" + format_literal(lit.atom)
    if isinstance(lit, Compare):
        if lit.op in CONSTRAINT_FUNCS:
            return f"{lit.op}({format_term(lit.left)}, {format_term(lit.right)})"
        return f"{format_term(lit.left)} {lit.op} {format_term(lit.right)}"
    if isinstance(lit, BoolLit):
        return "true" if lit.value else "false"
    raise TypeError(lit)


def format_rule(r: Rule) -> str:
    head = format_literal(r.head)
    return f"{head}." if not r.body else f"{head} :- {', '.join(format_literal(x) for x in r.body)}."
