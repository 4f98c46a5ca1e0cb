"""A file of an earlier commit imported as a module of its own: the old code as the oracle for a rewrite.

The old file imports the current package for everything else (a dotted ``name`` inside a package resolves its
relative imports there). Without git or the commit (a shallow clone, an unpacked archive) the loader gives None
and the tests that need it skip."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from types import ModuleType

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def git_module(rev: str, path: str, name: str) -> ModuleType | None:
    """The file ``path`` of commit ``rev`` imported as module ``name``, or None when git cannot show it."""
    try:
        text = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    file = os.path.join(tempfile.mkdtemp(prefix=f"{name.replace('.', '_')}_"), os.path.basename(path))
    with open(file, "w") as f:
        f.write(text.stdout)
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
