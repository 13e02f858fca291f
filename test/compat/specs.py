"""The differential suite's table: for every computing function of tinygrad 0.14's Tensor, how its calls are generated.

A spec is a function rng -> [Case]; most come from a family (unary, binary, reduce, ...) that draws the inputs over
the same pool of shapes (0-d, size 0, size 1, non-contiguous views) and dtypes, with values in the op's domain. The
rng is seeded by the op's name, so a run is deterministic and a failing case keeps its id. NOT_COMPUTED names the
Tensor functions that compute nothing comparable, each with the reason; test_differential checks that every public
callable of tinygrad's Tensor is in one of the two (or in the allowlist as deliberately missing)."""
from __future__ import annotations
import operator, os, tempfile
from typing import Any, Callable
import numpy as np
from compat.harness import T, D, L, Case

FLOAT, INT = ("float32", "float16"), ("int8", "int16", "int32", "int64", "uint8")
ALL = ("bool", *INT, *FLOAT)
# (shape the op sees, view): the non-contiguous views, and the small, empty and plain shapes
NONCONTIG = [((2, 3), "permute"), ((3, 2), "slice"), ((2, 3), "expand")]
SMALL = [((0,), ""), ((1,), ""), ((2, 0, 3), ""), ((2, 3), "")]
EDGE = [0.0, -0.0, 1.0, -1.0, 0.5, np.inf, -np.inf, np.nan, 1e-30, 60.0, -60.0]

def arr(rng: np.random.Generator, shape: tuple, dtype: str = "float32", dom: tuple = (-2, 2)) -> np.ndarray:
  """Random data of a dtype, floats uniform in dom, ints in dom clipped to the dtype's range."""
  if dtype == "bool": return np.asarray(rng.random(shape) < 0.5)
  if dtype in FLOAT: return np.asarray(rng.uniform(*dom, size=shape), dtype)
  info = np.iinfo(dtype)
  return np.asarray(rng.integers(max(info.min, int(np.floor(dom[0]))), min(info.max, int(np.ceil(dom[1]))) + 1, size=shape), dtype)

def t(rng: np.random.Generator, shape: tuple, dtype: str = "float32", dom: tuple = (-2, 2), view: str = "", grad: bool = True) -> T:
  """A tensor input of `shape` as the op sees it, stored so that `view` makes it non-contiguous."""
  stored = {"permute": tuple(reversed(shape)), "slice": shape[:-1] + (2 * shape[-1],) if shape else shape,
            "expand": (1,) + shape[1:] if shape else shape}.get(view, shape)
  return T(arr(rng, stored, dtype, dom), view if shape else "", shape, grad)

def pick(rng: np.random.Generator, xs: tuple, n: int) -> list:
  return [xs[i] for i in sorted(rng.choice(len(xs), min(n, len(xs)), replace=False))]

Spec = Callable[[np.random.Generator], list[Case]]

def torch_op(name: str, kw: dict | None = None) -> Callable | None:
  """The same elementwise op in torch, for edge values (None when torch has no such op under that name)."""
  import torch
  F, kw = torch.nn.functional, dict(kw or {})
  special = {"swish": F.silu, "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x), "gelu": lambda x: F.gelu(x, approximate="tanh"),
             "mod": torch.remainder, "leaky_relu": lambda x, neg_slope: F.leaky_relu(x, neg_slope), "logical_not": torch.logical_not,
             "hardtanh": lambda x, min_val, max_val: F.hardtanh(x, min_val, max_val), "__neg__": torch.neg, "reciprocal": torch.reciprocal}
  f = special.get(name) or getattr(torch, name, None) or getattr(F, name, None)
  if f is None or name in ("bool", "float", "half", "int", "long", "short", "double", "bfloat16", "contiguous", "detach", "clone"): return None
  return lambda *a: f(*[torch.tensor(x) for x in a], **kw).numpy()

# *** families: each op gets one draw from each pool (seeded by its name), so the suite covers every shape, view and
# dtype across the ops while each op stays a handful of calls (the reference, tinygrad, takes ~0.1 s a call) ***

def _one(rng: np.random.Generator, pool: list) -> Any: return pool[int(rng.integers(len(pool)))]

def unary(dom: tuple = (-2, 2), dtypes: tuple = ALL, edge: bool = True, fn: str | Callable | None = None, **kw: Any) -> Callable[[str], Spec]:
  """0-d, one non-contiguous view, one small or empty shape, one other dtype, and the edge values (no gradient)."""
  def spec(name: str) -> Spec:
    def gen(rng: np.random.Generator) -> list[Case]:
      main = "float32" if "float32" in dtypes else dtypes[0]
      shapes = [((), ""), _one(rng, NONCONTIG), _one(rng, SMALL)]
      cs = [Case(fn or name, (t(rng, s, main, dom, v),), dict(kw), label=f"{main}{s}{v}") for s, v in shapes]
      cs += [Case(fn or name, (t(rng, (2, 3), d, dom),), dict(kw), label=d) for d in pick(rng, tuple(d for d in dtypes if d != main), 1)]
      if edge and main == "float32":
        cs.append(Case(fn or name, (T(np.array(EDGE, np.float32), grad=False),), dict(kw), label="edge", torch=torch_op(name, kw)))
      return cs
    return gen
  return spec

BCAST = [((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3)), ((3,), ())]

