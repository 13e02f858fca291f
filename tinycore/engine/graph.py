"""GRAPH=1: the lazy graph as a Graphviz picture (a kernel's UOp graph, GRAPHUOPS=1, is drawn by tinycore/uop/graph.py)."""
from __future__ import annotations
from typing import TYPE_CHECKING
from tinycore.uop.graph import op_color, write_graph
if TYPE_CHECKING: from tinycore.lazy import LazyBuffer

def save_lazy_graph(graph: list[LazyBuffer], realizes: set[LazyBuffer]) -> str:
  """Each base is a box (double border when it becomes a kernel output); an edge through a view is green."""
  ids = {b: f"n{i}" for i, b in enumerate(graph)}
  lines, edges = ["digraph G {", "  node [shape=box, style=filled, fontname=monospace];"], 0
  def name(b: LazyBuffer) -> str:
    if b not in ids:
      ids[b] = f"n{len(ids)}"
      lines.append(f'  {ids[b]} [label="{b.op.name if b.op else "?"}\\n{b.shape} {b.dtype}", fillcolor="#a0a0ff"];')
    return ids[b]
  for b in graph:
    lines.append(f'  {ids[b]} [label="{b.op.name}\\n{b.shape} {b.dtype}", fillcolor="{op_color(b.op)}"{", peripheries=2" if b in realizes else ""}];')
  for b in graph:
    for s in b.srcs:
      view = s._base is not None
      lines.append(f'  {name(s.base)} -> {ids[b]}{" [color=green, penwidth=2]" if view else ""};')
      edges += 1
  return write_graph("\n".join(lines + ["}"]), "net", len(ids), edges)
