"""What the core notes for the VIZ page while VIZ is on; each call below sits behind an `if VIZ` in the core, so none
of this runs otherwise.

- realize.get_program_for: `kernel(ast, device)` opens a kernel's record, `optimized(k)` notes the optimizations chosen
  (from then on the kernel's rewrite passes are noted: the passes run while BEAM lowers its candidates are not),
  `programmed(p)` the linearized program, its source and launch sizes;
- search.beam_search: `candidates(timed)` every candidate BEAM timed, with its optimizations;
- the rewrite engine (uop/rewrite.py): `rewrite(run, sink, pm, ctx, name)` runs one graph_rewrite pass with its rules
  wrapped, counting each rule that fired. A named pass keeps the graph before and after it; the unnamed passes of a
  kernel's lowering (the index simplifications, many small rewrites) are counted together as one step. A rewrite
  started from inside a rule is part of that rule and not noted on its own;
- realize.run_schedule: `schedule(items)` each realize's kernels and the buffers between them.
The compile and run times come from the profiler's events (tinycore/profile.py), which VIZ turns on.
Imports only helpers: the rewrite engine, low in the stack, imports it."""
from __future__ import annotations
import collections, linecache, os
from dataclasses import dataclass, field
from typing import Any, Callable
from tinycore.helpers import BEAM, NOOPT

LOWERING_STEP = "index simplification while lowering"

@dataclass
class RewritePass:
  """One graph_rewrite pass of a kernel: its graph before and after (None for the lowering's merged small passes), the
  rules that fired (rule -> count) and how many rewrite calls it stands for."""
  name: str
  before: Any
  after: Any
  fired: collections.Counter = field(default_factory=collections.Counter)
  calls: int = 1

@dataclass
class KernelRecord:
  """A kernel's journey: its AST, optimizations, rewrite passes and program (a ProgramSpec)."""
  ast: Any
  device: str
  opts: list = field(default_factory=list)
  opts_by: str = ""
  candidates: list[tuple[list, float]] = field(default_factory=list)  # (optimizations, seconds) of each BEAM candidate
  passes: list[RewritePass] = field(default_factory=list)
  program: Any = None
  lowering: bool = False

@dataclass
class ScheduleRecord:
  """One realize: per item its AST (a SINK, or a COPY / EMPTY), device and buffers (id, size, dtype), outputs first."""
  items: list[tuple[Any, str, list[tuple[int, int, str]], int]]

kernels: list[KernelRecord] = []
schedules: list[ScheduleRecord] = []
_current: KernelRecord | None = None
_fired: collections.Counter | None = None  # the counter of the pass running now, where the wrapped rules count
_traced: dict[int, tuple[Any, Any]] = {}   # id(PatternMatcher) -> (it, its copy with counting rules)

# *** kernels ***

def kernel(ast: Any, device: str) -> None:
  global _current
  kernels.append(_current := KernelRecord(ast, device))

def optimized(k: Any) -> None:
  if _current is None: return
  _current.opts, _current.lowering = list(k.applied_opts), True
  _current.opts_by = f"BEAM={BEAM.value}" if BEAM.value else "none (NOOPT)" if NOOPT.value else "hand-coded heuristic"

def programmed(p: Any) -> None:
  global _current
  if _current is None: return
  _current.program, _current.lowering, _current = p, False, None

def candidates(timed: list[tuple[float, Any]]) -> None:
  if _current is not None: _current.candidates += [(list(k.applied_opts), t) for t, k in timed]

# *** rewrite passes ***

def _rule_name(fxn: Callable) -> str:
  code = getattr(fxn, "__code__", None)
  if code is None: return repr(fxn)
  line = linecache.getline(code.co_filename, code.co_firstlineno).strip()
  return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}  {line[:110]}"

def _counting(fxn: Callable) -> Callable:
  name = _rule_name(fxn)
  def counted(*args: Any, **kwargs: Any) -> Any:
    ret = fxn(*args, **kwargs)
    if ret is not None and _fired is not None: _fired[name] += 1
    return ret
  return counted

def rewrite(run: Callable, sink: Any, pm: Any, ctx: Any, name: str | None) -> Any:
  """run(sink, pm, ctx) (the engine's rewrite), noted as a pass of the kernel being lowered (see the module docstring)."""
  global _fired
  k = _current
  if k is None or not k.lowering or _fired is not None: return run(sink, pm, ctx)
  if (hit := _traced.get(id(pm))) is None or hit[0] is not pm:
    _traced[id(pm)] = hit = (pm, type(pm)([(pat, _counting(fxn)) for pat, fxn in pm.patterns]))
  _fired = fired = collections.Counter()
  try: out = run(sink, hit[1], ctx)
  finally: _fired = None
  if name is not None: k.passes.append(RewritePass(name, sink, out, fired))
  elif k.passes and k.passes[-1].name == LOWERING_STEP: k.passes[-1].fired.update(fired); k.passes[-1].calls += 1
  else: k.passes.append(RewritePass(LOWERING_STEP, None, None, fired))
  return out

# *** schedules ***

def schedule(items: list[Any]) -> None:
  schedules.append(ScheduleRecord([(si.ast, si.bufs[0].device, [(id(b), b.size, str(b.dtype)) for b in si.bufs], max(len(si.outputs), 1))
                                   for si in items]))
