"""Drawing graphs with Graphviz: DOT text, SVG objects for notebooks, files for the CLI.

* :func:`to_dot` — DOT text for one graph of a model; subgraphs of wrapper nodes (If, PartitionedCall, ...)
  are clusters linked to their owner node, data edges are labelled ``out:in``, control edges are dashed,
  highlighted nodes and types are filled. Large graphs are cut to a region of ``max_nodes`` nodes around the
  highlighted nodes (or the first nodes in graph order), and the title says so.
* :func:`render` / :func:`to_svg` — run ``dot`` and return an :class:`SVG` that Jupyter displays inline.
* :func:`draw_diff` — one picture of a rewrite: nodes the rewrite added in green, removed nodes (with the
  edges they had) as red dashed ghosts.
* :func:`write_drawing` — what ``anchorlog draw`` calls: format from the file extension (svg, png, pdf, dot).
"""

from __future__ import annotations

import shutil
import subprocess
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from anchorlog.errors import AnchorlogError, InputError
from anchorlog.facts.graph import Graph, Model

DOT_MISSING = "graphviz 'dot' is not installed; install it with `apt-get install graphviz` (or `brew install graphviz`)"
HIGHLIGHT_COLOR = "#ffd54f"
TYPE_COLOR = "#90caf9"
ADDED_COLOR = "#a5d6a7"
REMOVED_COLOR = "#ef9a9a"
DEFAULT_MAX_NODES = 200
FORMATS = {".svg": "svg", ".png": "png", ".pdf": "pdf", ".dot": "dot", ".gv": "dot"}


class SVG:
    """SVG markup that Jupyter renders inline (``_repr_svg_``); ``str()`` gives the markup."""

    def __init__(self, data: str) -> None:
        self.data = data

    def _repr_svg_(self) -> str:
        return self.data

    def __str__(self) -> str:
        return self.data

    def __repr__(self) -> str:
        return f"<SVG {len(self.data)} chars>"

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.data, encoding="utf-8")


class DotText(str):
    """DOT source (a ``str``) that Jupyter shows as the laid-out picture when ``dot`` is available."""

    def _repr_svg_(self) -> str | None:
        try:
            return run_dot(self, "svg").decode("utf-8")
        except AnchorlogError:
            return None  # no graphviz: Jupyter falls back to showing the text


@dataclass
class _Style:
    highlight: set[str] = field(default_factory=set)
    highlight_types: set[str] = field(default_factory=set)
    added: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    added_edges: set[tuple] = field(default_factory=set)


def _q(text: str) -> str:
    """A DOT double-quoted string."""
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _graphs_under(model: Model, g: Graph) -> list[Graph]:
    """``g`` and every graph nested below it through subgraph_names, in pre-order."""
    out: list[Graph] = []
    seen: set[str] = set()

    def walk(x: Graph) -> None:
        if x.name in seen:
            return
        seen.add(x.name)
        out.append(x)
        for n in x.nodes.values():
            for s in n.subgraph_names:
                if s and model.has_graph(s):
                    walk(model.graph(s))

    walk(g)
    return out


def _select_region(
    model: Model,
    graphs: list[Graph],
    seeds: list[tuple[str, str]],
    max_nodes: int,
    extra_links: Iterable[tuple[tuple[str, str], tuple[str, str]]] = (),
) -> set[tuple[str, str]]:
    """Up to ``max_nodes`` (graph, node) keys: breadth-first around ``seeds`` over data, control and
    owner/subgraph links; without seeds, the first nodes in pre-order."""
    all_keys = [(g.name, n) for g in graphs for n in g.nodes]
    if len(all_keys) <= max_nodes:
        return set(all_keys)
    if not seeds:
        chosen: list[tuple[str, str]] = []
        for g in graphs:
            for n in g.nodes:
                if len(chosen) >= max_nodes:
                    return set(chosen)
                chosen.append((g.name, n))
        return set(chosen)
    names = {g.name for g in graphs}
    adj: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for g in graphs:
        for n in g.nodes.values():
            k = (g.name, n.name)
            for a in n.inputs:
                if a is not None and a[0] in g.nodes:
                    adj.setdefault(k, []).append((g.name, a[0]))
                    adj.setdefault((g.name, a[0]), []).append(k)
            for c in n.ctrl_inputs:
                if c in g.nodes:
                    adj.setdefault(k, []).append((g.name, c))
                    adj.setdefault((g.name, c), []).append(k)
            for s in n.subgraph_names:
                if s in names:
                    for m in model.graph(s).nodes:
                        adj.setdefault(k, []).append((s, m))
                        adj.setdefault((s, m), []).append(k)
    for a, b in extra_links:
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, []).append(a)
    seen: set[tuple[str, str]] = set()
    queue = deque(seeds)
    while queue and len(seen) < max_nodes:
        k = queue.popleft()
        if k in seen:
            continue
        seen.add(k)
        queue.extend(x for x in adj.get(k, ()) if x not in seen)
    return seen