def binary(dom: tuple = (-2, 2), dom_b: tuple | None = None, dtypes: tuple = ALL, scalars: tuple = (2, 2.5, True),
    fn: str | Callable | None = None, inplace: bool = False, light: bool = False, **kw: Any) -> Callable[[str], Spec]:
  """A non-contiguous pair, a small or empty pair, a broadcasting pair, a python scalar, and a mixed-dtype pair
  (promotion). In place (inplace=True) the left side is a plain tensor: tinygrad cannot assign into a view. light: only
  the broadcasting pair and the scalar (the operators, whose methods have the full set)."""
  db = dom_b or dom
  def spec(name: str) -> Spec:
    def gen(rng: np.random.Generator) -> list[Case]:
      main = "float32" if "float32" in dtypes else dtypes[-1]
      f, pairs = fn or name, [] if light else [_one(rng, SMALL + [((), "")])] + ([] if inplace else [_one(rng, NONCONTIG)])
      cs = [Case(f, (t(rng, s, main, dom, v), t(rng, s, main, db)), dict(kw), label=f"{main}{s}{v}") for s, v in pairs]
      a, b = _one(rng, BCAST[:2] if inplace else BCAST)
      cs.append(Case(f, (t(rng, a, main, dom), t(rng, b, main, db)), dict(kw), label=f"bcast{a}{b}"))
      s = _one(rng, list(scalars))
      cs.append(Case(f, (t(rng, (2, 3), main, dom), s), dict(kw), label=f"scalar{s!r}"))
      x, y = pick(rng, dtypes, 2)
      if not light: cs.append(Case(f, (t(rng, (2, 3), x, dom), t(rng, (2, 3), y, db)), dict(kw), label=f"{x}-{y}"))
      return cs
    return gen
  return spec

REDUCE_SHAPES = [((2, 3, 4), "", None, False), ((2, 3, 4), "permute", 1, True), ((2, 3, 4), "", (0, 2), False), ((2, 3, 4), "slice", -1, False),
    ((0, 3), "", 1, False), ((0, 3), "", 0, True), ((1,), "", 0, False), ((2, 3), "expand", 0, False)]

def reduce(dtypes: tuple = ALL, axis_kw: str = "axis", dom: tuple = (-2, 2), keepdim: bool = True, single_axis: bool = False, n: int = 4,
           zero_d: bool = True, **kw: Any) -> Callable[[str], Spec]:
  """0-d, then n of: a 3-D tensor (each axis form), size 0 along and across the axis, size 1 and views; one other dtype."""
  def spec(name: str) -> Spec:
    def gen(rng: np.random.Generator) -> list[Case]:
      main = "float32" if "float32" in dtypes else dtypes[-1]
      cs = []
      for s, v, ax, kd in [((), "", None, False)] * zero_d + pick(rng, tuple(REDUCE_SHAPES), n):
        if single_axis: ax = (ax[0] if isinstance(ax, tuple) else 0 if ax is None and s else ax)
        if single_axis and ax is None and axis_kw == "dim": ax = -1
        cs.append(Case(name, (t(rng, s, main, dom, v),), {axis_kw: ax, **({"keepdim": kd} if keepdim else {}), **kw}, label=f"{s}{v}-{ax}"))
      cs += [Case(name, (t(rng, (2, 3), d, dom),), {axis_kw: 1, **kw}, label=d) for d in pick(rng, tuple(d for d in dtypes if d != main), 1)]
      return cs
    return gen
  return spec

def calls(*arglists: tuple, dtypes: tuple = ("float32",), **opts: Any) -> Callable[[str], Spec]:
  """Explicit call shapes with generated data: each arglist is a tuple of args where a `shape` tuple wrapped in S()
  becomes a random tensor of each dtype in turn (the dtype rotates over the arglists)."""
  def spec(name: str) -> Spec:
    def gen(rng: np.random.Generator) -> list[Case]:
      cs = []
      for i, al in enumerate(arglists):
        d = dtypes[i % len(dtypes)]
        args, kw = (al[:-1], al[-1]) if al and isinstance(al[-1], dict) else (al, {})
        mk = lambda a, d=d: a.make(rng, d) if isinstance(a, S) else a
        cs.append(Case(opts.get("fn", name), tuple(mk(a) for a in args), {k: mk(v) for k, v in kw.items()},
                       **{k: v for k, v in opts.items() if k != "fn"}, label=f"{d}-{i}"))
      return cs
    return gen
  return spec

class S:
  """A random tensor argument of `calls`: its shape, view, dtype (None: the rotating one), domain."""
  def __init__(self, *shape: int, view: str = "", dtype: str | None = None, dom: tuple = (-2, 2), grad: bool = True):
    self.shape, self.view, self.dtype, self.dom, self.grad = shape, view, dtype, dom, grad
  def make(self, rng: np.random.Generator, d: str) -> T: return t(rng, self.shape, self.dtype or d, self.dom, self.view, self.grad)

def op(f: Callable) -> Callable:
  """A python operator applied to the built arguments (library-independent)."""
  return lambda lib, *a, **k: f(*a, **k)

# *** the table ***

