"""The VIZ page: one self-contained HTML document (CSS, a little JavaScript and the SVGs inline; nothing is fetched
from a network) built from what record.py noted and the profiler's events.

Its sections, one shown at a time (the sidebar links to each; the URL's #fragment names the one shown):
- `#s<n>`: realize n's schedule, drawn by draw.schedule_graph (a kernel's box links to its section);
- `#k<n>`: kernel n: its launch sizes, FLOPs, bytes, compile and run times, the optimizations applied (with BEAM's
  candidates), the AST, each rewrite pass (rules fired, graph after), the linearized program and the source;
- `#timeline`: the profiler's timeline (timeline.py)."""
from __future__ import annotations
import collections, html, re
from typing import Any
from tinycore import profile
from tinycore.viz import record
from tinycore.viz.draw import fused_ops, schedule_graph, svgs, uop_graph
from tinycore.viz.timeline import timeline_svg

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
def _esc(x: Any) -> str: return html.escape(_ANSI.sub("", str(x)))
def _us(seconds: float) -> str: return f"{seconds * 1e6:,.1f} us"
def _opts(opts: list) -> str: return " ".join(f"{o.op.name}({o.axis},{o.amount})" for o in opts) or "none"

_CSS = """
body { margin: 0; font: 14px system-ui, sans-serif; display: flex; height: 100vh; }
nav { width: 290px; overflow-y: auto; background: #f4f4f6; border-right: 1px solid #ccc; padding: 8px; flex: none; }
nav a { display: block; padding: 2px 4px; color: #124; text-decoration: none; font-family: monospace; font-size: 12px; }
nav a.shown { background: #cde; } nav h3 { margin: 10px 0 4px; font-size: 13px; }
main { flex: 1; overflow: auto; padding: 12px 20px; }
section { display: none; } section.shown { display: block; }
pre, .uops { font: 12px monospace; background: #fafafa; border: 1px solid #ddd; padding: 6px; overflow-x: auto; }
table.facts td:first-child { color: #555; padding-right: 16px; } table { border-collapse: collapse; font-size: 13px; }
table.rules td, table.cands td { border-bottom: 1px solid #eee; padding: 1px 8px; font-family: monospace; }
details { margin: 6px 0; } summary { cursor: pointer; font-weight: 600; }
.graph { overflow: auto; max-height: 75vh; border: 1px solid #ddd; } .graph svg { max-width: 100%; height: auto; }
.graph.full svg { max-width: none; } .graph.ast { max-height: 40vh; } .graph { cursor: zoom-in; } .graph.full { cursor: zoom-out; }
.timeline-box { overflow-x: auto; border: 1px solid #ddd; } .timeline-box svg { width: calc(100% * var(--zoom, 1)); height: auto; }
"""
# one section shown at a time, named by the URL's fragment (the sidebar's links and the graphs' links set it)
_JS = """
function show() {
  const id = location.hash.slice(1) || document.querySelector('section').id;
  document.querySelectorAll('section').forEach(s => s.classList.toggle('shown', s.id === id));
  document.querySelectorAll('nav a').forEach(a => a.classList.toggle('shown', a.getAttribute('href') === '#' + id));
}
window.addEventListener('hashchange', show); window.addEventListener('DOMContentLoaded', show);
// a graph shrinks to the page's width; a click on its background shows it at full size (a click on a node follows its link)
document.addEventListener('click', e => { const g = e.target.closest('.graph'); if (g && !e.target.closest('a')) g.classList.toggle('full'); });
function zoom(v) { document.querySelector('.timeline-box').style.setProperty('--zoom', v); }
"""

def _facts(rec: record.KernelRecord, runs: list[profile.Event], compiles: list[profile.Event]) -> str:
  p = rec.program
  rows = [("device", rec.device), ("global size", p.global_size), ("local size", p.local_size if p.local_size is not None else "none (no local ids)"),
          ("FLOPs", f"{p.estimates_ops:,}"), ("bytes", f"{runs[0].args['bytes']:,}" if runs else "not run"),
          ("compile", _us(sum(e.dur_ns for e in compiles) / 1e9) if compiles else "not timed (PROFILE=0) or compiled before VIZ began"),
          ("runs", f"{len(runs)}, total {_us(sum(e.dur_ns for e in runs) / 1e9)}, mean {_us(sum(e.dur_ns for e in runs) / 1e9 / len(runs))}, "
                   f"min {_us(min(e.dur_ns for e in runs) / 1e9)}" if runs else "none timed"),
          ("optimizations", f"{_opts(rec.opts)}  (by {rec.opts_by})"), ("ops fused", " ".join(fused_ops(rec.ast)))]
  return '<table class="facts timing">' + "".join(f"<tr><td>{k}</td><td>{_esc(v)}</td></tr>" for k, v in rows) + "</table>"

def _candidates(rec: record.KernelRecord) -> str:
  if not rec.candidates:
    return "<p>BEAM's choice came from the disk cache: no candidate was timed in this run.</p>" if rec.opts_by.startswith("BEAM") else ""
  best = sorted(rec.candidates, key=lambda c: c[1])
  rows = "".join(f"<tr><td>{i + 1}</td><td>{_us(t)}</td><td>{_esc(_opts(o))}</td></tr>" for i, (o, t) in enumerate(best[:200]))
  return (f"<details class=\"beam\"><summary>BEAM: {len(best)} candidates timed (fastest first)</summary>"
          f'<table class="cands"><tr><th>#</th><th>time</th><th>optimizations</th></tr>{rows}</table></details>')

