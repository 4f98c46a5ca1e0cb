"""The text reader's cut path (repeated descriptor/attr blocks parsed once, ge_io._read_cut_text) gives exactly
the model of the plain path (every line through the JSON rewrite, ge_io._read_model_text_plain): same written
text, same facts, same structure, same sharing of objects, same one-line errors; and it falls back whenever it
cannot be sure."""

from __future__ import annotations

import dataclasses
import glob
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anchorlog.errors import InputError
from anchorlog.facts import ge_io
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Graph, Model, Node
from anchorlog.facts.relations import tables_from_model
from anchorlog.gcpause import paused_gc
from tests.shared_paths import SHARED

try:  # the structural comparison used for the real dumps
    from test_ge_io import canon
    from test_ge_io_fuzz import models
except ImportError:  # pragma: no cover - run from the project root with another import mode
    from tests.test_ge_io import canon
    from tests.test_ge_io_fuzz import models

REAL = sorted(glob.glob(f"{SHARED}/real-graphs/*.txt"))
CASES = sorted(glob.glob(f"{SHARED}/conformance/cases/*/model.pbtxt"))


def sharing(m: Model) -> list:
    """Every container object of the model in walk order, with the place it was first seen if it is shared:
    two models with equal lists alias their descriptors, attrs, shapes and lists the same way."""
    seen: dict[int, int] = {}
    out: list = []

    def visit(x, path: str) -> None:
        if x is None or isinstance(x, (str, bytes, int, float, bool)):
            return
        first = seen.get(id(x))
        if first is not None:
            out.append((path, first))
            return
        seen[id(x)] = len(seen)
        out.append((path, type(x).__name__))
        if isinstance(x, Graph):
            for n in x.nodes.values():
                visit(n, f"{path}/{n.name}")
            for f in ("attrs", "input", "output", "other", "extra"):
                visit(getattr(x, f), f"{path}.{f}")
        elif isinstance(x, Node):
            for f in ("inputs", "ctrl_inputs", "attrs", "input_desc", "output_desc", "subgraph_names", "other",
                      "extra", "input_text"):  # fmt: skip
                visit(getattr(x, f), f"{path}.{f}")
        elif isinstance(x, dict):
            for k, v in x.items():
                visit(v, f"{path}[{k!r}]")
        elif isinstance(x, (list, tuple)):
            for j, v in enumerate(x):
                visit(v, f"{path}[{j}]")
        elif dataclasses.is_dataclass(x):
            for f in dataclasses.fields(x):
                if f.name not in ("graph", "model"):
                    visit(getattr(x, f.name), f"{path}.{f.name}")

    for g in m.graphs:
        visit(g, g.name)
    for f in ("attrs", "other", "extra"):
        visit(getattr(m, f), f"model.{f}")
    return out


def facts(m: Model):
    """The fact tables of ``m`` (or the error deriving them: a mangled text can give a model they refuse)."""
    try:
        return tables_from_model(m)
    except Exception as e:  # noqa: BLE001 - compared, not hidden
        return repr(e)


def read(reader, text: str):
    """The model, or the one-line error, of ``reader`` (the public reader or the plain path)."""
    try:
        if reader == "plain":
            with paused_gc(settle=True):
                try:
                    return ge_io._read_model_text_plain(text, "<f>", True)
                finally:
                    ge_io._ORIGIN_ATTRS.clear()
                    ge_io._ORIGIN_IDS.clear()
        return ge_io.read_model_text(text, "<f>")
    except InputError as e:
        return str(e)