_BLOB = np.arange(6, dtype=np.float32).reshape(2, 3)  # memory that outlives the calls (from_blob reads it in place)
POS, UNIT, GE1 = (0.1, 3), (-0.9, 0.9), (1.1, 3)
TABLE: dict[str, Callable[[str], Spec]] = {
  # elementwise unary
  **{n: unary() for n in ("abs", "neg", "relu", "sigmoid", "tanh", "sin", "cos", "exp", "exp2", "erf", "sign", "square", "floor", "ceil", "round",
                         "trunc", "silu", "swish", "gelu", "quick_gelu", "mish", "softsign", "logsigmoid", "hardswish", "hardsigmoid", "relu6",
                         "selu", "isnan", "isinf", "isfinite", "logical_not", "atan", "asinh", "sinh", "cosh", "tan", "contiguous",
                         "contiguous_backward", "detach", "clone", "bool", "float", "half", "int", "long", "short", "double", "bfloat16")},
  **{n: unary(POS) for n in ("log", "log2", "log10", "sqrt", "rsqrt", "reciprocal")},
  **{n: unary(UNIT) for n in ("asin", "acos", "atanh")},
  "acosh": unary(GE1),
  "bitwise_not": unary(dtypes=("int8", "int16", "int32", "int64", "uint8", "bool")),
  "celu": unary(alpha=0.5), "elu": unary(alpha=0.7), "leaky_relu": unary(neg_slope=0.2), "hardtanh": unary(min_val=-0.5, max_val=0.8),
  "softplus": unary(beta=2.0), "cast": unary(dtypes=ALL, dtype=D("int16")), "bitcast": unary(dtypes=("float32", "int32", "uint8"), edge=False,
      dtype=D("uint8")),
  # elementwise binary (and the operators below)
  **{n: binary() for n in ("add", "sub", "mul", "maximum", "minimum", "eq", "ne", "copysign", "logaddexp")},
  "div": binary(dom_b=POS), "mod": binary(dom_b=POS), "fmod": binary(dom_b=POS), "pow": binary(POS, scalars=(2, 0.5, 0)),
  **{n: binary(dtypes=("bool", "int8", "int16", "int32", "int64", "uint8"), scalars=(3, True)) for n in ("bitwise_and", "bitwise_or", "bitwise_xor")},
  **{n: binary((0, 30), (0, 4), dtypes=("int8", "int16", "int32", "int64", "uint8"), scalars=(1, 3)) for n in ("lshift", "rshift")},
  "isclose": binary(), "allclose": binary(),
  "lerp": calls((S(2, 3), S(2, 3), S(2, 3)), (S(2, 3), S(3), 0.3), (S(0,), S(0,), 0.5), (S(), S(), S()), dtypes=("float32", "float16")),
  "where": calls((S(2, 3, dtype="bool"), S(2, 3), S(2, 3)), (S(2, 3, dtype="bool"), 1.5, S(3)), (S(0, dtype="bool"), 1, 2),
      (S(3, dtype="bool"), 2, 3.5), dtypes=("float32", "int32", "float16")),
  "clamp": calls((S(2, 3), -0.5, 0.5), (S(2, 3), None, 0.5), (S(0, 2), -1, 1), (S(2, 3, view="permute"), S(2, 3), S(2, 3)),
                 (S(2, 3, dtype="int8"), -1, 1)),
  "clip": calls((S(2, 3), -0.5, 0.5), (S(), 0.1, None), (S(2, 3, dtype="uint8"), 1, 3)),
  "masked_fill": calls((S(2, 3), S(2, 3, dtype="bool"), 0.0), (S(2, 3), S(3, dtype="bool"), -np.inf), (S(0, 3), S(0, 3, dtype="bool"), 2),
      dtypes=("float32", "int32")),
  # reductions
  **{n: reduce() for n in ("sum", "max", "min", "any", "all")},
  "prod": reduce(dom=(0.5, 1.5)), "mean": reduce(), "std": reduce(FLOAT), "var": reduce(FLOAT), "std_mean": reduce(FLOAT, n=2),
  "var_mean": reduce(FLOAT, n=2), "argmax": reduce(), "argmin": reduce(n=2),
  "logsumexp": reduce(FLOAT, single_axis=True),  # tinygrad's takes one axis (a tuple raises TypeError there)
  **{n: reduce(FLOAT, keepdim=False, single_axis=True, n=2) for n in ("softmax", "log_softmax", "softmin", "logcumsumexp")},
  **{n: reduce(keepdim=False, single_axis=True, n=2) for n in ("cumsum", "cummax", "cummin")},
  "cumprod": reduce(dom=(0.5, 1.5), keepdim=False, single_axis=True, n=2),
  # tinygrad's sort indexes the shape: a 0-d tensor crashes it (IndexError), no API check
  **{n: reduce(axis_kw="dim", keepdim=False, single_axis=True, n=2, zero_d=False) for n in ("sort", "argsort")},
  "normalize": reduce(FLOAT, axis_kw="dim", keepdim=False, single_axis=True, n=2),
  "topk": calls((S(2, 5), 2), (S(5), 5, {"largest": False}), (S(2, 3, view="permute"), 1, {"dim": 0}), (S(3, 0), 0), dtypes=("float32", "int32")),
  # movement
  "reshape": calls((S(2, 3), (3, 2)), (S(2, 3), -1), (S(2, 3, view="permute"), 6), (S(), (1, 1)), (S(0, 3), (3, 0)), (S(1,), ()), (S(2, 3), 4),
      (S(2, 3), (-1, -1)), dtypes=ALL),
  "view": calls((S(2, 3), (3, 2)), (S(2, 3, view="slice"), -1), dtypes=("float32", "int8")),
  "permute": calls((S(2, 3, 4), (2, 0, 1)), (S(2, 3), 1, 0), (S(), ()), (S(2, 3), (0, 0)), (S(0, 2), (1, 0)), dtypes=ALL),
  "expand": calls((S(1, 3), (2, 3)), (S(3), 2, 3), (S(), (2,)), (S(2, 1), (2, -1)), (S(2, 1), (0, 1)), (S(2, 3), (3, 3)), dtypes=ALL),
  "pad": calls((S(2, 3), ((1, 2), (0, 1))), (S(2, 3), (1, 1, 2, 0)), (S(3), ((1, 1),), {"value": 2.5}), (S(0, 2), ((1, 0), None)),
               (S(2, 3), ((-1, 1), (1, -1))), (S(2, 3), (1, 1), {"mode": "reflect"}), (S(2, 3), ((1, 1), (2, 2)), {"mode": "replicate"}),
               (S(2, 3), ((1, -1), (-1, 2)), {"mode": "reflect"}), (S(2, 3), ((2, 0),), {"mode": "circular"}), dtypes=("float32", "int32", "bool")),
  "pad_to": calls((S(2, 3), (4, 5)), (S(2, 3), 3, None), (S(2, 3), (4, 3), {"value": 1.5}), (S(2, 3), (1, 3))),
  "shrink": calls((S(4, 3), ((1, 3), None)), (S(3), ((0, 0),)), (S(2, 3, view="permute"), ((0, 1), (1, 3))), (S(2, 3), ((0, 3), None)), dtypes=ALL),
  "shrink_to": calls((S(4, 3), (2, 3)), (S(4, 3), 2, None)),
  "flip": calls((S(2, 3), 0), (S(2, 3), (0, 1)), (S(2, 3, view="slice"), -1), (S(), ()), (S(0, 2), 1), (S(2, 3), (0, 0)), dtypes=ALL),
  "transpose": calls((S(2, 3),), (S(2, 3, 4), 0, 2), (S(2, 3), -1, -2), (S(0, 3),), dtypes=ALL),
  "squeeze": calls((S(1, 3, 1),), (S(1, 3), 0), (S(2, 3), 0), (S(),), (S(), 0), (S(1,), -1), (S(0, 1), 1), dtypes=ALL),
  "unsqueeze": calls((S(2, 3), 0), (S(2, 3), -1), (S(), 0), (S(0,), 1), (S(2,), 3), dtypes=ALL),
  "flatten": calls((S(2, 3, 4),), (S(2, 3, 4), 1), (S(2, 3, 4), 0, 1), (S(),), (S(0, 3),), dtypes=ALL),
  "unflatten": calls((S(6, 2), 0, (2, 3)), (S(2, 6), -1, (3, -1)), (S(0,), 0, (0, 3))),
  "repeat": calls((S(2, 3), (2, 1)), (S(3), 2, 2), (S(), (3,)), (S(2, 3), 0, 1), dtypes=ALL),
  "repeat_interleave": calls((S(2, 3), 2), (S(2, 3), 3, 1), (S(), 2), (S(0, 2), 2, 0)),
  "roll": calls((S(5), 2), (S(2, 3), (1, -1), (0, 1)), (S(2, 3), 4, 1), (S(0, 2), 1, 0), (S(2, 3), 1, (0, 0))),
  "chunk": calls((S(5, 2), 2), (S(2, 6), 3, 1), (S(0, 2), 2)),
  "split": calls((S(5, 2), 2), (S(2, 6), (1, 5), 1), (S(4), [1, 1, 2]), (S(3), (1, 1))),
  "cat": calls((S(2, 3), S(1, 3)), (S(2, 3), S(2, 2), {"dim": 1}), (S(0, 3), S(2, 3)), (S(2, 3), S(2, 2)), (S(), S()),
      dtypes=("float32", "int8", "bool")),
  "stack": calls((S(2, 3), S(2, 3)), (S(2, 3), S(2, 3), {"dim": -1}), (S(), S()), (S(2, 3), S(3, 2)), (S(0,), S(0,)),
      dtypes=("float32", "int8", "bool")),
  "T": calls((S(2, 3),), (S(2, 3, 4),), fn=lambda lib, x: x.T),  # (tinygrad's .T of a 0-d tensor crashes: IndexError)
  "diag": calls((S(3),), (S(0,),), (S(2, 2),)), "diagonal": calls((S(3, 3),), (S(3, 4), 1), (S(2, 3, 4), 0, 1, 2), (S(3, 3), -1)),
  "tril": calls((S(3, 4),), (S(3, 4), 1), (S(2, 3, 3), -1), (S(3,),), dtypes=("float32", "int32", "bool")),
  "triu": calls((S(3, 4),), (S(3, 4), -1), (S(2, 0, 3), 0), dtypes=("float32", "int32", "bool")),
  "rearrange": calls((S(2, 3, 4), "a b c -> c (a b)"), (S(6, 2), "(a b) c -> a b c", {"a": 2}), (S(2, 3), "a b -> b a 1")),
  "unfold": calls((S(7,), 0, 3, 2), (S(2, 5), 1, 2, 1), (S(4,), 0, 5, 1), (S(4,), 0, 0, 1)),
  "meshgrid": calls((S(3), S(2)), (S(3), S(2), {"indexing": "xy"}), (S(), S()), (S(0,), S(2))),
  "gather": calls((S(3, 4), 1, L(lambda lib: lib.Tensor([[0, 3], [1, 1], [2, 0]]))), (S(3, 4), 0, L(lambda lib: lib.Tensor([[2, 0, 1, 0]]))),
      (S(3, 4), 1, L(lambda lib: lib.Tensor([[4]])))),
  "scatter": calls((S(3, 4), 1, L(lambda lib: lib.Tensor([[0, 3], [1, 2], [2, 0]])), S(3, 2)),
                   (S(3, 4), 0, L(lambda lib: lib.Tensor([[2, 0, 1, 0]])), 1.5),
                   (S(3, 4), 1, L(lambda lib: lib.Tensor([[0, 3], [1, 2], [2, 0]])), S(3, 2), {"reduce": "add"}),
                   (S(3, 4), 1, L(lambda lib: lib.Tensor([[0]])), S(1, 1), {"reduce": "bad"}), grad=False),
  "scatter_reduce": calls(*[(S(3, 4), 1, L(lambda lib: lib.Tensor([[0, 0], [1, 2], [3, 3]])), S(3, 2), r)
                            for r in ("sum", "prod", "mean", "amax", "amin")],
                          (S(3, 4), 1, L(lambda lib: lib.Tensor([[0, 0], [1, 2], [3, 3]])), S(3, 2), "sum", {"include_self": False}), grad=False),
  "masked_select": calls((S(2, 3), S(2, 3, dtype="bool")), (S(2, 3), S(3, dtype="bool")), (S(0,), S(0, dtype="bool")), grad=False),
  "nonzero": calls((S(2, 3, dtype="bool"),), (S(4, dtype="int32", dom=(0, 1)),), (S(0, dtype="bool"),), (S(5, dtype="bool"), {"size": 3})),
  "one_hot": calls((S(4, dtype="int32", dom=(0, 3)), 4), (S(2, 3, dtype="int64", dom=(0, 2)), 5), (S(dtype="int32", dom=(1, 1)), 3),
                   (S(0, dtype="int32"), 2), (S(3, dtype="int32", dom=(0, 2)), -1)),
  "__getitem__": calls(*[(S(3, 4), i) for i in (1, -1, (slice(None), 2), (slice(1, None, 2),), (None, Ellipsis, 0), (slice(None, None, -1),),
                                               (0, 0), 5, (slice(5, 7),), ((0,),), ([0, 2], slice(None)), (Ellipsis, None))],
                       (S(3, 4), L(lambda lib: lib.Tensor([2, 0, 2]))),
                       (S(3, 4), (L(lambda lib: lib.Tensor([[0], [2]])), L(lambda lib: lib.Tensor([1, 3])))),
                       (S(), ()), (S(), None), (S(0, 2), 0), (S(2, 3, view="permute"), (slice(None), 1)), dtypes=("float32", "int32"),
                       fn=lambda lib, x, i: x[i]),
  # creation (not a numpy scalar such as np.float32(2): tinygrad 0.14 raises RuntimeError where numpy and torch take it)
  "Tensor": calls(*[(v,) for v in (2.5, 3, True, [1, 2], [1.5, 2], [True, False], [[1, 2], [3, 4]], [], [[]], np.array(2.0),
      np.array([1, 2], np.int16), np.array(3, np.uint8), np.zeros((2, 0)), [1, 2.5, True], [[1, 2], [3]])], fn=lambda lib, x: lib.Tensor(x)),
  "arange": calls((5,), (2, 8, 2), (5, 0, -1), (0.5, 2.5, 0.5), (0,), (3, 1), (1, 4, {"dtype": D("int16")}), (2 ** 31, 2 ** 31 + 3), (1, 2, 0)),
  "linspace": calls((0, 1, 5), (-1, 1, 1), (2, 3, 0), (0, 10, 4, {"dtype": D("int32")}), (0, 1, 3, {"dtype": D("bool")})),
  "eye": calls((3,), (2, 4), (0,), (3, 2, {"dtype": D("int32")})),
  "full": calls(((2, 3), 1.5), ((), 2), ((0, 2), True), ((2,), 3, {"dtype": D("int8")})),
  **{n: calls(((2, 3),), ((),), ((0, 3),), (2, 3, {"dtype": D("int32")}), (4, {"dtype": D("bool")})) for n in ("ones", "zeros")},
  "empty": calls(((2, 3),), ((0,),), (3, {"dtype": D("int16")}), values=False),
  **{n: calls((S(2, 3),), (S(),), (S(0, 2), {"dtype": D("int32")}), dtypes=("float32", "int8", "bool")) for n in ("ones_like", "zeros_like")},
  "empty_like": calls((S(2, 3),), (S(0, 2), {"dtype": D("int32")}), values=False),
  "full_like": calls((S(2, 3), 2.5), (S(), 1), (S(0, 2), True), (S(2, 3), 3, {"dtype": D("int32")}), dtypes=("float32", "int8", "bool")),
  "const_like": calls((S(2, 3), 2.5), (S(), 1), (S(2, 3, dtype="int32"), 3)),
  # random: shapes and dtypes only, the generators differ
  **{n: calls(((2, 3),), ((),), ((0, 3),), (3, {"dtype": D("float16")}), values=False) for n in ("rand", "randn", "uniform", "normal")},
  **{n: calls(((2, 3),), ((3, 4, 2),), values=False) for n in ("glorot_uniform", "kaiming_uniform", "kaiming_normal", "scaled_uniform")},
  "randint": calls(((2, 3),), (4, {"low": 3, "high": 5}), (2, {"dtype": D("int64")}), values=False),
  "randperm": calls((5,), (0,), (3, {"dtype": D("int64")}), values=False),
  **{n: calls((S(2, 3),), (S(),), (S(0, 2),), dtypes=("float32", "float16"), values=False) for n in ("rand_like", "randn_like")},
  "multinomial": calls((S(4, dom=(0.1, 1)),), (S(2, 4, dom=(0.1, 1)), 3, True), (S(4, dom=(0.1, 1)), 2), values=False),
  "dropout": calls((S(3, 4),), (S(3, 4), 0.0), (S(0, 2), 0.5), values=False, train=True),
  # linear algebra and nn functional
  "dot": calls((S(3), S(3)), (S(2, 3), S(3, 4)), (S(2, 3), S(3)), (S(3), S(3, 2)), (S(2, 0), S(0, 3)), (S(2, 3), S(2, 3)),
               (S(2, 3, view="permute"), S(3, 1))),
  "matmul": calls((S(2, 3), S(3, 4)), (S(2, 2, 3), S(3, 4)), (S(3), S(3)), (S(2, 3), S(4, 3)), (S(0, 3), S(3, 2)),
                  (S(2, 3), S(3, 2), {"dtype": D("float32")}), dtypes=("float32", "float16", "int32")),
  "linear": calls((S(2, 3), S(3, 4), S(4)), (S(3), S(3, 2)), (S(2, 3), S(3))),
  "einsum": calls(("ij,jk->ik", S(2, 3), S(3, 4)), ("i,i->", S(3), S(3)), ("ij->ji", S(2, 3)), ("bij,bjk->bik", S(2, 2, 3), S(2, 3, 2)),
                  ("ij...,ij...->ij", S(2, 3, 4), S(2, 3, 4)), ("ii->i", S(3, 3)), ("ij,jk->ik", S(2, 3), S(4, 2)),
                  fn=lambda lib, f, *a, **k: lib.Tensor.einsum(f, *a, **k)),
  "conv2d": calls((S(2, 2, 5, 4), S(4, 1, 2, 2), S(4), {"groups": 2, "stride": 2, "padding": 1}), (S(1, 1, 5, 5), S(1, 1, 3, 3), {"dilation": 2}),
      (S(1, 1, 3, 3), S(1, 1, 2, 2), {"padding": (1, 0, 0, 1)}), (S(1, 3, 4, 4), S(2, 2, 3, 3))),
  "conv_transpose2d": calls((S(1, 2, 3, 3), S(2, 1, 3, 3), {"groups": 2, "output_padding": 1, "stride": 2}),
                            (S(1, 1, 3, 3), S(1, 1, 2, 2), S(1), {"dilation": 2, "padding": 1})),
  "avg_pool2d": calls((S(1, 2, 4, 4),), (S(1, 1, 5, 5), (2, 2), {"padding": 1, "count_include_pad": False}), (S(1, 1, 5, 5), (3, 3), 2,
      {"ceil_mode": True})),
  "max_pool2d": calls((S(1, 1, 5, 5), (3, 3), 2, {"padding": 1}), (S(1, 1, 5, 5), (2, 2), {"ceil_mode": True, "dilation": 2}),
                      (S(1, 1, 4, 4), (2, 2), {"return_indices": True})),
  "max_unpool2d": calls((S(1, 1, 4, 4),), fn=lambda lib, x: (lambda v, i: v.max_unpool2d(i))(*x.max_pool2d(return_indices=True))),
  "interpolate": calls((S(1, 1, 3, 3), (5, 4)), (S(1, 1, 4), (7,), {"mode": "nearest"}), (S(1, 2, 3, 3), (6, 6), {"mode": "nearest-exact"}),
      (S(1, 1, 3, 3), (5, 5), {"align_corners": True}), (S(1, 1, 3, 3, dtype="uint8", dom=(0, 200)), (5, 5))),
  "batchnorm": calls((S(2, 3, 4), S(3), S(3), S(3), S(3, dom=POS)), (S(2, 3), None, None, S(3), S(3, dom=POS)),
      (S(2, 3, 4), S(4), S(4), S(4), S(4, dom=POS), {"axis": -1})),
  "layernorm": calls((S(2, 3),), (S(2, 3, 4), (1, 2)), (S(2, 3), -1, 0.1), (S(2, 1),)),
  "scaled_dot_product_attention": calls((S(1, 2, 3, 4), S(1, 2, 3, 4), S(1, 2, 3, 4)), (S(2, 3, 4), S(2, 5, 4), S(2, 5, 2), {"is_causal": True}),
      (S(2, 3, 4), S(2, 3, 4), S(2, 3, 4), S(3, 3, dtype="bool")), (S(2, 3, 4), S(2, 3, 4), S(2, 3, 4), S(3, 3), {"is_causal": True})),
  "binary_crossentropy": calls((S(4, dom=(0.05, 0.95)), S(4, dom=(0, 1))), (S(2, 3, dom=(0.05, 0.95)), S(2, 3, dom=(0, 1)), "sum"),
                               (S(2, 3, dom=(0.05, 0.95)), S(2, 3, dom=(0, 1)), "none")),
  "binary_crossentropy_logits": calls((S(4), S(4, dom=(0, 1))), (S(2, 3), S(2, 3, dom=(0, 1)), "sum", S(3, dom=POS)),
                                      (S(2, 3), S(2, 3, dom=(0, 1)), "none")),
  "cross_entropy": calls((S(3, 5), L(lambda lib: lib.Tensor([1, 0, 4]))), (S(3, 5), S(3, 5, dom=(0, 1)), "sum"), (S(3, 5),
      L(lambda lib: lib.Tensor([1, 0, 4])), "none", 0.1),
                         (S(3, 5), L(lambda lib: lib.Tensor([1, 0]))), (S(2, 4, 3), L(lambda lib: lib.Tensor([[1, 0, 3], [2, 2, 0]])))),
  "nll_loss": calls((S(3, 5), L(lambda lib: lib.Tensor([1, 0, 4]))), (S(3, 5), L(lambda lib: lib.Tensor([1, 0, 4])), S(5, dom=POS)),
                    (S(3, 5), L(lambda lib: lib.Tensor([1, 0, 4])), None, 0, "sum"), (S(3, 5), L(lambda lib: lib.Tensor([1, 0, 4])), None, None,
                        "none")),
  "sparse_categorical_crossentropy": calls((S(3, 5), L(lambda lib: lib.Tensor([1, 0, 4]))),
      (S(3, 5), L(lambda lib: lib.Tensor([1, -1, 4])), -1, 0.1), (S(3, 5), L(lambda lib: lib.Tensor([1, 0, 4])), -1, 0.0, "sum")),
  "sequential": calls((S(2, 3), L(lambda lib: [lib.Tensor.relu, lambda x: x * 2])),),
  # queries and exports of one tensor
  **{n: calls((S(2, 3),), (S(),), (S(0, 2),), (S(2, 3, view="permute"),), dtypes=("float32", "int8", "bool", "float16"), grad=False)
     for n in ("numel", "element_size", "nbytes", "is_floating_point", "tolist", "numpy")},
  "data": calls((S(2, 3),), (S(),), (S(0, 2),), dtypes=("float32", "int8", "bool"), grad=False),  # (tinygrad's memoryview has no float16)
  "item": calls((S(),), (S(1,),), (S(1, 1),), (S(2,),), dtypes=("float32", "int8", "bool", "float16", "uint8", "int64"), grad=False),
  "size": calls((S(2, 3),), (S(2, 3), 1), (S(2, 3), -1), (S(),), (S(2, 3), 2)),
  **{n: calls((S(2, 3),), fn=lambda lib, x, n=n: getattr(x, n)) for n in ("shape", "ndim", "dtype", "max_shape")},
  "max_numel": calls((S(2, 3),), (S(),)),
  "qr": calls((S(3, 2),)), "svd": calls((S(2, 2),)),  # tinygrad's take seconds a call
  "newton_schulz": calls((S(3, 3), 3, (3.4445, -4.775, 2.0315)), (S(2, 3), 5, (3.4445, -4.775, 2.0315))),
  "from_blob": calls((_BLOB,), fn=lambda lib, a: lib.Tensor.from_blob(a.ctypes.data, a.shape, dtype=lib.dtypes.float32).contiguous()),
  # multi-device: two copies of the default device
  **{n: calls((S(4, 3), L(lambda lib: tuple(f"{lib.Tensor([0]).device.split(':')[0]}:{i}" for i in range(2))), 0), fn=n, grad=False)
     for n in ("shard", "shard_")},
  "shard_like": calls((S(4, 3), L(lambda lib: lib.Tensor.ones(4, 3).shard(tuple(f"{lib.Tensor([0]).device.split(':')[0]}:{i}" for i in range(2)),
      0))), grad=False),
  # in place
  "assign": calls((S(2, 3), S(2, 3)), (S(2, 3), 1.5), (S(2, 3), S(3)), (S(2, 3), S(2, 3, dtype="int32")), (S(), [2.0]),
                  fn=lambda lib, x, v: (lambda b: (b.assign(v), b)[1])(x.contiguous().realize())),
  "__setitem__": calls((S(3, 4), 1, 2.5), (S(3, 4), (slice(None), 0), S(3)), (S(3, 4), L(lambda lib: lib.Tensor([0, 2])), 0.0), (S(3, 4), 5, 1.0),
      fn=lambda lib, x, i, v: (lambda b: (b.__setitem__(i, v), b)[1])(x.contiguous().realize()), grad=False),
}

