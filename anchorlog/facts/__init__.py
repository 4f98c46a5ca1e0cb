"""Graph IR, GE model I/O and relational facts.

Main names: :class:`Model`, :class:`Graph`, :class:`Node`, :class:`TensorDesc`, :class:`Attr` (the IR);
:class:`FactDB`, :func:`tables_from_model`, :data:`SCHEMA` (facts); :class:`GraphBuilder`,
:class:`ModelBuilder` (the builder DSL for tests and notebooks).
"""

from anchorlog.facts.builder import CTRL, Edge, GraphBuilder, ModelBuilder
from anchorlog.facts.graph import Attr, Graph, Model, Node, TensorDesc
from anchorlog.facts.relations import COLUMNS, OP_CLASSES, RELATIONS, SCHEMA, FactDB, tables_from_model

__all__ = [
    "Attr",
    "COLUMNS",
    "CTRL",
    "Edge",
    "FactDB",
    "Graph",
    "GraphBuilder",
    "Model",
    "ModelBuilder",
    "Node",
    "OP_CLASSES",
    "RELATIONS",
    "SCHEMA",
    "TensorDesc",
    "tables_from_model",
]