def _node_attrs(node, style: _Style, key: str) -> str:
    label = f"{node.name}\n{node.type}"
    attrs = [f"label={_q(label)}", f"tooltip={_q(key)}"]
    fill = None
    if node.name in style.removed:
        fill = REMOVED_COLOR
        attrs.append('style="filled,dashed"')
    elif node.name in style.added:
        fill = ADDED_COLOR
    elif node.name in style.highlight:
        fill = HIGHLIGHT_COLOR
    elif node.type in style.highlight_types:
        fill = TYPE_COLOR
    if fill is not None:
        if node.name not in style.removed:
            attrs.append('style="filled"')
        attrs.append(f'fillcolor="{fill}"')
    if node.type in ("Data", "RefData", "NetOutput", "Variable", "Const", "Constant"):
        attrs.append("shape=ellipse")
    return ", ".join(attrs)


def _dot_from(
    model: Model,
    graph: Graph,
    style: _Style,
    max_nodes: int,
    ghost_edges: Iterable[tuple[str, str, str, str, str]] = (),
    title: str | None = None,
    rankdir: str = "TB",
) -> str:
    graphs = _graphs_under(model, graph)
    seeds_names = style.highlight | style.added | style.removed
    seeds = [(g.name, n) for g in graphs for n in g.nodes if n in seeds_names]
    seeds += [(e[0], e[1]) for e in style.added_edges] + [(e[0], e[3]) for e in style.added_edges]
    if not seeds:  # named nodes focus the region; highlighted types only when nothing is named
        seeds = [(g.name, n.name) for g in graphs for n in g.nodes.values() if n.type in style.highlight_types]
    ghost_edges = list(ghost_edges)
    links = [((e[0], e[1]), (e[0], e[3])) for e in ghost_edges]
    region = _select_region(model, graphs, seeds, max_nodes, links)
    total = sum(len(g.nodes) for g in graphs)
    ids: dict[tuple[str, str], str] = {}
    for gi, g in enumerate(graphs):
        for ni, n in enumerate(g.nodes):
            if (g.name, n) in region:
                ids[(g.name, n)] = f"g{gi}n{ni}"
    head = title if title is not None else f"{model.name or 'model'} / {graph.name}"
    if len(region) < total:
        head += f" (showing {len(region)} of {total} nodes)"
    lines = [
        "digraph anchorlog {",
        f"  graph [compound=true, rankdir={rankdir}, fontname=Helvetica, label={_q(head)}, labelloc=t];",
        "  node [shape=box, style=rounded, fontname=Helvetica, fontsize=10];",
        "  edge [fontname=Helvetica, fontsize=8];",
    ]
    cluster_of: dict[str, int] = {}

    def emit_graph(g: Graph, indent: str) -> None:
        for n in g.nodes.values():
            k = (g.name, n.name)
            if k not in ids:
                continue
            lines.append(f"{indent}{ids[k]} [{_node_attrs(n, style, g.name + '/' + n.name)}];")
            for s in n.subgraph_names:
                if not s or not model.has_graph(s):
                    continue
                sub = model.graph(s)
                if not any((s, m) in ids for m in sub.nodes) or s in cluster_of:
                    continue
                cluster_of[s] = len(cluster_of)
                lines.append(f"{indent}subgraph cluster_{cluster_of[s]} {{")
                lines.append(f"{indent}  label={_q(s)}; style=dashed; color=gray40;")
                emit_graph(sub, indent + "  ")
                lines.append(f"{indent}}}")

    emit_graph(graph, "  ")
    # Subgraph nodes in the region whose owner fell outside it still get their cluster (at top level).
    for g in graphs[1:]:
        if g.name not in cluster_of and any((g.name, m) in ids for m in g.nodes):
            cluster_of[g.name] = len(cluster_of)
            lines.append(f"  subgraph cluster_{cluster_of[g.name]} {{")
            lines.append(f"    label={_q(g.name)}; style=dashed; color=gray40;")
            emit_graph(g, "    ")
            lines.append("  }")
    for g in graphs:
        for n in g.nodes.values():
            dst = ids.get((g.name, n.name))
            if dst is None:
                continue
            for i, a in enumerate(n.inputs):
                if a is None:
                    continue
                src = ids.get((g.name, a[0]))
                if src is None:
                    continue
                extra = ', color="#2e7d32", penwidth=2' if (g.name, a[0], a[1], n.name, i) in style.added_edges else ""
                lines.append(f'  {src} -> {dst} [label="{a[1]}:{i}"{extra}];')
            for c in n.ctrl_inputs:
                src = ids.get((g.name, c))
                if src is not None:
                    lines.append(f"  {src} -> {dst} [style=dashed, color=gray30, arrowhead=odot];")
            for j, s in enumerate(n.subgraph_names):
                if s not in cluster_of:
                    continue
                first = next((ids[(s, m)] for m in model.graph(s).nodes if (s, m) in ids), None)
                if first is not None:
                    lines.append(
                        f'  {dst} -> {first} [lhead=cluster_{cluster_of[s]}, style=dotted, color=gray50, label="subgraph {j}"];'
                    )
    for gname, src_name, out, dst_name, inp in ghost_edges:
        src, dst = ids.get((gname, src_name)), ids.get((gname, dst_name))
        if src is None or dst is None:
            continue
        lab = "ctrl" if out == "ctrl" else f"{out}:{inp}"
        lines.append(f'  {src} -> {dst} [label="{lab}", style=dashed, color="#c62828", fontcolor="#c62828"];')
    lines.append("}")
    return DotText("\n".join(lines) + "\n")


