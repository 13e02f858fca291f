"""tinygrad 0.14's public surface, listed from tinygrad itself at test time (never a frozen copy): each entry a name and
a getter that finds the same thing in either library (AttributeError/KeyError/TypeError when it is not there).

Covered: Tensor (public methods, properties, class methods, operators, instance attributes), the nn layers (their
constructors, call and instance attributes), nn.optim (constructors, methods, attributes of a constructed optimizer),
nn.state, nn.datasets, dtypes and DType, Device, TinyJit, Variable, Context and every context variable, GlobalCounters,
getenv and the names tinygrad.helpers defines."""
from __future__ import annotations
import dataclasses, functools, inspect
from typing import Any, Callable, TypeVar
from compat.harness import TG, TC, Lib, dtype_name

Getter = Callable[[Lib], Any]
# operator dunders count as public API; the rest of the dunders are python's bookkeeping
BOOKKEEPING = {"__annotations__", "__dict__", "__doc__", "__module__", "__slots__", "__weakref__", "__subclasshook__", "__init_subclass__",
               "__del__", "__hash__", "__repr__", "__init__", "__firstlineno__", "__static_attributes__"}
# constructor arguments for each nn layer and optimizer, to list the attributes of an instance (a new tinygrad layer
# fails the inventory until it is added here)
LAYER_ARGS: dict[str, tuple] = {
  "Linear": (3, 4), "Conv2d": (2, 3, 3), "Conv1d": (2, 3, 3), "ConvTranspose2d": (2, 3, 3), "ConvTranspose1d": (2, 3, 3), "BatchNorm": (3,),
  "BatchNorm2d": (3,), "BatchNorm3d": (3,), "LayerNorm": (3,), "LayerNorm2d": (3,), "GroupNorm": (2, 4), "InstanceNorm": (3,), "RMSNorm": (3,),
  "Embedding": (5, 3), "LSTMCell": (3, 4)}
OPTIMIZERS = ("SGD", "Adam", "AdamW", "LAMB", "LARS", "Muon")

def path(dotted: str) -> Getter:
  """The object at a dotted path from the library's top module (`nn.optim.SGD`)."""
  return lambda lib: functools.reduce(getattr, dotted.split("."), lib.mod)

def public(obj: Any) -> list[str]: return [n for n in dir(obj) if not n.startswith("_")]

def defined_in(mod: Any) -> list[str]:
  """The public names a module defines itself (not those it imports)."""
  return [n for n in public(mod) if getattr(getattr(mod, n), "__module__", None) == mod.__name__ and not isinstance(getattr(mod, n), TypeVar)]

def members(prefix: str, owner: Getter, names: list[str]) -> dict[str, Getter]:
  return {f"{prefix}.{n}": functools.partial(lambda n, lib: getattr(owner(lib), n), n) for n in names}

def instance(dotted: str, *args: Any) -> Getter:
  """A constructed object, args given as functions of the library where they are tensors."""
  return lambda lib: path(dotted)(lib)(*[a(lib) if callable(a) else a for a in args])

def tensor_names() -> list[str]:
  """tinygrad's Tensor API: public names and operators (attributes of instances included)."""
  T = TG.Tensor
  ops = [n for n in dir(T) if n.startswith("__") and n not in BOOKKEEPING and getattr(T, n, None) is not getattr(object, n, None)]
  return public(T) + ops

def surface() -> dict[str, Getter]:
  """name -> getter, for everything the inventory checks."""
  tg = TG.mod
  out: dict[str, Getter] = {"Tensor": path("Tensor")}
  one = lambda lib: lib.Tensor([1.0])
  for n in tensor_names():
    member = type(inspect.getattr_static(tg.Tensor, n)).__name__ == "member_descriptor"  # a __slots__ attribute: look on an instance
    out[f"Tensor.{n}"] = functools.partial(lambda n, member, lib: getattr(one(lib) if member else lib.Tensor, n), n, member)
  for mod in ("nn", "nn.optim", "nn.state", "nn.datasets"):
    out |= members(mod, path(mod), defined_in(path(mod)(TG)))
  for n in LAYER_ARGS:
    obj = instance(f"nn.{n}", *LAYER_ARGS[n])
    out |= members(f"nn.{n}()", obj, [a for a in vars(obj(TG)) if not a.startswith("_")] + ["__call__"])
  for n in OPTIMIZERS:
    obj = instance(f"nn.optim.{n}", lambda lib: [lib.Tensor([[1.0, 2.0], [3.0, 4.0]])])
    out |= members(f"nn.optim.{n}()", obj, [a for a in vars(obj(TG)) if not a.startswith("_")] + public(type(obj(TG))))
  out |= members("dtypes", path("dtypes"), public(tg.dtypes))
  f32 = path("dtypes.float32")
  out |= members("DType", f32, public(type(tg.dtypes.float32)) + [f.name for f in dataclasses.fields(tg.dtypes.float32)])
  out |= members("Device", path("Device"), public(tg.Device))
  out["TinyJit"] = path("TinyJit")
  out |= members("TinyJit()", instance("TinyJit", lambda lib: (lambda: None)), public(tg.TinyJit) + public(tg.TinyJit(lambda: None)) + ["__call__"])
  out["Variable"] = path("Variable")
  out["Variable().bind"] = lambda lib: lib.mod.Variable("i", 1, 10).bind
  out["Context"] = path("Context")
  cvars = [n for n in defined_in(tg.helpers) if isinstance(getattr(tg.helpers, n), tg.helpers.ContextVar)]
  out |= {f"Context({n}=)": functools.partial(lambda n, lib: lib.mod.Context(**{n: getattr(lib.mod.helpers, n).value}), n) for n in cvars}
  out |= members("GlobalCounters", path("GlobalCounters"), public(tg.GlobalCounters))
  out["getenv"] = path("getenv")
  out |= members("helpers", path("helpers"), defined_in(tg.helpers))
  return out

