"""UOp: the immutable, hash-consed node of the IR, used for kernel ASTs, linear programs and index arithmetic.

This module is the bottom of the IR: a node, its bounds, its rendering as an expression and the evaluation of a symbolic
size. It knows no rewrite rules: pattern matching is in rewrite.py, and simplification and the size helpers that need it
(`simplify`, `ssimplify`, `smax`, `resolve`) are in symbolic.py, above both."""
from __future__ import annotations
import math, weakref
from typing import Any, Callable, Iterator, Union
from tinycore.dtype import DType, dtypes
from tinycore.ops import Ops, GroupOp, python_alu

class UOpMetaClass(type):
  """Hash-consing: building the same (op, dtype, src, arg) twice returns the same object."""
  ucache: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
  def __call__(cls, op: Ops, dtype: DType = dtypes.void, src: tuple[UOp, ...] = (), arg: Any = None) -> UOp:
    key = (op, dtype, src, arg)
    # (the dictionary under the weak one, read directly: WeakValueDictionary.get is Python code, and this runs for
    # every node built; a dead node's reference returns None until its callback has removed it)
    if (ref := _ucache_refs.get(key)) is not None and (ret := ref()) is not None: return ret
    UOpMetaClass.ucache[key] = ret = super().__call__(op, dtype, src, arg)
    return ret

_ucache_refs = UOpMetaClass.ucache.data

_consts: dict[tuple, UOp] = {}  # UOp.const's nodes of python ints and bools by (dtype, type, value)

