"""The transformer generator: determinism, GE-valid structure, node kinds, descriptors, TensorMove options,
the ``generate`` command and the bundled example."""

from __future__ import annotations

import argparse
from importlib import resources

import pytest
from _model_checks import check_model
from hypothesis import given, settings
from hypothesis import strategies as st

from anchorlog.facts.generate import count_types, ge_memory_size, generate_transformer, nz_shape


def fingerprint(model) -> list:
    """Everything that defines a model, as plain data (no file format involved)."""
    out = []
    for g in model.graphs:
        for n in g.nodes.values():
            descs = [
                (d.dtype, d.shape, d.layout, d.size, sorted((k, repr(a.py())) for k, a in d.attrs.items()))
                for d in n.input_desc + n.output_desc
            ]
            # floats compared at float32 precision: that is what the GE proto stores
            attrs = sorted(
                (k, a.kind, f"{a.py():.6g}" if a.kind == "f" else repr(a.py()))
                for k, a in n.attrs.items()
                if a.kind != "t"
            )
            out.append(
                (g.name, n.name, n.type, n.id, list(n.inputs), list(n.ctrl_inputs), n.subgraph_names, attrs, descs)
            )
    return out


def test_same_seed_same_model_other_seed_other_model():
    a = generate_transformer(3, seed=7)
    b = generate_transformer(3, seed=7)
    c = generate_transformer(3, seed=8)
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint(a) != fingerprint(c)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_generated_models_are_valid(seed):
    check_model(generate_transformer(3, seed=seed))


@pytest.mark.parametrize("layers,tp", [(1, 1), (4, 2), (5, 8)])
def test_node_kind_counts(layers, tp):
    m = generate_transformer(layers, seed=11, tp=tp, partition_every=4)
    c = count_types(m)
    calls = layers // 4
    assert c["Variable"] == 2 * layers and c["Assign"] == 2 * layers
    assert c["Softmax"] == layers and c["BatchMatMul"] == 2 * layers and c["Cast"] == 2 * layers
    assert c.get("PartitionedCall", 0) == calls
    assert c["If"] == 1
    # root NetOutput + one per If branch + one per PartitionedCall subgraph
    assert c["NetOutput"] == 1 + 2 + calls
    # each of the 2 sums per layer is an AllReduce or a ReduceScatter + AllGather pair; one more AllGather at the end
    sums = c.get("HcomAllReduce", 0) + c.get("HcomReduceScatter", 0)
    assert sums == (2 * layers if tp > 1 else 0)
    assert c.get("HcomAllGather", 0) == c.get("HcomReduceScatter", 0) + (1 if tp > 1 else 0)
    # after hidden_states, before each cache Assign, at each returned cache, before each AllReduce
    assert c["TensorMove"] == 1 + 2 * layers + 2 * layers + (2 * layers if tp > 1 else 0)
    assert c.get("SplitD", 0) + c.get("SplitVD", 0) >= 2 * layers
    assert c.get("RmsNorm", 0) + c.get("LayerNorm", 0) == 2 * layers + 2  # + one per If branch
    assert [n.attr("index") for n in m.root.nodes_of_type("Data")] == [0, 1, 2, 3, 4]
    assert len(m.graphs) == 1 + 2 + calls


def test_subgraph_parent_indexes():
    m = generate_transformer(4, seed=5, partition_every=2)
    owners = {s: n for n in m.all_nodes() for s in n.subgraph_names}
    assert {n.type for n in owners.values()} == {"If", "PartitionedCall"}
    for g in m.graphs[1:]:
        parent = owners[g.name]
        datas = [n for n in g.nodes.values() if n.type == "Data"]
        assert datas and all(n.has_attr("_parent_node_index") for n in datas)
        want = 1 if parent.type == "If" else 0  # If input 0 is the condition
        assert [n.attr("_parent_node_index") for n in datas] == [want]
        (net,) = g.nodes_of_type("NetOutput")
        assert [d.attr("_parent_node_index") for d in net.input_desc] == [0]
        assert parent.output_desc[0].shape == net.input_desc[0].shape


