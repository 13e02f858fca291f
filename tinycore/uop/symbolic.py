"""Symbolic simplification of integer index arithmetic and constant folding, as graph-rewrite rules.

Index expressions are kept as a canonical linear form (sum of coefficient * term, plus a constant), which lets
division and modulo by constants cancel the way index math needs: (a*4+b)//4 -> a and (a*4+b)%4 -> b for 0<=b<4.
The size helpers built on it (`ssimplify`, `smax`, `resolve`) live here too, above uop.py, which knows no rules."""
from __future__ import annotations
import functools, math
from tinycore.dtype import dtypes
from tinycore.ops import Ops, GroupOp
from typing import Any
from tinycore.uop.uop import UOp, const_fold, sint
from tinycore.uop.rewrite import UPat, PatternMatcher, graph_rewrite

def _is_int(u: UOp) -> bool: return dtypes.is_int(u.dtype)
# Unsigned arithmetic wraps (hashes, the random generator's rounds): it is never index math, and its sums are not made
# linear. A hash adds each round's result to a running sum: flattened, every sum repeats the terms of the ones before
# it (the threefry kernel's C was 128 KB, quadratic in the rounds, and took seconds to simplify and compile).
def _is_index(u: UOp) -> bool: return dtypes.is_int(u.dtype) and not dtypes.is_unsigned(u.dtype)

# The order of a sum's terms: by their keys, nested (op, repr(arg), sources' keys) tuples compared as tuples. A key is
# interned (by its op, arg and the ids of its sources' keys), so equal keys are one object, and _Key compares two
# keys by walking down to the first sources that differ: O(depth). Python's own tuple comparison tests each item for
# equality and then compares the first unequal one again, one level down: O(depth^2) for two sums' terms that differ
# deep inside (the random number generator's hash rounds: seconds per kernel).
_keys: dict[tuple, tuple] = {}
_generation = [0]  # bumped when _keys is emptied: the keys nodes kept from before are made again, interned anew
_KEYS_MAX = 300_000

def _sort_key(u: UOp) -> tuple:
  if (hit := u._cache.get("key")) is not None and hit[0] == _generation[0]: return hit[1]
  src = tuple(_sort_key(s) for s in u.src)
  if (k := _keys.get(flat := (u.op.value, repr(u.arg), tuple(map(id, src))))) is None:
    _keys[flat] = k = (flat[0], flat[1], src)  # (an entry keeps its sources' keys alive: their ids stay theirs)
  u._cache["key"] = (_generation[0], k)
  return k

def _sorted_terms(terms: dict[UOp, int]) -> list[UOp]:
  if len(_keys) >= _KEYS_MAX:  # (between sorts only: the keys of one sort are all of one generation)
    _keys.clear()
    _generation[0] += 1
  return sorted(terms, key=_Key)

class _Key:
  """A term's key in a sort: compared as the nested tuples compare, through the first differing sources only."""
  __slots__ = ("k",)
  def __init__(self, u: UOp): self.k = _sort_key(u)
  def __lt__(self, o: _Key) -> bool:
    a, b = self.k, o.k
    while a is not b:
      if a[0] != b[0]: return a[0] < b[0]
      if a[1] != b[1]: return a[1] < b[1]
      for x, y in zip(a[2], b[2]):
        if x is not y: a, b = x, y; break
      else: return len(a[2]) < len(b[2])
    return False

def linear_terms(u: UOp) -> tuple[dict[UOp, int], int]:
  """Decompose an integer expression into ({term: coefficient}, constant)."""
  if (ret := u._cache.get("lin")) is None: u._cache["lin"] = ret = _linear_terms(u)
  return ret

def _linear_terms(u: UOp) -> tuple[dict[UOp, int], int]:
  if u.op is Ops.CONST: return {}, u.arg
  if u.op is Ops.ADD:
    (t0, c0), (t1, c1) = linear_terms(u.src[0]), linear_terms(u.src[1])
    out = dict(t0)
    for t, c in t1.items(): out[t] = out.get(t, 0) + c
    return {t: c for t, c in out.items() if c != 0}, c0 + c1
  if u.op is Ops.MUL and u.src[1].op is Ops.CONST:
    t, c = linear_terms(u.src[0])
    k = u.src[1].arg
    return ({x: v * k for x, v in t.items()} if k else {}), c * k
  return {u: 1}, 0

