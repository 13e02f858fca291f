"""Graphviz pictures of graphs: a UOp graph (GRAPHUOPS=1, one per kernel) and the drawing both it and the lazy graph use.

Below codegen/, which draws each kernel's UOps; engine/graph.py draws the lazy graph (GRAPH=1) with the same helpers."""
from __future__ import annotations
import os, shutil, subprocess, tempfile
from tinycore.ops import Ops, GroupOp
from tinycore.uop.uop import UOp

def _out_path(stem: str) -> str: return os.path.join(os.getenv("GRAPHPATH", tempfile.gettempdir()), stem)

def write_graph(dot: str, stem: str, nodes: int, edges: int) -> str:
  """Write the dot source, and an SVG beside it when Graphviz's `dot` is installed; returns the picture's path."""
  path = _out_path(stem)
  with open(path + ".dot", "w") as f: f.write(dot)
  out = path + ".dot"
  if shutil.which("dot"):
    subprocess.run(["dot", "-Tsvg", path + ".dot", "-o", path + ".svg"], check=False, capture_output=True)
    out = path + ".svg"
  print(f"saving graph with {nodes} nodes and {edges} edges to {out}")
  return out

def op_color(op: Ops | None) -> str:
  """The fill colour of a node: movement green, reduce red, buffers and constants blue, the rest grey."""
  if op in GroupOp.Movement: return "#80ff80"
  if op is Ops.REDUCE_AXIS: return "#ff8080"
  if op in (Ops.BUFFER, Ops.EMPTY, Ops.CONST, Ops.COPY): return "#a0a0ff"
  return "#e0e0e0"

def uop_dot(sink: UOp) -> tuple[str, int, int]:
  """The Graphviz source of a UOp graph (each UOp a box: op, dtype, arg; an edge from a source to its user), with its
  numbers of nodes and edges."""
  nodes = sink.toposort()
  ids = {u: f"u{i}" for i, u in enumerate(nodes)}
  lines, edges = ["digraph G {", "  node [shape=box, style=filled, fontname=monospace];"], 0
  for u in nodes:
    arg = "" if u.arg is None else str(u.arg).replace("\\", "/").replace('"', "'")[:40]  # (a backslash or quote would end dot's string)
    lines.append(f'  {ids[u]} [label="{u.op.name}\\n{u.dtype}\\n{arg}", fillcolor="{op_color(u.op)}"];')
    for s in u.src:
      lines.append(f"  {ids[s]} -> {ids[u]};")
      edges += 1
  return "\n".join(lines + ["}"]), len(nodes), edges

def save_uop_graph(sink: UOp, name: str) -> str:
  """The UOp graph as a picture (see uop_dot); returns its path."""
  dot, nodes, edges = uop_dot(sink)
  return write_graph(dot, f"net.uops.{name}", nodes, edges)