# the operators: tensor (op) tensor-or-scalar over the binary family, a python scalar on the left (__r*__), in place (__i*__)
_INTK = dict(dtypes=("int8", "int16", "int32", "int64", "uint8", "bool"), dom=(0, 5), scalars=(1, 3))
_BINOPS = {"add": {}, "sub": {}, "mul": {}, "truediv": dict(dom_b=POS), "floordiv": dict(dom_b=POS), "mod": dict(dom_b=POS),
           "pow": dict(dom=POS, scalars=(2, 0.5, 0)), "and": _INTK, "or": _INTK, "xor": _INTK, "lshift": _INTK, "rshift": _INTK}

def rscalar(f: Callable, kw: dict) -> Callable[[str], Spec]:
  """`scalar (op) tensor`: each scalar against a float tensor and a tensor of another of the op's dtypes."""
  def spec(name: str) -> Spec:
    dts = kw.get("dtypes", ALL)
    def gen(rng: np.random.Generator) -> list[Case]:
      main = "float32" if "float32" in dts else dts[-1]
      return [Case(lambda lib, x, s: f(s, x), (t(rng, sh, d, kw.get("dom", POS)), s), label=f"{s!r}-{d}{sh}")
              for s, (sh, d) in [(_one(rng, list(kw.get("scalars", (2, 2.5, True)))), _one(rng, [((2, 3), main), ((), pick(rng, dts, 1)[0])]))]]
    return gen
  return spec

