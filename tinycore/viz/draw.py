"""Graphs for the VIZ page, laid out and drawn by Graphviz's `dot` into SVG that the page inlines: a kernel's UOp
graphs (the AST, the graph before and after a rewrite pass) and a realize's schedule (kernels, the buffers between them).
A graph over VIZ_MAX_NODES nodes (600) is not drawn: dot takes long on it and it reads no better; the page prints it."""
from __future__ import annotations
import html, os, shutil, subprocess
from typing import Any
from tinycore.helpers import getenv
from tinycore.ops import Ops
from tinycore.uop.graph import uop_dot
from tinycore.viz.record import ScheduleRecord

MAX_NODES = getenv("VIZ_MAX_NODES", 600)
# what a kernel's node in the schedule lists as fused into it: its compute ops, not its plumbing
_PLUMBING = {Ops.SINK, Ops.STORE, Ops.LOAD, Ops.DEFINE_GLOBAL, Ops.CONST, Ops.VIEW}

def svgs(dots: list[str | None]) -> list[str | None]:
  """The SVG element dot draws from each Graphviz source (None stays None), several dot processes at a time. (No
  threads: the page may be built at the interpreter's exit, when no thread pool can start.)"""
  if shutil.which("dot") is None: raise RuntimeError("VIZ draws its graphs with Graphviz's `dot`: install graphviz (Debian: apt install graphviz)")
  out: list[str | None] = [None] * len(dots)
  todo, n = [i for i, d in enumerate(dots) if d is not None], os.cpu_count() or 2
  for b in range(0, len(todo), n):
    procs = [(i, subprocess.Popen(["dot", "-Tsvg"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
             for i in todo[b:b + n]]
    for i, p in procs:
      svg, err = p.communicate(dots[i])
      if p.returncode != 0: raise RuntimeError(f"dot failed on a graph of the VIZ page: {err.strip()}")
      out[i] = svg[svg.index("<svg"):]
  return out

def uop_graph(sink: Any) -> str | None:
  """The Graphviz source of a UOp graph, None when it is too big to draw."""
  dot, nodes, _ = uop_dot(sink)
  return dot if nodes <= MAX_NODES else None

def fused_ops(ast: Any) -> list[str]:
  """The compute ops of a kernel's AST, in order of first use."""
  return list(dict.fromkeys(u.op.name for u in ast.toposort() if u.op not in _PLUMBING))

def schedule_graph(rec: ScheduleRecord, kernel_of: dict[tuple[str, Any], tuple[int, str]]) -> str:
  """A realize's schedule: a box per kernel (its name and the ops fused into it, linked to its section of the page), an
  ellipse per buffer (size and dtype); an edge from each buffer a kernel reads, and to each buffer it writes."""
  lines = ["digraph S {", "  rankdir=LR; node [fontname=monospace, style=filled];"]
  seen: set[int] = set()
  for i, (ast, device, bufs, n_out) in enumerate(rec.items):
    if ast.op is Ops.SINK:
      idx, name = kernel_of.get((device, ast), (None, "kernel"))
      label, href = f"{name}\\n{' '.join(fused_ops(ast))[:60]}", f', href="#k{idx}", target="_top"' if idx is not None else ""
      lines.append(f'  i{i} [shape=box, fillcolor="#ffe0a0", label="{html.escape(label)}", tooltip="{device}"{href}];')
    elif ast.op is Ops.COPY: lines.append(f'  i{i} [shape=box, fillcolor="#a0a0ff", label="copy\\n{bufs[1][1]} x {bufs[1][2]}"];')
    else: continue  # EMPTY: an allocation, no work
    for j, (bid, size, dt) in enumerate(bufs):
      if bid not in seen:
        seen.add(bid)
        lines.append(f'  b{bid} [shape=ellipse, fillcolor="#e0e0e0", label="{size} x {dt}"];')
      lines.append(f"  i{i} -> b{bid};" if j < n_out else f"  b{bid} -> i{i};")
  return "\n".join(lines + ["}"])