def assert_same(text: str, *, cut: bool | None = None) -> Model | str:
    """The public reader and the plain path agree on ``text``; with ``cut`` given, assert whether the cut path
    took it (True: the text was read with its blocks cut out)."""
    new = read("public", text)
    old = read("plain", text)
    if isinstance(old, str) or isinstance(new, str):
        assert new == old
    else:
        assert ge_io.model_to_text(new) == ge_io.model_to_text(old)
        if len(text) < 200_000:  # (slow on the real dumps; the written text and the sharing cover them)
            assert canon(new) == canon(old)
        assert facts(new) == facts(old)
        assert sharing(new) == sharing(old)
        for ga, gb in zip(new.graphs, old.graphs):
            assert [(n.name, n.input_text) for n in ga.nodes.values()] == [
                (n.name, n.input_text) for n in gb.nodes.values()
            ]
    if cut is not None:
        try:
            took = ge_io._read_cut_text(text) is not None
        finally:
            ge_io._ORIGIN_ATTRS.clear()
            ge_io._ORIGIN_IDS.clear()
        assert took == cut
    return new


def printer_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return ge_io.model_to_text(ge_io.read_model_text(f.read(), path, validate=False))


@pytest.mark.skipif(not REAL, reason="real dumps not available")
@pytest.mark.parametrize("path", REAL, ids=os.path.basename)
def test_real_dumps(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert_same(text)
    assert_same(printer_text(path), cut=True)


@pytest.mark.skipif(not CASES, reason="conformance cases not available")
def test_conformance_models_as_written_and_as_printed():
    for path in CASES:
        with open(path, encoding="utf-8") as f:
            assert_same(f.read())  # hand-written: most take the plain path, as before
        assert_same(printer_text(path), cut=True)


def test_generated_transformer():
    text = ge_io.model_to_text(generate_transformer(nodes=1000, seed=1))
    assert_same(text, cut=True)
    red, blocks, count = ge_io._cut_blocks(text)
    assert len(blocks) < count / 5 and len(red) < len(text) / 3  # what makes the cut path faster


def test_copies_do_not_alias_but_origin_attrs_are_shared():
    m = ge_io.read_model_text(ge_io.model_to_text(generate_transformer(nodes=300, seed=2)))
    descs = [d for n in m.root.nodes.values() for d in n.input_desc + n.output_desc]
    assert len({id(d) for d in descs}) == len(descs)
    assert len({id(d.attrs) for d in descs}) == len(descs)
    assert len({id(d.shape) for d in descs if d.shape is not None}) == sum(d.shape is not None for d in descs)
    origin = [d.attrs["origin_shape"] for d in descs if "origin_shape" in d.attrs]
    assert len({id(a) for a in origin}) < len(origin) / 10  # one Attr per distinct value, as the plain path
    by_value: dict[str, list] = {}
    for d in descs:
        by_value.setdefault(repr(d), []).append(d)
    a, b = next(group for group in by_value.values() if len(group) > 1)[:2]
    before = repr(b)
    a.shape.append(7)
    a.attrs["x"] = a.attrs.pop("origin_format")
    assert repr(b) == before
    attrs = [n.attrs["axis"] for n in m.root.nodes.values() if "axis" in n.attrs]
    assert len({id(x) for x in attrs}) == len(attrs) > 1  # op attrs are fresh objects, as the plain path


# A printer-shaped model whose blocks repeat, with every kind of block content the copies must reproduce.
DESC = """    {field} {{
      dtype: DT_FLOAT16
      shape {{
        dim: 2
        dim: -1
      }}
      layout: "ND"
      attr {{
        key: "origin_format"
        value {{
          s: "ND"
        }}
      }}
      attr {{
        key: "origin_shape"
        value {{
          list {{
            i: 2
            i: -1
            val_type: VT_LIST_INT
          }}
        }}
      }}
{more}      size: 64
    }}
"""
MORE = [
    "",
    '      attr {\n        key: "_parent_node_index"\n        value {\n          i: 0\n        }\n      }\n',
    '      attr {\n        key: "note"\n        value {\n          s: "input_desc { } attr {"\n        }\n      }\n',
    '      attr {\n        key: "odd"\n        value {\n          s: "\\377\\n}\\n    }\\n"\n        }\n      }\n',
    '      attr {\n        key: "fl"\n        value {\n          list {\n            f: 1\n            f: -0\n'
    "            val_type: VT_LIST_FLOAT\n          }\n        }\n      }\n",
    '      attr {\n        key: "td"\n        value {\n          td {\n            dtype: DT_INT8\n'
    '            attr {\n              key: "origin_format"\n              value {\n                s: "ND"\n'
    "              }\n            }\n          }\n        }\n      }\n",
    '      device_type: "NPU"\n      real_dim_cnt: 2\n      has_out_attr: true\n',
    "      cmps_size: 0\n      attr_groups {\n        x: 1\n      }\n",
    "      unknown_field: 5\n      unknown_msg {\n        a {\n          b: 1\n        }\n      }\n",
    '      reuse_input: true\n      reuse_input_index: 1\n      name: "t"\n',
]
OP_ATTRS = [
    '    attr {\n      key: "axis"\n      value {\n        i: 0\n      }\n    }\n',
    '    attr {\n      key: "flag"\n      value {\n        b: true\n      }\n    }\n',
    '    attr {\n      key: "dt"\n      value {\n        dt: DT_INT32\n      }\n    }\n',
    '    attr {\n      key: "ints"\n      value {\n        list {\n          i: 1\n          i: 2\n        }\n      }\n    }\n',
    '    attr {\n      key: "empty"\n      value {\n      }\n    }\n',
    '    attr {\n      key: "value"\n      value {\n        t {\n          desc {\n            dtype: DT_INT64\n'
    "            shape {\n              dim: 2\n            }\n          }\n"
    '          data: "\\200\\000\\001"\n        }\n      }\n    }\n',
    '    attr {\n      key: "fn"\n      value {\n        func {\n          name: "f"\n          attr {\n'
    '            key: "k"\n            value {\n              s: "v"\n            }\n          }\n        }\n'
    "      }\n    }\n",
    '    attr {\n      key: "g"\n      value {\n        g {\n          name: "inner"\n          op {\n'
    '            name: "i0"\n            type: "Data"\n            output_desc {\n              dtype: DT_FLOAT\n'
    "            }\n          }\n        }\n      }\n    }\n",
    '    attr {\n      key: "lst"\n      value {\n        list {\n          td {\n            dtype: DT_FLOAT\n'
    '          }\n          td {\n            layout: "NZ"\n          }\n          val_type: VT_LIST_TENSOR_DESC\n'
    "        }\n      }\n    }\n",
]


def tricky_model(seed: int) -> str:
    rnd = random.Random(seed)
    ops = []
    for i in range(12):
        body = [f'    name: "op{i}"\n', f'    type: "{"Data" if i == 0 else "Add"}"\n']
        if i:
            body.append(f'    input: "op{rnd.randrange(i)}:0"\n')
        body += rnd.sample(OP_ATTRS, rnd.randrange(4))
        if i:
            body.append(f"    id: {i}\n")
        for field in ["input_desc"] * (1 if i else 0) + ["output_desc"] * rnd.randrange(1, 3):
            body.append(DESC.format(field=field, more=rnd.choice(MORE)))
        ops.append("  op {\n" + "".join(body) + "  }\n")
    graph_attr = '  attr {\n    key: "ga"\n    value {\n      i: 3\n    }\n  }\n'
    return 'name: "m"\ngraph {\n  name: "g"\n' + "".join(ops) + graph_attr + "}\n" + OP_ATTRS[0].replace("    ", "")


@pytest.mark.parametrize("seed", range(8))
def test_tricky_blocks_same_model(seed):
    text = tricky_model(seed)
    m = assert_same(text, cut=True)
    assert isinstance(m, Model) and len(m.root.nodes) == 12
    assert_same(text.rstrip("\n"), cut=True)  # no newline at the end


def test_copies_of_every_block_kind_are_fresh():
    # every block kind used at least twice, so the second use is a copy (or a second parse)
    ops = []
    for i, more in enumerate(MORE + MORE):
        attrs = "".join(OP_ATTRS)
        ops.append(
            f'  op {{\n    name: "o{i}"\n    type: "T"\n{attrs}{DESC.format(field="output_desc", more=more)}  }}\n'
        )
    text = 'graph {\n  name: "g"\n' + "".join(ops) + "}\n"
    m = assert_same(text, cut=True)
    nodes = list(m.root.nodes.values())
    for a, b in zip(nodes, nodes[len(MORE) :]):
        for (ka, x), (kb, y) in zip(a.attrs.items(), b.attrs.items()):
            assert ka == kb and x is not y and canon(x) == canon(y)
        assert a.output_desc[0] is not b.output_desc[0] and canon(a.output_desc) == canon(b.output_desc)


@pytest.mark.parametrize(
    "text",
    [
        # a placeholder-looking line already in the text: read the plain way (here: an error)
        'graph {\n  name: "g"\n  op {\n    name: "a"\n    attr: 0\n  }\n}\n',
        'graph {\n  name: "g"\n  op {\n    name: "a"\n    input_desc: 0\n    output_desc {\n    }\n  }\n}\n',
        # an `input_desc` block under an unknown field: the placeholder would land in `extra`
        'graph {\n  name: "g"\n  op {\n    name: "a"\n    mine {\n      input_desc {\n        dtype: DT_FLOAT\n'
        "      }\n    }\n  }\n}\n",
        'graph {\n  name: "g"\n  op {\n    name: "a"\n    output_desc {\n      desc {\n        x: 1\n      }\n'
        "    }\n  }\n}\n",
        # unbalanced: the block's own closing line is missing / comes early
        'graph {\n  name: "g"\n  op {\n    name: "a"\n    output_desc {\n      dtype: DT_FLOAT\n  }\n}\n',
        'graph {\n  name: "g"\n  op {\n    name: "a"\n    output_desc {\n      shape {\n    }\n    }\n  }\n}\n',
        'graph {\n  name: "g"\n  op {\n    name: "a"\n    output_desc {\n      }\n      dtype: DT_FLOAT\n'
        "    }\n  }\n}\n",
        # wrong value types inside a block: the error names the line
        'graph {\n  name: "g"\n  op {\n    name: "a"\n    output_desc {\n      size: "big"\n    }\n  }\n}\n',
        'graph {\n  name: "g"\n  op {\n    name: "a"\n    attr {\n      key: 3\n    }\n  }\n}\n',
        'graph {\n  name: "g"\n  op {\n    name: "a"\n    output_desc {\n      dtype: DT_NOPE\n    }\n  }\n}\n',
        # strings that talk about blocks
        'graph {\n  name: "g"\n  op {\n    name: "attr: 1"\n    type: "desc {"\n    output_desc {\n    }\n  }\n}\n',
        # layouts the printer does not write: CRLF, tabs, several fields on a line, a comment
        'graph {\r\n  name: "g"\r\n  op {\r\n    name: "a"\r\n    output_desc {\r\n    }\r\n  }\r\n}\r\n',
        'graph {\n\tname: "g"\n\top {\n\t\tname: "a"\n\t\toutput_desc {\n\t\t}\n\t}\n}\n',
        'graph { name: "g" op { name: "a" output_desc { dtype: DT_FLOAT } } }\n',
        'graph {\n  name: "g"\n  op {\n    name: "a"  # c\n    output_desc {\n      shape { dim: 1 }\n    }\n  }\n}\n',
        # indentation that is not the printer's
        'graph {\n  name: "g"\n  op {\n    name: "a"\n    output_desc {\n    dtype: DT_FLOAT\n    }\n  }\n}\n',
        'graph {\n  name: "g"\n  op {\n    name: "a"\n      output_desc {\n      }\n  }\n}\n',
        "",
    ],
)
def test_odd_and_bad_texts_same_result(text):
    assert_same(text)


def test_bad_input_messages_unchanged():
    try:
        from test_bad_input import BAD
    except ImportError:  # pragma: no cover
        from tests.test_bad_input import BAD
    for text, _ in BAD.values():
        assert_same(text)


def test_mangled_printer_texts_same_result():
    # random line edits of a printer text: every result (model or error message) equals the plain path's
    base = tricky_model(3).splitlines(keepends=True)
    rnd = random.Random(7)
    for _ in range(150):
        lines = list(base)
        for _ in range(rnd.randrange(1, 3)):
            j = rnd.randrange(len(lines))
            edit = rnd.randrange(5)
            if edit == 0:
                del lines[j]
            elif edit == 1:
                lines.insert(j, lines[rnd.randrange(len(lines))])
            elif edit == 2:
                lines[j] = "  " + lines[j]
            elif edit == 3:
                lines[j] = lines[j][2:] if lines[j].startswith("  ") else lines[j]
            else:
                lines.insert(j, rnd.choice(["}\n", "    }\n", "      }\n", "    attr {\n", "    input_desc {\n"]))
        assert_same("".join(lines))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models(), st.integers(0, 3))