OPERATORS: dict[str, Callable[[str], Spec]] = {}
for _n, _kw in _BINOPS.items():
  _f = getattr(operator, _n + "_" if _n in ("and", "or") else _n)
  OPERATORS |= {f"__{_n}__": binary(fn=op(_f), light=True, **_kw), f"__r{_n}__": rscalar(_f, _kw),
                f"__i{_n}__": binary(fn=op(getattr(operator, f"i{_n}")), inplace=True, light=True, **_kw)}
del OPERATORS["__imod__"]  # tinygrad defines no in-place mod
OPERATORS |= {f"__{n}__": binary(fn=op(getattr(operator, n)), light=True) for n in ("eq", "ne", "lt", "le", "gt", "ge")}
OPERATORS |= {"__matmul__": calls((S(2, 3), S(3, 4)), (S(3), S(3)), (S(2, 3), S(2, 3)), fn=op(operator.matmul)),
              "__rmatmul__": calls((S(2, 3), S(1, 2)), (S(3), S(3)), fn=lambda lib, x, y: x.__rmatmul__(y)),
              "__imatmul__": calls((S(3, 3), S(3, 3)), fn=op(operator.imatmul)),
              "__neg__": unary(fn=op(operator.neg)), "__invert__": unary(dtypes=("bool", "int8", "int32", "uint8"), fn=op(operator.invert)),
              "__bool__": calls((S(),), (S(1,),), (S(2,),), fn=op(bool), dtypes=("float32", "bool")),
              "__len__": calls((S(2, 3),), (S(),), fn=op(len))}

