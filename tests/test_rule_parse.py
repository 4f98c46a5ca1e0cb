"""The rule-file parser after Session 4b's speed-up (one pass of the master pattern, places built for real tokens
only, precedence climbing for expressions, remembered tokens of files parsed again, per-head rule lists in
stratification) builds exactly what the old one did: the same tokens, syntax trees (every node and its
file:line:col), strata and error messages, for every rule file of the package, every program of the
datalog-conformance suites and a few hundred damaged variants of the rule files. The reference is the old lexer
and expression parser, kept verbatim in tests/oracles/rule_syntax.py."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml
from datalog_conformance import get_tests_dir

from anchorlog.errors import RuleError
from anchorlog.queries import Program
from anchorlog.queries import syntax as new
from anchorlog.queries.conformance import program_text
from tests.oracles import rule_syntax as reference

QUERIES = Path(new.__file__).parent
RULE_FILES = sorted(QUERIES.glob("*.dl"))
SUITES = ("basic", "negation", "recursion", "errors")
HEAVY = {"souffle_example_hmmer", "souffle_example_lubm"}  # megabytes of facts; their rules are small and common


def _outcome(parse, text: str, file: str = "<text>", base_dir: Path | None = None) -> str:
    """What a parse gives, as text: the whole syntax tree (dataclass reprs carry every place), or the error."""
    try:
        return repr(parse(text, file, base_dir))
    except RuleError as e:
        return f"RuleError {e} kind={getattr(e, 'kind', None)}"


def _suite_rule_texts() -> list[str]:
    def rules_in(node: object) -> list[list[str]]:
        if isinstance(node, dict):
            found = [node["rules"]] if isinstance(node.get("rules"), list) else []
            return found + [r for k, v in node.items() if k not in ("rules", "facts") for r in rules_in(v)]
        if isinstance(node, list):
            return [r for v in node for r in rules_in(v)]
        return []

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    texts = []
    for suite in SUITES:
        for path in sorted((get_tests_dir() / suite).rglob("*.yaml")):
            if path.stem in HEAVY:
                continue
            raw = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 - a safe loader
            texts += [program_text([str(r) for r in rules]) for rules in rules_in(raw)]
    return texts


def test_there_are_rule_files() -> None:
    assert len(RULE_FILES) >= 10  # the loops below would pass vacuously otherwise


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_rule_file_tokens_and_tree_as_reference(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert new.tokenize(text, str(path)) == reference.tokenize(text, str(path))
    # as Program.from_file parses it, includes and all
    got = _outcome(new.parse_program, text, str(path), path.resolve().parent)
    assert got == _outcome(reference.parse_program, text, str(path), path.resolve().parent)
    assert not got.startswith("RuleError")
    # a second parse (tokens remembered for this file and its includes) gives the same tree again
    assert _outcome(new.parse_program, text, str(path), path.resolve().parent) == got


def test_conformance_suite_programs_as_reference() -> None:
    texts = _suite_rule_texts()
    assert len(texts) > 80
    outcomes = [_outcome(new.parse_program, t) for t in texts]
    assert outcomes == [_outcome(reference.parse_program, t) for t in texts]
    assert sum(o.startswith("RuleError") for o in outcomes) < len(outcomes) // 2


def test_damaged_rule_files_give_the_same_trees_and_errors() -> None:
    """Truncations, deleted characters and inserted characters or fragments at random places of every rule file
    (a window of it, includes dropped): the same tree or the same error, file:line:col included."""
    rng = random.Random(4)
    fragments = list('()[]{}.,;:!=<>+-*/%^$@"\'#&|~`\\ \n_aZ09') + [
        "/*", "*/", '"', "count :", "sum ", "-", "(", ":-", " not ", "0x", "1.5e3", "3u", ".decl", "band", "^ 2",
        ".type T <: number", "// c\n", "/* a\nb */",
    ]  # fmt: skip
    kinds = {"syntax": 0, "other": 0, "ok": 0}
    for path in RULE_FILES:
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if not ln.startswith(".include")]
        for _ in range(25):
            first = rng.randrange(max(1, len(lines) - 40))
            text = "\n".join(lines[first : first + 40])
            k = rng.randrange(len(text) + 1)
            op = rng.randrange(3)
            damaged = (
                text[:k]
                if op == 0
                else text[:k] + text[k + 1 :]
                if op == 1
                else text[:k] + rng.choice(fragments) + text[k:]
            )
            got = _outcome(new.parse_program, damaged)
            assert got == _outcome(reference.parse_program, damaged), damaged
            kinds["ok" if not got.startswith("RuleError") else "syntax" if "kind=syntax" in got else "other"] += 1
    assert kinds["syntax"] > 100 and kinds["ok"] > 20  # both paths exercised


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("p(1).\n// note\n  q(X) :- p(X) # r", "<text>:3:16: syntax error: unexpected character '#'"),
        ('/* two\nlines */ p(1). \n\t q("open', "<text>:3:5: syntax error: unexpected character '\"'"),
        ("p(X) :- q(X), X = 1 +", "<text>:1:22: syntax error: expected a term, found end of input"),
        ("p(X) :- q(X), X = (1 + 2", "<text>:1:25: syntax error: expected ')', found end of input"),
        (
            ".decl r(a: number)\n.input r(IO=file",
            "<text>:2:17: syntax error: unbalanced parentheses, found end of input",
        ),
        ("p(X) :- q(X) /* unterminated", "<text>:1:14: syntax error: expected '.', found '/'"),
        ("p(X) :- q(X), X = 1 band 2 band", "<text>:1:32: syntax error: expected a term, found end of input"),
    ],
)
def test_error_places(text: str, message: str) -> None:
    for parse in (new.parse_program, reference.parse_program):
        with pytest.raises(RuleError) as err:
            parse(text)
        assert str(err.value) == message
        assert err.value.kind == "syntax"  # type: ignore[attr-defined]


def test_operator_trees_as_reference() -> None:
    """Every pair of binary operators (precedence and left associativity) and the power's right associativity."""
    ops = [op for level in new.Parser._LEVELS for op in level] + ["^"]
    for a in ops:
        for b in ops:
            text = f"p(R) :- q(X, Y, Z), R = X {a} Y {b} Z {a} -X ^ 2."
            assert _outcome(new.parse_program, text) == _outcome(reference.parse_program, text)
    tree = new.parse_program("p(R) :- q(X, Y, Z), R = X - Y - Z * 2 ^ Y ^ Z band 1.").rules[0].body[1].right
    assert new.format_term(tree) == "(((X - Y) - (Z * (2 ^ (Y ^ Z)))) band 1)"