def test_random_models_same_model(model, copies):
    # repeat each node's descriptor on its inputs so that blocks repeat
    for n in model.root.nodes.values():
        n.input_desc = [dataclasses.replace(n.output_desc[0]) for _ in range(copies)]
    text = ge_io.model_to_text(model)
    assert_same(text, cut=ge_io._fast_tree(text) is not None)


def test_runs_of_blocks_keep_order_and_last_wins():
    # consecutive blocks at one indentation are cut as one run: descriptors interleaved in and out, an attr
    # key repeated in a run (the last one wins), runs split by other fields, graph and model attr runs, a
    # TensorDef with two `desc` blocks (the last one wins; `desc` blocks are not joined)
    def attr(key: str, value: int, ind: str) -> str:
        return f'{ind}attr {{\n{ind}  key: "{key}"\n{ind}  value {{\n{ind}    i: {value}\n{ind}  }}\n{ind}}}\n'

    def desc(field: str, dtype: str) -> str:
        return f"    {field} {{\n      dtype: {dtype}\n    }}\n"

    two_descs = (
        '    attr {\n      key: "value"\n      value {\n        t {\n          desc {\n            dtype: DT_INT8\n'
        '          }\n          desc {\n            dtype: DT_INT16\n          }\n          data: "x"\n        }\n'
        "      }\n    }\n"
    )
    op = (
        '  op {\n    name: "a"\n    type: "T"\n'
        + attr("k", 1, "    ")
        + attr("j", 2, "    ")
        + attr("k", 3, "    ")
        + "    id: 4\n"
        + attr("late", 5, "    ")
        + two_descs
        + desc("input_desc", "DT_FLOAT")
        + desc("output_desc", "DT_INT32")
        + desc("input_desc", "DT_INT64")
        + '    subgraph_name: "s"\n'
        + desc("output_desc", "DT_BOOL")
        + "  }\n"
    )
    graph_attrs = attr("g1", 1, "  ") + attr("g2", 2, "  ") + attr("g1", 3, "  ")
    text = 'graph {\n  name: "g"\n' + op + op.replace('"a"', '"b"') + graph_attrs + "}\n" + attr("m", 1, "")
    text += 'graph {\n  name: "s"\n}\n'
    m = assert_same(text, cut=True)
    for name in "ab":
        n = m.root.nodes[name]
        assert list(n.attrs) == ["k", "j", "late", "value"] and n.attr("k") == 3
        assert n.attrs["value"].value.desc.dtype == "DT_INT16"
        assert [d.dtype for d in n.input_desc] == ["DT_FLOAT", "DT_INT64"]
        assert [d.dtype for d in n.output_desc] == ["DT_INT32", "DT_BOOL"]
    assert m.root.attr("g1") == 3 and list(m.root.attrs) == ["g1", "g2"] and m.attr("m") == 1
    red, blocks, count = ge_io._cut_blocks(text)
    assert count == 10  # per op: attr runs (k, j, k) and (late, value), descriptor runs; graph, model attrs