class UOp(metaclass=UOpMetaClass):
  """One node: `op` from the op set, result `dtype`, sources `src`, and an op-specific `arg`.

  Equality is identity (nodes are hash-consed), so comparisons build nodes: use `.lt()`, `.ne()`, `.eq()`.
  Python operators on UOps build ALU nodes, which makes index arithmetic read like ordinary code."""
  __slots__ = ("op", "dtype", "src", "arg", "__weakref__", "_cache")
  def __init__(self, op: Ops, dtype: DType = dtypes.void, src: tuple[UOp, ...] = (), arg: Any = None):
    self.op, self.dtype, self.src, self.arg, self._cache = op, dtype, src, arg, {}
  def __reduce__(self) -> tuple: return UOp, (self.op, self.dtype, self.src, self.arg)
  def __repr__(self) -> str: return pretty(self)
  def replace(self, **kw: Any) -> UOp:
    return UOp(kw.get("op", self.op), kw.get("dtype", self.dtype), kw.get("src", self.src), kw.get("arg", self.arg))

  # *** graph walking ***
  def toposort(self) -> list[UOp]:
    """Every node reachable from this one, sources before users."""
    seen: dict[UOp, None] = {}
    stack: list[tuple[UOp, bool]] = [(self, False)]
    while stack:
      u, expanded = stack.pop()
      if u in seen: continue
      if expanded: seen[u] = None
      else:
        stack.append((u, True))
        stack.extend((s, False) for s in reversed(u.src) if s not in seen)
    return list(seen)
  def sparents(self) -> set[UOp]: return set(self.toposort())

  # *** constants and construction ***
  @staticmethod
  def const(dtype: Any, b: Any = None) -> UOp:
    """A CONST node. `UOp.const(dtype, value)`, or tinygrad 0.14's order `UOp.const(value, dtype=None)` (the dtype then
    defaults to the python value's)."""
    if not isinstance(dtype, DType): dtype, b = (b if b is not None else dtypes.from_py(dtype)), dtype
    # (index arithmetic makes the same few constants all the time: the node for a (dtype, python number) is kept)
    if (ret := _consts.get(key := (dtype, type(b), b))) is not None: return ret
    if isinstance(b, UOp): return b
    ret = UOp(Ops.CONST, dtype, arg=dtypes.as_const(b, dtype) if not (isinstance(b, float) and math.isnan(b)) else b)
    if type(b) is int or type(b) is bool:  # (not floats: -0.0 == 0.0 as a key)
      if len(_consts) >= 4096: _consts.clear()
      _consts[key] = ret
    return ret
  def const_like(self, b: Any) -> UOp: return UOp.const(self.dtype, b)
  @staticmethod
  def variable(name: str, min_val: int, max_val: int, dtype: DType = dtypes.int32) -> UOp:
    """A symbolic integer (for example a batch size) known to lie in [min_val, max_val]."""
    return UOp(Ops.DEFINE_VAR, dtype, arg=(name, min_val, max_val))
  def bind(self, val: int) -> UOp:
    if self.op is not Ops.DEFINE_VAR: raise ValueError(f"can only bind a Variable, not {self.op}")
    if not self.arg[1] <= val <= self.arg[2]: raise ValueError(f"value {val} out of range [{self.arg[1]}, {self.arg[2]}] of {self.arg[0]}")
    return BoundVariable(self, val)
  def alu(self, op: Ops, *src: UOp) -> UOp:
    out_dtype = dtypes.bool if op in GroupOp.Comparison else (src[-1].dtype if op is Ops.WHERE else self.dtype)
    return UOp(op, out_dtype, (self,) + src)
  def cast(self, dtype: DType) -> UOp: return self if self.dtype == dtype else UOp(Ops.CAST, dtype, (self,))
  def bitcast(self, dtype: DType) -> UOp: return UOp(Ops.BITCAST, dtype, (self,))
  def _b(self, x: Any) -> UOp: return x if isinstance(x, UOp) else self.const_like(x)
  def __add__(self, x: Any) -> UOp: return self.alu(Ops.ADD, self._b(x))
  def __radd__(self, x: Any) -> UOp: return self._b(x).alu(Ops.ADD, self)
  def __sub__(self, x: Any) -> UOp: return self.alu(Ops.ADD, -self._b(x))
  def __rsub__(self, x: Any) -> UOp: return self._b(x).alu(Ops.ADD, -self)
  def __mul__(self, x: Any) -> UOp: return self.alu(Ops.MUL, self._b(x))
  def __rmul__(self, x: Any) -> UOp: return self._b(x).alu(Ops.MUL, self)
  def __floordiv__(self, x: Any) -> UOp: return self.alu(Ops.IDIV, self._b(x))
  def __mod__(self, x: Any) -> UOp: return self.alu(Ops.MOD, self._b(x))
  def __neg__(self) -> UOp: return self * -1 if dtypes.is_int(self.dtype) else self.alu(Ops.NEG)
  def __lt__(self, x: Any) -> UOp: return self.alu(Ops.CMPLT, self._b(x))
  def __ge__(self, x: Any) -> UOp: return (self < x).logical_not()
  def __and__(self, x: Any) -> UOp: return self.alu(Ops.AND, self._b(x))
  def __or__(self, x: Any) -> UOp: return self.alu(Ops.OR, self._b(x))
  def __xor__(self, x: Any) -> UOp: return self.alu(Ops.XOR, self._b(x))
  def lt(self, x: Any) -> UOp: return self < x
  def ne(self, x: Any) -> UOp: return self.alu(Ops.CMPNE, self._b(x))
  def eq(self, x: Any) -> UOp: return self.ne(x).logical_not()
  def logical_not(self) -> UOp: return self.ne(True)
  def maximum(self, x: Any) -> UOp: return self.alu(Ops.MAX, self._b(x))
  def where(self, a: Any, b: Any) -> UOp:
    a = a if isinstance(a, UOp) else (b.const_like(a) if isinstance(b, UOp) else UOp.const(dtypes.from_py(a), a))
    return self.alu(Ops.WHERE, a, a._b(b))

  # *** bounds: every node knows the smallest and largest value it can take ***
  @property
  def vmin(self) -> Any: return self._min_max[0]
  @property
  def vmax(self) -> Any: return self._min_max[1]
  @property
  def _min_max(self) -> tuple[Any, Any]:
    if (mm := self._cache.get("mm")) is None:
      mm = _bounds(self)
      # integers wrap: a range that leaves the dtype's says nothing about the wrapped value
      if dtypes.is_int(self.dtype) and not (dtypes.min(self.dtype) <= mm[0] and mm[1] <= dtypes.max(self.dtype)):
        mm = (dtypes.min(self.dtype), dtypes.max(self.dtype))
      self._cache["mm"] = mm
    return mm
  def fits(self) -> bool:
    """True when no ADD/MUL inside this integer expression can overflow its dtype (so order and division rules hold)."""
    if (f := self._cache.get("fits")) is None:
      f = True
      if self.op in (Ops.ADD, Ops.MUL) and dtypes.is_int(self.dtype):
        f = all(x.fits() for x in self.src) and dtypes.min(self.dtype) <= _bounds(self)[0] and _bounds(self)[1] <= dtypes.max(self.dtype)
      self._cache["fits"] = f
    return f
  @property
  def expr(self) -> str:
    """A Variable's name."""
    return self.arg[0]
  def substitute(self, mapping: dict[UOp, UOp]) -> UOp:
    memo: dict[UOp, UOp] = dict(mapping)
    for u in self.toposort():
      if u not in memo: memo[u] = u.replace(src=tuple(memo[s] for s in u.src)) if u.src else u
    return memo[self]
  def vars(self) -> set[UOp]: return {u for u in self.toposort() if u.op is Ops.DEFINE_VAR}
  def render(self) -> str:
    """Index arithmetic as a readable infix (C-like) expression, for error messages and shape printing."""
    s = self.src
    if self.op is Ops.CONST: return str(self.arg)
    if self.op is Ops.DEFINE_VAR: return self.arg[0]
    if self.op in (Ops.RANGE, Ops.SPECIAL): return self.arg[0] if isinstance(self.arg, tuple) else f"ridx{self.arg}"
    if self.op in _INFIX: return f"({s[0].render()}{_INFIX[self.op]}{s[1].render()})"
    if self.op is Ops.MAX: return f"max({s[0].render()}, {s[1].render()})"
    if self.op is Ops.WHERE: return f"({s[0].render()}?{s[1].render()}:{s[2].render()})"
    return f"{self.op.name.lower()}({', '.join(x.render() for x in s)})"
  def __bool__(self) -> bool: raise TypeError(f"a symbolic value has no truth value: {self.render()}")
  def __int__(self) -> int:
    # the bounds decide here; the rewrite rules live above this module (`symbolic.simplify` a value first to fold more)
    if self.vmin == self.vmax: return int(self.vmin)
    raise TypeError(f"symbolic value {self.render()} is not a constant")

