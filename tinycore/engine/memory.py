"""Buffer lifetimes: a realize frees its intermediate buffers once their last reader has run, and a TinyJit capture
packs the buffers that only its own kernels use into one arena per device, buffers whose lifetimes do not overlap at
the same bytes.

Which buffers are private is decided by who holds them, not by guessing from the graph: a lazy buffer (or a Buffer)
that something outside the schedule or the capture still references (a Tensor, an autograd context, an unrealized
op that will read it later, the value a jitted function returns, another capture) keeps its memory. Python's
reference counts say that exactly; a reference the count does not know of only makes a buffer look shared (kept),
never private.

A buffer is planned only if its first use writes it (a kernel's output): a buffer read before it is written holds
state from before (a constant lifted into a buffer, data copied in during the call) and keeps its own memory.

MEMPLAN=0 turns both off: every buffer of a realize lives until the realize ends, and every buffer of a capture keeps
its own memory for the replays."""
from __future__ import annotations
import sys
from dataclasses import dataclass
from typing import Any, Sequence
from tinycore.device import Buffer, Device
from tinycore.dtype import dtypes
from tinycore.helpers import ContextVar

MEMPLAN = ContextVar("MEMPLAN", 1)
OFFSET_ALIGN = 256  # arena offsets: a multiple of every vector load's and every GPU's base alignment, unless the allocator asks for more

def _baseline() -> int:
  """The reference count of an object held by one tuple, seen from inside a `for x in that_tuple` loop (what the
  checks below see of an object nobody else holds)."""
  for x in (object(),): return sys.getrefcount(x)
  return 0
_HELD_ONCE = _baseline()

# *** eager: a realize's intermediate buffers freed after their last reader ***

class ScheduleFrees:
  """For one schedule: the buffers that this realize allocates and whose first use writes them, by the index of the
  last item that uses them. After that item runs, `free_after(k)` deallocates each one unless a lazy buffer that owns
  it is still referenced outside the schedule's items (the caller marks every item that ran realized at once, so the
  graph of the items that ran holds nothing any more).

  Which buffer that is and which lazy buffers own it depends on the items' structure only: `plan` (free_plan's, kept
  for every schedule of one structure) names them by position; what depends on the buffers themselves (whether one is
  allocated already, a view, has views or allocation options) is checked on each schedule."""
  def __init__(self, schedule: Sequence[Any], plan: dict[int, list[tuple[tuple[int, int], tuple[tuple[int, int, int], ...]]]] | None = None):
    if plan is None: plan = free_plan(schedule)
    viewed = {id(b._base) for si in schedule for b in si.bufs if b._base is not None}
    self.uses: dict[int, int] = {}  # id(lazy buffer) -> its references from the items' outputs and inputs
    self.at: dict[int, list[tuple[Buffer, tuple[Any, ...]]]] = {}
    for k, frees in plan.items():
      at = []
      for (i, j), owners in frees:
        b = schedule[i].bufs[j]
        if b._buf is not None or b._base is not None or b.options is not None or id(b) in viewed: continue
        lbs = []
        for i2, side, j2, n in owners:
          lbs.append(lb := (schedule[i2].outputs if side == 0 else schedule[i2].inputs)[j2])
          self.uses[id(lb)] = n
        at.append((b, tuple(lbs)))
      if at: self.at[k] = at

  def free_after(self, k: int) -> None:
    """Deallocate the buffers last used by item k that no one outside the schedule holds."""
    for b, owners in self.at.pop(k, ()):
      if all(sys.getrefcount(lb) - self.uses[id(lb)] <= _HELD_ONCE for lb in owners): b.deallocate()

def free_plan(schedule: Sequence[Any]) -> dict[int, list[tuple[tuple[int, int], tuple[tuple[int, int, int, int], ...]]]]:
  """ScheduleFrees's plan by position: after item k, the buffers (item, slot in its bufs) that an item's output
  writes first (read by no item before), with the lazy buffers that own each (item, 0 for its outputs or 1 for its
  inputs, slot, and how many times the items refer to that lazy buffer); what depends on the buffers themselves is
  left to ScheduleFrees."""
  # (one pass over the items)
  uses: dict[int, int] = {}  # id(lazy buffer) -> its references from the items' outputs and inputs
  last: dict[int, int] = {}  # id(buffer) -> the last item that uses it
  slot: dict[int, tuple[int, int]] = {}  # id(buffer) -> its first (item, slot in bufs)
  where: dict[int, tuple[int, int, int]] = {}  # id(lazy buffer) -> its first (item, side, slot)
  owners: dict[int, list[Any]] = {}  # id(buffer) -> the lazy buffers that own it, if first written here
  for k, si in enumerate(schedule):
    for j, b in enumerate(si.bufs): slot.setdefault(id(b), (k, j))
    for side, lbs in ((0, si.outputs), (1, si.inputs)):
      for j, lb in enumerate(lbs):
        uses[id(lb)] = uses.get(id(lb), 0) + 1
        where.setdefault(id(lb), (k, side, j))
        if lb._base is not None: continue
        if (o := owners.get(id(b := lb.buffer))) is not None:
          if not any(x is lb for x in o): o.append(lb)
        elif side == 0 and id(b) not in last: owners[id(b)] = [lb]
    for b in si.bufs: last[id(b)] = k
  plan: dict[int, list[tuple[tuple[int, int], tuple[tuple[int, int, int, int], ...]]]] = {}
  for i, lbs in owners.items():
    if i in slot: plan.setdefault(last[i], []).append((slot[i], tuple((*where[id(lb)], uses[id(lb)]) for lb in lbs)))
  return plan