def test_placeholder_shaped_text_of_its_own():
    desc = "    output_desc {\n      dtype: DT_FLOAT\n    }\n"
    strings = '  op {\n    name: "attr: 1"\n    type: "input_desc: 2"\n' + desc + "  }\n"
    assert_same('graph {\n  name: "g"\n' + strings + "}\n", cut=True)  # only strings: the cut is used
    own_line = '  op {\n    name: "a"\n    mine {\n      attr: 0\n    }\n' + desc + "  }\n"
    assert_same('graph {\n  name: "g"\n' + own_line + "}\n", cut=False)  # a line of that shape: plain path
    in_block = "    output_desc {\n      mine {\n        attr: 0\n        desc: 1\n      }\n    }\n"
    text = 'graph {\n  name: "g"\n  op {\n    name: "a"\n' + in_block + in_block + "  }\n}\n"
    m = assert_same(text, cut=True)  # inside a block, unknown fields keep such lines as they are
    assert m.root.nodes["a"].output_desc[0].extra == ["mine", ["attr", 0, "desc", 1]]


def test_read_model_file_paths_same_messages(tmp_path):
    # a .pbtxt is decoded from a memory map; a file without a known suffix from its bytes: same results
    text = ge_io.model_to_text(generate_transformer(nodes=200, seed=3))
    for name, data in [("ok", text.encode()), ("bad", b'graph {\n  name: "g"\n}\n\xff'), ("empty", b"")]:
        (tmp_path / f"{name}.pbtxt").write_bytes(data)
        (tmp_path / f"{name}.dump").write_bytes(data)
        results = []
        for suffix in ("pbtxt", "dump"):
            try:
                results.append(ge_io.model_to_text(ge_io.read_model(tmp_path / f"{name}.{suffix}")))
            except InputError as e:
                results.append(e.args[0])  # the message without the place
        assert results[0] == results[1], name
    with pytest.raises(InputError, match=r"not UTF-8 text \(byte 22\)"):
        ge_io.read_model(tmp_path / "bad.pbtxt")