# a bound Variable is a plain python object carried next to the graph, not a node of it
class BoundVariable:
  """A Variable together with the value it takes for one run (`Variable("bs", 1, 64).bind(16)`), or an integer
  expression of bound Variables (`pos + 1`, `pos * 2`, `pos < n`: tinygrad 0.14's bound Variables compose so, and a
  KV cache slices `cache[:, pos:pos+1]`). `var` is the symbolic value (the Variable, or the expression of them), `vals`
  the values of its Variables, `val` its value for them."""
  __slots__ = ("var", "vals")
  def __init__(self, var: UOp, val: int | dict[UOp, int]): self.var, self.vals = var, val if isinstance(val, dict) else {var: val}
  @property
  def val(self) -> int: return sym_infer(self.var, self.vals)
  def __repr__(self) -> str: return f"{self.var.render()}={self.val}"
  def unbind(self) -> tuple[UOp, int]:
    if self.var.op is not Ops.DEFINE_VAR: raise ValueError(f"{self.var.render()} is an expression, not a Variable: it has no single binding")
    return self.var, self.val
  def __eq__(self, o: object) -> bool: return isinstance(o, BoundVariable) and o.var is self.var and o.vals == self.vals
  def __hash__(self) -> int: return hash((self.var, tuple(self.vals.items())))
  def _op(self, fn: Callable[[UOp, Any], UOp], x: Any) -> BoundVariable:
    if isinstance(x, BoundVariable): return BoundVariable(fn(self.var, x.var), {**self.vals, **x.vals})
    if not isinstance(x, (int, UOp)) or isinstance(x, bool): return NotImplemented
    return BoundVariable(fn(self.var, x), self.vals)
  def __add__(self, x: Any) -> BoundVariable: return self._op(UOp.__add__, x)
  def __radd__(self, x: Any) -> BoundVariable: return self._op(UOp.__radd__, x)
  def __sub__(self, x: Any) -> BoundVariable: return self._op(UOp.__sub__, x)
  def __rsub__(self, x: Any) -> BoundVariable: return self._op(UOp.__rsub__, x)
  def __mul__(self, x: Any) -> BoundVariable: return self._op(UOp.__mul__, x)
  def __rmul__(self, x: Any) -> BoundVariable: return self._op(UOp.__rmul__, x)
  def __floordiv__(self, x: Any) -> BoundVariable: return self._op(UOp.__floordiv__, x)
  def __mod__(self, x: Any) -> BoundVariable: return self._op(UOp.__mod__, x)
  def __neg__(self) -> BoundVariable: return BoundVariable(-self.var, self.vals)
  def __lt__(self, x: Any) -> BoundVariable: return self._op(UOp.__lt__, x)
  def __gt__(self, x: Any) -> BoundVariable: return self._op(lambda a, b: UOp._b(a, b).alu(Ops.CMPLT, a), x)
  def __le__(self, x: Any) -> BoundVariable: return self._op(lambda a, b: UOp._b(a, b).alu(Ops.CMPLT, a).logical_not(), x)
  def __ge__(self, x: Any) -> BoundVariable: return self._op(lambda a, b: a.alu(Ops.CMPLT, UOp._b(a, b)).logical_not(), x)