# *** TinyJit: the capture's private buffers packed into arenas ***

@dataclass
class Plan:
  """What the planner did to one capture: the kernels' buffer lists with the private buffers replaced, where each
  planned buffer lives (its memory: base buffer, byte offset, bytes; and its first and last kernel), and the bytes the
  private buffers took before (each its own allocation) and take now (the arenas, or the shared buffers)."""
  kernels: list[tuple[Any, list[Buffer | None]]]
  placed: list[tuple[Buffer, int, int, int, int]]  # (memory's base, offset, nbytes, first kernel, last kernel)
  bytes_before: int
  bytes_after: int

def _unheld(cands: tuple[Buffer, ...], occ: dict[int, int], also: int) -> list[Buffer]:
  """Those of cands referenced only by the capture's lists (occ[id] times), by `also` containers besides cands."""
  return [b for b in cands if sys.getrefcount(b) - occ[id(b)] - also <= _HELD_ONCE]

def private_buffers(kernels: Sequence[tuple[Any, Sequence[Buffer | None]]], writes: Sequence[Sequence[int]]) -> list[Buffer]:
  """The buffers of a capture that only its kernels reference and whose first use is a write, in order of first use.
  A buffer that is a view, has views, or has allocation options is left alone."""
  uniq: dict[int, Buffer] = {}
  occ: dict[int, int] = {}
  written_first: set[int] = set()
  excluded: set[int] = set()
  for (_, bufs), w in zip(kernels, writes):
    for i in range(len(bufs)):
      if (x := bufs[i]) is None: continue  # (an input's slot)
      if id(x) not in uniq:
        uniq[id(x)] = x
        if i in w: written_first.add(id(x))
      occ[id(x)] = occ.get(id(x), 0) + 1
      if x._base is not None: excluded.update((id(x), id(x._base)))
  x = None
  return _unheld(tuple(b for i, b in uniq.items() if i in written_first and i not in excluded and b.options is None), occ, 1)

def plan_capture(kernels: Sequence[tuple[Any, Sequence[Buffer | None]]], writes: Sequence[Sequence[int]]) -> Plan:
  """Give the capture's private buffers (private_buffers) memory that buffers of disjoint lifetimes share: per device,
  offsets into one arena (greedy by size: each buffer at the lowest aligned offset free of every placed buffer whose
  lifetime overlaps its own), or, on a device without buffer views, whole buffers of the same byte size."""
  priv = private_buffers(kernels, writes)
  life: dict[int, list[int]] = {id(b): [-1, -1] for b in priv}
  for j, (_, bufs) in enumerate(kernels):
    for b in bufs:
      if b is not None and (lt := life.get(id(b))) is not None:
        if lt[0] < 0: lt[0] = j
        lt[1] = j
  repl: dict[int, Buffer] = {}
  placed: list[tuple[Buffer, int, int, int, int]] = []
  after = 0
  for dev in sorted({b.device for b in priv}):
    mine = [b for b in priv if b.device == dev]
    allocator = Device[dev].allocator
    if hasattr(allocator, "_offset"):
      align = max(OFFSET_ALIGN, getattr(allocator, "offset_align", 1))
      spans: list[tuple[int, int, int, int]] = []  # (offset, end, first, last)
      at: dict[int, int] = {}
      for b in sorted(mine, key=lambda b: (-b.nbytes, life[id(b)][0])):
        f, l = life[id(b)]
        off = 0
        for o, e in sorted((o, e) for o, e, f2, l2 in spans if f2 <= l and f <= l2):
          if off + b.nbytes <= o: break
          off = max(off, -(-e // align) * align)
        spans.append((off, off + b.nbytes, f, l))
        at[id(b)] = off
      arena = Buffer(dev, max((e for _, e, _, _ in spans), default=0), dtypes.uint8)
      after += arena.nbytes
      for b in mine:
        repl[id(b)] = Buffer(dev, b.size, b.dtype, base=arena, offset=at[id(b)])
        placed.append((arena, at[id(b)], b.nbytes, *life[id(b)]))
    else:
      slots: dict[int, list[tuple[int, Buffer]]] = {}  # nbytes -> (last kernel so far, shared buffer)
      for b in sorted(mine, key=lambda b: life[id(b)][0]):
        f, l = life[id(b)]
        free = slots.setdefault(b.nbytes, [])
        if (k := next((i for i, (end, _) in enumerate(free) if end < f), None)) is None:
          shared = Buffer(dev, b.size, b.dtype)
          after += b.nbytes
        else: shared = free.pop(k)[1]
        free.append((l, shared))
        repl[id(b)] = shared
        placed.append((shared, 0, b.nbytes, f, l))
  planned = [(r, [repl.get(id(b), b) if b is not None else None for b in bufs]) for r, bufs in kernels]
  return Plan(planned, placed, sum(b.nbytes for b in priv), after)

def free_caches(devices: set[str]) -> None:
  """Hand the memory the allocators keep for reuse back to the system (the capture's old buffers went there)."""
  for dev in devices:
    if hasattr(alloc := Device[dev].allocator, "free_cache"): alloc.free_cache()

__all__ = ["MEMPLAN", "ScheduleFrees", "free_plan", "Plan", "private_buffers", "plan_capture", "free_caches"]