def test_blocks_that_do_not_repeat_take_the_plain_path():
    def text(n_ops: int, distinct: int) -> str:
        ops = "".join(
            f'  op {{\n    name: "o{i}"\n    type: "T"\n    output_desc {{\n      size: {i % distinct}\n    }}\n  }}\n'
            for i in range(n_ops)
        )
        return 'graph {\n  name: "g"\n' + ops + "}\n"

    assert_same(text(1200, 1200), cut=False)  # 1200 distinct blocks, each once
    assert_same(text(1200, 250), cut=True)  # few distinct ones: cut
    assert_same(text(4800, 1100), cut=True)  # many distinct ones, but each about 4 times


def test_text_reads_in_threads_give_the_models_of_reads_one_by_one():
    """The cut path's per-read state is module-level: concurrent reads (threads) must not see each other's
    blocks or shared origin attrs, nor turn a bad text into a model."""
    from concurrent.futures import ThreadPoolExecutor

    texts = [ge_io.model_to_text(generate_transformer(nodes=n, seed=s)) for n, s in ((600, 1), (900, 2), (700, 3))]
    bad = texts[0].replace("output_desc {", "output_desc {{", 1)
    expected = [ge_io.model_to_text(ge_io.read_model_text(t)) for t in texts]

    def shared_origins(m: Model) -> int:  # distinct origin attr objects: one per distinct value within a read
        return len({id(d.attrs[k]) for g in m.graphs for n in g.nodes.values()
                    for d in (*n.input_desc, *n.output_desc) for k in ("origin_format", "origin_shape")
                    if k in d.attrs})  # fmt: skip

    expected_sharing = [shared_origins(ge_io.read_model_text(t)) for t in texts]

    def read(t: str) -> tuple[str, int] | str:
        try:
            m = ge_io.read_model_text(t)
        except InputError:
            return "error"
        return ge_io.model_to_text(m), shared_origins(m)

    work = [*texts, bad] * 4
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(read, work))
    assert got == [*zip(expected, expected_sharing), "error"] * 4
