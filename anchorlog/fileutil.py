"""Atomic file output: write to a temporary file next to the target, then rename it over the target, so a
reader never sees a partial file and a failed run leaves no output behind."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable

from anchorlog.errors import InputError


def check_writable(path: str | os.PathLike) -> None:
    """Raise :class:`InputError` unless a file can be created at ``path`` (checked before long work starts,
    so that the user learns about a bad output path at once).

    The check really creates (and removes) a temporary file in the target directory: permission bits and
    ``os.access`` say nothing for root, read-only mounts or pseudo file systems such as /proc."""
    path = os.fspath(path)
    if not path:
        raise InputError("empty output path")
    if os.path.isdir(path):
        raise InputError("output path is a directory", path)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        what = "is not a directory" if os.path.exists(parent) else "does not exist"
        raise InputError(f"cannot write output: {parent} {what}", path)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError("cannot write output: permission denied", path)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise InputError("cannot write output: file is not writable", path)
    try:
        fd, probe = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".probe", dir=parent)
    except OSError as e:
        raise InputError(f"cannot write output: cannot create a file in {parent} ({e.strerror or e})", path) from None
    os.close(fd)
    os.unlink(probe)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare the resolved paths
        return os.path.realpath(a) == os.path.realpath(b)


def check_outputs_distinct(inputs: Iterable[str | os.PathLike], outputs: Iterable[str | os.PathLike]) -> None:
    """Raise :class:`InputError` naming the path when an output would replace an input or another output
    (the same file under any spelling: symlinks, ``..``, hard links)."""
    ins = [os.fspath(p) for p in inputs]
    outs = [os.fspath(p) for p in outputs]
    for k, out in enumerate(outs):
        for src in ins:
            if _same_file(out, src):
                raise InputError(f"output would overwrite the input {src}; choose another output file", out)
        for other in outs[:k]:
            if _same_file(out, other):
                raise InputError(f"two outputs name the same file ({other}); choose different files", out)


# Suffixes a GE model is written under (text or binary); anything else is refused rather than guessed.
def model_output_kind(path: str | os.PathLike) -> str:
    """``"text"`` or ``"binary"`` for a model output path by its suffix; :class:`InputError` (listing the
    accepted suffixes) for any other suffix."""
    from anchorlog.facts.ge_io import BINARY_SUFFIXES, TEXT_SUFFIXES

    path = os.fspath(path)
    if os.path.isdir(path):
        raise InputError("output path is a directory", path)
    low = path.lower()
    if low.endswith(BINARY_SUFFIXES):
        return "binary"
    if low.endswith(TEXT_SUFFIXES):
        return "text"
    accepted = ", ".join(TEXT_SUFFIXES) + " (GE text); " + ", ".join(BINARY_SUFFIXES) + " (GE binary)"
    if low.endswith(".onnx"):
        raise InputError(f"writing ONNX is not supported; use {accepted}", path)
    suffix = os.path.splitext(path)[1] or "(none)"
    raise InputError(f"unknown model output suffix {suffix}; use {accepted}", path)


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