# Tensor functions that compute nothing to compare against tinygrad, with the reason (the others must have a spec)
NOT_COMPUTED = {
  "backward": "checked in every case with gradients", "gradient": "checked in every case with gradients",
  "realize": "called by every comparison", "to": "one device per library here", "to_": "one device per library here",
  "device": "device names differ by design (CPU vs CLANG)", "manual_seed": "the generators differ; random ops compare shapes",
  "replace": "rebinding a tensor, no computation", "requires_grad_": "tinycore's superset, tested on its own",
  "is_param_": "marks optimizer parameters (autograd issue item), no values",
  "grad": "an attribute, compared after backward()", "is_param": "an attribute", "uop": "the graph node, internal to each library",
  "__init__": "Tensor(...) has a spec of its own", "__repr__": "text", "__hash__": "identity", "__del__": "lifetime",
  "__iter__": "via __getitem__", "__delitem__": "not supported by tinygrad either",
}
SPECS: dict[str, Callable[[str], Spec]] = {**TABLE, **OPERATORS}

# *** nn layers with the same weights, optimizers over a few steps from the same weights, state dict round trips ***

def _set(obj: Any, key: str, value: Any) -> None:
  *owner, last = key.split(".")
  for k in owner: obj = obj[int(k)] if k.isdigit() else getattr(obj, k)
  setattr(obj, last, value)

