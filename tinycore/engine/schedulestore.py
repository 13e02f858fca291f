"""The schedule cache on disk: a new process whose lazy graph has the structure of one scheduled before (a training
step's first call, warm) takes its kernels from disk instead of grouping the graph again (ResNet-18's step: ~1 s).

What an entry is and the rules it keeps:
- the in-memory cache's key (engine/schedule.py `_structure`: ops, args, dtypes, shapes, devices, views, the pattern of
  realized inputs) names it: its repr is hashed for the file name, and the key itself is stored in the entry and compared
  for equality on a hit, so a hit means what a hit of the in-memory cache means; a repr that is not faithful only misses;
- the table (the cache's folder) names everything else the kernels depend on: the hash of tinycore's source, the
  values of the context knobs (ContextVars) but those that only print or time (DISPLAY_KNOBS), and each device's
  renderer with its settings (CLANG_MARCH, the CPU). Any change is a different table, a miss;
- the value is the schedule's kernels, every AST node once over all of them (op, dtype, arg, positions of its sources),
  with each item's buffers, outputs and inputs as positions among the graph's bases then leaves (what the in-memory
  entry holds), or the positions of the assigns that get buffers of their own (`own`, see schedule._OwnValues);
- an entry that does not load (a damaged file: helpers.diskcache_get checks its length and sha256; a pickle from
  another version; a position outside the graph; an AST that is no kernel) is a miss: the graph is scheduled again and
  the entry written anew. Only graphs of MIN_BASES bases or more go to disk: a small one schedules faster than a file opens."""
from __future__ import annotations
import functools, hashlib, pathlib, pickle
from typing import Any, NamedTuple
from tinycore.device import Device
from tinycore.helpers import ContextVar, diskcache_get, diskcache_put
from tinycore.ops import Ops
from tinycore.uop.uop import UOp

MIN_BASES = 64
FORMAT = 1
# knobs that change what is printed, profiled or searched per kernel, never the grouping into kernels
DISPLAY_KNOBS = frozenset({"DEBUG", "PROFILE", "VIZ", "BEAM", "NOOPT", "JIT", "MEMPLAN"})
ITEM_OPS = (Ops.SINK, Ops.COPY, Ops.EMPTY)

Item = tuple[UOp, tuple[int, ...], tuple[int, ...], tuple[int, ...]]  # an AST and the positions of its buffers, outputs, inputs

class Stored(NamedTuple):
  """An entry as loaded: the items and the lifted constants' positions, or (`own`) the assigns' positions."""
  items: list[Item] | None = None
  consts: tuple[int, ...] = ()
  own: tuple[int, ...] | None = None

@functools.cache
def source_hash() -> str:
  """The hash of every Python file of the tinycore package (read once per process)."""
  root = pathlib.Path(__file__).resolve().parent.parent
  h = hashlib.sha256()
  for f in sorted(root.rglob("*.py")):
    h.update(str(f.relative_to(root)).encode())
    h.update(f.read_bytes())
  return h.hexdigest()[:16]

def _devices(key: tuple) -> set[str]:
  out: set[str] = set()
  for d in [b[4] for b in key[0]] + [lf[1] for lf in key[1]]: out.update((d,) if isinstance(d, str) else d)
  return out

def table(key: tuple) -> str:
  """The disk table a schedule of this key lives in (see the rules above)."""
  knobs = sorted((k, repr(v.value)) for k, v in ContextVar._cache.items() if k not in DISPLAY_KNOBS)
  rends = sorted(f"{d}:{type(r := Device[d].renderer).__qualname__}:{r!r}:{getattr(r, 'cachekey', '')}" for d in _devices(key))
  return f"schedules:v{FORMAT}:{source_hash()}:{hashlib.sha256(repr((knobs, rends)).encode()).hexdigest()[:16]}"

def _flat(asts: list[UOp]) -> tuple[list[tuple], list[int]]:
  """Every node of the ASTs once, sources first, as (op, dtype, arg, source positions); and each AST's position."""
  pos: dict[UOp, int] = {}
  nodes: list[tuple] = []
  for ast in asts:
    for u in ast.toposort():
      if u not in pos:
        pos[u] = len(nodes)
        nodes.append((u.op, u.dtype, u.arg, tuple(pos[s] for s in u.src)))
  return nodes, [pos[a] for a in asts]

def _unflat(nodes: list[tuple], roots: list[int]) -> list[UOp]:
  made: list[UOp] = []
  for op, dtype, arg, src in nodes: made.append(UOp(op, dtype, tuple(made[i] for i in src), arg))
  return [made[i] for i in roots]

def save(key: tuple, entry: Stored) -> None:
  """Write a schedule's entry: its items and constants, or the assigns given buffers of their own."""
  if len(key[0]) < MIN_BASES: return
  try:
    if entry.own is not None: body: dict[str, Any] = {"own": entry.own}
    else:
      nodes, roots = _flat([ast for ast, *_ in entry.items or []])
      body = {"nodes": nodes, "roots": roots, "pos": [p for _, *p in entry.items or []], "consts": entry.consts}
    diskcache_put(table(key), repr(key), pickle.dumps({"key": key, **body}, protocol=pickle.HIGHEST_PROTOCOL))
  except Exception: pass  # (a device without a renderer, a value pickle refuses: not stored, scheduled again next time)

def load(key: tuple, n_refs: int) -> Stored | None:
  """What save wrote for this key, checked against a graph of n_refs bases and leaves; None where there is none or it
  does not load."""
  if len(key[0]) < MIN_BASES: return None
  try:
    if (raw := diskcache_get(table(key), repr(key))) is None: return None
    d = pickle.loads(raw)
    if d["key"] != key: return None
    if "own" in d:
      own = tuple(d["own"])
      return Stored(own=own) if all(type(i) is int and 0 <= i < len(key[0]) for i in own) else None
    asts = _unflat(d["nodes"], d["roots"])
    items = [(ast, *map(tuple, p)) for ast, p in zip(asts, d["pos"], strict=True)]
    consts = tuple(d["consts"])
    refs = [i for _, *p in items for ps in p for i in ps] + list(consts)
    if not all(type(i) is int and 0 <= i < n_refs for i in refs) or not all(ast.op in ITEM_OPS for ast, *_ in items): return None
    return Stored(items, consts)
  except Exception: return None  # (any failure to read an entry is a miss: another version's pickle, a damaged body)

__all__ = ["Stored", "load", "save", "table", "source_hash", "MIN_BASES"]