def _graph(drawn: str | None, sink: Any, kind: str = "") -> str:
  if drawn is not None: return f'<div class="graph {kind}">{drawn}</div>'
  return f"<p>{len(sink.toposort())} nodes: too many to draw (VIZ_MAX_NODES)</p>"

def _pass(ps: record.RewritePass, drawn: str | None) -> str:
  rules = "".join(f"<tr><td>{n}</td><td>{_esc(r)}</td></tr>" for r, n in ps.fired.most_common())
  size = f", {len(ps.before.toposort())} -> {len(ps.after.toposort())} nodes" if ps.after is not None else f", {ps.calls} rewrites"
  body = f'<table class="rules"><tr><th>fired</th><th>rule</th></tr>{rules}</table>' if rules else "<p>no rule fired</p>"
  if ps.after is not None: body += "<p>graph after the pass:</p>" + _graph(drawn, ps.after)
  return f'<details class="rewrite-step"><summary>{_esc(ps.name)}: {sum(ps.fired.values())} rules fired{size}</summary>{body}</details>'

def _uops(uops: list) -> str:
  pos = {u: i for i, u in enumerate(uops)}
  return "\n".join(f"{i:4d} {u.op.name:16s} {str(u.dtype):24s} {[pos.get(s, '-') for s in u.src]!s:16s} {u.arg!r}"[:200] for i, u in enumerate(uops))

def _kernel(i: int, rec: record.KernelRecord, drawn: dict[int, str | None], events: list[profile.Event]) -> str:
  p = rec.program
  runs = [e for e in events if e.lane == "kernels" and getattr(e.ref, "p", None) is p]
  compiles = [e for e in events if e.lane.startswith("compile") and e.name == p.name and e.device == p.device]
  steps = "".join(f"<li>{_pass(ps, drawn.get(id(ps)))}</li>" for ps in rec.passes) or "<li>no rewrite pass noted</li>"
  return (f'<section id="k{i}" class="kernel"><h2>{_esc(p.display_name or p.name)}</h2>{_facts(rec, runs, compiles)}{_candidates(rec)}'
          f'<h3>AST</h3>{_graph(drawn.get(id(rec)), rec.ast, "ast")}<h3>Rewrite steps</h3><ol class="rewrites">{steps}</ol>'
          f'<h3>Linearized program ({len(p.uops)} uops)</h3><pre class="uops">{_esc(_uops(p.uops))}</pre>'
          f'<h3>Source ({_esc(p.device)})</h3><pre class="source">{_esc(p.src)}</pre></section>')

def _count(s: record.ScheduleRecord) -> str:
  n = collections.Counter(it[0].op.name for it in s.items)
  return ", ".join(f"{n[op]} {what}" for op, what in (("SINK", "kernels"), ("COPY", "copies")) if n[op])

def render_page() -> str:
  """The page for everything noted so far."""
  kernels = [(i, k) for i, k in enumerate(record.kernels) if k.program is not None]
  kernel_of = {(k.device, k.ast): (i, _ANSI.sub("", k.program.name)) for i, k in kernels}
  events = list(profile.events)
  # every graph is drawn at once, dot processes side by side: the ASTs, the graphs after each pass, the schedules
  jobs: list[tuple[int, str | None]] = []
  for _, k in kernels:
    jobs.append((id(k), uop_graph(k.ast)))
    jobs += [(id(ps), uop_graph(ps.after)) for ps in k.passes if ps.after is not None]
  jobs += [(id(s), schedule_graph(s, kernel_of)) for s in record.schedules]
  drawn = dict(zip([j for j, _ in jobs], svgs([d for _, d in jobs])))
  nav = ["<h3>Timeline</h3><a href=\"#timeline\">timeline</a>", "<h3>Schedules</h3>"]
  nav += [f'<a href="#s{i}">realize {i}: {_count(s)}</a>' for i, s in enumerate(record.schedules) if _count(s)]
  nav += ["<h3>Kernels</h3>"] + [f'<a class="kernel-link" href="#k{i}">{i:3d} {_esc(k.program.name)}</a>' for i, k in kernels]
  runner_index = {id(k.program): i for i, k in kernels}
  def href(e: profile.Event) -> str | None:
    i = runner_index.get(id(getattr(e.ref, "p", None)))
    return None if i is None else f"#k{i}"
  sections = [f'<section id="timeline"><h2>Timeline</h2><p>zoom <input type="range" min="1" max="40" value="1" oninput="zoom(this.value)"> '
              f'(hover a bar for its name and time; a kernel\'s bar links to it)</p>'
              f'<div class="timeline-box">{timeline_svg(events, href)}</div></section>']
  sections += [f'<section id="s{i}" class="schedule"><h2>Realize {i}: {_count(s)}</h2><p>a box per kernel (the ops fused into it; '
               f'a click opens it), an ellipse per buffer</p><div class="graph">{drawn[id(s)]}</div></section>'
               for i, s in enumerate(record.schedules) if _count(s)]
  sections += [_kernel(i, k, drawn, events) for i, k in kernels]
  return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>tinycore VIZ</title><style>{_CSS}</style><script>{_JS}</script>"
          f"</head><body><nav>{''.join(nav)}</nav><main>{''.join(sections)}</main></body></html>")