def build_linear(terms: dict[UOp, int], const: int, like: UOp) -> UOp:
  ret: UOp | None = None
  # every ADD made here is in canonical form (a prefix of sorted terms is sorted): `canon` spares canonical() its sort
  # when the rewrite meets these nodes next (a sum of n terms was sorted again for each of its n prefixes)
  canon = all(terms.values())  # (a zero coefficient would not survive linear_terms: such a sum is not canonical)
  for t in _sorted_terms(terms):
    c = terms[t]
    x = t if c == 1 else UOp(Ops.MUL, like.dtype, (t, like.const_like(c)))
    if ret is None: ret = x
    else:
      ret = UOp(Ops.ADD, like.dtype, (ret, x))
      if canon: ret._cache["canon"] = True
  if ret is None: return like.const_like(const)
  if const == 0: return ret
  ret = UOp(Ops.ADD, like.dtype, (ret, like.const_like(const)))
  if canon: ret._cache["canon"] = True
  return ret

def canonical(x: UOp) -> UOp | None:
  u = x
  if not _is_index(u) or "canon" in u._cache: return None
  t, c = linear_terms(u)
  ret = build_linear(t, c, u)
  return None if ret is u else ret

def fold_divmod(x: UOp, d: UOp, op: Ops) -> UOp | None:
  c = d.arg
  if c <= 0 or x.vmin < 0 or not x.fits(): return None
  if x.vmax < c: return x.const_like(0) if op is Ops.IDIV else x
  terms, k = linear_terms(x)
  if any(t.vmin < 0 for t in terms): return None
  # pull out the parts of x that are whole multiples of c
  quot = {t: v // c for t, v in terms.items() if v // c}
  rem = {t: v % c for t, v in terms.items() if v % c}
  if quot or k >= c or k < 0:
    rest = build_linear(rem, k % c, x)
    if op is Ops.MOD: return rest % c
    return build_linear(quot, k // c, x) + rest // c
  # x = f*B + s with f dividing c and 0 <= s < f (a window offset below a row length): s never carries into the
  # quotient, so (f*B + s)//(f*m) = B//m and (f*B + s)%(f*m) = (B%m)*f + s (B >= 0 as x >= 0)
  for f in sorted({math.gcd(v, c) for v in terms.values()} - {1, c}, reverse=True):
    small = {t: v for t, v in terms.items() if v % f}
    lo = k + sum(v * (t.vmin if v > 0 else t.vmax) for t, v in small.items())
    hi = k + sum(v * (t.vmax if v > 0 else t.vmin) for t, v in small.items())
    if 0 <= lo and hi < f:
      big = build_linear({t: v // f for t, v in terms.items() if v % f == 0}, 0, x)
      return big // (c // f) if op is Ops.IDIV else (big % (c // f)) * f + build_linear(small, k, x)
  # a common factor of every coefficient, the constant and the divisor
  if (g := math.gcd(c, k, *terms.values())) > 1:
    small = build_linear({t: v // g for t, v in terms.items()}, k // g, x)
    return small // (c // g) if op is Ops.IDIV else (small % (c // g)) * g
  # nested: (y//a)//b -> y//(a*b), (y%a)%b -> y%b when b divides a
  if x.op is Ops.IDIV and op is Ops.IDIV and x.src[1].op is Ops.CONST and x.src[1].arg > 0:
    return x.src[0] // (x.src[1].arg * c)
  if x.op is Ops.MOD and op is Ops.MOD and x.src[1].op is Ops.CONST and x.src[1].arg % c == 0: return x.src[0] % c
  return None

def fold_lt(x: UOp, c: UOp) -> UOp | None:
  if not _is_int(x) or not x.fits(): return None
  terms, k = linear_terms(x)
  if k != 0 and terms: return build_linear(terms, 0, x) < (c.arg - k)
  if len(terms) == 1 and (coef := next(iter(terms.values()))) > 1:
    # t*coef < c  <->  t < ceil(c/coef)
    return next(iter(terms)) < -(-c.arg // coef)
  return None

def fold_bounds(x: UOp) -> UOp | None:
  if (dtypes.is_int(x.dtype) or x.dtype == dtypes.bool) and x.vmin == x.vmax and x.op is not Ops.CONST: return x.const_like(x.vmin)
  return None

symbolic = PatternMatcher([
  # constant folding of any ALU op whose inputs are all constants
  (UPat(GroupOp.ALU, name="x", src=UPat(Ops.CONST)),
   lambda x: const_fold(x.op, x.dtype, [s.arg for s in x.src]) if x.op is not Ops.MULACC else None),
  (UPat(Ops.CAST, name="x", src=(UPat(Ops.CONST, name="c"),)), lambda x, c: UOp.const(x.dtype, c.arg)),
  # values the bounds pin to one number
  (UPat(GroupOp.ALU | {Ops.SPECIAL, Ops.DEFINE_VAR, Ops.CAST}, name="x"), fold_bounds),
  # identities
  (UPat(Ops.ADD, src=[UPat.var("x"), UPat.const(None, 0)]), lambda x: x if _is_int(x) else None),
  (UPat(Ops.MUL, src=[UPat.var("x"), UPat.const(None, 1)]), lambda x: x if _is_int(x) or dtypes.is_float(x.dtype) else None),
  (UPat(Ops.MUL, src=[UPat.var("x"), UPat.const(None, 0)]), lambda x: x.const_like(0) if _is_int(x) else None),
  (UPat(Ops.IDIV, src=(UPat.var("x"), UPat.const(None, 1))), lambda x: x),
  (UPat(Ops.MOD, src=(UPat.var("x"), UPat.const(None, 1))), lambda x: x.const_like(0)),
  (UPat(Ops.AND, dtype=dtypes.bool, src=[UPat.var("x"), UPat.const(dtypes.bool, True)]), lambda x: x),
  (UPat(Ops.AND, dtype=dtypes.bool, src=[UPat.var("x"), UPat.const(dtypes.bool, False)]), lambda x: x.const_like(False)),
  (UPat(Ops.OR, dtype=dtypes.bool, src=[UPat.var("x"), UPat.const(dtypes.bool, False)]), lambda x: x),
  (UPat(Ops.OR, dtype=dtypes.bool, src=[UPat.var("x"), UPat.const(dtypes.bool, True)]), lambda x: x.const_like(True)),
  (UPat(Ops.AND, dtype=dtypes.bool, src=(UPat.var("x"), UPat.var("x"))), lambda x: x),
  (UPat(Ops.WHERE, src=(UPat.const(dtypes.bool, True), UPat.var("a"), UPat.var())), lambda a: a),
  (UPat(Ops.WHERE, src=(UPat.const(dtypes.bool, False), UPat.var(), UPat.var("b"))), lambda b: b),
  (UPat(Ops.WHERE, src=(UPat.var(), UPat.var("a"), UPat.var("a"))), lambda a: a),
  (UPat(Ops.CMPNE, src=(UPat(Ops.CMPNE, src=(UPat.var("x"), UPat.const(dtypes.bool, True))), UPat.const(dtypes.bool, True))),
   lambda x: x),
  # integer index arithmetic: linear canonical form, division and modulo folding, comparisons
  (UPat(Ops.MUL, src=(UPat(Ops.MUL, src=(UPat.var("x"), UPat.cvar("c1"))), UPat.cvar("c2"))),
   lambda x, c1, c2: x * (c1.arg * c2.arg) if _is_int(x) else None),
  (UPat(Ops.MUL, src=(UPat(Ops.ADD, name="a"), UPat.cvar("c"))),
   lambda a, c: a.src[0] * c + a.src[1] * c if _is_index(a) else None),
  (UPat(Ops.MUL, src=(UPat.cvar("c"), UPat.var("x"))), lambda c, x: x * c if x.op is not Ops.CONST else None),
  (UPat(Ops.ADD, name="x"), canonical),
  (UPat((Ops.IDIV, Ops.MOD), name="op", src=(UPat.var("x"), UPat.cvar("d"))),
   lambda op, x, d: fold_divmod(x, d, op.op) if _is_int(x) else None),
  (UPat(Ops.CMPLT, src=(UPat.var("x"), UPat.cvar("c"))), fold_lt),
  (UPat(Ops.MAX, src=(UPat.var("x"), UPat.var("y"))),
   lambda x, y: x if x.vmin >= y.vmax else (y if y.vmin >= x.vmax else None) if _is_int(x) else None),
], memo="symbolic")  # (every rule is a function of the node alone: results are kept on the nodes, see PatternMatcher)

@functools.lru_cache(maxsize=100_000)
def simplify(u: UOp) -> UOp: return graph_rewrite(u, symbolic)

# *** the size helpers: symbolic sizes folded by the rules above ***
def ssimplify(x: sint) -> sint:
  """A size simplified: a python int where it folds to a constant, else the simplified UOp."""
  if not isinstance(x, UOp): return x
  s = simplify(x)
  return int(s.arg) if s.op is Ops.CONST else s

def smax(*xs: sint) -> sint:
  """The largest of some sizes, a python int where none is symbolic."""
  ints = [x for x in xs if isinstance(x, int)]
  syms = [x for x in xs if isinstance(x, UOp)]
  if not syms: return max(ints)
  return simplify(functools.reduce(lambda a, b: a.maximum(b), syms + ([syms[0].const_like(max(ints))] if ints else [])))

def resolve(x: Any, default: bool = True) -> bool:
  """A python bool from a possibly symbolic condition; `default` where the bounds cannot decide."""
  if not isinstance(x, UOp): return bool(x)
  s = simplify(x)
  return bool(s.vmin) if s.vmin == s.vmax else default
