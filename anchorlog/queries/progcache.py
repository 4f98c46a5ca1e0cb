"""A persistent on-disk cache of parsed and checked rule programs, in the spirit of Python's ``.pyc`` files.

Every anchorlog process used to parse its big rule files (tensor_move.dl, layout.dl, rw_types.dl, symbols.dl and
what they include) afresh; loading the pickled result of parse + checks + stratification is several times
cheaper. An entry is valid only while all of these are unchanged:

* the text of the root file and of every file it includes (their resolved paths and contents; how each
  ``.include`` name resolved is re-checked too, so a retargeted symlink is noticed),
* the path the program was loaded by (error places name it),
:data:`FORMAT` (bump it when the AST / Program classes change), the Python version and the source text of
  the engine modules that build a program (syntax.py, analysis.py, program.py, this file), so an edited parser or
  checker never meets a program it did not build (whatever anchorlog's version says: a source checkout keeps
  one version while its files change).

Where: ``$ANCHORLOG_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/anchorlog`` or ``~/.cache/anchorlog``; entries
live in its ``programs/`` folder. ``ANCHORLOG_CACHE_DIR=off`` (also ``0``, ``no``, ``none``, ``false``,
``disable``, ``disabled``; any case) turns the cache off. The cache never makes a run fail: an unreadable,
truncated, corrupt or foreign entry is ignored (and rewritten), an unwritable folder means no cache; entries are
written to a temp file and moved in place with os.replace, so concurrent processes see either the old or the new
whole entry.

Only the program state is stored (syntax tree, arities, strata). The per-program memos the evaluator attaches
later (evaluate._program_memo, the rule-atom lists keyed by id(rule)) are not: they are keyed by object ids and
database layouts of one process.
"""

from __future__ import annotations

import gc
import hashlib
import io
import os
import pickle
import sys
from pathlib import Path
from typing import Any

from .syntax import Parser, ProgramAST, Token, parse_program

FORMAT = 1  # bump when ProgramAST / the AST node classes / Stratum / what Program keeps change shape
ENV_VAR = "ANCHORLOG_CACHE_DIR"
_OFF_VALUES = {"off", "0", "no", "none", "false", "disable", "disabled"}
_ENGINE_MODULES = ("syntax.py", "analysis.py", "program.py", "progcache.py")

_fingerprint_memo: list[str] = []


def cache_dir() -> Path | None:
    """The folder program entries go to, or None when the cache is turned off (or no home folder is known)."""
    env = os.environ.get(ENV_VAR)
    if env is not None and env.strip():
        if env.strip().lower() in _OFF_VALUES:
            return None
        return Path(env).expanduser() / "programs"
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "anchorlog" / "programs"
    try:
        return Path.home() / ".cache" / "anchorlog" / "programs"
    except (RuntimeError, KeyError, OSError):
        return None


def fingerprint() -> str:
    """What every entry of this process must have been built by: format, Python version and engine sources."""
    if not _fingerprint_memo:
        h = hashlib.sha256(f"{FORMAT}|{sys.version_info[:3]}|".encode())
        here = Path(__file__).parent
        for name in _ENGINE_MODULES:
            try:
                h.update((here / name).read_bytes())
            except OSError:
                h.update(b"<missing>")
            h.update(b"\0")
        _fingerprint_memo.append(h.hexdigest())
    return _fingerprint_memo[0]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _entry_path(folder: Path, source: str, resolved: Path) -> Path:
    """One entry per rule file (and the path it is loaded by): what built it and what it read are checked
    inside, so a new anchorlog or an edited file replaces the entry instead of piling up new ones."""
    key = hashlib.sha256(f"{source}\0{resolved}".encode()).hexdigest()[:40]
    return folder / f"{key}.pickle"


def parse_recording(text: str, file: str, base_dir: Path) -> tuple[ProgramAST, list[tuple[str, str, str]]]:
    """:func:`parse_program`, also answering what each ``.include`` read: [(base/name, resolved path, digest)].
    The digest is taken before the parser reads the file: if the file changes in between, the entry's digest
    is the older content's and the entry is found stale later (never a new tree under an old digest)."""
    includes: list[tuple[str, str, str]] = []

    class RecordingParser(Parser):
        def include(self, name: str, tok: Token) -> None:
            base = self.base_dir if self.base_dir is not None else Path.cwd()
            path = (base / name).resolve()
            try:
                digest = _digest(path.read_bytes())
            except OSError:
                digest = "<unreadable>"  # the parser reports the missing file; nothing gets stored
            includes.append((str(base / name), str(path), digest))
            super().include(name, tok)

    ast = parse_program(text, file, base_dir, parser=RecordingParser)
    return ast, includes


def _deps_valid(deps: Any, links: Any, root: Path, root_text: str) -> bool:
    if not isinstance(deps, list) or not isinstance(links, list):
        return False
    for path, digest in deps:
        if path == str(root):
            data = root_text.encode("utf-8")
        else:
            try:
                data = Path(path).read_bytes()
            except OSError:
                return False
        if _digest(data) != digest:
            return False
    for written, resolved in links:
        try:
            if str(Path(written).resolve()) != resolved:
                return False
        except (OSError, RuntimeError):
            return False
    return True


def load(source: str, resolved: Path, text: str) -> tuple[ProgramAST, dict[str, int], list] | None:
    """The stored (ast, arity, strata) of the rule file `resolved` (loaded as `source`, current root text
    `text`), or None when the cache is off or holds no valid entry. Never raises."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        data = _entry_path(folder, source, resolved).read_bytes()
    except (OSError, ValueError):
        return None
    was_enabled = gc.isenabled()
    gc.disable()  # unpickling allocates ~10^5 small objects; collections in between only cost time
    try:
        stream = io.BytesIO(data)
        header = pickle.load(stream)
        if not (
            isinstance(header, dict)
            and header.get("format") == FORMAT
            and header.get("fingerprint") == fingerprint()
            and header.get("source") == source
            and header.get("resolved") == str(resolved)
            and _deps_valid(header.get("deps"), header.get("links"), resolved, text)
        ):
            return None
        state = pickle.load(stream)
        ast, arity, strata = state
        if not (isinstance(ast, ProgramAST) and isinstance(arity, dict) and isinstance(strata, list)):
            return None
        return ast, arity, strata
    except Exception:  # truncated, corrupt, or pickled by other code: ignore it, it gets rewritten
        return None
    finally:
        if was_enabled:
            gc.enable()


def store(
    source: str,
    resolved: Path,
    text: str,
    includes: list[tuple[str, str, str]],
    ast: ProgramAST,
    arity: dict[str, int],
    strata: list,
) -> None:
    """Write an entry for a freshly parsed and checked program; silently nothing when that is not possible."""
    folder = cache_dir()
    if folder is None:
        return
    try:
        deps = [(str(resolved), _digest(text.encode("utf-8")))]
        deps += list(dict.fromkeys((path, digest) for _, path, digest in includes if path != str(resolved)))
        links = [(written, path) for written, path, _ in includes]
        header = {
            "format": FORMAT,
            "fingerprint": fingerprint(),
            "source": source,
            "resolved": str(resolved),
            "deps": deps,
            "links": links,
        }
        payload = pickle.dumps(header, protocol=pickle.HIGHEST_PROTOCOL) + pickle.dumps(
            (ast, arity, strata), protocol=pickle.HIGHEST_PROTOCOL
        )
        import tempfile

        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".pickle")
    except Exception:  # unreadable include, unpicklable tree, unwritable folder: no cache this time
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, _entry_path(folder, source, resolved))
    except Exception:
        try:
            os.unlink(tmp)
        except OSError:
            pass