def layer(cls: str, ctor: tuple, *xs: S, kw: dict | None = None, train: bool = False, call: Callable | None = None) -> Callable[[str], Spec]:
  """nn.<cls>(*ctor, **kw) with every state-dict entry replaced by the same random tensor in both libraries (so the
  gradients reach them), called on xs; returns the output and, in training, the state after the call."""
  import tinygrad.nn as tnn
  names = {k: (tuple(v.shape), v.dtype) for k, v in tnn.state.get_state_dict(getattr(tnn, cls)(*ctor, **(kw or {}))).items()}
  def fn(lib: Any, state: dict, *x: Any) -> Any:
    m = getattr(lib.nn, cls)(*ctor, **(kw or {}))
    for k, v in state.items(): _set(m, k, v)
    out = call(m, *x) if call else m(*x)
    return (out, lib.nn.state.get_state_dict(m)) if train else out
  def spec(name: str) -> Spec:
    def gen(rng: np.random.Generator) -> list[Case]:
      state = {k: t(rng, s, "float32", POS if "var" in k else (-1, 1)) if dt.name != "long" else T(np.array(rng.integers(0, 5), np.int64))
               for k, (s, dt) in names.items()}
      return [Case(fn, (state, *[x.make(rng, "float32") for x in xs]), train=train, label=cls)]
    return gen
  return spec

def optimizer(cls: str, steps: int = 3, **kw: Any) -> Callable[[str], Spec]:
  """A two-layer MLP trained for a few steps from the same weights; the weights after the steps are compared."""
  def fn(lib: Any, w1: Any, w2: Any, x: Any) -> Any:
    opt = getattr(lib.nn.optim, cls)([w1, w2], **kw)
    for _ in range(steps):
      opt.zero_grad()
      (x @ w1).relu().matmul(w2).square().mean().backward()
      opt.step()
    return [w1, w2]
  def spec(name: str) -> Spec:
    def gen(rng: np.random.Generator) -> list[Case]:
      return [Case(fn, (t(rng, (3, 4)), t(rng, (4, 2)), t(rng, (5, 3), grad=False)), grad=False, train=True, label=cls)]
    return gen
  return spec

