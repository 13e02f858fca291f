"""GRAPH=1 and GRAPHUOPS=1: the lazy graph and a kernel's UOp graph as Graphviz pictures."""
from __future__ import annotations
import os, shutil, subprocess, tempfile
from typing import TYPE_CHECKING
from tinycore.ops import Ops, GroupOp
from tinycore.uop.uop import UOp
if TYPE_CHECKING: from tinycore.lazy import LazyBuffer

def _out_path(stem: str) -> str: return os.path.join(os.getenv("GRAPHPATH", tempfile.gettempdir()), stem)

def _write(dot: str, stem: str, nodes: int, edges: int) -> str:
  """Write the dot source, and an SVG beside it when Graphviz's `dot` is installed; returns the picture's path."""
  path = _out_path(stem)
  with open(path + ".dot", "w") as f: f.write(dot)
  out = path + ".dot"
  if shutil.which("dot"):
    subprocess.run(["dot", "-Tsvg", path + ".dot", "-o", path + ".svg"], check=False, capture_output=True)
    out = path + ".svg"
  print(f"saving graph with {nodes} nodes and {edges} edges to {out}")
  return out

def _color(op: Ops | None) -> str:
  if op in GroupOp.Movement: return "#80ff80"
  if op is Ops.REDUCE_AXIS: return "#ff8080"
  if op in (Ops.BUFFER, Ops.EMPTY, Ops.CONST, Ops.COPY): return "#a0a0ff"
  return "#e0e0e0"

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
    lines.append(f'  {ids[b]} [label="{b.op.name}\\n{b.shape} {b.dtype}", fillcolor="{_color(b.op)}"{", peripheries=2" if b in realizes else ""}];')
  for b in graph:
    for s in b.srcs:
      view = s._base is not None
      lines.append(f'  {name(s.base)} -> {ids[b]}{" [color=green, penwidth=2]" if view else ""};')
      edges += 1
  return _write("\n".join(lines + ["}"]), "net", len(ids), edges)

def save_uop_graph(sink: UOp, name: str) -> str:
  nodes = sink.toposort()
  ids = {u: f"u{i}" for i, u in enumerate(nodes)}
  lines, edges = ["digraph G {", "  node [shape=box, style=filled, fontname=monospace];"], 0
  for u in nodes:
    arg = "" if u.arg is None else str(u.arg).replace('"', "'")[:40]
    lines.append(f'  {ids[u]} [label="{u.op.name}\\n{u.dtype}\\n{arg}", fillcolor="{_color(u.op)}"];')
    for s in u.src:
      lines.append(f"  {ids[s]} -> {ids[u]};")
      edges += 1
  return _write("\n".join(lines + ["}"]), f"net.uops.{name}", len(nodes), edges)