def _pick_graph(model: Model, graph: str | None) -> Graph:
    if not model.graphs:
        raise InputError("the model has no graph to draw")
    if graph is None:
        return model.root
    if not model.has_graph(graph):
        names = ", ".join(g.name for g in model.graphs[:8])
        raise InputError(f"no graph named {graph!r} (graphs: {names}{' ...' if len(model.graphs) > 8 else ''})")
    return model.graph(graph)


def to_dot(
    model: Model,
    *,
    graph: str | None = None,
    highlight: Iterable[str] = (),
    highlight_types: Iterable[str] = (),
    max_nodes: int = DEFAULT_MAX_NODES,
    title: str | None = None,
    rankdir: str = "TB",
) -> str:
    """DOT text for graph ``graph`` (default: the root) of ``model`` with its nested subgraphs as clusters.

    ``highlight`` names nodes to fill, ``highlight_types`` op types to fill; with more than ``max_nodes``
    nodes only a region around the highlighted nodes (else the first nodes) is drawn."""
    g = _pick_graph(model, graph)
    style = _Style(highlight=set(highlight), highlight_types=set(highlight_types))
    return _dot_from(model, g, style, max_nodes, title=title, rankdir=rankdir)


def dot_available() -> bool:
    return shutil.which("dot") is not None