def test_descriptors_are_consistent_and_sized_like_ge():
    m = generate_transformer(2, seed=3, tp=2)
    for g in m.graphs:
        for n in g.nodes.values():
            for i, a in enumerate(n.inputs):
                if a is None:
                    continue
                src = g.nodes[a[0]].output_desc[a[1]]
                dst = n.input_desc[i]
                assert (src.dtype, src.shape, src.layout) == (dst.dtype, dst.shape, dst.layout), (n.name, i)
            for d in n.output_desc:
                assert d.size == ge_memory_size(d.dtype, d.shape)
                assert d.size % 32 == 0 and d.size >= 32
                assert d.has_attr("origin_format") and d.has_attr("origin_shape")
    # GE: bytes + 32 rounded up to 32 (TensorUtils::GetTensorMemorySizeInBytes)
    assert ge_memory_size("DT_FLOAT16", [1, 128, 1024]) == 128 * 1024 * 2 + 32
    assert ge_memory_size("DT_FLOAT", [3]) == 64
    assert ge_memory_size("DT_FLOAT", []) == 64
    assert ge_memory_size("DT_FLOAT", [-1, 4]) == 0
    nz = [n for n in m.all_nodes() if n.type == "Const" and n.output_desc[0].layout == "FRACTAL_NZ"]
    assert nz, "some weights are stored FRACTAL_NZ"
    d = nz[0].output_desc[0]
    assert d.attr("origin_format") == "ND" and d.shape == nz_shape(d.attr("origin_shape"))


def test_ge_strings_for_hccl_and_assign():
    m = generate_transformer(2, seed=1, tp=4)
    hccl = m.root.nodes_of_type("HcomAllReduce", "HcomAllGather", "HcomReduceScatter")
    assert hccl
    for n in hccl:
        assert n.attr("_ge_attr_op_kernel_lib_name") == "ops_kernel_info_hccl"
        assert n.attr("group") == "hccl_world_group"
    for n in m.root.nodes_of_type("HcomReduceScatter"):
        (consumer, _), *_ = m.root.consumers(n.name, 0)
        assert m.root.nodes[consumer].type == "HcomAllGather"
        assert n.output_desc[0].shape[0] * 4 == n.input_desc[0].shape[0]
    for n in m.root.nodes_of_type("Assign"):
        assert n.attr("reference") is True
        assert n.attr("_input_name_key") == ["ref", "value"] and n.attr("_output_name_key") == ["ref"]
        assert m.root.nodes[n.inputs[0][0]].type == "Variable"
        assert m.root.nodes[n.inputs[1][0]].type == "TensorMove"  # copy before the in-place write
    # cache writes are ordered by control edges
    assigns = m.root.nodes_of_type("Assign")
    assert all(b.ctrl_inputs == [a.name] for a, b in zip(assigns, assigns[1:]))


@pytest.mark.parametrize("share", [0.05, 0.2])
def test_tensor_move_share_option(share):
    m = generate_transformer(3, seed=2, tp=1, tensor_move_share=share)
    c = count_types(m)
    assert c["TensorMove"] / m.num_nodes() >= share
    check_model(m)


def test_without_tensor_moves():
    m = generate_transformer(3, seed=2, tp=2, tensor_moves=False)
    assert count_types(m).get("TensorMove", 0) == 0
    check_model(m)


def test_nodes_target():
    m = generate_transformer(None, seed=4, nodes=3000)
    assert 3000 <= m.num_nodes() <= 3300
    check_model(m)


def test_ids_unique_and_preorder():
    m = generate_transformer(4, seed=9, partition_every=2)
    ids = [n.id for n in m.all_nodes()]
    assert sorted(ids) == list(range(len(ids)))
    call = m.root.nodes_of_type("PartitionedCall")[0]
    sub = m.graph(call.subgraph_names[0])
    assert [n.id for n in sub.nodes.values()] == list(range(call.id + 1, call.id + 1 + len(sub)))


def test_bad_options():
    with pytest.raises(TypeError):
        generate_transformer(2, seed=0, no_such_option=1)
    with pytest.raises(ValueError):
        generate_transformer(2, seed=0, hidden=1000, heads=16)


def _run_cli(argv: list[str]) -> int:
    from anchorlog.commands import generate as cmd

    parser = argparse.ArgumentParser(prog="anchorlog")
    cmd.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_generate_command_writes_a_readable_model(tmp_path, capsys):
    ge_io = pytest.importorskip("anchorlog.facts.ge_io")
    out = tmp_path / "t.pbtxt"
    assert _run_cli(["generate", "transformer", "--layers", "2", "--seed", "5", "-o", str(out)]) == 0
    assert "nodes" in capsys.readouterr().out
    back = ge_io.read_model(out)
    ref = generate_transformer(2, seed=5)
    assert [(g.name, list(g.nodes)) for g in back.graphs] == [(g.name, list(g.nodes)) for g in ref.graphs]
    assert count_types(back) == count_types(ref)


