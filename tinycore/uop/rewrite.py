"""Pattern matching over UOp graphs and the bottom-up graph rewrite engine."""
from __future__ import annotations
import itertools
from typing import Any, Callable
from tinycore.dtype import DType
from tinycore.helpers import VIZ
from tinycore.viz import record as vizrecord
from tinycore.ops import Ops
from tinycore.uop.uop import UOp

class UPat:
  """A pattern over UOps. `op`, `dtype` may be one value or a set; `src` a tuple (in order), a list (any order),
  or None (anything); `name` binds the matched node for the rewrite function."""
  __slots__ = ("op", "dtype", "src", "arg", "name", "allow_any_len")
  def __init__(self, op: Ops | set[Ops] | None = None, dtype: DType | set[DType] | None = None,
               src: tuple[UPat, ...] | list[UPat] | UPat | None = None, arg: Any = None, name: str | None = None,
               allow_any_len: bool = False):
    self.op = None if op is None else (frozenset(op) if isinstance(op, (set, frozenset, tuple)) else frozenset((op,)))
    self.dtype = None if dtype is None else (frozenset(dtype) if isinstance(dtype, (set, frozenset, tuple)) else frozenset((dtype,)))
    self.src, self.arg, self.name, self.allow_any_len = src, arg, name, allow_any_len
  @staticmethod
  def var(name: str | None = None, dtype: DType | set[DType] | None = None) -> UPat: return UPat(dtype=dtype, name=name)
  @staticmethod
  def cvar(name: str | None = None, dtype: DType | set[DType] | None = None) -> UPat: return UPat(Ops.CONST, dtype, name=name)
  @staticmethod
  def const(dtype: DType | set[DType] | None, b: Any) -> UPat: return UPat(Ops.CONST, dtype, arg=b)

  def match(self, u: UOp, store: dict[str, UOp]) -> list[dict[str, UOp]]:
    if self.op is not None and u.op not in self.op: return []
    if self.dtype is not None and u.dtype not in self.dtype: return []
    if self.arg is not None and (u.arg != self.arg or type(u.arg) is not type(self.arg)): return []
    if self.name is not None:
      if self.name in store and store[self.name] is not u: return []
      store = {**store, self.name: u}
    if self.src is None: return [store]
    if isinstance(self.src, UPat): srcs_options: Any = [[self.src] * len(u.src)]
    elif isinstance(self.src, list): srcs_options = itertools.permutations(self.src)
    else: srcs_options = [self.src]
    out: list[dict[str, UOp]] = []
    for pats in srcs_options:
      if len(pats) != len(u.src) and not (self.allow_any_len and len(pats) <= len(u.src)): continue
      stores = [store]
      for p, s in zip(pats, u.src):
        stores = [m for st in stores for m in p.match(s, st)]
        if not stores: break
      out.extend(stores)
    return out

class PatternMatcher:
  """An ordered list of (pattern, function) rules; `rewrite` applies the first rule whose function returns a UOp.

  `memo` names a slot of each node's cache where a rewrite without a ctx keeps the node's result: the rules must then be
  pure functions of the node (its structure and bounds), so the result is the same whichever graph the node is met in,
  and a later rewrite stops at every node rewritten before (the kernels of a model share most of their index math)."""
  def __init__(self, patterns: list[tuple[UPat, Callable[..., UOp | None]]], memo: str | None = None):
    self.patterns, self.memo = patterns, memo
    self.by_op: dict[Ops | None, list[tuple[UPat, Callable]]] = {}
    for pat, fxn in patterns:
      for op in (pat.op if pat.op is not None else [None]): self.by_op.setdefault(op, []).append((pat, fxn))
  def __add__(self, o: PatternMatcher) -> PatternMatcher: return PatternMatcher(self.patterns + o.patterns)
  def rewrite(self, u: UOp, ctx: Any = None) -> UOp | None:
    for pat, fxn in self.by_op.get(u.op, []) + self.by_op.get(None, []):
      for m in pat.match(u, {}):
        ret = fxn(ctx, **m) if ctx is not None else fxn(**m)
        if ret is not None and ret is not u: return ret
    return None

def graph_rewrite(sink: UOp, pm: PatternMatcher, ctx: Any = None, name: str | None = None) -> UOp:
  """Rewrite bottom-up to a fixed point: sources are rewritten before the node that uses them. Under VIZ the pass is
  noted for the page (with `name` as its step's title, see tinycore/viz/record.py)."""
  return vizrecord.rewrite(_rewrite, sink, pm, ctx, name) if VIZ.value else _rewrite(sink, pm, ctx)

def _rewrite(sink: UOp, pm: PatternMatcher, ctx: Any) -> UOp:
  if pm.memo is not None and ctx is None: return _rewrite_memo(sink, pm, pm.memo)
  memo: dict[UOp, UOp] = {}
  def process(root: UOp) -> UOp:
    for u in root.toposort():
      if u in memo: continue
      nu = u.replace(src=tuple(memo[s] for s in u.src)) if u.src else u
      if nu is not u and nu in memo: memo[u] = memo[nu]
      elif (r := pm.rewrite(nu, ctx)) is not None: memo[u] = memo[nu] = process(r)
      else: memo[u] = memo[nu] = nu
    return memo[root]
  return process(sink)

def _rewrite_memo(sink: UOp, pm: PatternMatcher, slot: str) -> UOp:
  """_rewrite with each node's result kept in its cache under `slot` (a node that is its own result keeps None, not a
  reference to itself): the walk stops at nodes rewritten by an earlier call, the same rewrite as _rewrite's."""
  def done(u: UOp) -> UOp | None:
    if (r := u._cache.get(slot, u)) is u: return None
    return u if r is None else r
  def result(u: UOp) -> UOp:  # (of a node rewritten already)
    r = u._cache[slot]
    return u if r is None else r
  def keep(u: UOp, r: UOp) -> UOp:
    u._cache[slot] = None if r is u else r
    return r
  def process(root: UOp) -> UOp:
    if (hit := done(root)) is not None: return hit
    # the nodes below root not rewritten yet, sources first (the walk does not enter a rewritten node)
    order: list[UOp] = []
    seen: set[UOp] = set()
    stack: list[tuple[UOp, bool]] = [(root, False)]
    while stack:
      u, expanded = stack.pop()
      if expanded: order.append(u); continue
      if u in seen: continue
      seen.add(u)
      stack.append((u, True))
      stack.extend((s, False) for s in reversed(u.src) if s not in seen and slot not in s._cache)
    for u in order:
      if slot in u._cache: continue
      nu = u.replace(src=tuple(result(s) for s in u.src)) if u.src else u
      if nu is not u and (hit := done(nu)) is not None: keep(u, hit)
      elif (r := pm.rewrite(nu, None)) is not None: keep(u, keep(nu, process(r)) if nu is not u else process(r))
      else: keep(u, keep(nu, nu))
    return result(root)
  return process(sink)
