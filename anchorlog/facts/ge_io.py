"""Reading and writing GE graph dumps (``ge.proto.ModelDef``) as the IR of :mod:`anchorlog.facts.graph`.

Formats: protobuf text (``.pbtxt``/``.txt``, what ``DUMP_GE_GRAPH`` writes) and binary (``.pb``).

* Text is parsed by our own scanner, not by protobuf's pure-Python ``text_format`` (far too slow for
  100k-node graphs). Dumps laid out the way protobuf's printer writes them (one field per line) take a fast
  path that turns the text into JSON with a few C-level string passes and lets ``json`` build the tree;
  anything else (hand-written files, comments, several fields on a line, ``<>`` or ``[]`` syntax) goes
  through a general tokenizer. Both produce the same generic tree, from which the IR is built. Before that,
  the descriptor and attr blocks of a printer-shaped dump are cut out and each distinct one is parsed once
  (see ``_read_cut_text``): large models repeat a few thousand block texts hundreds of thousands of times.
* Binary goes through the generated protobuf classes (``ge_ir_pb2``; upb parses in C).

Nothing is lost: every known field the IR does not model is kept in the owner's ``other`` dict (keyed by
field name, repeated fields as lists, sub-messages as generic trees), fields our schema does not know are
kept in ``extra`` (text: ``(name, value)`` generic trees; binary: ``("#wire", raw bytes)``) and written back.

Generic tree: a message is a flat list ``[name1, value1, name2, value2, ...]`` in read order; a value is a
nested list (message), ``str`` (a string literal), ``int``, ``float``, a ``str`` ending in ``"\x01"`` (a bare
identifier such as an enum name or ``true``; the marker is stripped to get the name), or a byte string:
``bytes`` or a ``str`` ending in ``"\x02"`` holding latin-1 text (used for literals that are not UTF-8 or
that end in a marker character).

Proto3 semantics are followed: a scalar field that is absent reads as its zero value (an op without ``id``
has id 0) and zero values are not written.
"""

from __future__ import annotations

import codecs
import json
import math
import mmap
import os
import re
import struct
import threading
from typing import Any

from anchorlog.errors import InputError
from anchorlog.facts.graph import (
    SCALAR_KINDS,
    Attr,
    AttrList,
    Graph,
    Model,
    NamedAttrs,
    Node,
    TensorDef,
    TensorDesc,
)
from anchorlog.gcpause import paused_gc

__all__ = [
    "read_model",
    "read_model_text",
    "read_model_bytes",
    "write_model",
    "model_to_text",
    "model_to_bytes",
    "parse_text_tree",
    "format_float",
    "TEXT_SUFFIXES",
    "BINARY_SUFFIXES",
]

TEXT_SUFFIXES = (".pbtxt", ".txt", ".prototxt", ".textproto")
BINARY_SUFFIXES = (".pb", ".bin", ".om.pb")


# ----------------------------------------------------------------------------------------------------------
# Schema facts (names and numbers of ge_ir.proto) used by the text writer and the generic converters
# ----------------------------------------------------------------------------------------------------------
DATA_TYPES = (
    "DT_UNDEFINED DT_FLOAT DT_FLOAT16 DT_INT8 DT_UINT8 DT_INT16 DT_UINT16 DT_INT32 DT_INT64 DT_UINT32 "
    "DT_UINT64 DT_BOOL DT_DOUBLE DT_STRING DT_DUAL_SUB_INT8 DT_DUAL_SUB_UINT8 DT_COMPLEX64 DT_COMPLEX128 "
    "DT_QINT8 DT_QINT16 DT_QINT32 DT_QUINT8 DT_QUINT16 DT_RESOURCE DT_STRING_REF DT_DUAL DT_VARIANT DT_BF16 "
    "DT_INT4 DT_UINT1 DT_INT2 DT_UINT2 DT_COMPLEX32 DT_HIFLOAT8 DT_FLOAT8_E5M2 DT_FLOAT8_E4M3FN "
    "DT_FLOAT8_E8M0 DT_FLOAT6_E3M2 DT_FLOAT6_E2M3 DT_FLOAT4_E2M1 DT_FLOAT4_E1M2 DT_HIFLOAT4 DT_HIFLOAT4_SCALE"
).split()
DTYPE_NUM = {n: i for i, n in enumerate(DATA_TYPES)}
VAL_TYPES = (
    "VT_LIST_NONE VT_LIST_STRING VT_LIST_INT VT_LIST_FLOAT VT_LIST_BOOL VT_LIST_BYTES VT_LIST_TENSOR_DESC "
    "VT_LIST_TENSOR VT_LIST_GRAPH VT_LIST_NAMED_ATTRS VT_LIST_DATA_TYPE"
).split()
VAL_TYPE_NUM = {n: i for i, n in enumerate(VAL_TYPES)}

# AttrDef oneof members and ListValue members with their field numbers (text output is in number order).
ATTR_FIELD_NUM = {
    "list": 1, "s": 2, "i": 3, "f": 4, "b": 5, "bt": 7, "func": 10, "td": 11, "t": 12, "g": 13,
    "list_list_int": 14, "dt": 15, "list_list_float": 16, "expression": 17,
}  # fmt: skip
LIST_FIELD_NUM = {"s": 2, "i": 3, "f": 4, "b": 5, "bt": 7, "td": 8, "t": 9, "g": 10, "na": 11, "dt": 12}

# Known-but-unmodelled fields kept in ``other``: name -> (field number, kind). Kinds: "str", "int", "bool",
# "msg" (generic tree), with a leading "*" when repeated.
OP_OTHER = {
    "attr_groups": (11, "msg"), "has_out_attr": (20, "bool"), "input_name": (23, "*str"),
    "src_name": (24, "*str"), "src_index": (25, "*int"), "dst_name": (26, "*str"), "dst_index": (27, "*int"),
    "input_i": (28, "*int"), "output_i": (29, "*int"), "workspace": (30, "*int"),
    "workspace_bytes": (31, "*int"), "is_input_const": (32, "*bool"),
}  # fmt: skip
TD_OTHER = {
    "attr_groups": (6, "msg"), "has_out_attr": (9, "bool"), "weight_size": (11, "int"),
    "output_tensor": (13, "bool"), "device_type": (14, "str"), "input_tensor": (15, "bool"),
    "real_dim_cnt": (16, "int"), "data_offset": (18, "int"), "cmps_size": (19, "int"), "cmps_tab": (20, "str"),
    "cmps_tab_offset": (21, "int"),
}  # fmt: skip
GRAPH_OTHER = {"attr_groups": (12, "msg")}
MODEL_OTHER = {"attr_groups": (12, "msg")}


# ----------------------------------------------------------------------------------------------------------
# Strings and numbers
# ----------------------------------------------------------------------------------------------------------
_ESCAPE_RE = re.compile(
    r"\\(?:([0-7]{1,3})|[xX]([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.))|([^\\]+)", re.S
)
_SIMPLE_ESC = {"n": b"\n", "t": b"\t", "r": b"\r", '"': b'"', "'": b"'", "\\": b"\\", "a": b"\a", "b": b"\b",
               "f": b"\f", "v": b"\v", "?": b"?"}  # fmt: skip


_PRINTER_ESCAPES = re.compile(r"(?:[^\\]|\\(?:[0-3][0-7][0-7]|[nrt\"'\\]))*", re.S)


def unescape(body: str) -> str | bytes:
    """Decode the inside of a text-format string literal: C escapes and octal/hex bytes. The result is a
    ``str`` when the bytes are UTF-8, else ``bytes``."""
    if "\\" not in body:
        return body
    if _PRINTER_ESCAPES.fullmatch(body) is not None:
        # only the escapes protobuf's printer writes (3-digit octal, \n \r \t \" \' \\): Python's C decoder
        # reads them exactly the same (constant tensor data is full of octal bytes)
        raw = codecs.escape_decode(body.encode("utf-8", "surrogateescape"))[0]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
    out = bytearray()
    for m in _ESCAPE_RE.finditer(body):
        octal, hexa, u4, u8, simple, plain = m.groups()
        if plain is not None:
            out += plain.encode("utf-8", "surrogateescape")
        elif octal is not None:
            out.append(int(octal, 8) & 0xFF)
        elif hexa is not None:
            out.append(int(hexa, 16))
        elif u4 is not None or u8 is not None:
            out += chr(int(u4 or u8, 16)).encode("utf-8", "surrogatepass")
        else:
            esc = _SIMPLE_ESC.get(simple)
            if esc is None:
                raise ValueError(f"invalid escape \\{simple}")
            out += esc
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        return bytes(out)


_NEEDS_ESCAPE = re.compile(r"[^ !#-&(-\[\]-~]")  # anything but printable ASCII without " ' \
_BYTE_ESCAPE = {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t", ord('"'): '\\"', ord("'"): "\\'",
                ord("\\"): "\\\\"}  # fmt: skip
_BYTE_TEXT = [_BYTE_ESCAPE.get(b) or (chr(b) if 0x20 <= b < 0x7F else f"\\{b:03o}") for b in range(256)]


def quote(value: str | bytes) -> str:
    """A text-format string literal escaped like protobuf's printer (C escapes, octal for other bytes)."""
    if isinstance(value, str):
        if not _NEEDS_ESCAPE.search(value):
            return f'"{value}"'
        value = value.encode("utf-8", "surrogateescape")
    elif not isinstance(value, (bytes, bytearray)):
        return quote(str(value))  # a non-string stored where a string belongs: write its text
    return '"' + "".join([_BYTE_TEXT[b] for b in value]) + '"'


_F32 = struct.Struct("<f")