# *** signatures ***

def _norm_default(v: Any, lib: Lib) -> Any:
  """A default value comparable across the libraries: dtypes by name, context variables by key, callables by name."""
  if v is inspect.Parameter.empty: return "<required>"
  if isinstance(v, type(lib.dtypes.float32)): return f"dtypes.{dtype_name(lib, v)}"
  if type(v).__name__ == "ContextVar": return f"ContextVar({v.key})"
  if callable(v): return getattr(v, "__qualname__", repr(v))
  return v

def signature_problems(ref: Any, got: Any) -> dict[str, str]:
  """Why a call written for tinygrad's `ref` would not bind the same way to tinycore's `got`, keyed by tinygrad's
  parameter name ({} when compatible; "*" for a problem of the whole signature). Same positional parameters (names,
  order, defaults), every keyword tinygrad accepts accepted by name with the same default, *args and **kwargs where
  tinygrad has them; tinycore may add parameters only with defaults, after tinygrad's."""
  try: rs, gs = inspect.signature(ref), inspect.signature(got)
  except (TypeError, ValueError): return {}  # builtins without a signature: existence is all we can check
  P = inspect.Parameter
  rp, gp = list(rs.parameters.values()), list(gs.parameters.values())
  positional = lambda ps: [p for p in ps if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
  rpos, gpos = positional(rp), positional(gp)
  gnamed = {p.name: p for p in gp if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)}
  star = lambda ps, k: next((p.name for p in ps if p.kind == k), None)
  same_default = lambda r, g: _norm_default(r.default, TG) == _norm_default(g.default, TC)
  why: dict[str, str] = {}
  for i, r in enumerate(rpos):
    g = gpos[i] if i < len(gpos) else None
    if g is None: why[r.name] = f"no positional parameter {i} ({r.name})" + (" (only **kwargs)" if star(gp, P.VAR_KEYWORD) else "")
    elif r.kind == P.POSITIONAL_OR_KEYWORD and (g.name != r.name or g.kind != r.kind): why[r.name] = f"parameter {i} is {g.name!r}, not {r.name!r}"
    elif not same_default(r, g): why[r.name] = f"{r.name}'s default {g.default!r}, tinygrad {r.default!r}"
  for g in gpos[len(rpos):]:
    if g.default is P.empty: why["*"] = f"extra required parameter {g.name!r}"
    elif star(rp, P.VAR_POSITIONAL): why["*"] = f"extra positional {g.name!r} takes what tinygrad's *{star(rp, P.VAR_POSITIONAL)} takes"
  for r in rp:
    if r.kind != P.KEYWORD_ONLY: continue
    g = gnamed.get(r.name)
    if g is None: why[r.name] = f"no keyword {r.name!r}" + (" (only **kwargs)" if star(gp, P.VAR_KEYWORD) else "")
    elif not same_default(r, g): why[r.name] = f"{r.name}'s default {g.default!r}, tinygrad {r.default!r}"
  for k, mark in ((P.VAR_POSITIONAL, "*"), (P.VAR_KEYWORD, "**")):
    if star(rp, k) and not star(gp, k): why[mark + star(rp, k)] = f"no {mark}{star(rp, k)}"
  for p in gp:
    if p.kind == P.KEYWORD_ONLY and p.default is P.empty and p.name not in {r.name for r in rp}: why["*"] = f"extra required keyword {p.name!r}"
  return {k: f"{v}: tinygrad {rs}, tinycore {gs}" for k, v in why.items()}
