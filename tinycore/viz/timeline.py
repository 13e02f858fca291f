"""The profiler's events (tinycore/profile.py) as an SVG timeline for the VIZ page: a row per device and lane, a bar
per span (its title names it and its duration; a kernel's bar links to the kernel's section of the page). A timeline
is a list of rows, not a graph, so it is drawn here rather than by Graphviz.

A run is mostly idle on the device (Python between realizes, the first compiles): an idle gap longer than a fiftieth
of the busy time is cut to a few pixels and marked by a dashed line labelled with the time cut, so the bars stay
readable. The page's zoom widens the drawing (the box scrolls)."""
from __future__ import annotations
import bisect, html
from typing import Callable
from tinycore.profile import Event

WIDTH, ROW, LABEL, CUT_PX = 1600, 22, 170, 8
_COLORS = {"kernels": "#f0a030", "copies": "#6080ff", "jit": "#40b040", "compile": "#b070d0"}

def _lane_order(key: tuple[str, str]) -> tuple:
  kind = key[1].split()[0]
  return (key[0], list(_COLORS).index(kind) if kind in _COLORS else len(_COLORS), key[1])

class _Axis:
  """Time (ns) -> x: busy spans at one scale, each idle gap over `cut` ns drawn CUT_PX wide."""
  def __init__(self, events: list[Event]):
    spans: list[list[int]] = []
    for s, e in sorted((e.start_ns, e.start_ns + e.dur_ns) for e in events):
      if spans and s <= spans[-1][1]: spans[-1][1] = max(spans[-1][1], e)
      else: spans.append([s, e])
    busy = sum(e - s for s, e in spans)
    cut = max(busy // 50, 1000)
    self.starts, self.pos, self.cuts, p = [s for s, _ in spans], [], [], 0.0
    for i, (s, e) in enumerate(spans):
      if i:
        gap = s - spans[i - 1][1]
        if gap > cut: self.cuts.append((p, gap))  # drawn CUT_PX wide, taking no time on the axis
        else: p += gap
      self.pos.append(p)
      p += e - s
    self.length = max(p, 1.0)
    self.scale = (WIDTH - LABEL - CUT_PX * len(self.cuts) - 10) / self.length
    self.cut_before = [sum(1 for c, _ in self.cuts if c <= q) for q in self.pos]
  def x(self, t: int) -> float:
    i = max(bisect.bisect_right(self.starts, t) - 1, 0)
    return LABEL + (self.pos[i] + t - self.starts[i]) * self.scale + self.cut_before[i] * CUT_PX

def timeline_svg(events: list[Event], href: Callable[[Event], str | None]) -> str:
  """The SVG of every event (an empty note when there are none); href(event) gives a bar's link, or None."""
  if not events: return "<p>No events: the timeline is recorded with PROFILE=1 (VIZ turns it on).</p>"
  ax = _Axis(events)
  rows = sorted({(e.device, e.lane) for e in events}, key=_lane_order)
  y = {r: 20 + i * ROW for i, r in enumerate(rows)}
  height = 30 + len(rows) * ROW
  out = [f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
         'font-family="monospace" font-size="11" preserveAspectRatio="none">']
  for n, (p, gap) in enumerate(ax.cuts):  # a dashed line where idle time was cut, labelled with how much
    x = LABEL + p * ax.scale + n * CUT_PX + CUT_PX / 2
    out.append(f'<line x1="{x:.1f}" y1="12" x2="{x:.1f}" y2="{height}" stroke="#999" stroke-dasharray="3,3">'
               f'<title>{gap / 1e6:.2f} ms idle, cut</title></line>')
  for r in rows: out.append(f'<text x="2" y="{y[r] + 14}">{html.escape(f"{r[0]} {r[1]}"[:24])}</text>')
  out.append(f'<text x="{LABEL}" y="10">{(max(e.start_ns + e.dur_ns for e in events) - min(e.start_ns for e in events)) / 1e6:.2f} ms in all, '
             f'{ax.length / 1e6:.2f} ms drawn; {len(ax.cuts)} idle gaps cut (dashed)</text>')
  for e in events:
    x, w = ax.x(e.start_ns), max(e.dur_ns * ax.scale, 1.0)
    title = html.escape(f"{e.name}: {e.dur_ns / 1e3:.1f} us" + "".join(f"\n{k}: {v}" for k, v in e.args.items()))
    bar = (f'<rect x="{x:.2f}" y="{y[(e.device, e.lane)] + 2}" width="{w:.2f}" height="{ROW - 4}" '
           f'fill="{_COLORS.get(e.lane.split()[0], "#999")}" stroke="#fff" stroke-width="0.3"><title>{title}</title></rect>')
    out.append(f'<a href="{link}">{bar}</a>' if (link := href(e)) else bar)
  return "\n".join(out + ["</svg>"])