def Variable(name: str, min_val: int, max_val: int, dtype: DType | None = None, multiple_of: int = 1, param: bool = False) -> UOp:
  """A symbolic integer for shapes that vary between runs, bounded by [min_val, max_val]; dtype an int dtype (default
  int32, tinycore's index type). tinygrad 0.14's multiple_of and param are accepted at their defaults only."""
  if multiple_of != 1: raise NotImplementedError(f"Variable {name!r}: multiple_of={multiple_of} is not supported by tinycore (only 1)")
  if param: raise NotImplementedError(f"Variable {name!r}: param=True (tinygrad's function-parameter variables) is not supported by tinycore")
  if dtype is not None and not dtypes.is_int(dtype): raise TypeError(f"Variable {name!r}: dtype must be an int dtype, got {dtype}")
  return UOp.variable(name, min_val, max_val, dtype if dtype is not None else dtypes.int32)

sint = Union[int, UOp]
_INFIX = {Ops.ADD: "+", Ops.MUL: "*", Ops.IDIV: "//", Ops.MOD: "%", Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.AND: "&", Ops.OR: "|"}

def _bounds(u: UOp) -> tuple[Any, Any]:
  s = u.src
  if u.op is Ops.CONST: return u.arg, u.arg
  # float ranges are not tracked (NaN has no place in an order): only integer and bool bounds fold anything
  if dtypes.is_float(u.dtype): return -math.inf, math.inf
  if u.op is Ops.DEFINE_VAR: return u.arg[1], u.arg[2]
  if u.op is Ops.RANGE: return s[0].vmin, s[1].vmax - 1
  if u.op is Ops.SPECIAL: return 0, (u.arg[1].vmax if isinstance(u.arg[1], UOp) else u.arg[1]) - 1
  if u.op is Ops.ADD: return s[0].vmin + s[1].vmin, s[0].vmax + s[1].vmax
  if u.op is Ops.MUL:
    vals = [s[0].vmin * s[1].vmin, s[0].vmin * s[1].vmax, s[0].vmax * s[1].vmin, s[0].vmax * s[1].vmax]
    if not all(isinstance(v, (int, bool)) for v in vals): return dtypes.min(u.dtype), dtypes.max(u.dtype)
    return min(vals), max(vals)
  if u.op is Ops.IDIV and s[1].op is Ops.CONST and s[1].arg > 0 and s[0].vmin >= 0:
    return s[0].vmin // s[1].arg, s[0].vmax // s[1].arg
  if u.op is Ops.MOD and s[1].op is Ops.CONST and s[1].arg > 0 and s[0].vmin >= 0:
    return (s[0].vmin, s[0].vmax) if s[0].vmax < s[1].arg else (0, s[1].arg - 1)
  if u.op is Ops.MAX: return max(s[0].vmin, s[1].vmin), max(s[0].vmax, s[1].vmax)
  if u.op is Ops.CMPLT: return (s[0].vmax < s[1].vmin, s[0].vmin < s[1].vmax)
  if u.op is Ops.CMPNE:
    if s[0].vmax < s[1].vmin or s[0].vmin > s[1].vmax: return True, True
    if s[0].vmin == s[0].vmax == s[1].vmin == s[1].vmax: return False, False
    return False, True
  if u.op is Ops.AND and u.dtype == dtypes.bool: return bool(s[0].vmin and s[1].vmin), bool(s[0].vmax and s[1].vmax)
  if u.op is Ops.OR and u.dtype == dtypes.bool: return bool(s[0].vmin or s[1].vmin), bool(s[0].vmax or s[1].vmax)
  if u.op is Ops.WHERE: return min(s[1].vmin, s[2].vmin), max(s[1].vmax, s[2].vmax)
  if u.op is Ops.CAST and dtypes.is_int(u.dtype) and dtypes.is_int(s[0].dtype) and \
     dtypes.min(u.dtype) <= s[0].vmin and s[0].vmax <= dtypes.max(u.dtype): return s[0].vmin, s[0].vmax
  if u.op is Ops.CAST and u.dtype == dtypes.bool: return (s[0].vmin > 0 or s[0].vmax < 0), not (s[0].vmin == s[0].vmax == 0)
  return dtypes.min(u.dtype), dtypes.max(u.dtype)

