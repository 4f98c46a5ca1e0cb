"""Atomic file output: write to a temporary file next to the target, then rename it over the target, so a
reader never sees a partial file and a failed run leaves no output behind."""

from __future__ import annotations

import os
import tempfile

from anchorlog.errors import InputError


def check_writable(path: str | os.PathLike) -> None:
    """Raise :class:`InputError` unless a file can be created at ``path`` (checked before long work starts,
    so that the user learns about a bad output path at once)."""
    path = os.fspath(path)
    if not path:
        raise InputError("empty output path")
    if os.path.isdir(path):
        raise InputError("output path is a directory", path)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise InputError("cannot write output: directory does not exist", path)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError("cannot write output: permission denied", path)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise InputError("cannot write output: file is not writable", path)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; errors raise :class:`InputError` naming the path."""
    path = os.fspath(path)
    check_writable(path)
    parent = os.path.dirname(os.path.abspath(path))
    fd = -1
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=parent)
        with os.fdopen(fd, "wb") as f:
            fd = -1
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(path):
            # keep the permission bits of the file being replaced
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
        tmp = ""
    except OSError as e:
        raise InputError(f"cannot write output: {e.strerror or e}", path) from None
    finally:
        if fd >= 0:
            os.close(fd)
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8", "surrogateescape"))