def run_dot(dot_text: str, fmt: str = "svg", timeout: float = 120.0) -> bytes:
    """Lay out ``dot_text`` with Graphviz; raises :class:`AnchorlogError` (one line) when that fails."""
    exe = shutil.which("dot")
    if exe is None:
        raise AnchorlogError(DOT_MISSING)
    try:
        proc = subprocess.run([exe, f"-T{fmt}"], input=dot_text.encode("utf-8"), capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AnchorlogError(
            f"graphviz 'dot' took longer than {timeout:.0f} s; draw fewer nodes (--max-nodes)"
        ) from None
    if proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise AnchorlogError(f"graphviz 'dot' failed: {msg[0] if msg else 'exit status ' + str(proc.returncode)}")
    return proc.stdout


def to_svg(dot_text: str) -> SVG:
    """Render DOT text to an :class:`SVG` (displays inline in Jupyter)."""
    return SVG(run_dot(dot_text, "svg").decode("utf-8"))


def render(model: Model, **kwargs) -> SVG:
    """:func:`to_dot` then :func:`to_svg`: ``render(model, highlight=["x"], max_nodes=40)`` in a notebook."""
    return to_svg(to_dot(model, **kwargs))


def diff_dot(
    before: Model,
    after: Model,
    *,
    graph: str | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
    title: str | None = None,
    rankdir: str = "TB",
) -> str:
    """DOT text of ``after`` with what changed since ``before``: added nodes and edges green, removed nodes
    drawn back in as red dashed ghosts with their former edges."""
    import copy

    gname = graph if graph is not None else (after.root.name if after.graphs else None)
    after_g = _pick_graph(after, gname)
    merged = copy.copy(after)  # shallow: only graphs we touch are replaced below
    merged.graphs = []
    style = _Style()
    ghost: list[tuple[str, str, str, str, str]] = []
    before_graphs = {g.name: g for g in before.graphs}
    for g in after.graphs:
        bg = before_graphs.get(g.name)
        if bg is None:
            style.added.update(g.nodes)
            merged.graphs.append(g)
            continue
        removed = [n for n in bg.nodes if n not in g.nodes]
        style.added.update(n for n in g.nodes if n not in bg.nodes)
        style.removed.update(removed)
        before_edges = set(bg.data_edges())
        for e in g.data_edges():
            if e not in before_edges:
                style.added_edges.add((g.name, *e))
        if not removed:
            merged.graphs.append(g)
            continue
        # A drawing copy of the graph with the removed nodes put back (edges omitted; drawn as ghosts).
        view = Graph(g.name)
        view.model = merged
        gone = set(removed)
        for n in g.nodes.values():
            view.nodes[n.name] = n
        for name in removed:
            old = copy.copy(bg.nodes[name])
            old.inputs, old.ctrl_inputs, old.subgraph_names = [], [], []
            view.nodes[name] = old
        for src, out, dst, inp in bg.data_edges():
            if src in gone or dst in gone:
                ghost.append((g.name, src, str(out), dst, str(inp)))
        for src, dst in bg.ctrl_edges():
            if src in gone or dst in gone:
                ghost.append((g.name, src, "ctrl", dst, ""))
        merged.graphs.append(view)
    for g in before.graphs:
        if not after.has_graph(g.name):
            style.removed.update(g.nodes)
    shown = next(x for x in merged.graphs if x.name == after_g.name)
    head = (
        title
        if title is not None
        else f"{after.name or 'model'} / {shown.name}: +{len(style.added)} -{len(style.removed)} nodes"
    )
    return _dot_from(merged, shown, style, max_nodes, ghost_edges=ghost, title=head, rankdir=rankdir)


def draw_diff(before: Model, after: Model, **kwargs) -> SVG:
    """An :class:`SVG` of :func:`diff_dot` (``before`` is the model before a rewrite, ``after`` after it)."""
    return to_svg(diff_dot(before, after, **kwargs))


def write_drawing(dot_text: str, path: str | Path) -> None:
    """Write ``dot_text`` laid out in the format the extension of ``path`` names (.svg .png .pdf .dot)."""
    p = Path(path)
    fmt = FORMATS.get(p.suffix.lower())
    if fmt is None:
        raise AnchorlogError(f"{p}: unknown drawing format {p.suffix or '(none)'}; use .svg, .png, .pdf or .dot")
    data = dot_text.encode("utf-8") if fmt == "dot" else run_dot(dot_text, fmt)
    tmp = p.with_name(p.name + ".tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(p)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise AnchorlogError(f"{p}: cannot write: {err.strerror or err}") from None
