"""The on-disk program cache (anchorlog/queries/progcache.py): a cached program is the freshly parsed one, and a
bad, foreign or stale entry, or an unwritable folder, never changes an answer or raises."""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path

import pytest

from anchorlog.errors import RuleError
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.relations import FactDB
from anchorlog.queries import Program, progcache

QUERIES = Path(progcache.__file__).parent
RULE_FILES = sorted(QUERIES.glob("*.dl"))
CASES = (
    Path(__file__).resolve().parent.parent.parent / "shared" / "conformance" / "cases"
)  # ../shared beside the checkout
MODELS = [
    CASES / c / "model.pbtxt"
    for c in (
        "tm_st_intermediate_source_scatter_branch_deleted",
        "layout_st_while_body_data_mul_mul_netoutput_insert_identity",
        "concat_ut_conv_5hd_concat_c_notask",
    )
]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ANCHORLOG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "programs"


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.pickle")) if folder.is_dir() else []


def no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on a program can only come from the cache."""

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("parsed although a valid cache entry exists")

    monkeypatch.setattr(progcache, "parse_recording", fail)


def write_rules(folder: Path, base_rule: str = "b(X) :- a(X).") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "base.dl").write_text(f".decl a(x: number)\n.decl b(x: number)\n{base_rule}\n")
    root = folder / "root.dl"
    root.write_text('.include "base.dl"\n.decl c(x: number)\n.output c\nc(X) :- b(X), X > 1.\n')
    return root


def answer(prog: Program) -> list[tuple]:
    return prog.run(None, extra={"a": [(1,), (2,), (3,)]}).rows("c")


def explained(prog: Program, db: FactDB | None) -> str:
    """explain() or, for a program that needs relations this database lacks, the error it reports."""
    try:
        return prog.explain(db)
    except RuleError as e:
        return f"error: {e}"


def fact_db(model: Path) -> FactDB:
    return FactDB.from_model(read_model(str(model)))


def test_cached_program_equals_fresh_parse_for_every_rule_file(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    models = [m for m in MODELS if m.is_file()]
    if not models:
        pytest.skip("conformance cases not available")
    dbs = [fact_db(m) for m in models]
    monkeypatch.setenv("ANCHORLOG_CACHE_DIR", "off")
    fresh = {p: Program.from_file(p) for p in RULE_FILES}
    monkeypatch.setenv("ANCHORLOG_CACHE_DIR", str(tmp_path / "cache"))
    for p in RULE_FILES:
        Program.from_file(p)  # writes the entries
    assert len(entries(cache)) == len(RULE_FILES)
    no_parsing(monkeypatch)
    for p in RULE_FILES:
        loaded = Program.from_file(p)
        old = fresh[p]
        assert loaded.source == old.source and loaded.arity == old.arity
        assert [(s.relations, s.recursive, s.recursive_atoms) for s in loaded.strata] == [
            (s.relations, s.recursive, s.recursive_atoms) for s in old.strata
        ]
        assert loaded.outputs == old.outputs and loaded.inputs == old.inputs
        assert [str(r.place) for r in loaded.rules] == [str(r.place) for r in old.rules]
        for db in [None, *dbs]:  # strata, every rule and the SQL statements generated for this database
            assert explained(loaded, db) == explained(old, db)


def test_cached_program_gives_the_same_results(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = MODELS[1]
    if not model.is_file():
        pytest.skip("conformance cases not available")
    path = QUERIES / "symbols.dl"
    fresh = Program.from_file(path)
    no_parsing(monkeypatch)
    loaded = Program.from_file(path)
    db = fact_db(model)
    a, b = fresh.run(db), loaded.run(db)
    assert a.relations == b.relations
    for rel in a.relations:
        assert a.rows(rel) == b.rows(rel), rel


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "foreign_pickle", "old_format", "wrong_body"])
def test_bad_entry_is_ignored_and_rewritten(
    damage: str, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_rules(tmp_path / "rules")
    expected = answer(Program.from_file(root))
    (entry,) = entries(cache)
    data = entry.read_bytes()
    if damage == "garbage":
        entry.write_bytes(b"\x80\x05not a pickle at all" * 10)
    elif damage == "truncated":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        entry.write_bytes(b"")
    elif damage == "foreign_pickle":
        entry.write_bytes(pickle.dumps(["something", "else"]))
    else:
        stream = io.BytesIO(data)
        header = pickle.load(stream)
        body = data[stream.tell() :]
        if damage == "old_format":
            header["format"] = progcache.FORMAT - 1
        else:
            body = pickle.dumps(("not an ast", {}, []))
        entry.write_bytes(pickle.dumps(header) + body)
    assert answer(Program.from_file(root)) == expected
    no_parsing(monkeypatch)  # the entry was rewritten whole
    assert answer(Program.from_file(root)) == expected


def test_edited_include_is_parsed_again(cache: Path, tmp_path: Path) -> None:
    root = write_rules(tmp_path / "rules")
    assert answer(Program.from_file(root)) == [(2,), (3,)]
    write_rules(tmp_path / "rules", base_rule="b(X) :- a(Y), X = Y + 10.")
    assert answer(Program.from_file(root)) == [(11,), (12,), (13,)]
    assert answer(Program.from_file(root)) == [(11,), (12,), (13,)]  # now from the rewritten entry
    # the root edited as well
    root.write_text(root.read_text().replace("X > 1", "X > 12"))
    assert answer(Program.from_file(root)) == [(13,)]


def test_retargeted_include_symlink_is_noticed(cache: Path, tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    write_rules(rules)
    (rules / "other.dl").write_text(".decl a(x: number)\n.decl b(x: number)\nb(7) :- a(_).\n")
    (rules / "base.dl").rename(rules / "first.dl")
    (rules / "base.dl").symlink_to(rules / "first.dl")
    root = rules / "root.dl"
    assert answer(Program.from_file(root)) == [(2,), (3,)]
    (rules / "base.dl").unlink()
    (rules / "base.dl").symlink_to(rules / "other.dl")
    assert answer(Program.from_file(root)) == [(7,)]


def test_unwritable_cache_folder_means_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("ANCHORLOG_CACHE_DIR", str(blocker / "cache"))
    root = write_rules(tmp_path / "rules")
    assert answer(Program.from_file(root)) == [(2,), (3,)]
    assert answer(Program.from_file(root)) == [(2,), (3,)]
    if os.geteuid() != 0:  # root ignores permission bits
        folder = tmp_path / "ro"
        (folder / "programs").mkdir(parents=True)
        (folder / "programs").chmod(0o500)
        monkeypatch.setenv("ANCHORLOG_CACHE_DIR", str(folder))
        try:
            assert answer(Program.from_file(root)) == [(2,), (3,)]
            assert entries(folder / "programs") == []
        finally:
            (folder / "programs").chmod(0o700)


def test_failed_atomic_write_leaves_no_temp_file(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(src: object, dst: object) -> None:
        raise PermissionError("read-only")

    monkeypatch.setattr(progcache.os, "replace", refuse)
    root = write_rules(tmp_path / "rules")
    assert answer(Program.from_file(root)) == [(2,), (3,)]
    assert list(cache.iterdir()) == []


def test_unreadable_entry_is_ignored(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_rules(tmp_path / "rules")
    Program.from_file(root)
    (entry,) = entries(cache)
    entry.unlink()
    entry.mkdir()  # reading it fails with IsADirectoryError; replacing it fails too
    assert answer(Program.from_file(root)) == [(2,), (3,)]


def test_cache_off_and_default_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_rules(tmp_path / "rules")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for off in ("off", "OFF", "0", "none"):
        monkeypatch.setenv("ANCHORLOG_CACHE_DIR", off)
        assert progcache.cache_dir() is None
        assert answer(Program.from_file(root)) == [(2,), (3,)]
    assert not (tmp_path / "xdg").exists()
    monkeypatch.delenv("ANCHORLOG_CACHE_DIR")
    assert progcache.cache_dir() == tmp_path / "xdg" / "anchorlog" / "programs"
    Program.from_file(root)
    assert len(entries(tmp_path / "xdg" / "anchorlog" / "programs")) == 1
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert progcache.cache_dir() == tmp_path / "home" / ".cache" / "anchorlog" / "programs"


def test_rule_errors_are_not_cached(cache: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.dl"
    bad.write_text(".decl a(x: number)\nb(X) :- !a(X).\n")  # unsafe variable
    for _ in range(2):
        with pytest.raises(Exception, match="X"):
            Program.from_file(bad)
    assert entries(cache) == []


def test_program_cached_uses_the_disk_cache_and_keeps_memos_out(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from anchorlog.queries import program as program_module

    path = QUERIES / "concat_notask.dl"
    monkeypatch.setattr(program_module, "_FILE_CACHE", {})
    prog = Program.cached(path)
    (entry,) = entries(cache)
    stream = io.BytesIO(entry.read_bytes())
    assert pickle.load(stream)["resolved"] == str(path.resolve())
    assert len(pickle.load(stream)) == 3  # ast, arity, strata: no evaluator memo
    monkeypatch.setattr(program_module, "_FILE_CACHE", {})
    no_parsing(monkeypatch)
    again = Program.cached(path)
    assert again is not prog and "_al_memo" not in again.__dict__
    assert again.explain() == prog.explain()


def test_concurrent_loads_and_writes_agree(cache: Path, tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    root = write_rules(tmp_path / "rules")
    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(lambda _: answer(Program.from_file(root)), range(24)))
    assert answers == [[(2,), (3,)]] * 24
    assert [p.name for p in cache.iterdir() if not p.name.endswith(".pickle")] == []  # no temp file left
    assert len(entries(cache)) == 1
