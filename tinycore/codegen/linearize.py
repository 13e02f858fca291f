"""Linearize: order a lowered UOp graph into the list a renderer walks, opening and closing loops.

Loops nest in the order of their RANGE arg, except that a loop whose nodes need others closed first (a lane loop after
the reduce its stores read) opens beside those, after them. A node is placed inside every loop it depends on; an ASSIGN
to an accumulator ends its reduce loops for the nodes that use its result; a DEFINE_ACC sits just outside its loops.
Nodes are emitted as early as their loops allow, which hoists loop-invariant work out of inner loops."""
from __future__ import annotations
import heapq
from tinycore.dtype import dtypes
from tinycore.ops import Ops
from tinycore.uop.uop import UOp

def linearize(sink: UOp) -> list[UOp]:
  nodes = sink.toposort()
  ranges = sorted((u for u in nodes if u.op is Ops.RANGE), key=lambda r: r.arg)
  order = {r: i for i, r in enumerate(ranges)}
  inside: dict[UOp, frozenset[UOp]] = {}    # the loops a node sits in
  exported: dict[UOp, frozenset[UOp]] = {}  # the loops its users inherit
  closed: dict[UOp, frozenset[UOp]] = {}    # the loops that must be closed before a node is placed
  closed_out: dict[UOp, frozenset[UOp]] = {}
  for u in nodes:
    srcs = [s for s in u.src if s.op is not Ops.RANGE or u.op is not Ops.DEFINE_ACC]
    blk = frozenset().union(*(exported[s] for s in srcs)) if srcs else frozenset()
    closed[u] = closed_out[u] = frozenset().union(*(closed_out[s] for s in u.src)) if u.src else frozenset()
    if u.op is Ops.DEFINE_ACC: blk = blk | {r for r in ranges if order[r] < min(order[r] for r in u.src[1:])}
    inside[u] = exported[u] = blk
    if u.op is Ops.RANGE: exported[u] = blk | {u}
    # an accumulator is declared outside its loops, but every read of its running value is inside them
    if u.op is Ops.DEFINE_ACC: exported[u] = blk | frozenset(u.src[1:])
    if u.op is Ops.ASSIGN:
      loops = frozenset(u.src[0].src[1:])
      exported[u], closed_out[u] = blk - loops, closed[u] | loops
  depth = {u: max((order[r] for r in inside[u]), default=-1) for u in nodes}
  users: dict[UOp, list[UOp]] = {u: [] for u in nodes}
  for u in nodes:
    # a RANGE never gates readiness: a node's depth already keeps it until its loops are open
    for s in dict.fromkeys(u.src):
      if s.op is not Ops.RANGE: users[s].append(u)
  missing = {u: len({s for s in u.src if s.op is not Ops.RANGE}) for u in nodes}
  topo = {u: i for i, u in enumerate(nodes)}
  heap: list[tuple[int, int, UOp]] = []
  blocked: list[UOp] = []
  def ready(u: UOp) -> None:
    if u.op is not Ops.RANGE and u.op is not Ops.SINK: heapq.heappush(heap, (depth[u], topo[u], u))
  for u in nodes:
    if missing[u] == 0: ready(u)
  out: list[UOp] = []
  stack: list[UOp] = []
  def emit(u: UOp) -> None:
    out.append(u)
    for c in users[u]:
      missing[c] -= 1
      if missing[c] == 0: ready(c)
  # the loops a loop's nodes need closed first and never sit in (a lane loop after its reduce: lowerer.py
  # `_lane_loop_store`): such a loop is opened beside them, not inside them
  groups: dict[frozenset[UOp], frozenset[UOp]] = {}  # the loops nodes sit in -> the loops closed before them
  for u in nodes: groups[inside[u]] = groups.get(inside[u], frozenset()) | closed[u]
  after = {r: frozenset().union(*(c for s, c in groups.items() if r in s)) - frozenset().union(*(s for s in groups if r in s)) for r in ranges}
  on: set[UOp] = set()  # the open loops
  def close() -> None:
    out.append(UOp(Ops.ENDRANGE, dtypes.void, (r := stack.pop(),)))
    on.discard(r)
    for u in blocked: heapq.heappush(heap, (depth[u], topo[u], u))
    blocked.clear()
  while heap or blocked:
    if not heap:
      if not stack: raise RuntimeError(f"linearize: {len(blocked)} nodes can never be placed")
      close()
      continue
    u = heap[0][2]
    if closed[u] & on:
      blocked.append(heapq.heappop(heap)[2])
      continue
    if not (need := inside[u] - on):
      emit(heapq.heappop(heap)[2])
      continue
    # the next loop in order that u may sit in: past the open ones, not one that u's loops come after
    m, top = min(need, key=order.__getitem__), order[stack[-1]] if stack else -1
    skip = frozenset().union(*(after[r] for r in inside[u])) - inside[u]
    if stack and (top > order[m] or stack[-1] in skip): close()
    else:
      emit(r := next(r for r in ranges[top + 1:] if r not in skip))
      stack.append(r)
      on.add(r)
  while stack: out.append(UOp(Ops.ENDRANGE, dtypes.void, (stack.pop(),)))
  return out
