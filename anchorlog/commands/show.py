"""``anchorlog show IN``: what a model holds — op types, graphs and subgraphs with their owners, tensor
sizes."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

from anchorlog.facts.graph import Model, TensorDesc

# Bits per element of GE data types (for descriptors without a `size`).
_DTYPE_BITS = {
    "DT_FLOAT": 32, "DT_FLOAT16": 16, "DT_BF16": 16, "DT_INT8": 8, "DT_UINT8": 8, "DT_INT16": 16,
    "DT_UINT16": 16, "DT_INT32": 32, "DT_UINT32": 32, "DT_INT64": 64, "DT_UINT64": 64, "DT_BOOL": 8,
    "DT_DOUBLE": 64, "DT_COMPLEX64": 64, "DT_COMPLEX128": 128, "DT_QINT8": 8, "DT_QUINT8": 8, "DT_QINT16": 16,
    "DT_QUINT16": 16, "DT_QINT32": 32, "DT_INT4": 4, "DT_UINT1": 1, "DT_INT2": 2, "DT_UINT2": 2,
    "DT_COMPLEX32": 32, "DT_HIFLOAT8": 8, "DT_FLOAT8_E5M2": 8, "DT_FLOAT8_E4M3FN": 8, "DT_FLOAT8_E8M0": 8,
}  # fmt: skip


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "show",
        help="summarise a model: op types, graphs, tensor sizes",
        description="Summarise a model: op-type histogram, graphs and subgraphs (node counts, owning node), "
        "output tensor sizes (TensorDescriptor.size, else computed from shape and dtype).",
    )
    p.add_argument("input", metavar="IN", help="model (.pbtxt/.txt/.pb/.onnx)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--top", type=int, default=10, metavar="N", help="largest tensors / op types shown (default 10)")
    p.set_defaults(func=run)


def tensor_bytes(td: TensorDesc) -> int | None:
    """Bytes of a tensor: its ``size`` when set, else elements x dtype width; None when not static."""
    if td.size:
        return int(td.size)
    if td.shape is None or any(d < 0 for d in td.shape):
        return None
    bits = _DTYPE_BITS.get(td.dtype)
    if bits is None:
        return None
    n = 1
    for d in td.shape:
        n *= d
    return (n * bits + 7) // 8


def summarize(model: Model, top: int = 10) -> dict[str, Any]:
    """The summary ``show`` prints, as a dict."""
    types = Counter(n.type for n in model.all_nodes())
    owners: dict[str, tuple[str, str]] = {}
    for g in model.graphs:
        for n in g.nodes.values():
            for s in n.subgraph_names:
                if s:
                    owners.setdefault(s, (g.name, n.name))
    graphs = []
    for i, g in enumerate(model.graphs):
        owner = owners.get(g.name)
        graphs.append(
            {
                "graph": g.name,
                "root": i == 0,
                "nodes": len(g.nodes),
                "data_edges": sum(1 for _ in g.data_edges()),
                "ctrl_edges": sum(1 for _ in g.ctrl_edges()),
                "owner": None if owner is None else {"graph": owner[0], "node": owner[1]},
            }
        )
    sizes: list[tuple[int, str, str, int, str, list[int] | None]] = []
    unknown = 0
    for g in model.graphs:
        for n in g.nodes.values():
            for i, td in enumerate(n.output_desc):
                b = tensor_bytes(td)
                if b is None:
                    unknown += 1
                else:
                    sizes.append((b, g.name, n.name, i, td.dtype, td.shape))
    total = sum(s[0] for s in sizes)
    largest = sorted(sizes, key=lambda s: -s[0])[:top]
    return {
        "model": model.name,
        "source": model.source,
        "nodes": model.num_nodes(),
        "graphs": graphs,
        "op_types": dict(types.most_common()),
        "tensors": {
            "outputs": len(sizes) + unknown,
            "static": len(sizes),
            "not_static": unknown,
            "total_bytes": total,
            "largest": [
                {"bytes": b, "graph": gn, "node": nn, "output": i, "dtype": dt, "shape": sh}
                for b, gn, nn, i, dt, sh in largest
            ],
        },
    }


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def run(args: argparse.Namespace) -> int:
    from anchorlog.errors import OptionError
    from anchorlog.facts import ge_io

    if args.top < 0:
        raise OptionError("--top must not be negative")
    model = ge_io.read_any(args.input)
    s = summarize(model, args.top)
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    print(f"model {s['model']!r} ({args.input}): {s['nodes']} nodes in {len(s['graphs'])} graph(s)")
    print("graphs:")
    for g in s["graphs"]:
        owner = (
            "root"
            if g["root"]
            else ("owner " + f"{g['owner']['graph']}/{g['owner']['node']}" if g["owner"] else "no owner")
        )
        print(f"  {g['graph']}: {g['nodes']} nodes, {g['data_edges']} data / {g['ctrl_edges']} control edges ({owner})")
    types = list(s["op_types"].items())
    shown = types if args.top == 0 else types[: max(args.top, 1) * 2]
    print(f"op types ({len(types)}):")
    width = max((len(t) for t, _ in shown), default=0)
    for t, c in shown:
        print(f"  {t:<{width}}  {c}")
    if len(shown) < len(types):
        print(f"  ... {len(types) - len(shown)} more")
    ts = s["tensors"]
    print(
        f"output tensors: {ts['outputs']} ({ts['not_static']} without static size), "
        f"static total {_human(ts['total_bytes'])}"
    )
    for t in ts["largest"]:
        print(f"  {_human(t['bytes']):>10}  {t['graph']}/{t['node']}:{t['output']}  {t['dtype']} {t['shape']}")
    return 0