def to_float32(x: float) -> float:
    """``x`` rounded to the nearest IEEE single (what a proto ``float`` field stores)."""
    try:
        return _F32.unpack(_F32.pack(x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def format_float(x: float) -> str:
    """Shortest text for a proto ``float`` as protobuf's C++ printer writes it (6 significant digits when
    that reads back to the same single, else 9)."""
    if x != x:
        return "nan"
    if x in (math.inf, -math.inf):
        return "inf" if x > 0 else "-inf"
    if x == 0 and math.copysign(1.0, x) < 0:
        return "-0.0"  # "-0" (the C++ printer's text) would read back as the integer 0 and lose the sign
    s = f"{x:.6g}"
    if to_float32(float(s)) == to_float32(x):
        return s
    return f"{x:.9g}"


def format_double(x: float) -> str:
    if x != x:
        return "nan"
    if x in (math.inf, -math.inf):
        return "inf" if x > 0 else "-inf"
    return repr(x)


# ----------------------------------------------------------------------------------------------------------
# Text: general tokenizer + recursive-descent parser into the generic tree
# ----------------------------------------------------------------------------------------------------------
_TOKEN_RE = re.compile(
    r"""(?P<ws>(?:[ \t\r\n\f\v]+|\#[^\n]*)+)
      |(?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
      |(?P<num>-?(?:0[xX][0-9a-fA-F]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fF]?)(?![\w.]))
      |(?P<ident>-?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
      |(?P<punct>[{}<>\[\]:,;/])
    """,
    re.X,
)
_INT_RE = re.compile(r"-?(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)\Z")


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


class _TextSyntaxError(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.pos = pos


def _number(tok: str) -> int | float:
    if _INT_RE.match(tok):
        neg = tok.startswith("-")
        body = tok[1:] if neg else tok
        if body[:2] in ("0x", "0X"):
            v = int(body, 16)
        elif len(body) > 1 and body[0] == "0":
            v = int(body, 8)
        else:
            v = int(body)
        return -v if neg else v
    return float(tok.rstrip("fF"))


def _tokenize(text: str) -> list[tuple[str, str, int]]:
    toks: list[tuple[str, str, int]] = []
    pos = 0
    n = len(text)
    match = _TOKEN_RE.match
    while pos < n:
        m = match(text, pos)
        if m is None:
            raise _TextSyntaxError(f"unexpected character {text[pos]!r}", pos)
        kind = m.lastgroup
        if kind != "ws":
            toks.append((kind, m.group(), pos))  # type: ignore[arg-type]
        pos = m.end()
    toks.append(("eof", "", n))
    return toks


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0

    def fail(self, msg: str, tok: tuple[str, str, int] | None = None) -> None:
        tok = tok or self.toks[self.i]
        raise _TextSyntaxError(msg, tok[2])

    def parse(self) -> list:
        out = self.message(None)
        return out

    def message(self, closer: str | None) -> list:
        toks = self.toks
        out: list = []
        while True:
            kind, val, pos = toks[self.i]
            if kind == "eof":
                if closer is not None:
                    self.fail(f"expected {closer!r} before end of input")
                return out
            if kind == "punct" and val in "}>":
                if closer != val:
                    self.fail(f"unexpected {val!r}")
                self.i += 1
                return out
            if kind == "ident" and not val.startswith("-"):
                name = val
            elif kind == "punct" and val == "[":  # extension or Any type URL: [pkg.name] / [type.googleapis.com/x]
                j = self.i + 1
                while toks[j][0] != "eof" and toks[j][1] != "]":
                    j += 1
                if toks[j][0] == "eof":
                    self.fail("unterminated '[' in field name")
                name = "[" + self.text[toks[self.i + 1][2] : toks[j][2]].strip() + "]"
                self.i = j
            elif kind == "num" and val.isdigit():
                name = val  # unknown field printed by number
            else:
                self.fail(f"expected a field name, found {val!r}" if val else "expected a field name")
            self.i += 1
            kind, val, pos = toks[self.i]
            colon = kind == "punct" and val == ":"
            if colon:
                self.i += 1
                kind, val, pos = toks[self.i]
            if kind == "punct" and val in "{<":
                self.i += 1
                out.append(name)
                out.append(self.message("}" if val == "{" else ">"))
            elif kind == "punct" and val == "[":
                if not colon:
                    self.fail("expected ':' before '['")
                self.i += 1
                if toks[self.i][1] == "]" and toks[self.i][0] == "punct":
                    self.i += 1
                else:
                    while True:
                        k2, v2, _ = toks[self.i]
                        if k2 == "punct" and v2 in "{<":
                            self.i += 1
                            out.append(name)
                            out.append(self.message("}" if v2 == "{" else ">"))
                        else:
                            out.append(name)
                            out.append(self.scalar())
                        k2, v2, _ = toks[self.i]
                        self.i += 1
                        if k2 == "punct" and v2 == "]":
                            break
                        if not (k2 == "punct" and v2 == ","):
                            self.fail("expected ',' or ']' in list", toks[self.i - 1])
            else:
                if not colon:
                    self.fail(f"expected ':' or '{{' after field name {name!r}")
                out.append(name)
                out.append(self.scalar())
            kind, val, _ = toks[self.i]
            if kind == "punct" and val in ",;":
                self.i += 1

    def scalar(self) -> Any:
        kind, val, pos = self.toks[self.i]
        if kind == "str":
            parts = []
            while kind == "str":
                try:
                    parts.append(unescape(val[1:-1]))
                except ValueError as e:
                    self.fail(str(e))
                self.i += 1
                kind, val, pos = self.toks[self.i]
            if len(parts) == 1 and isinstance(parts[0], str):
                value: str | bytes = parts[0]
            else:
                value = b"".join(p if isinstance(p, bytes) else p.encode("utf-8", "surrogateescape") for p in parts)
                try:
                    value = value.decode("utf-8")
                except UnicodeDecodeError:
                    return value
            # A string ending in the identifier marker travels as bytes so it cannot be taken for one.
            return value.encode("utf-8", "surrogateescape") if value[-1:] in ("\x01", "\x02") else value
        if kind == "num":
            self.i += 1
            try:
                return _number(val)
            except ValueError:
                self.fail(f"bad number {val!r}")
        if kind == "ident":
            self.i += 1
            return val + "\x01"
        self.fail(f"expected a value, found {val!r}" if val else "expected a value")


def parse_text_tree(text: str) -> list:
    """Parse protobuf text format into the generic tree (raises ``_TextSyntaxError`` with a position)."""
    return _Parser(text).parse()


# ----------------------------------------------------------------------------------------------------------
# Text fast path: printer-shaped dumps -> JSON -> generic tree
# ----------------------------------------------------------------------------------------------------------
# Turns a dump laid out as protobuf's printer writes it (every line `key: value`, `key {` or `}`) into JSON
# with a few C-level passes: each key line becomes `,"key",value` or `,"key",[`, `}` becomes `]`, bare
# identifiers become strings marked with a trailing \x01, and the few lines holding escapes are re-encoded
# one by one. The passes only touch a line start, the text right after a key, or a line ending, so string
# contents stay intact. Input laid out any other way (several fields on a line, comments, `<>`, `[...]`
# lists, ...) makes invalid JSON or is caught explicitly, and goes to the general parser.
# Python 3.11's re.sub expands a group-referencing template in Python for every match, so the passes use
# literal replacements (expanded in C) and lookaheads; only identifier lines go through a callback.
_FAST_SCALAR_SEP = re.compile(r': (?=[^"\n]*\n)')  # `key: 12` / `key: NAME` (the rest of the line has no quote)
_FAST_IDENT = re.compile(r'",(-?[A-Za-z_][A-Za-z0-9_]*)\n')
_FAST_LIST_SYNTAX = re.compile(r'",\[[^\n]')
_FAST_ESCAPED_LINE = re.compile(r'([ ]*[A-Za-z_][A-Za-z0-9_]*: )"((?:[^"\\\n]|\\.)*)"')
_IDENT_JSON: dict[str, str] = {}


def _ident_json(m: re.Match) -> str:
    name = m.group(1)
    out = _IDENT_JSON.get(name)
    if out is None:
        out = _IDENT_JSON[name] = '","' + name + '\\u0001"\n'
    return out


def _json_string_value(value: str | bytes) -> str:
    """A JSON string for a decoded literal; byte strings (and strings ending in a marker) as latin-1 text
    marked with a trailing \x02."""
    if isinstance(value, bytes) or value[-1:] in ("\x01", "\x02"):
        raw = value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")
        return json.dumps(raw.decode("latin-1") + "\x02")
    return json.dumps(value)


def _reencode_escaped_lines(text: str) -> str | None:
    """Lines holding a backslash (escaped string values) with the literal rewritten as a JSON string."""
    parts: list[str] = []
    last = 0
    pos = text.find("\\")
    while pos >= 0:
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        if end < 0:
            end = len(text)
        m = _FAST_ESCAPED_LINE.fullmatch(text, start, end)
        if m is None:
            return None
        try:
            value = unescape(m.group(2))
        except ValueError:
            return None
        parts.append(text[last:start])
        parts.append(m.group(1) + _json_string_value(value))
        last = end
        pos = text.find("\\", end)
    parts.append(text[last:])
    return "".join(parts)


def _strip_indentation(text: str) -> str:
    """Remove leading spaces of every line with a few C-level replaces (16, 8, 4, 2, 1 spaces at a time;
    cheaper than one regex match per line)."""
    deep = "\n" + " " * 16
    while deep in text:
        text = text.replace(deep, "\n")
    for n in (8, 4, 2, 1):
        text = text.replace("\n" + " " * n, "\n")
    return text


def _fast_tree(text: str) -> list | None:
    """The generic tree of a printer-shaped dump, or None when the text is not shaped like one."""
    if "\t" in text or "\r" in text:
        return None  # tab indentation or CRLF: not a printer's layout
    escaped = "\\" in text
    if len(text) <= _FAST_CHUNK_CHARS:
        if escaped:
            text = _reencode_escaped_lines(text)  # type: ignore[assignment]
            if text is None:
                return None
        body = _json_lines("\n" + text + ("" if not text or text.endswith("\n") else "\n"))
        if body is None:
            return None
        body = "[" + body[2:] + "]"
    else:
        # Every rewrite is local to one line, so the text is rewritten in pieces of whole lines that stay in
        # the CPU cache (one pass per rewrite over a 150 MB string is memory bound) and joined once.
        if not text.endswith("\n"):
            text += "\n"
        pieces = ["["]
        pos = 0
        n = len(text)
        while pos < n:
            # end a piece after a closing-brace line, so no piece ends with an opened block (the `[\n,` fix)
            end = text.find("}\n", pos + _FAST_CHUNK_CHARS)
            end = n if end < 0 else end + 2
            chunk = text[pos:end]
            if escaped and "\\" in chunk:
                # lines holding escapes (constant tensor data) are rewritten piece by piece too
                chunk = _reencode_escaped_lines(chunk)  # type: ignore[assignment]
                if chunk is None:
                    return None
            piece = _json_lines("\n" + chunk)
            if piece is None:
                return None
            pieces.append(piece)
            pos = end
        pieces[1] = pieces[1][2:]
        pieces.append("]")
        body = "".join(pieces)
        del pieces
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


_FAST_CHUNK_CHARS = 1 << 18


def _json_lines(text: str) -> str | None:
    """The JSON-array-element form of ``text`` (``"\n" + whole lines``, each ending in a newline), without
    the trailing ``\n,"``: every line becomes ``\n,"key",value`` (or ``\n,"key",[`` / ``\n]``). None when
    the lines use syntax only the general parser reads."""
    # `",[` followed by more on the line only comes from a `key: [` list or from string contents: without
    # either in the text, the search for it after the rewrite is skipped
    maybe_list = ": [" in text or '",[' in text
    body = _strip_indentation(text).replace("\n", '\n,"')  # every line now starts with `,"`
    # A string value ending in ": " would look like a separator: escape that space first (JSON \u0020).
    body = body.replace(': "\n', ':\\u0020"\n')
    body = body.replace(',"}', "]").replace(" {\n", '",[\n').replace(': "', '","')
    body = _FAST_SCALAR_SEP.sub('",', body)
    if maybe_list and _FAST_LIST_SYNTAX.search(body):
        return None  # `key: [a, b]` lists: the general parser handles them
    body = _FAST_IDENT.sub(_ident_json, body)
    return body[:-3].replace("[\n,", "[\n")


# ----------------------------------------------------------------------------------------------------------
# Generic tree -> IR
# ----------------------------------------------------------------------------------------------------------
class _TreeError(Exception):
    """A field with a value of the wrong type; carries a path for the message."""


def _pairs(t: list):
    it = iter(t)
    return zip(it, it)


def _ident(v: Any) -> str | None:
    """The name of a bare identifier value, None for anything else."""
    if type(v) is str and v[-1:] == "\x01":
        return v[:-1]
    return None


def _bytes_value(v: Any) -> bytes | None:
    if isinstance(v, bytes):
        return v
    if type(v) is str and v[-1:] == "\x02":
        return v[:-1].encode("latin-1")
    return None


def _as_str(v: Any, field: str) -> str:
    if type(v) is str:
        tail = v[-1:]
        if tail != "\x01" and tail != "\x02":  # a plain string (the common case)
            return v
        if tail == "\x02":
            return v[:-1].encode("latin-1").decode("utf-8", "surrogateescape")
    elif isinstance(v, bytes):
        return v.decode("utf-8", "surrogateescape")
    raise _TreeError(f"field {field!r} expects a string, found {_show(v)}")


def _as_bytes_or_str(v: Any, field: str) -> str | bytes:
    """A proto ``bytes`` value: str when UTF-8, else bytes."""
    if type(v) is str:
        tail = v[-1:]
        if tail != "\x01" and tail != "\x02":
            return v
    raw = _bytes_value(v)
    if raw is not None:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
    raise _TreeError(f"field {field!r} expects a string, found {_show(v)}")


def _as_int(v: Any, field: str) -> int:
    if type(v) is int:
        return v
    raise _TreeError(f"field {field!r} expects an integer, found {_show(v)}")


def _as_float(v: Any, field: str) -> float:
    if type(v) is float or type(v) is int:
        return to_float32(float(v))
    name = _ident(v)
    if name is not None:
        low = name.lower()
        if low in ("inf", "infinity", "-inf", "-infinity", "nan", "-nan"):
            return float(low)
    raise _TreeError(f"field {field!r} expects a number, found {_show(v)}")


def _as_bool(v: Any, field: str) -> bool:
    name = _ident(v)
    if name is not None:
        if name in ("true", "True", "t"):
            return True
        if name in ("false", "False", "f"):
            return False
    elif type(v) is int and v in (0, 1):
        return bool(v)
    raise _TreeError(f"field {field!r} expects true or false, found {_show(v)}")


def _as_enum(v: Any, field: str, names: dict[str, int], values: list[str] | tuple[str, ...]) -> int:
    name = _ident(v)
    if name is not None:
        if name in names:
            return names[name]
        raise _TreeError(f"field {field!r}: unknown value {name}")
    if type(v) is int:
        return v
    raise _TreeError(f"field {field!r} expects an enum value, found {_show(v)}")


def _as_msg(v: Any, field: str) -> list:
    if type(v) is list:
        return v
    raise _TreeError(f"field {field!r} expects a message {{...}}, found {_show(v)}")


def _show(v: Any) -> str:
    if isinstance(v, list):
        return "a message"
    name = _ident(v)
    if name is not None:
        return name
    return repr(v)


def _dtype_name(num: int) -> str:
    return DATA_TYPES[num] if 0 <= num < len(DATA_TYPES) else str(num)


def _scalar_other(kind: str, v: Any, field: str) -> Any:
    k = kind.lstrip("*")
    if k == "str":
        return _as_str(v, field)
    if k == "int":
        return _as_int(v, field)
    if k == "bool":
        return _as_bool(v, field)
    return _as_msg(v, field)


def _store_other(other: dict[str, Any], spec: tuple[int, str], name: str, v: Any) -> None:
    kind = spec[1]
    value = _scalar_other(kind, v, name)
    if kind.startswith("*"):
        other.setdefault(name, []).append(value)
    elif kind == "msg":
        prev = other.get(name)
        other[name] = value if prev is None else prev + value  # repeated occurrences merge
    elif value:
        other[name] = value
    else:
        other.pop(name, None)  # zero value (last one wins): proto3 does not keep it


def _attr_entry(t: list, field: str) -> tuple[str, Attr]:
    # Fast path: `attr { key: "k" value { <kind>: <scalar> } }` as every printer writes it.
    if type(t) is list and len(t) == 4 and t[0] == "key" and t[2] == "value":
        key = t[1]
        value = t[3]
        if type(key) is str and key[-1:] > "\x02" and type(value) is list:
            if len(value) == 2:
                kind = value[0]
                v = value[1]
                tv = type(v)
                if kind == "i" and tv is int or kind == "s" and tv is str and v[-1:] > "\x02":
                    return key, Attr(kind, v)
                if kind == "list" and tv is list:
                    return key, Attr("list", _list_from_tree(v))
                if kind == "b" and (v == "true\x01" or v == "false\x01"):
                    return key, Attr("b", v == "true\x01")
            return key, _attr_from_tree(value)
    key = ""
    attr: Attr | None = None
    it = iter(_as_msg(t, field))
    for k, v in zip(it, it):
        if k == "key":
            key = _as_str(v, "key")
        elif k == "value":
            attr = _attr_from_tree(_as_msg(v, "value"))
        else:
            raise _TreeError(f"map entry {field!r} has unknown field {k!r}")
    return key, attr if attr is not None else Attr(None)


def _attr_map_into(attrs: dict[str, Attr], v: Any, field: str = "attr") -> None:
    if type(v) is int and _CUT is not None and field == "attr":
        attrs.update(_CUT.take(v))  # attr blocks cut out of the text (see _read_cut_text)
        return
    key, attr = _attr_entry(v, field)
    attrs[key] = attr


def _attr_from_tree(t: list) -> Attr:
    kind: str | None = None
    value: Any = None
    extra: list = []
    for k, v in _pairs(t):
        if k == "s" or k == "expression":
            value = _as_bytes_or_str(v, k)
        elif k == "i":
            value = _as_int(v, k)
        elif k == "b":
            value = _as_bool(v, k)
        elif k == "f":
            value = _as_float(v, k)
        elif k == "list":
            value = _list_from_tree(_as_msg(v, k))
        elif k == "dt":
            value = _as_enum(v, k, DTYPE_NUM, DATA_TYPES)
        elif k == "bt":
            value = _as_bytes_or_str(v, k)
            if isinstance(value, str):
                value = value.encode("utf-8", "surrogateescape")
        elif k == "func":
            value = _named_attrs_from_tree(_as_msg(v, k))
        elif k == "td":
            value = _tensor_desc_from_tree(_as_msg(v, k))
        elif k == "t":
            value = _tensor_def_from_tree(_as_msg(v, k))
        elif k == "g":
            value = _graph_from_tree(_as_msg(v, k))
        elif k == "list_list_int":
            value = _list_list_from_tree(_as_msg(v, k), "list_list_i", "list_i", _as_int)
        elif k == "list_list_float":
            value = _list_list_from_tree(_as_msg(v, k), "list_list_f", "list_f", _as_float)
        else:
            extra.append(k)
            extra.append(v)
            continue
        kind = k  # oneof: the last member set wins, as in protobuf
    return Attr(kind, value, extra) if extra else Attr(kind, value)


def _list_list_from_tree(t: list, outer: str, inner: str, conv) -> list[list]:
    rows: list[list] = []
    for k, v in _pairs(t):
        if k != outer:
            raise _TreeError(f"unknown field {k!r} in {outer}")
        row = []
        for k2, v2 in _pairs(_as_msg(v, outer)):
            if k2 != inner:
                raise _TreeError(f"unknown field {k2!r} in {outer}")
            row.append(conv(v2, inner))
        rows.append(row)
    return rows


_LIST_CONV = {
    "s": _as_bytes_or_str,
    "i": _as_int,
    "f": _as_float,
    "b": _as_bool,
}


_FAST_LIST_TYPES = {"i": int, "s": str}


def _list_from_tree(t: list) -> AttrList:
    # Fast path: one element kind (ints or plain strings), optionally followed by val_type.
    n = len(t)
    if n >= 2:
        body = t
        val_type: int | None = None
        if t[-2] == "val_type":
            vt = t[-1]
            if type(vt) is str and vt[-1:] == "\x01" and vt[:-1] in VAL_TYPE_NUM:
                val_type = VAL_TYPE_NUM[vt[:-1]] or None
                body = t[:-2]
            else:
                body = None  # type: ignore[assignment]
        if body is not None and body:
            keys = body[0::2]
            k0 = keys[0]
            want = _FAST_LIST_TYPES.get(k0)
            if want is not None and keys.count(k0) == len(keys):
                items = body[1::2]
                if set(map(type, items)) == {want} and (
                    want is int or not any(x[-1:] in ("\x01", "\x02") for x in items)
                ):
                    return AttrList(k0, items, val_type)
        elif body is not None:
            return AttrList(None, [], val_type)
    return _list_from_tree_general(t)


def _list_from_tree_general(t: list) -> AttrList:
    kind: str | None = None
    items: list[Any] = []
    other: dict[str, list[Any]] = {}
    val_type: int | None = None
    for k, v in _pairs(t):
        if k == "val_type":
            val_type = _as_enum(v, k, VAL_TYPE_NUM, VAL_TYPES)
            continue
        conv = _LIST_CONV.get(k)
        if conv is not None:
            item = conv(v, k)
        elif k == "bt":
            item = _as_bytes_or_str(v, k)
            if isinstance(item, str):
                item = item.encode("utf-8", "surrogateescape")
        elif k == "dt":
            item = _as_enum(v, k, DTYPE_NUM, DATA_TYPES)
        elif k == "td":
            item = _tensor_desc_from_tree(_as_msg(v, k))
        elif k == "t":
            item = _tensor_def_from_tree(_as_msg(v, k))
        elif k == "g":
            item = _graph_from_tree(_as_msg(v, k))
        elif k == "na":
            item = _named_attrs_from_tree(_as_msg(v, k))
        else:
            other.setdefault("#extra", []).extend((k, v))
            continue
        if kind is None:
            kind = k
        if k == kind:
            items.append(item)
        else:
            other.setdefault(k, []).append(item)
    if val_type == 0:
        val_type = None
    return AttrList(kind, items, val_type, other)


def _named_attrs_from_tree(t: list) -> NamedAttrs:
    na = NamedAttrs()
    for k, v in _pairs(t):
        if k == "name":
            na.name = _as_str(v, k)
        elif k == "attr":
            _attr_map_into(na.attrs, v)
        else:
            na.extra.extend((k, v))
    return na


def _tensor_def_from_tree(t: list) -> TensorDef:
    td = TensorDef()
    for k, v in _pairs(t):
        if k == "desc":
            if type(v) is int and _CUT is not None:
                ((_, td.desc),) = _CUT.take(v)  # a block cut out of the text (see _read_cut_text)
            else:
                td.desc = _tensor_desc_from_tree(_as_msg(v, k))
        elif k == "data":
            data = _as_bytes_or_str(v, k)
            td.data = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
        else:
            td.extra.extend((k, v))
    return td


def _shape_from_tree(t: Any) -> list[int]:
    t = _as_msg(t, "shape")
    dims = t[1::2]
    if t[0::2].count("dim") * 2 == len(t) and set(map(type, dims)) <= _INT_ONLY:
        return dims
    out = []
    it = iter(t)
    for k, v in zip(it, it):
        if k != "dim":
            raise _TreeError(f"unknown field {k!r} in shape")
        out.append(_as_int(v, "dim"))
    return out


_INT_ONLY = {int}


# While a model is read: origin_format / origin_shape attr trees -> the one Attr built for each distinct value.
# GE writes both attrs on every tensor descriptor but a large model has only a few hundred distinct values;
# sharing them saves building about a million objects at 100 k nodes. Attrs are values (code replaces a
# descriptor's attr, never mutates one in place), as the generator's AttrPool assumes too.
_ORIGIN_ATTRS: dict[Any, Attr] = {}
_ORIGIN_IDS: set[int] = set()  # id() of every Attr in _ORIGIN_ATTRS (they are alive while it holds them)


def _shared_origin_attr(entry: Any) -> Attr | None:
    """The shared Attr of a printer-shaped ``origin_format`` (``s``) or ``origin_shape`` (``list``) tensor attr
    entry tree; None for anything else (the caller reads it the general way)."""
    if type(entry) is not list or len(entry) != 4 or entry[0] != "key" or entry[2] != "value":
        return None
    key = entry[1]
    if key != "origin_shape" and key != "origin_format":
        return None
    value = entry[3]
    if type(value) is not list or len(value) != 2:
        return None
    kind = value[0]
    body = value[1]
    if key == "origin_format":
        if kind != "s" or type(body) is not str or body[-1:] <= "\x02":
            return None
        memo = body
    else:
        if kind != "list" or type(body) is not list:
            return None
        memo = tuple(body)
        if float in map(type, memo):
            return None  # 1.0 == 1 and -0.0 == 0.0: equal keys would not be equal values
    try:
        attr = _ORIGIN_ATTRS.get(memo)
    except TypeError:  # a nested message in the list: not a plain shape
        return None
    if attr is None:
        attr = Attr("s", body) if kind == "s" else Attr("list", _list_from_tree(body))
        if len(_ORIGIN_ATTRS) < 100_000:
            _ORIGIN_ATTRS[memo] = attr
            _ORIGIN_IDS.add(id(attr))
    return attr


# A DataType identifier as the fast text path leaves it ("DT_FLOAT\x01") -> its name.
_DTYPE_IDENT = {n + "\x01": n for n in DATA_TYPES}


def _tensor_desc_from_tree(t: list) -> TensorDesc:
    dtype = "DT_UNDEFINED"
    shape: list[int] | None = None
    layout = name = ""
    size = reuse_input_index = 0
    reuse_input = False
    attrs: dict[str, Attr] = {}
    other: dict[str, Any] = {}
    extra: list = []
    it = iter(t)
    for k, v in zip(it, it):
        if k == "attr":
            attr = _shared_origin_attr(v)
            if attr is not None:
                attrs[v[1]] = attr
                continue
            key, attr = _attr_entry(v, "attr")
            attrs[key] = attr
        elif k == "dtype":
            if type(v) is str and v in _DTYPE_IDENT:
                dtype = _DTYPE_IDENT[v]
            else:
                dtype = _dtype_name(_as_enum(v, k, DTYPE_NUM, DATA_TYPES))
        elif k == "shape":
            dims = _shape_from_tree(v)
            shape = dims if shape is None else shape + dims  # a repeated singular message merges
        elif k == "layout":
            layout = v if type(v) is str and v[-1:] > "\x02" else _as_str(v, k)
        elif k == "size":
            size = v if type(v) is int else _as_int(v, k)
        elif k == "name":
            name = _as_str(v, k)
        elif k == "reuse_input":
            reuse_input = _as_bool(v, k)
        elif k == "reuse_input_index":
            reuse_input_index = _as_int(v, k)
        else:
            spec = TD_OTHER.get(k)
            if spec is None:
                extra.extend((k, v))
            else:
                _store_other(other, spec, k, v)
    return TensorDesc(dtype, shape, layout, name, size, reuse_input, reuse_input_index, attrs, other, extra)


def _node_from_tree(t: list) -> Node:
    node = Node("", "")
    node.id = 0
    node.stream_id = 0
    attrs = node.attrs
    raw_inputs: list[str] = []
    for k, v in _pairs(t):
        if k == "attr":
            if type(v) is int and _CUT is not None:
                attrs.update(_CUT.take(v))  # attr blocks cut out of the text (see _read_cut_text)
            else:
                key, attr = _attr_entry(v, "attr")
                attrs[key] = attr
        elif k == "input_desc" or k == "output_desc":
            if type(v) is int and _CUT is not None:
                for field, desc in _CUT.take(v):  # descriptor blocks cut out of the text (see _read_cut_text)
                    (node.input_desc if field == "input_desc" else node.output_desc).append(desc)
            else:
                (node.input_desc if k == "input_desc" else node.output_desc).append(
                    _tensor_desc_from_tree(_as_msg(v, k))
                )
        elif k == "input":
            raw_inputs.append(v if type(v) is str and v[-1:] > "\x02" else _as_str(v, k))
        elif k == "name":
            node.name = _as_str(v, k)
        elif k == "type":
            node.type = _as_str(v, k)
        elif k == "id":
            node.id = v if type(v) is int else _as_int(v, k)
        elif k == "stream_id":
            node.stream_id = _as_int(v, k)
        elif k == "subgraph_name":
            node.subgraph_names.append(_as_str(v, k))
        else:
            spec = OP_OTHER.get(k)
            if spec is None:
                node.extra.extend((k, v))
            else:
                _store_other(node.other, spec, k, v)
    _set_inputs(node, raw_inputs)
    return node


# What C's strtol(text, nullptr, 10) reads: C-locale white space, an optional sign, ASCII digits.
_STRTOL_PREFIX = re.compile(r"[ \t\n\v\f\r]*([-+]?[0-9]+)", re.ASCII)


def ge_input_index(text: str) -> int:
    """The output index GE reads from the text after the last ':' of an ``OpDef.input`` entry: its
    ParseNodeIndex takes ``static_cast<int32_t>(strtol(text, nullptr, 10))``, so "abc" is 0, "1abc" is 1 and
    nothing is refused."""
    m = _STRTOL_PREFIX.match(text)
    if m is None:
        return 0
    value = max(min(int(m.group(1)), 2**63 - 1), -(2**63))  # strtol saturates at LONG_MIN/LONG_MAX
    return (value + 2**31) % 2**32 - 2**31  # the cast to int32_t wraps


def _set_inputs(node: Node, raw_inputs: list[str]) -> None:
    # GE accepts every entry (see ge_input_index); an entry that is not in the canonical form GE itself writes
    # ("src:N", "src:-1", "") is kept in node.input_text so that writing the model back loses nothing.
    inputs = node.inputs
    for s in raw_inputs:
        if not s:
            inputs.append(None)
            continue
        src, sep, idx = s.rpartition(":")
        if sep:
            if idx == "-1":
                node.ctrl_inputs.append(src)
                continue
            if idx.isdigit() and idx.isascii() and len(idx) < 10 and (idx[0] != "0" or len(idx) == 1):
                inputs.append((src, int(idx)))  # the canonical form (the common case)
                continue
            num = ge_input_index(idx)
            if num == -1:
                node.ctrl_inputs.append(src)
                if s != src + ":-1":
                    node.input_text[(-1, src)] = s
            else:
                if s != f"{src}:{num}":
                    node.input_text[(len(inputs), (src, num))] = s
                inputs.append((src, num))
            continue
        # No ":" at all: GE's ParseNodeIndex rejects it, so the input slot stays unconnected (it still
        # counts as a data input).
        node.input_text[(len(inputs), None)] = s
        inputs.append(None)


def _input_strings(n: Node) -> list[str]:
    """``OpDef.input`` of ``n``: data inputs in slot order, then control inputs; an entry read in a
    non-canonical form is written as read while it still names the same anchor."""
    raw = n.input_text
    if not raw:
        inputs = ["" if a is None else f"{a[0]}:{a[1]}" for a in n.inputs]
        inputs.extend(c + ":-1" for c in n.ctrl_inputs)
        return inputs
    inputs = [raw.get((i, a)) or ("" if a is None else f"{a[0]}:{a[1]}") for i, a in enumerate(n.inputs)]
    inputs.extend(raw.get((-1, c)) or c + ":-1" for c in n.ctrl_inputs)
    return inputs


def _graph_from_tree(t: list) -> Graph:
    g = Graph("")
    nodes = g.nodes
    for j in range(0, len(t) - 1, 2):
        k = t[j]
        v = t[j + 1]
        if k == "op":
            t[j + 1] = None  # free each op's tree as soon as its node exists (halves peak memory)
            node = _node_from_tree(_as_msg(v, k))
            del v
            node.graph = g
            if node.name in nodes:
                # Keep the first; the validator reports duplicates (the count tells it there were some).
                g.other.setdefault("#duplicate_nodes", []).append(node.name)
                continue
            nodes[node.name] = node
        elif k == "name":
            g.name = _as_str(v, k)
        elif k == "attr":
            _attr_map_into(g.attrs, v)
        elif k == "input":
            g.input.append(_as_str(v, k))
        elif k == "output":
            g.output.append(_as_str(v, k))
        else:
            spec = GRAPH_OTHER.get(k)
            if spec is None:
                g.extra.extend((k, v))
            else:
                _store_other(g.other, spec, k, v)
    return g


def _model_from_tree(t: list) -> Model:
    m = Model()
    graphs: list[Graph] = []
    for j in range(0, len(t) - 1, 2):
        k = t[j]
        v = t[j + 1]
        if k == "graph":
            t[j + 1] = None  # the graph's tree is freed op by op while it is built
            graphs.append(_graph_from_tree(_as_msg(v, k)))
            del v
        elif k == "name":
            m.name = _as_str(v, k)
        elif k == "version":
            m.version = _as_int(v, k) or None
        elif k == "custom_version":
            m.custom_version = _as_str(v, k)
        elif k == "attr":
            _attr_map_into(m.attrs, v)
        else:
            spec = MODEL_OTHER.get(k)
            if spec is None:
                m.extra.extend((k, v))
            else:
                _store_other(m.other, spec, k, v)
    seen: set[str] = set()
    for g in graphs:
        if g.name in seen:
            m.other.setdefault("#duplicate_graphs", []).append(g.name)
            continue
        seen.add(g.name)
        g.model = m
        m.graphs.append(g)
    return m


# ----------------------------------------------------------------------------------------------------------
# IR -> text
# ----------------------------------------------------------------------------------------------------------
# Indentation by depth (protobuf's parsers refuse nesting deeper than 100, so 256 levels is plenty).
_IND = ["  " * i for i in range(256)]


def _string_field(prefix: str, value: str | bytes) -> str:
    """``prefix`` followed by ``value`` as a string literal: quote() with its common case (a str that needs
    no escaping, e.g. every op name, type and input of a generated model) inline."""
    if type(value) is str and not _NEEDS_ESCAPE.search(value):
        return f'{prefix}"{value}"'
    return prefix + quote(value)


# The closing lines of an attribute entry (`  }` of its value, `}` of the entry) at each depth.
_ENTRY_CLOSE = [f"{_IND[d + 1]}}}\n{_IND[d]}}}" for d in range(len(_IND) - 1)]
# The `name: ` / `type: ` / `input: ` line heads of an op's fields at each depth.
_OP_STRING_FIELDS = [(f"{p}name: ", f"{p}type: ", f"{p}input: ") for p in _IND]


# Attribute-list element types whose equal values always print the same (so equal keys mean equal text; -0.0
# is the one exception among them, handled where the keys are made).
_PLAIN_ITEM_TYPES = frozenset((int, str, bytes, bool, float))


class _TextWriter:
    """Writes a model as text lines into ``out``. With ``reuse`` (the default) equal descriptor blocks and equal
    attribute entries are formatted once per write and their text reused (see desc_block and attr_map); without
    it every line is formatted where it stands, the reference the reuse is tested against."""

    def __init__(self, reuse: bool = True) -> None:
        self.out: list[str] = []
        self.reuse = reuse
        # Text of whole ``input_desc``/``output_desc`` blocks by what they are made of (see desc_block). A
        # transformer's 280 k descriptors take a few thousand distinct forms: readers share one Attr per
        # distinct origin attr, so attribute identities repeat. Valid for one write (the model is not edited
        # meanwhile and every keyed Attr stays alive, so its id is not reused).
        self._desc_text: dict[tuple, str] = {}
        self._attr_heads: dict[tuple[str, int], dict[str, str]] = {}  # (field, depth) -> key -> entry head
        # Text of whole attribute entries (``attr { key value { ... } }``) by entry head and value key (see
        # _entry_key): a Const's ``value`` tensor, float and list attributes repeat across ops.
        self._entry_text: dict[tuple, str] = {}
        if not reuse:
            self.desc_block = self.render_desc_block  # type: ignore[method-assign]

    # generic trees (unknown fields, attr_groups)
    def tree(self, t: list, d: int) -> None:
        out = self.out
        p = _IND[d]
        for k, v in _pairs(t):
            if k == "#wire":
                self.tree(wire_to_tree(v), d)
                continue
            if type(v) is list:
                out.append(f"{p}{k} {{")
                self.tree(v, d + 1)
                out.append(f"{p}}}")
            else:
                out.append(f"{p}{k}: {_generic_scalar(v)}")

    def attr_map(self, attrs: dict[str, Attr], d: int, field: str = "attr") -> None:
        if not attrs:
            return
        out = self.out
        p = _IND[d]
        p1 = _IND[d + 1]
        # protobuf sorts map entries by key bytes; code point order is the same for UTF-8 text
        p2 = _IND[d + 2]
        close = _ENTRY_CLOSE[d]
        heads = self._attr_heads.get((field, d))
        if heads is None:
            heads = self._attr_heads[(field, d)] = {}
        entries = self._entry_text if self.reuse else None
        for key in sorted(attrs) if len(attrs) > 1 else attrs:
            a = attrs[key]
            head = heads.get(key)
            if head is None:  # the same few dozen keys on every op: their entry heads are made once per write
                head = heads[key] = f"{p}{field} {{\n{p1}key: {quote(key)}\n{p1}value {{"
            kind = a.kind
            v = a.value
            # the common scalar kinds in one line each (several text lines per list element)
            if kind == "i" and type(v) is int and not a.extra:
                out.append(f"{head}\n{p2}i: {v}\n{close}")
            elif kind == "s" and type(v) is str and not _NEEDS_ESCAPE.search(v) and not a.extra:
                out.append(f'{head}\n{p2}s: "{v}"\n{close}')
            elif kind == "b" and not a.extra:
                out.append(f"{head}\n{p2}b: {'true' if v else 'false'}\n{close}")
            else:
                value_key = self._entry_key(a, d + 2) if entries is not None else None
                if value_key is None:
                    out.append(head)
                    self.attr(a, d + 2)
                    out.append(close)
                    continue
                entry_key = (head, value_key)  # the head string stands for (field, depth, key)
                try:
                    text = entries.get(entry_key)
                except TypeError:  # an unhashable value inside (e.g. in a list): written without the cache
                    entry_key = None
                    text = None
                if text is None:
                    mark = len(out)
                    out.append(head)
                    self.attr(a, d + 2)
                    out.append(close)
                    text = "\n".join(out[mark:])
                    del out[mark:]
                    if entry_key is not None:
                        entries[entry_key] = text
                out.append(text)

    def _entry_key(self, a: Attr, d: int) -> tuple | None:
        """A hashable key of what ``a`` (written at depth ``d``) prints as: equal keys give equal text. None when
        the entry is written without reuse (unknown fields, -0.0 beside 0.0, element types not known to print
        the same when equal, kinds that rarely repeat)."""
        if a.extra:
            return None
        kind = a.kind
        v = a.value
        if kind == "list":
            if v.other:
                return None
            items = v.items
            types = tuple(map(type, items))
            if not _PLAIN_ITEM_TYPES.issuperset(types) or (float in types and 0.0 in items):
                return None
            return (kind, v.kind, v.val_type, types, *items)
        if kind == "t":
            desc = v.desc
            data = v.data
            if v.extra or type(data) is not bytes:
                return None
            # the descriptor's own text (reused as well) stands for it: equal text, equal entry
            return (kind, None if desc is None else self.desc_block("desc", desc, d + 1), data)
        if kind == "td":
            return (kind, self.desc_block("td", v, d))
        if kind in _VALUE_KINDS and type(v) in _PLAIN_ITEM_TYPES and not (type(v) is float and v == 0.0):
            return (kind, type(v), v)
        return None

    def attr(self, a: Attr, d: int) -> None:
        out = self.out
        p = _IND[d]
        kind = a.kind
        v = a.value
        if kind == "s" or kind == "expression":
            out.append(f"{p}{kind}: {quote(v)}")
        elif kind == "i":
            out.append(f"{p}i: {int(v)}")
        elif kind == "b":
            out.append(f"{p}b: {'true' if v else 'false'}")
        elif kind == "list":
            out.append(f"{p}list {{")
            self.attr_list(v, d + 1)
            out.append(f"{p}}}")
        elif kind == "f":
            out.append(f"{p}f: {format_float(v)}")
        elif kind == "dt":
            out.append(f"{p}dt: {int(v)}")
        elif kind == "bt":
            out.append(f"{p}bt: {quote(v)}")
        elif kind == "func":
            out.append(f"{p}func {{")
            self.named_attrs(v, d + 1)
            out.append(f"{p}}}")
        elif kind == "td":
            out.append(f"{p}td {{")
            self.tensor_desc(v, d + 1)
            out.append(f"{p}}}")
        elif kind == "t":
            out.append(f"{p}t {{")
            self.tensor_def(v, d + 1)
            out.append(f"{p}}}")
        elif kind == "g":
            out.append(f"{p}g {{")
            self.graph(v, d + 1)
            out.append(f"{p}}}")
        elif kind in ("list_list_int", "list_list_float"):
            outer, inner = ("list_list_i", "list_i") if kind == "list_list_int" else ("list_list_f", "list_f")
            fmt = str if kind == "list_list_int" else format_float
            p1, p2 = _IND[d + 1], _IND[d + 2]
            out.append(f"{p}{kind} {{")
            for row in v:
                out.append(f"{p1}{outer} {{")
                out.extend(f"{p2}{inner}: {fmt(x)}" for x in row)
                out.append(f"{p1}}}")
            out.append(f"{p}}}")
        elif kind is not None:
            raise ValueError(f"unknown attribute kind {kind!r}")
        if a.extra:
            self.tree(a.extra, d)

    def attr_list(self, lst: AttrList, d: int) -> None:
        groups: dict[str, list[Any]] = {}
        if lst.kind is not None:
            groups[lst.kind] = lst.items
        for k, items in lst.other.items():
            if k != "#extra":
                groups.setdefault(k, []).extend(items)
        out = self.out
        p = _IND[d]
        for k in sorted(groups, key=lambda k: LIST_FIELD_NUM.get(k, 99)):
            items = groups[k]
            if k == "s" or k == "bt":
                out.extend(f"{p}{k}: {quote(x)}" for x in items)
            elif k == "i" or k == "dt":
                out.extend(f"{p}{k}: {int(x)}" for x in items)
            elif k == "f":
                out.extend(f"{p}f: {format_float(x)}" for x in items)
            elif k == "b":
                out.extend(f"{p}b: {'true' if x else 'false'}" for x in items)
            else:
                method = {"td": self.tensor_desc, "t": self.tensor_def, "g": self.graph, "na": self.named_attrs}[k]
                for x in items:
                    out.append(f"{p}{k} {{")
                    method(x, d + 1)
                    out.append(f"{p}}}")
        if lst.val_type:
            vt = VAL_TYPES[lst.val_type] if 0 <= lst.val_type < len(VAL_TYPES) else str(lst.val_type)
            out.append(f"{p}val_type: {vt}")
        if "#extra" in lst.other:
            self.tree(lst.other["#extra"], d)

    def named_attrs(self, na: NamedAttrs, d: int) -> None:
        if na.name:
            self.out.append(f"{_IND[d]}name: {quote(na.name)}")
        self.attr_map(na.attrs, d)
        if na.extra:
            self.tree(na.extra, d)

    def tensor_def(self, t: TensorDef, d: int) -> None:
        if t.desc is not None:
            self.out.append(self.desc_block("desc", t.desc, d))
        if t.data:
            self.out.append(f"{_IND[d]}data: {quote(t.data)}")
        if t.extra:
            self.tree(t.extra, d)

    def other_fields(self, other: dict[str, Any], specs: dict, lo: int, hi: int, d: int) -> None:
        """Write the ``other`` fields whose numbers fall in [lo, hi), in number order."""
        if not other:
            return
        out = self.out
        p = _IND[d]
        for name, (num, kind) in specs.items():
            if not (lo <= num < hi) or name not in other:
                continue
            v = other[name]
            base = kind.lstrip("*")
            values = v if kind.startswith("*") else [v]
            for x in values:
                if base == "msg":
                    out.append(f"{p}{name} {{")
                    self.tree(x, d + 1)
                    out.append(f"{p}}}")
                elif base == "str":
                    out.append(f"{p}{name}: {quote(x)}")
                elif base == "bool":
                    out.append(f"{p}{name}: {'true' if x else 'false'}")
                else:
                    out.append(f"{p}{name}: {int(x)}")

    def tensor_desc(self, td: TensorDesc, d: int) -> None:
        out = self.out
        p = _IND[d]
        other = td.other
        if td.name:
            out.append(f"{p}name: {quote(td.name)}")
        if td.dtype and td.dtype != "DT_UNDEFINED":
            out.append(f"{p}dtype: {td.dtype}")
        if td.shape is not None:
            out.append(f"{p}shape {{")
            p1 = _IND[d + 1]
            out.extend(f"{p1}dim: {int(x)}" for x in td.shape)
            out.append(f"{p}}}")
        if td.layout:
            out.append(f"{p}layout: {quote(td.layout)}")
        self.attr_map(td.attrs, d)
        if other:
            self.other_fields(other, TD_OTHER, 6, 10, d)
        if td.size:
            out.append(f"{p}size: {int(td.size)}")
        if other:
            self.other_fields(other, TD_OTHER, 11, 12, d)
        if td.reuse_input:
            out.append(f"{p}reuse_input: true")
        if other:
            self.other_fields(other, TD_OTHER, 13, 17, d)
        if td.reuse_input_index:
            out.append(f"{p}reuse_input_index: {int(td.reuse_input_index)}")
        if other:
            self.other_fields(other, TD_OTHER, 18, 99, d)
        if td.extra:
            self.tree(td.extra, d)

    def desc_block(self, field: str, td: TensorDesc, d: int) -> str:
        """``field { <td> }`` at depth ``d`` as one multi-line string, the same lines :meth:`tensor_desc`
        writes; equal descriptors (same plain fields, same Attr objects under the same keys) share one text."""
        if td.extra:
            return self.render_desc_block(field, td, d)
        shape = td.shape
        attrs = td.attrs
        key = (
            field,
            d,
            td.name,
            td.dtype,
            td.layout,
            td.size,
            td.reuse_input,
            td.reuse_input_index,
            None if shape is None else (*shape,),
            len(attrs),
            *attrs,
            *map(id, attrs.values()),
        )
        if td.other:
            key += tuple(td.other.items())
        try:
            text = self._desc_text.get(key)
        except TypeError:  # an unhashable value among the other fields: written without the cache
            return self.render_desc_block(field, td, d)
        if text is None:
            text = self._desc_text[key] = self.render_desc_block(field, td, d)
        return text

    def render_desc_block(self, field: str, td: TensorDesc, d: int) -> str:
        """``field { <td> }`` at depth ``d`` written now, without the block cache."""
        saved = self.out
        self.out = lines = [f"{_IND[d]}{field} {{"]
        try:
            self.tensor_desc(td, d + 1)
        finally:
            self.out = saved
        lines.append(f"{_IND[d]}}}")
        return "\n".join(lines)

    def node(self, n: Node, d: int) -> None:
        out = self.out
        p = _IND[d]
        other = n.other
        name_field, type_field, input_field = _OP_STRING_FIELDS[d]
        name = n.name
        op_type = n.type
        needs_escape = _NEEDS_ESCAPE.search
        if type(name) is str and type(op_type) is str and op_type and not needs_escape(name + op_type):
            out.append(f'{name_field}"{name}"\n{type_field}"{op_type}"')  # the common case as one piece
        else:
            out.append(_string_field(name_field, name))
            if op_type:
                out.append(_string_field(type_field, op_type))
        if n.input_text:
            out.extend(_string_field(input_field, s) for s in _input_strings(n))
        else:
            for a in n.inputs:
                if a is None:
                    out.append(f'{p}input: ""')
                else:
                    s = f"{a[0]}:{a[1]}"
                    out.append(input_field + quote(s) if needs_escape(s) else f'{input_field}"{s}"')
            for c in n.ctrl_inputs:
                out.append(_string_field(input_field, c + ":-1"))
        self.attr_map(n.attrs, d)
        if other:
            self.other_fields(other, OP_OTHER, 11, 21, d)
        if n.id:
            out.append(f"{p}id: {int(n.id)}")
        if n.stream_id:
            out.append(f"{p}stream_id: {int(n.stream_id)}")
        if other:
            self.other_fields(other, OP_OTHER, 23, 33, d)
        desc_block = self.desc_block
        for td in n.input_desc:
            out.append(desc_block("input_desc", td, d))
        for td in n.output_desc:
            out.append(desc_block("output_desc", td, d))
        for s in n.subgraph_names:
            out.append(f"{p}subgraph_name: {quote(s)}")
        if n.extra:
            self.tree(n.extra, d)

    def graph(self, g: Graph, d: int) -> None:
        out = self.out
        p = _IND[d]
        if g.name:
            out.append(f"{p}name: {quote(g.name)}")
        out.extend(f"{p}input: {quote(x)}" for x in g.input)
        out.extend(f"{p}output: {quote(x)}" for x in g.output)
        op_open = f"{p}op {{"
        op_close = f"{p}}}"
        node = self.node
        for n in g.nodes.values():
            out.append(op_open)
            node(n, d + 1)
            out.append(op_close)
        self.attr_map(g.attrs, d)
        self.other_fields(g.other, GRAPH_OTHER, 0, 99, d)
        if g.extra:
            self.tree(g.extra, d)

    def model(self, m: Model) -> None:
        out = self.out
        if m.name:
            out.append(f"name: {quote(m.name)}")
        if m.version:
            out.append(f"version: {int(m.version)}")
        if m.custom_version:
            out.append(f"custom_version: {quote(m.custom_version)}")
        for g in m.graphs:
            out.append("graph {")
            self.graph(g, 1)
            out.append("}")
        self.attr_map(m.attrs, 0)
        self.other_fields(m.other, MODEL_OTHER, 0, 99, 0)
        if m.extra:
            self.tree(m.extra, 0)


def _generic_scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return format_double(v)
    if isinstance(v, str):
        if v[-1:] == "\x01":
            return v[:-1]
        if v[-1:] != "\x02":
            return quote(v)
    raw = _bytes_value(v)
    if raw is not None:
        return quote(raw)
    raise ValueError(f"cannot write {v!r} as a text-format value")


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def wire_to_tree(data: bytes) -> list:
    """Unknown fields' wire bytes as a generic tree with numbered names (as protobuf prints them): varints
    as integers, length-delimited as byte strings, fixed32/fixed64 as hex integers."""
    out: list = []
    pos = 0
    n = len(data)
    while pos < n:
        key, pos = _read_varint(data, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = _read_varint(data, pos)
            out.extend((str(num), v))
        elif wt == 2:
            ln, pos = _read_varint(data, pos)
            out.extend((str(num), data[pos : pos + ln]))
            pos += ln
        elif wt == 1:
            out.extend((str(num), int.from_bytes(data[pos : pos + 8], "little")))
            pos += 8
        elif wt == 5:
            out.extend((str(num), int.from_bytes(data[pos : pos + 4], "little")))
            pos += 4
        else:  # groups (wire types 3/4) are not used by proto3 files: keep the rest as bytes
            out.extend((str(num), data[pos:]))
            break
    return out


def model_to_text(model: Model) -> str:
    """The model in protobuf text format, laid out as GE's dumps (fields in number order, 2-space indent,
    attribute maps sorted by key)."""
    w = _TextWriter()
    w.model(model)
    w.out.append("")
    return "\n".join(w.out)


# Text pieces joined and encoded at a time by model_to_utf8 (~2 MB of text at a time for a transformer).
_ENCODE_PIECES = 4096


def model_to_utf8(model: Model) -> bytearray:
    """``model_to_text(model).encode("utf-8", "surrogateescape")``, encoded piece by piece into one growing
    buffer: without the whole text as a string beside its bytes (at 100 k nodes two fresh 144 MiB buffers,
    whose page faults cost 0.15-0.56 s of system CPU against 0.07-0.10 s this way). UTF-8 encodes each code
    point on its own, so the pieces' bytes are the whole text's bytes."""
    w = _TextWriter()
    w.model(model)
    out = w.out
    out.append("")
    buf = bytearray()
    step = _ENCODE_PIECES
    for k in range(0, len(out), step):
        if k:
            buf += b"\n"
        buf += "\n".join(out[k : k + step]).encode("utf-8", "surrogateescape")
    return buf


# ----------------------------------------------------------------------------------------------------------
# Binary (through ge_ir_pb2)
# ----------------------------------------------------------------------------------------------------------
def _pb2():
    from anchorlog.facts import ge_ir_pb2

    return ge_ir_pb2


def model_to_bytes(model: Model) -> bytes:
    """The model as a serialized ``ge.proto.ModelDef``; the same bytes for the same model in every process (map
    entries, e.g. attributes, in key order: upb's default order varies from one process to the next)."""
    pb = _pb2()
    msg = pb.ModelDef()
    _model_to_msg(model, msg)
    return msg.SerializeToString(deterministic=True)


def _model_to_msg(m: Model, msg) -> None:
    if m.name:
        msg.name = m.name
    if m.version:
        msg.version = int(m.version)
    if m.custom_version:
        msg.custom_version = m.custom_version
    for g in m.graphs:
        _graph_to_msg(g, msg.graph.add())
    _attrs_to_msg(m.attrs, msg.attr)
    _other_to_msg(m.other, MODEL_OTHER, msg)
    _extra_to_msg(m.extra, msg)


def _graph_to_msg(g: Graph, msg) -> None:
    if g.name:
        msg.name = g.name
    msg.input.extend(g.input)
    msg.output.extend(g.output)
    add = msg.op.add
    for n in g.nodes.values():
        _node_to_msg(n, add())
    _attrs_to_msg(g.attrs, msg.attr)
    _other_to_msg(g.other, GRAPH_OTHER, msg)
    _extra_to_msg(g.extra, msg)


def _node_to_msg(n: Node, msg) -> None:
    msg.name = n.name
    if n.type:
        msg.type = n.type
    msg.input.extend(_input_strings(n))
    _attrs_to_msg(n.attrs, msg.attr)
    if n.id:
        msg.id = int(n.id)
    if n.stream_id:
        msg.stream_id = int(n.stream_id)
    for td in n.input_desc:
        _tensor_desc_to_msg(td, msg.input_desc.add())
    for td in n.output_desc:
        _tensor_desc_to_msg(td, msg.output_desc.add())
    msg.subgraph_name.extend(n.subgraph_names)
    if n.other:
        _other_to_msg(n.other, OP_OTHER, msg)
    _extra_to_msg(n.extra, msg)


def _dtype_num(name: str) -> int:
    num = DTYPE_NUM.get(name)
    if num is not None:
        return num
    try:
        return int(name.removeprefix("DT_"))
    except ValueError:
        raise ValueError(f"unknown data type {name!r}") from None


def _tensor_desc_to_msg(td: TensorDesc, msg) -> None:
    if td.name:
        msg.name = td.name
    if td.dtype and td.dtype != "DT_UNDEFINED":
        msg.dtype = _dtype_num(td.dtype)
    if td.shape is not None:
        msg.shape.SetInParent()
        msg.shape.dim.extend(int(x) for x in td.shape)
    if td.layout:
        msg.layout = td.layout
    if td.attrs:
        _attrs_to_msg(td.attrs, msg.attr)
    if td.size:
        msg.size = int(td.size)
    if td.reuse_input:
        msg.reuse_input = True
    if td.reuse_input_index:
        msg.reuse_input_index = int(td.reuse_input_index)
    if td.other:
        _other_to_msg(td.other, TD_OTHER, msg)
    _extra_to_msg(td.extra, msg)


def _attrs_to_msg(attrs: dict[str, Attr], field) -> None:
    for key, a in attrs.items():
        _attr_to_msg(a, field[key])


def _b(v: str | bytes) -> bytes:
    return v if isinstance(v, bytes) else v.encode("utf-8", "surrogateescape")


def _attr_to_msg(a: Attr, msg) -> None:
    kind = a.kind
    v = a.value
    if kind is None:
        pass
    elif kind == "s" or kind == "expression" or kind == "bt":
        setattr(msg, kind, _b(v))
    elif kind == "i" or kind == "dt":
        setattr(msg, kind, int(v))
    elif kind == "b":
        msg.b = bool(v)
    elif kind == "f":
        msg.f = float(v)
    elif kind == "list":
        lv = msg.list
        lv.SetInParent()
        _list_to_msg(v, lv)
    elif kind == "func":
        msg.func.SetInParent()
        _named_attrs_to_msg(v, msg.func)
    elif kind == "td":
        msg.td.SetInParent()
        _tensor_desc_to_msg(v, msg.td)
    elif kind == "t":
        msg.t.SetInParent()
        _tensor_def_to_msg(v, msg.t)
    elif kind == "g":
        msg.g.SetInParent()
        _graph_to_msg(v, msg.g)
    elif kind == "list_list_int":
        msg.list_list_int.SetInParent()
        for row in v:
            msg.list_list_int.list_list_i.add().list_i.extend(int(x) for x in row)
    elif kind == "list_list_float":
        msg.list_list_float.SetInParent()
        for row in v:
            msg.list_list_float.list_list_f.add().list_f.extend(float(x) for x in row)
    else:
        raise ValueError(f"unknown attribute kind {kind!r}")
    _extra_to_msg(a.extra, msg)


def _list_items_to_msg(k: str, items: list[Any], lv) -> None:
    if k in ("s", "bt"):
        getattr(lv, k).extend(_b(x) for x in items)
    elif k in ("i", "dt"):
        getattr(lv, k).extend(int(x) for x in items)
    elif k == "f":
        lv.f.extend(float(x) for x in items)
    elif k == "b":
        lv.b.extend(bool(x) for x in items)
    elif k == "td":
        for x in items:
            _tensor_desc_to_msg(x, lv.td.add())
    elif k == "t":
        for x in items:
            _tensor_def_to_msg(x, lv.t.add())
    elif k == "g":
        for x in items:
            _graph_to_msg(x, lv.g.add())
    elif k == "na":
        for x in items:
            _named_attrs_to_msg(x, lv.na.add())


def _list_to_msg(lst: AttrList, lv) -> None:
    if lst.kind is not None:
        _list_items_to_msg(lst.kind, lst.items, lv)
    for k, items in lst.other.items():
        if k == "#extra":
            _extra_to_msg(items, lv)
        else:
            _list_items_to_msg(k, items, lv)
    if lst.val_type:
        lv.val_type = int(lst.val_type)


def _named_attrs_to_msg(na: NamedAttrs, msg) -> None:
    if na.name:
        msg.name = na.name
    _attrs_to_msg(na.attrs, msg.attr)
    _extra_to_msg(na.extra, msg)


def _tensor_def_to_msg(t: TensorDef, msg) -> None:
    if t.desc is not None:
        msg.desc.SetInParent()
        _tensor_desc_to_msg(t.desc, msg.desc)
    if t.data:
        msg.data = bytes(t.data)
    _extra_to_msg(t.extra, msg)


def _other_to_msg(other: dict[str, Any], specs: dict, msg) -> None:
    for name, v in other.items():
        spec = specs.get(name)
        if spec is None:
            continue  # bookkeeping entries ("#duplicate_nodes" ...)
        kind = spec[1]
        if kind == "msg":
            _tree_into_msg(v, getattr(msg, name))
        elif kind.startswith("*"):
            getattr(msg, name).extend(v)
        else:
            setattr(msg, name, v)


def _tree_into_msg(tree: list, msg) -> None:
    """Merge a generic tree into a protobuf message (used for rarely seen sub-messages like attr_groups)."""
    from google.protobuf import text_format

    w = _TextWriter()
    w.tree(tree, 0)
    msg.SetInParent()
    text_format.Merge("\n".join(w.out), msg, allow_unknown_field=True)


def _extra_to_msg(extra: list, msg) -> None:
    """Write fields our schema does not know back: raw wire bytes, or numbered text fields re-encoded."""
    if not extra:
        return
    raw = bytearray()
    for k, v in _pairs(extra):
        if k == "#wire":
            raw += v
        elif isinstance(k, str) and k.isdigit():
            raw += _encode_unknown(int(k), v)
        # Named fields our schema does not know have no field number: they cannot go to binary.
    if raw:
        msg.MergeFromString(bytes(raw))


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _encode_unknown(num: int, v: Any) -> bytes:
    if type(v) is list:
        body = b"".join(_encode_unknown(int(k), x) for k, x in _pairs(v) if str(k).isdigit())
        return _varint(num << 3 | 2) + _varint(len(body)) + body
    if isinstance(v, bool):
        return _varint(num << 3) + _varint(int(v))
    if isinstance(v, int):
        return _varint(num << 3) + _varint(v)
    if isinstance(v, float):
        return _varint(num << 3 | 1) + struct.pack("<d", v)
    if _ident(v) is not None:
        return b""  # an enum name without its enum: no number to write
    data = _bytes_value(v)
    if data is None and isinstance(v, str):
        data = v.encode("utf-8", "surrogateescape")
    if data is None:
        return b""
    return _varint(num << 3 | 2) + _varint(len(data)) + data


def read_model_bytes(data: bytes, source: str = "<bytes>", *, validate: bool = True) -> Model:
    """Parse a serialized ``ge.proto.ModelDef``."""
    with paused_gc(settle=True):
        return _read_model_bytes(data, source, validate)


def _read_model_bytes(data: bytes, source: str, validate: bool) -> Model:
    from google.protobuf.message import DecodeError

    pb = _pb2()
    msg = pb.ModelDef()
    try:
        msg.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise InputError(f"not a binary GE model (ge.proto.ModelDef): {e}", source) from None
    # Unknown fields anywhere? A second parse without them re-serializes to fewer bytes (all in C). A
    # non-canonical encoding can also change the size: then we only look closer than needed.
    probe = pb.ModelDef()
    probe.ParseFromString(data)
    probe.DiscardUnknownFields()
    reader = _MsgReader(keep_unknown=probe.ByteSize() != len(data))
    del probe
    try:
        model = reader.model(msg)
    except (_TreeError, UnicodeDecodeError) as e:
        raise InputError(str(e), source) from None
    model.source = source
    if validate:
        from anchorlog.facts.validate import validate as _validate

        _validate(model)
    return model


class _MsgReader:
    """Protobuf message -> IR (same result as reading the equivalent text)."""

    def __init__(self, keep_unknown: bool) -> None:
        self.keep_unknown = keep_unknown

    def unknown(self, msg, extra: list) -> None:
        if not self.keep_unknown:
            return
        from google.protobuf.unknown_fields import UnknownFieldSet

        if len(UnknownFieldSet(msg)) == 0:
            return
        # Serialize a copy with every known field cleared: what is left are the unknown fields' bytes.
        probe = type(msg)()
        probe.CopyFrom(msg)
        for fd, _ in probe.ListFields():
            probe.ClearField(fd.name)
        extra.append("#wire")
        extra.append(probe.SerializeToString())

    def model(self, msg) -> Model:
        m = Model(msg.name)
        m.version = msg.version or None
        m.custom_version = msg.custom_version
        for gm in msg.graph:
            g = self.graph(gm)
            if m.has_graph(g.name):
                m.other.setdefault("#duplicate_graphs", []).append(g.name)
                continue
            g.model = m
            m.graphs.append(g)
        self.attr_map(msg.attr, m.attrs)
        if msg.HasField("attr_groups"):
            m.other["attr_groups"] = _msg_to_tree(msg.attr_groups)
        self.unknown(msg, m.extra)
        return m

    def graph(self, msg) -> Graph:
        g = Graph(msg.name)
        g.input = list(msg.input)
        g.output = list(msg.output)
        nodes = g.nodes
        for om in msg.op:
            n = self.node(om)
            n.graph = g
            if n.name in nodes:
                g.other.setdefault("#duplicate_nodes", []).append(n.name)
                continue
            nodes[n.name] = n
        self.attr_map(msg.attr, g.attrs)
        if msg.HasField("attr_groups"):
            g.other["attr_groups"] = _msg_to_tree(msg.attr_groups)
        self.unknown(msg, g.extra)
        return g

    def node(self, msg) -> Node:
        n = Node("", "")
        n.id = 0
        n.stream_id = 0
        other = n.other
        # One ListFields() call yields exactly the fields that are set, in number order (cheaper than
        # asking upb for every field).
        for fd, value in msg.ListFields():
            name = fd.name
            if name == "attr":
                self.attr_map(value, n.attrs)
            elif name == "input_desc":
                n.input_desc = [self.tensor_desc(t) for t in value]
            elif name == "output_desc":
                n.output_desc = [self.tensor_desc(t) for t in value]
            elif name == "input":
                _set_inputs(n, value)
            elif name == "name":
                n.name = value
            elif name == "type":
                n.type = value
            elif name == "id":
                n.id = value
            elif name == "stream_id":
                n.stream_id = value
            elif name == "subgraph_name":
                n.subgraph_names = list(value)
            else:
                kind = OP_OTHER[name][1]
                if kind == "msg":
                    other[name] = _msg_to_tree(value)
                elif kind[0] == "*":
                    other[name] = list(value)
                else:
                    other[name] = value
        if self.keep_unknown:
            self.unknown(msg, n.extra)
        return n

    def tensor_desc(self, msg) -> TensorDesc:
        dtype = "DT_UNDEFINED"
        shape = None
        layout = name = ""
        size = reuse_input_index = 0
        reuse_input = False
        attrs: dict[str, Attr] = {}
        other: dict[str, Any] = {}
        for fd, value in msg.ListFields():
            k = fd.name
            if k == "attr":
                self.attr_map(value, attrs)
            elif k == "dtype":
                dtype = DATA_TYPES[value] if 0 <= value < len(DATA_TYPES) else str(value)
            elif k == "shape":
                shape = list(value.dim)
            elif k == "layout":
                layout = value
            elif k == "size":
                size = value
            elif k == "name":
                name = value
            elif k == "reuse_input":
                reuse_input = value
            elif k == "reuse_input_index":
                reuse_input_index = value
            else:
                other[k] = _msg_to_tree(value) if TD_OTHER[k][1] == "msg" else value
        extra: list = []
        if self.keep_unknown:
            self.unknown(msg, extra)
        return TensorDesc(dtype, shape, layout, name, size, reuse_input, reuse_input_index, attrs, other, extra)

    def attr_map(self, field, attrs: dict[str, Attr]) -> None:
        if not field:
            return
        # protobuf orders map entries by key bytes; for UTF-8 that is code point order
        attr = self.attr
        for key in sorted(field):
            attrs[key] = attr(field[key])

    def attr(self, msg) -> Attr:
        kind = msg.WhichOneof("value")
        extra: list = []
        self.unknown(msg, extra)
        if kind is None:
            return Attr(None, None, extra)
        v = getattr(msg, kind)
        if kind == "s" or kind == "expression":
            try:
                v = v.decode("utf-8")
            except UnicodeDecodeError:
                pass
        elif kind == "f":
            pass
        elif kind == "list":
            v = self.attr_list(v)
        elif kind == "func":
            v = self.named_attrs(v)
        elif kind == "td":
            v = self.tensor_desc(v)
        elif kind == "t":
            v = self.tensor_def(v)
        elif kind == "g":
            v = self.graph(v)
        elif kind == "list_list_int":
            v = [list(r.list_i) for r in v.list_list_i]
        elif kind == "list_list_float":
            v = [list(r.list_f) for r in v.list_list_f]
        return Attr(kind, v, extra)

    def attr_list(self, msg) -> AttrList:
        kind: str | None = None
        items: list[Any] = []
        other: dict[str, list[Any]] = {}
        val_type = None
        for fd, value in msg.ListFields():
            k = fd.name
            if k == "val_type":
                val_type = value or None
                continue
            if k == "s":
                vals = []
                for x in value:
                    try:
                        vals.append(x.decode("utf-8"))
                    except UnicodeDecodeError:
                        vals.append(bytes(x))
            elif k in ("i", "f", "b", "bt", "dt"):
                vals = list(value)
            elif k == "td":
                vals = [self.tensor_desc(x) for x in value]
            elif k == "t":
                vals = [self.tensor_def(x) for x in value]
            elif k == "g":
                vals = [self.graph(x) for x in value]
            else:
                vals = [self.named_attrs(x) for x in value]
            if kind is None:
                kind, items = k, vals
            else:
                other[k] = vals
        extra: list = []
        self.unknown(msg, extra)
        if extra:
            other["#extra"] = extra
        return AttrList(kind, items, val_type, other)

    def named_attrs(self, msg) -> NamedAttrs:
        na = NamedAttrs(msg.name)
        self.attr_map(msg.attr, na.attrs)
        self.unknown(msg, na.extra)
        return na

    def tensor_def(self, msg) -> TensorDef:
        t = TensorDef(self.tensor_desc(msg.desc) if msg.HasField("desc") else None, bytes(msg.data))
        self.unknown(msg, t.extra)
        return t


def _msg_to_tree(msg) -> list:
    from google.protobuf import text_format

    return parse_text_tree(text_format.MessageToString(msg, print_unknown_fields=True))


# ----------------------------------------------------------------------------------------------------------
# Text fast path, part 2: repeated blocks parsed once
# ----------------------------------------------------------------------------------------------------------
# A large model repeats itself: a transformer's 280 k tensor descriptors (three quarters of its text) take a
# few dozen distinct forms, its op attributes about a thousand. Before the line rewrites, every
# `input_desc {` / `output_desc {` / `desc {` / `attr {` block is cut out of the text (from its opening line
# to the first line that is its own indentation and `}`), keyed by its raw text, and replaced by a
# placeholder line `<field>: <k>` (k = the distinct block's number). Each distinct block is parsed once, on
# its own, by the same fast path; the rest of the text, a quarter of the size, goes through the line
# rewrites and json; building the IR, a placeholder yields the parsed object to its first user and a fresh
# copy to every other one.
#
# Why this is the same model: the line rewrites are line-local (each line becomes one JSON fragment that
# depends only on that line and whether the line before opened a block), so when a block's lines, parsed on
# their own, make exactly one `field, [...]` pair, the whole text's JSON holds that same balanced value
# where the block was, and the placeholder line's JSON `field, k` stands in the same position. A block that
# does not parse that way, a placeholder that lands where no builder consumes it (an unknown field's raw
# tree), or any other surprise sends the whole text down the plain path, which also reports every error.
# Lines the placeholders look like: if the text already has one outside the blocks, the cut is not used.
_PLACEHOLDER_LINE = re.compile(r"^ *(?:attr|(?:(?:in|out)put_)?desc): ", re.M)
_VALUE_KINDS = frozenset(SCALAR_KINDS) | {None}  # Attr kinds whose value is immutable (str, bytes, numbers)
_CUT: _CutBlocks | None = None  # the blocks of the text being built (placeholders are read only meanwhile)
# A run of blocks parsed on its own costs about what the plain path spends on its lines (~35 us at 30 k): above
# this many distinct runs, the cut is used only while they repeat 4 times on average.
_CUT_MAX_DISTINCT = 1000


def _cut_blocks(text: str) -> tuple[str, list[str], int] | None:
    """``text`` (whole lines) with its descriptor and attr blocks replaced by placeholder lines: the reduced
    text, the distinct block texts (placeholder k is ``blocks[k]``) and the number of placeholders. None if a
    block has no closing line."""
    index: dict[str, str] = {}  # block text -> its placeholder line
    out: list[str] = []
    append = out.append
    find = text.find
    rfind = text.rfind
    last = 0
    count = 0
    # the next `attr {` and `desc {` line ends (two str.find scans are several times faster than one regex)
    next_attr = find("attr {\n")
    next_desc = find("desc {\n")
    while next_attr >= 0 or next_desc >= 0:
        # (a cut block's own opener is passed over by the search after its end, below)
        if next_desc < 0 or 0 <= next_attr < next_desc:
            pos = next_attr
            head = text[rfind("\n", 0, pos) + 1 : pos]
            word = head.lstrip(" ")
            if word:
                next_attr = find("attr {\n", pos + 1)
                continue  # e.g. `my_attr {`: not a block that is cut
        else:
            pos = next_desc
            head = text[rfind("\n", 0, pos) + 1 : pos]
            word = head.lstrip(" ")
            if word and word != "input_" and word != "output_":
                next_desc = find("desc {\n", pos + 1)
                continue
        start = pos - len(head)
        indent = head[: len(head) - len(word)]
        close = "\n" + indent + "}\n"
        end = find(close, pos + 6)
        if end < 0:
            return None
        end += len(close)
        # the blocks right after it at the same indentation join it (an op's attrs, an op's descriptors):
        # fewer placeholders, the same pairs in the same order
        if word != "":
            more = (indent + "input_desc {\n", indent + "output_desc {\n")
        else:
            more = (indent + "attr {\n",) if text[pos] == "a" else ()
        while more and text.startswith(more, end):
            end = find(close, text.index("\n", end))
            if end < 0:
                return None
            end += len(close)
        block = text[start:end]
        line = index.get(block)
        if line is None:
            line = index[block] = f"{text[start : pos + 4]}: {len(index)}\n"
        append(text[last:start])
        append(line)
        count += 1
        last = end
        if 0 <= next_attr < end:
            next_attr = find("attr {\n", end)
        if 0 <= next_desc < end:
            next_desc = find("desc {\n", end)
    append(text[last:])
    return "".join(out), list(index), count


def _parse_block(block: str) -> list[tuple[str, Any]]:
    """The IR of one cut run of blocks parsed on its own: its (key, Attr) pairs for attr blocks, its
    (field, TensorDesc) pairs for descriptors. Raises _TreeError when the text is not such blocks, balanced."""
    tree = _fast_tree(block)
    if not tree or len(tree) % 2 or any(type(v) is not list for v in tree[1::2]):
        raise _TreeError("block does not parse on its own")
    fields = set(tree[0::2])
    if fields == {"attr"}:
        return [_attr_entry(v, "attr") for v in tree[1::2]]
    if fields <= {"input_desc", "output_desc"} or fields == {"desc"} and len(tree) == 2:
        return [(k, _tensor_desc_from_tree(v)) for k, v in _pairs(tree)]
    raise _TreeError("unexpected block")


def _attr_maker(attr: Attr):
    """A function returning an Attr equal to ``attr`` that shares with it only what a second parse would (the
    model-wide origin attrs, immutable values); None for kinds not copied this way."""
    if id(attr) in _ORIGIN_IDS:
        return lambda: attr
    if attr.extra:
        return None
    kind = attr.kind
    value = attr.value
    if kind in _VALUE_KINDS:
        return lambda: Attr(kind, value)
    if kind == "list" and value.kind in _VALUE_KINDS and not value.other:
        list_kind, items, val_type = value.kind, value.items, value.val_type
        return lambda: Attr("list", AttrList(list_kind, items[:], val_type))
    if kind == "t" and not value.extra:
        data = value.data
        if value.desc is None:
            return lambda: Attr("t", TensorDef(None, data))
        desc = _desc_maker(value.desc)
        return None if desc is None else lambda: Attr("t", TensorDef(desc(), data))
    if kind == "td":
        desc = _desc_maker(value)
        return None if desc is None else lambda: Attr("td", desc())
    return None


def _desc_maker(td: TensorDesc):
    """A function returning a TensorDesc equal to ``td`` (see _attr_maker); None if it is not copied this way."""
    attrs = td.attrs
    other = td.other
    if td.extra or any(type(v) is list for v in other.values()):
        return None
    dtype, shape, layout, name, size = td.dtype, td.shape, td.layout, td.name, td.size
    reuse_input, reuse_input_index = td.reuse_input, td.reuse_input_index
    if all(id(a) in _ORIGIN_IDS for a in attrs.values()):  # the common case: origin_format / origin_shape
        if shape is None:
            return lambda: TensorDesc(
                dtype, None, layout, name, size, reuse_input, reuse_input_index, attrs.copy(), other.copy(), []
            )
        return lambda: TensorDesc(
            dtype, shape[:], layout, name, size, reuse_input, reuse_input_index, attrs.copy(), other.copy(), []
        )
    makers = [(k, _attr_maker(a)) for k, a in attrs.items()]
    if any(mk is None for _, mk in makers):
        return None
    return lambda: TensorDesc(
        dtype, None if shape is None else shape[:], layout, name, size, reuse_input, reuse_input_index,
        {k: mk() for k, mk in makers}, other.copy(), [],
    )  # fmt: skip


def _copy_maker(run: list[tuple[str, Any]], block: str):
    """A function returning fresh copies of ``run``, the pairs of ``block``: built from its objects where their
    kinds allow (see _attr_maker), else by parsing the block again."""
    makers = [(k, (_attr_maker if type(obj) is Attr else _desc_maker)(obj)) for k, obj in run]
    if any(mk is None for _, mk in makers):
        return lambda: _parse_block(block)
    if len(makers) == 1:
        ((key, maker),) = makers
        return lambda: [(key, maker())]
    return lambda: [(k, mk()) for k, mk in makers]


class _CutBlocks:
    """The parsed distinct blocks of a text: ``take(k)`` hands out block k's pairs (first use) or a copy."""

    def __init__(self, blocks: list[str]) -> None:
        self.first: list[Any] = [_parse_block(b) for b in blocks]
        self.makers = [_copy_maker(obj, b) for obj, b in zip(self.first, blocks)]
        self.used = 0

    def take(self, k: int) -> list[tuple[str, Any]]:
        self.used += 1
        obj = self.first[k]
        if obj is None:
            return self.makers[k]()
        self.first[k] = None
        return obj


def _read_cut_text(text: str) -> Model | None:
    """The model of a printer-shaped ``text`` read with its repeated blocks parsed once (see above), not yet
    validated; None when the text needs the plain path (any doubt, and every error)."""
    global _CUT
    if "\t" in text or "\r" in text:
        return None
    if not text.endswith("\n"):
        text += "\n"
    cut = _cut_blocks(text)
    if cut is None:
        return None
    reduced, blocks, count = cut
    del cut
    if len(blocks) > _CUT_MAX_DISTINCT and len(blocks) * 4 > count:
        return None  # blocks hardly repeat: parsing each on its own would cost more than the plain path
    # Every placeholder line holds one `attr: ` or `desc: `; more of them means the text had such lines or
    # strings of its own: fine unless a line outside the blocks already looked like a placeholder. (Inside
    # a block such a line fails the block's own parse.)
    if reduced.count("attr: ") + reduced.count("desc: ") != count:
        if len(_PLACEHOLDER_LINE.findall(reduced)) != count:
            return None
    try:
        _CUT = blocks_read = _CutBlocks(blocks)
        del blocks
        tree = _fast_tree(reduced)
        del reduced
        if tree is None:
            return None
        model = _model_from_tree(tree)
        if blocks_read.used != count:
            return None  # a placeholder sits where no builder takes it (an unknown field's tree)
        return model
    except Exception:  # the plain path reports it
        return None
    finally:
        _CUT = None


# ----------------------------------------------------------------------------------------------------------
# Public entry points
# ----------------------------------------------------------------------------------------------------------
# The text path keeps per-read state at module level (_CUT: the cut blocks; _ORIGIN_ATTRS/_ORIGIN_IDS: the origin
# attrs shared within one model), read in its innermost loops where a thread-local look-up would cost; reads of
# text are therefore one at a time (they hold the GIL throughout anyway).
_TEXT_READ_LOCK = threading.RLock()


def read_model_text(text: str, source: str = "<text>", *, validate: bool = True) -> Model:
    """Parse a ``ge.proto.ModelDef`` in protobuf text format (thread-safe: concurrent reads run one at a time)."""
    with _TEXT_READ_LOCK:
        try:
            with paused_gc(settle=True):
                return _read_model_text(text, source, validate)
        finally:
            _ORIGIN_ATTRS.clear()  # sharing is per model
            _ORIGIN_IDS.clear()


def _read_model_text(text: str, source: str, validate: bool) -> Model:
    model = _read_cut_text(text)
    if model is None:
        _ORIGIN_ATTRS.clear()  # the plain path shares origin attrs from scratch
        _ORIGIN_IDS.clear()
        return _read_model_text_plain(text, source, validate)
    model.source = source
    if validate:
        from anchorlog.facts.validate import validate as _validate

        _validate(model)
    return model


def _read_model_text_plain(text: str, source: str, validate: bool) -> Model:
    """The whole text through the line rewrites (or the general parser); every error is reported from here."""
    tree = _fast_tree(text)
    try:
        if tree is not None:
            try:
                model = _model_from_tree(tree)
            except _TreeError:
                tree = None  # let the general parser find the exact place
        if tree is None:
            try:
                tree = parse_text_tree(text)
            except _TextSyntaxError as e:
                line, col = _line_col(text, e.pos)
                raise InputError(f"malformed text proto: {e}", f"{source}:{line}:{col}") from None
            model = _model_from_tree(tree)
    except _TreeError as e:
        where = _locate_type_error(text)
        if where is not None:
            raise InputError(f"malformed text proto: {e}", f"{source}:{where[0]}:{where[1]}") from None
        raise InputError(f"malformed text proto: {e}", source) from None
    model.source = source
    if validate:
        from anchorlog.facts.validate import validate as _validate

        _validate(model)
    return model


_LOCATE_MAX_CHARS = 32 << 20


def _locate_type_error(text: str) -> tuple[int, int] | None:
    """Line and column of a value of the wrong type (our tree does not keep positions): protobuf's own text
    parser finds it. Only on the error path, and only for files it parses in reasonable time."""
    if len(text) > _LOCATE_MAX_CHARS:
        return None
    from google.protobuf import text_format

    try:
        text_format.Parse(text, _pb2().ModelDef(), allow_unknown_field=True)
    except text_format.ParseError as e:
        line, col = e.GetLine(), e.GetColumn()
        if line:
            return line, col
    except Exception:
        return None
    return None


def _looks_binary(data: bytes) -> bool:
    head = data[:4096]
    if not head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 4:  # not just a cut multi-byte character at the end
            return True
    return b"\x00" in head


def read_model(path: str | os.PathLike) -> Model:
    """Read a GE model: text (``.pbtxt``/``.txt``) or binary (``.pb``); other suffixes are sniffed.

    Raises :class:`InputError` (one line naming the place) for a missing file, malformed input or an
    inconsistent graph (see :mod:`anchorlog.facts.validate`)."""
    path = os.fspath(path)
    low = path.lower()
    text: str | None = None
    try:
        with open(path, "rb") as f:
            if low.endswith(TEXT_SUFFIXES) and not low.endswith(BINARY_SUFFIXES):
                text = _read_utf8(f, path)
            else:
                data = f.read()
    except FileNotFoundError:
        raise InputError("no such file", path) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a model file", path) from None
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", path) from None
    if text is not None:
        return read_model_text(text, path)
    if low.endswith(BINARY_SUFFIXES):
        binary = True
    elif low.endswith(TEXT_SUFFIXES):
        binary = False
    else:
        binary = _looks_binary(data)
    if binary:
        return read_model_bytes(data, path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _not_utf8(e, path) from None
    del data  # large dumps: do not hold the bytes and the text at once
    return read_model_text(text, path)


def _not_utf8(e: UnicodeDecodeError, path: str) -> InputError:
    return InputError(f"not UTF-8 text (byte {e.start}); binary models need the .pb suffix", path)


def _read_utf8(f, path: str) -> str:
    """The text of the open file ``f``, decoded straight from a memory map where the file allows one (no
    bytes copy of a 150 MB dump: about a third of the read + decode time)."""
    try:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(f.fileno()).st_size else None
    except (OSError, ValueError):  # not a regular file
        mapped = None
    try:
        if mapped is None:
            return f.read().decode("utf-8")
        with mapped:
            return str(mapped, "utf-8")
    except UnicodeDecodeError as e:
        raise _not_utf8(e, path) from None


def write_model(model: Model, path: str | os.PathLike) -> None:
    """Write ``model`` to ``path``: binary for ``.pb``, text otherwise. The file appears atomically (temp file
    + rename): an error leaves no partial output."""
    from anchorlog.fileutil import atomic_write_bytes

    path = os.fspath(path)
    if path.lower().endswith(BINARY_SUFFIXES):
        data: bytes | bytearray = model_to_bytes(model)
    else:
        data = model_to_utf8(model)
    atomic_write_bytes(path, data)  # type: ignore[arg-type]  # a bytearray writes as its bytes


def read_any(path: str | os.PathLike) -> Model:
    """A GE model (text or binary), or an ONNX model (``.onnx``) imported through
    :func:`anchorlog.facts.onnx_import.read_onnx`."""
    path = os.fspath(path)
    if path.lower().endswith(".onnx"):
        if not os.path.exists(path):
            raise InputError("no such file", path)
        from anchorlog.facts.onnx_import import read_onnx

        model = read_onnx(path)
        if model.source is None:
            model.source = path
        return model
    return read_model(path)