def _roundtrip(lib: Any, tensors: dict) -> Any:
  """safe_save then safe_load, then load_state_dict into a model of the same shapes."""
  with tempfile.TemporaryDirectory() as d:
    lib.nn.state.safe_save(tensors, os.path.join(d, "m.safetensors"))
    back = lib.nn.state.safe_load(os.path.join(d, "m.safetensors"))
    m = lib.nn.Linear(3, 2)
    lib.nn.state.load_state_dict(m, {"weight": back["weight"], "bias": back["bias"]})
    return {**{k: v.to(lib.Tensor([0]).device) for k, v in back.items()}, "model": lib.nn.state.get_state_dict(m)}

def _bn_load(lib: Any, state: dict) -> Any:
  m = lib.nn.BatchNorm(2)
  lib.nn.state.load_state_dict(m, state)
  return lib.nn.state.get_state_dict(m)

MODULES: dict[str, Callable[[str], Spec]] = {
  "nn.Linear": layer("Linear", (3, 4), S(2, 3)), "nn.Linear(bias=False)": layer("Linear", (3, 4), S(3), kw={"bias": False}),
  "nn.Conv2d": layer("Conv2d", (2, 3, 3), S(1, 2, 5, 5)),
  "nn.Conv2d(groups)": layer("Conv2d", (2, 4, (2, 3)), S(1, 2, 5, 6), kw={"stride": 2, "padding": 1, "groups": 2}),
  "nn.Conv1d": layer("Conv1d", (2, 3, 3), S(1, 2, 6)), "nn.ConvTranspose2d": layer("ConvTranspose2d", (2, 3, 3), S(1, 2, 3, 3), kw={"stride": 2}),
  "nn.ConvTranspose1d": layer("ConvTranspose1d", (2, 2, 3), S(1, 2, 4)),
  "nn.BatchNorm": layer("BatchNorm", (3,), S(4, 3)), "nn.BatchNorm(train)": layer("BatchNorm", (3,), S(4, 3), train=True),
  "nn.BatchNorm2d(train)": layer("BatchNorm2d", (3,), S(2, 3, 2, 2), train=True),
  "nn.BatchNorm3d": layer("BatchNorm3d", (2,), S(1, 2, 2, 2, 2), kw={"affine": False}),
  "nn.LayerNorm": layer("LayerNorm", (3,), S(2, 3)), "nn.LayerNorm(shape)": layer("LayerNorm", ((2, 3),), S(4, 2, 3),
      kw={"elementwise_affine": False}),
  "nn.LayerNorm2d": layer("LayerNorm2d", (3,), S(1, 3, 2, 2)), "nn.GroupNorm": layer("GroupNorm", (2, 4), S(2, 4, 3)),
  "nn.InstanceNorm": layer("InstanceNorm", (3,), S(2, 3, 4)), "nn.RMSNorm": layer("RMSNorm", (4,), S(2, 4)),
  "nn.Embedding": layer("Embedding", (5, 3), S(2, 3, dtype="int32", dom=(0, 4))),
  "nn.LSTMCell": layer("LSTMCell", (3, 4), S(2, 3)),
  **{f"nn.optim.{o}": optimizer(o, lr=0.1) for o in ("SGD", "Adam", "AdamW", "LAMB", "LARS", "Muon")},
  "nn.optim.SGD(momentum)": optimizer("SGD", lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
  "nn.optim.AdamW(decay)": optimizer("AdamW", lr=0.05, weight_decay=0.1, b1=0.8),
  "nn.optim.LAMB(adam)": optimizer("LAMB", lr=0.05, adam=True),
  "nn.state": calls(({"weight": S(2, 3), "bias": S(2), "i8": S(3, dtype="int8"), "h": S(2, dtype="float16"), "z": S(), "e": S(0, 2)},),
                    fn=_roundtrip, grad=False),
  "nn.state(0-d vs (1,))": calls(({"weight": S(2), "bias": S(2), "running_mean": S(2), "running_var": S(2, dom=POS),
                                   "num_batches_tracked": L(lambda lib: lib.Tensor([3]))},), fn=_bn_load, grad=False),
}
SPECS |= MODULES

# Cases where tinycore deliberately does not do what tinygrad 0.14 does, by case id (name-index-label, as the test id
# without the device), with the reason. test_differential requires these to still differ, so a stale entry fails.
DIFFERS: dict[str, str] = {
  "mod-4-int32-int64": "integer x % 0: undefined in C, tinygrad returns whatever its backend gives (-1); tinycore gives 0 on every backend "
                       "(torch raises ZeroDivisionError)",
  "fmod-4-int8-uint8": "integer fmod(x, 0): as mod above, tinycore gives 0 on every backend",
  "argmax-4-(0,3)-0": "argmax over an empty dim has no answer: tinycore raises as torch does, tinygrad returns a made-up index",
  "diag-2-float32-2": "diag of a 2-D tensor gives its diagonal in tinycore, as torch.diag; tinygrad 0.14 only takes 1-D",
  "one_hot-4-float32-4": "one_hot(-1) takes the largest value + 1 as the class count, as torch and tinygrad after 0.14; tinygrad 0.14 refuses -1 "
                       "(ValueError)",
  "gather-2-float32-2": "an out-of-range gather index raises IndexError in tinycore (as torch); tinygrad silently reads 0",
  "interpolate-4-float32-4": "linear interpolation of uint8: tinygrad 0.14 wraps around in uint8 intermediates (9 where the neighbours are "
                             "175 and 56); tinycore computes as torch's fixed-point uint8 kernel",
  "batchnorm-2-float32-2": "batchnorm with weight=None and bias=None: tinygrad 0.14 crashes reshaping None's stand-in; tinycore normalizes "
                           "without affine, as torch's batch_norm",
  "sparse_categorical_crossentropy-1-float32-1": "ignore_index with label_smoothing: tinycore averages the smoothing term over the kept "
                                                 "rows, as torch's cross_entropy (1.8916 on this case); tinygrad 0.14 over all rows (1.3463)",
}