def const_fold(op: Ops, dtype: DType, vals: list[Any]) -> UOp: return UOp.const(dtype, python_alu(op, dtype, *vals))

def sym_infer(x: sint, var_vals: dict[UOp, int]) -> int:
  """The value of a symbolic size for the given values of its Variables."""
  if isinstance(x, int): return x
  vals: dict[UOp, Any] = {}
  for u in x.toposort():
    if u.op is Ops.CONST: vals[u] = u.arg
    elif u.op is Ops.DEFINE_VAR:
      if u not in var_vals: raise ValueError(f"Variable {u.expr} has no value: bind it (Variable({u.expr!r}, ...).bind(n)) to use {x.render()}")
      vals[u] = var_vals[u]
    else: vals[u] = python_alu(u.op, u.dtype, *[vals[s] for s in u.src])
  return int(vals[x])
def sint_to_uop(x: sint) -> UOp: return UOp.const(dtypes.int32, x) if isinstance(x, int) else x

def pretty(u: UOp, indent: int = 0, seen: set | None = None) -> str:
  """A tree print of a graph, shared nodes shown once."""
  seen = set() if seen is None else seen
  pad = "  " * indent
  if id(u) in seen: return f"{pad}<shared {u.op}>"
  seen.add(id(u))
  head = f"{pad}UOp({u.op}, {u.dtype}, arg={u.arg!r}"
  if not u.src: return head + ")"
  return head + ", src=(\n" + ",\n".join(pretty(s, indent + 1, seen) for s in u.src) + ")"

def iter_leaves(u: UOp) -> Iterator[UOp]: return (x for x in u.toposort() if not x.src)
