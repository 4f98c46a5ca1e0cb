"""Explainer registry for ``anchorlog explain IN NAME [--anchor NODE:OUT]``.

A pass module that can explain its decisions registers a function
``explain(model, name, *, options, anchor=None) -> str`` for the node types it decides about (e.g.
``TensorMove`` for ``tensor-move-delete``) and/or for anchors (``--anchor NODE:OUT``: why a buffer got or did
not get a copy). The command loads every pass module (:func:`anchorlog.analysis.registry.load_all`), finds the
node, and dispatches: ``--anchor`` goes to the anchor explainers, otherwise the node's type picks one.

Usage in a pass module::

    from anchorlog.analysis.explainers import register_explainer

    @register_explainer("tensor-move-delete", node_types=("TensorMove",))
    def explain(model, name, *, options, anchor=None) -> str: ...
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from anchorlog.errors import OptionError
from anchorlog.facts.graph import Model


class ExplainFn(Protocol):
    def __call__(
        self, model: Model, name: str, *, options: dict[str, str], anchor: tuple[str, int] | None = None
    ) -> str: ...


@dataclass
class Explainer:
    pass_name: str
    fn: ExplainFn
    node_types: tuple[str, ...] = ()
    anchors: bool = False


EXPLAINERS: list[Explainer] = []


def register_explainer(
    pass_name: str, *, node_types: tuple[str, ...] = (), anchors: bool = False
) -> Callable[[ExplainFn], ExplainFn]:
    """Register ``fn`` as the explanation of ``pass_name`` for nodes of ``node_types`` and/or for anchors."""

    def deco(fn: ExplainFn) -> ExplainFn:
        EXPLAINERS[:] = [e for e in EXPLAINERS if not (e.pass_name == pass_name and e.fn.__name__ == fn.__name__)]
        EXPLAINERS.append(Explainer(pass_name, fn, tuple(node_types), anchors))
        return fn

    return deco


def explainers_for(node_type: str | None, *, anchor: bool) -> list[Explainer]:
    """Explainers that apply: anchor explainers when ``anchor``, else those registered for ``node_type``."""
    if anchor:
        return [e for e in EXPLAINERS if e.anchors]
    return [e for e in EXPLAINERS if node_type in e.node_types]


def explain(
    model: Model, name: str, *, options: dict[str, str] | None = None, anchor: tuple[str, int] | None = None
) -> str:
    """Dispatch to the registered explainers; raises :class:`OptionError` when nothing can explain ``name``."""
    from anchorlog.analysis.registry import load_all

    load_all()
    node = model.find_node(name)
    if node is None:
        raise OptionError(f"no node named {name!r} in the model", name)
    found = explainers_for(node.type, anchor=anchor is not None)
    if not found:
        kinds = sorted({t for e in EXPLAINERS for t in e.node_types})
        anchor_passes = sorted({e.pass_name for e in EXPLAINERS if e.anchors})
        what = "anchors" if anchor is not None else f"{node.type} nodes"
        msg = f"no pass explains {what}; explainable node types: {', '.join(kinds) or '(none)'}"
        if anchor_passes:
            msg += f"; --anchor explained by: {', '.join(anchor_passes)}"
        raise OptionError(msg, name)
    import copy

    texts = []
    for e in found:
        # each explainer runs its pass; with several, each gets its own copy of the model
        subject = copy.deepcopy(model) if len(found) > 1 else model
        text = e.fn(subject, name, options=dict(options or {}), anchor=anchor)
        texts.append(f"[{e.pass_name}]\n{text}" if len(found) > 1 else text)
    return "\n\n".join(texts)