def test_remembered_tokens_follow_the_text(tmp_path: Path) -> None:
    """Tokens are remembered per (file name, text): an included file edited on disk is read and parsed afresh,
    and the memory stays bounded."""
    inc = tmp_path / "inc.dl"
    main = tmp_path / "main.dl"
    main.write_text('.include "inc.dl"\np(X) :- q(X).\n', encoding="utf-8")
    inc.write_text("q(1).\n", encoding="utf-8")
    first = Program.from_file(main)
    inc.write_text("q(1).\nq(2).\n", encoding="utf-8")
    second = Program.from_file(main)
    assert [new.format_rule(r) for r in first.rules] == ["q(1).", "p(X) :- q(X)."]
    assert [new.format_rule(r) for r in second.rules] == ["q(1).", "q(2).", "p(X) :- q(X)."]
    assert second.rules[1].place == new.Place(str(inc), 2, 1)
    for k in range(new._TOKENS_SEEN_MAX + 5):
        new.parse_program(f"r({k}).")
    assert len(new._TOKENS_SEEN) <= new._TOKENS_SEEN_MAX


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_strata_hold_their_relations_rules_in_program_order(path: Path) -> None:
    prog = Program.from_file(path)
    heads = list(dict.fromkeys(r.head.rel for r in prog.ast.rules))
    assert heads
    assert sorted(rel for s in prog.strata for rel in s.relations) == sorted(heads)
    for s in prog.strata:
        members = set(s.relations)
        assert s.rules == [r for r in prog.ast.rules if r.head.rel in members]
        assert s.relations == sorted(s.relations, key=heads.index)
