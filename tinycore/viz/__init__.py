"""VIZ=1: a local web page that shows what the compiler did, for every kernel of the run.

    VIZ=1 python train.py          # at exit: the page is served on 127.0.0.1 (a free port; the URL is printed)
    VIZ=file python train.py       # at exit: one self-contained HTML file instead (its path is printed)
    tinycore.viz.serve()           # on demand, from a running program (or tinycore.viz.save(path))

The page shows each realize's schedule (its kernels as a graph, with the buffers between them and the ops fused into
each), and per kernel: the AST, each rewrite pass with the graph after it and the rules that fired, the optimizations
applied (hand-coded, or BEAM's choice with every candidate it timed), the linearized program, the rendered source, the
launch sizes, FLOPs and bytes, the compile time and the run times; and the timeline of the run (tinycore/profile.py).

Files, one concept each: record.py (what the core notes while VIZ is on; the only one the core imports), draw.py
(graphs drawn by Graphviz's `dot` into SVG), timeline.py (the profiler's events as an SVG timeline), page.py (the
HTML page), server.py (serving it). This module imports only record.py; the page code loads when it is asked for."""
from __future__ import annotations
import atexit, os, tempfile
from tinycore.helpers import VIZ
from tinycore.viz import record

def save(path: str | None = None) -> str:
  """Write the page as one self-contained HTML file (VIZ_PATH, else a file in the temporary folder); returns its path."""
  from tinycore.viz.page import render_page
  path = path or os.getenv("VIZ_PATH") or os.path.join(tempfile.gettempdir(), f"tinycore_viz_{os.getpid()}.html")
  with open(path, "w") as f: f.write(render_page())
  return path

def serve(port: int = 0, block: bool = True) -> str:
  """Serve the page on 127.0.0.1 (port 0: a free one) and return its URL; block=True serves until Ctrl-C."""
  from tinycore.viz.server import serve_page
  return serve_page(port, block)

@atexit.register
def _show_at_exit() -> None:
  if not VIZ or not (record.kernels or record.schedules): return
  if VIZ.value == "file": print(f"VIZ: {len(record.kernels)} kernels written to {save()}")
  else: serve(int(os.getenv("VIZ_PORT", "0")), block=True)
