"""Test-session plumbing.

DuckDB's Python module (built with nanobind) reports its own module-level functions as "leaked" when the
interpreter tears down after it was imported, burying pytest's summary line under dozens of lines of noise.
Nothing of ours leaks; so once pytest has printed its summary, the process ends with pytest's exit status
without running that teardown.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import pytest

_exit_status: list[int] = []

# The on-disk rule-program cache (anchorlog/queries/progcache.py) of this test session lives in a private temp
# folder (removed at the end), never in the user's ~/.cache; child processes (CLI tests) inherit it.
_PROGRAM_CACHE = tempfile.mkdtemp(prefix="anchorlog-test-cache-")
os.environ["ANCHORLOG_CACHE_DIR"] = _PROGRAM_CACHE


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _exit_status.append(int(exitstatus))
    shutil.rmtree(_PROGRAM_CACHE, ignore_errors=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _exit_status and "duckdb" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status[-1])