def test_generate_command_rejects_bad_options(tmp_path):
    from anchorlog.errors import OptionError

    with pytest.raises(OptionError):
        _run_cli(["generate", "transformer", "--layers", "0", "-o", str(tmp_path / "x.pbtxt")])
    with pytest.raises(OptionError):
        _run_cli(["generate", "transformer", "--tensor-move-share", "1.5", "-o", str(tmp_path / "x.pbtxt")])
    assert not (tmp_path / "x.pbtxt").exists()


EXAMPLE_ARGS = dict(layers=2, seed=6, tp=2, hidden=1024, seq=64, partition_every=2)


def test_bundled_example_is_the_generator_output():
    ge_io = pytest.importorskip("anchorlog.facts.ge_io")
    path = resources.files("anchorlog") / "examples" / "transformer-2l.pbtxt"
    model = ge_io.read_model(str(path))
    check_model(model)
    ref = generate_transformer(**EXAMPLE_ARGS)
    assert fingerprint(model) == fingerprint(ref)


def test_cli_main_generate_then_draw(tmp_path, capsys):
    cli = pytest.importorskip("anchorlog.cli")
    model = tmp_path / "t.pb"
    assert cli.main(["generate", "transformer", "--layers", "1", "--seed", "3", "--tp", "2", "-o", str(model)]) == 0
    assert model.stat().st_size > 0
    assert cli.main(["generate", "transformer", "--layers", "2", "--nodes", "50", "-o", str(model)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err
    assert cli.main(["draw", str(model), "-o", str(tmp_path / "t.dot"), "--highlight-type", "HcomAllReduce"]) == 0
    assert "HcomAllReduce" in (tmp_path / "t.dot").read_text()


def test_more_bad_options():
    for kwargs in ({"dtype": "DT_NOPE"}, {"seq": 0}, {"tp": 0}):
        with pytest.raises(ValueError):
            generate_transformer(1, seed=0, **kwargs)
    with pytest.raises(ValueError):
        generate_transformer(0, seed=0)


@settings(max_examples=15, deadline=None)
@given(
    layers=st.integers(1, 5),
    seed=st.integers(0, 10_000),
    tp=st.sampled_from([1, 2, 4, 8]),
    partition_every=st.integers(0, 3),
    with_if=st.booleans(),
    tensor_moves=st.booleans(),
)
def test_any_configuration_is_valid(layers, seed, tp, partition_every, with_if, tensor_moves):
    m = generate_transformer(
        layers,
        seed=seed,
        tp=tp,
        hidden=1024,
        seq=32,
        partition_every=partition_every,
        with_if=with_if,
        tensor_moves=tensor_moves,
    )
    check_model(m)
    c = count_types(m)
    assert c["Assign"] == 2 * layers and c["NetOutput"] == len(m.graphs)
    assert (c.get("TensorMove", 0) > 0) == tensor_moves
    for g in m.graphs:
        for n in g.nodes.values():
            for i, a in enumerate(n.inputs):
                src = g.nodes[a[0]].output_desc[a[1]]
                assert (src.dtype, src.shape) == (n.input_desc[i].dtype, n.input_desc[i].shape)


def test_generate_checks_the_output_path_before_generating(tmp_path, monkeypatch):
    """A bad output path (unknown suffix, missing directory) is refused before the (possibly long) generation
    starts, and nothing is written."""
    from anchorlog.errors import InputError
    from anchorlog.facts import generate as gen

    calls = []
    monkeypatch.setattr(gen, "generate_transformer", lambda *a, **k: calls.append(1))
    with pytest.raises(InputError, match="suffix|ONNX|\\.pbtxt"):
        _run_cli(["generate", "transformer", "--layers", "1", "-o", str(tmp_path / "x.csv")])
    with pytest.raises(InputError, match="does not exist"):
        _run_cli(["generate", "transformer", "--layers", "1", "-o", str(tmp_path / "no" / "x.pbtxt")])
    assert calls == []
    assert list(tmp_path.iterdir()) == []
