"""The compatibility suite's machinery: tinygrad 0.14 (the reference) and tinycore side by side, the same inputs built in
both, and ONE comparison of what a call gives: shape, dtype, values, `gradient()`, `backward()` and `.grad`, or the
exception class for bad input.

Rules the comparison enforces (the suite's contract; a change here changes what "compatible" means):
- the reference runs on tinygrad's CPU device (clang); tinycore runs on the device under test (CLANG, PYTHON).
- tinycore tensors are made without requires_grad, as tinygrad 0.14 code makes them (its Tensor takes no such flag):
  tinycore's default must be differentiable like 0.14's. COMPAT_REQUIRES_GRAD=1 makes them with requires_grad=True
  instead; a diagnostic only, to see gradient values that the default would hide, never how CI runs.
- gradients: of sum(out * w) for a fixed random w, over every float tensor output, with respect to every float tensor
  input; `gradient()` first, then `backward()` on the same graph, then each input's `.grad`, in both libraries (tinygrad's
  backward() is not its gradient() written into .grad: an input outside the graph keeps .grad None there).
- values: ints and bools exactly; floats within the dtype's tolerance (times the case's factor), NaN where NaN, inf
  where inf. dtypes are compared by their `dtypes.<name>`, not their C spelling (tinygrad's weak dtypes as the defaults).
- edge values (inf, nan, -0.0, huge): where tinycore differs from tinygrad but agrees with torch, it passes.
- exceptions: tinycore must raise where tinygrad raises, an instance of tinygrad's class (a subclass is fine). Where
  tinygrad raises AssertionError or ZeroDivisionError (an internal check or a crash, not an API promise), any
  Exception is accepted. Inputs where tinygrad crashes on what torch accepts are left out of the specs."""
from __future__ import annotations
import builtins, contextlib, dataclasses, os, zlib
from typing import Any, Callable
import numpy as np
import tinygrad, tinycore
from tinygrad.helpers import DEV as _TG_DEV

_TG_DEV.value = "CPU"  # tinygrad would pick OpenCL or a GPU when it finds one; the reference is its CPU device
FORCE_REQUIRES_GRAD = bool(int(os.getenv("COMPAT_REQUIRES_GRAD", "0")))

@dataclasses.dataclass(frozen=True)
class Lib:
  """One library under comparison: its module and a way to run code on a chosen device."""
  name: str
  mod: Any
  @property
  def Tensor(self) -> Any: return self.mod.Tensor
  @property
  def dtypes(self) -> Any: return self.mod.dtypes
  @property
  def nn(self) -> Any: return self.mod.nn
  def tensor(self, data: Any, **kw: Any) -> Any:
    """A tensor of an input: tinycore's made with requires_grad=True only in the diagnostic mode."""
    if self.name == "tinycore" and FORCE_REQUIRES_GRAD and np.asarray(data).dtype.kind == "f": kw["requires_grad"] = True
    return self.mod.Tensor(data, **kw)

TG, TC = Lib("tinygrad", tinygrad), Lib("tinycore", tinycore)
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "bfloat16", "float32", "float64")

def dtype_name(lib: Lib, dt: Any) -> str:
  """The `dtypes.<name>` of a DType (tinygrad spells int8 'signed char', tinycore 'char': the attribute is common).
  tinygrad 0.14 reports its weak dtypes (of python constants) on some results: they realize as the default float or
  int, and are named so."""
  for weak, default in (("weakfloat", "default_float"), ("weakint", "default_int")):
    if getattr(lib.dtypes, weak, None) is not None and dt == getattr(lib.dtypes, weak): dt = getattr(lib.dtypes, default)
  return next((n for n in DTYPES if getattr(lib.dtypes, n, None) == dt), repr(dt))

@contextlib.contextmanager
def on_device(dev: str):
  """tinycore's default device set to dev for the duration."""
  old = tinycore.Device.DEFAULT
  tinycore.Device.DEFAULT = dev
  try: yield
  finally: tinycore.Device.DEFAULT = old

# *** inputs: markers resolved per library ***

@dataclasses.dataclass(eq=False)
class T:
  """A tensor input made from the same numpy data in both libraries, then viewed: "permute" (data stored transposed),
  "slice" (every other element of the last dim), "expand" (a size-1 first dim broadcast). The data has the stored
  shape; `.target` is the shape the op sees. Float inputs are differentiated (grad=False opts out)."""
  data: np.ndarray
  view: str = ""
  target: tuple = ()
  grad: bool = True
  def build(self, lib: Lib, inputs: list) -> Any:
    t = lib.tensor(self.data)
    if self.grad and self.data.dtype.kind == "f": inputs.append(t)
    if self.view == "permute": return t.permute(*reversed(range(t.ndim)))
    if self.view == "slice": return t[..., ::2]
    if self.view == "expand": return t.expand(*self.target)
    return t

@dataclasses.dataclass(frozen=True)
class D:
  """A dtype argument, `dtypes.<name>` of each library."""
  name: str
  def build(self, lib: Lib, inputs: list) -> Any: return getattr(lib.dtypes, self.name)

@dataclasses.dataclass(frozen=True)
class L:
  """Any library-dependent argument: fn(lib)."""
  fn: Callable[[Lib], Any]
  def build(self, lib: Lib, inputs: list) -> Any: return self.fn(lib)

def build(x: Any, lib: Lib, inputs: list) -> Any:
  if isinstance(x, (T, D, L)): return x.build(lib, inputs)
  if isinstance(x, tuple): return tuple(build(v, lib, inputs) for v in x)
  if isinstance(x, list): return [build(v, lib, inputs) for v in x]
  if isinstance(x, dict): return {k: build(v, lib, inputs) for k, v in x.items()}
  return x

@dataclasses.dataclass(eq=False)
class Case:
  """One call: `Tensor.<fn>(*args, **kwargs)` for a name, or fn(lib, *args, **kwargs) for anything else (operators,
  layers, optimizers). values=False compares shape and dtype only (random or uninitialised data); tol scales the
  dtype's tolerance; train runs it under Context(TRAINING=1). torch: for edge values (inf, nan, -0.0), where tinygrad's
  own answer is off, the same op in torch as a second opinion (see `differences`)."""
  fn: str | Callable
  args: tuple = ()
  kwargs: dict = dataclasses.field(default_factory=dict)
  grad: bool = True
  values: bool = True
  tol: float = 1.0
  train: bool = False
  label: str = ""
  torch: Callable | None = None

  def call(self, lib: Lib, inputs: list) -> Any:
    args, kwargs = build(self.args, lib, inputs), build(self.kwargs, lib, inputs)
    fn = getattr(lib.Tensor, self.fn) if isinstance(self.fn, str) else (lambda *a, **k: self.fn(lib, *a, **k))
    with (lib.mod.Context(TRAINING=1) if self.train else contextlib.nullcontext()): return fn(*args, **kwargs)

# *** outcomes ***

@dataclasses.dataclass(frozen=True)
class Raised:
  exc: BaseException
  def __repr__(self) -> str: return f"{type(self.exc).__name__}({str(self.exc)[:120]!r})"

@dataclasses.dataclass(frozen=True)
class Either:
  """A reference outcome with more than one right answer: tinycore's must equal one of them."""
  options: tuple

@dataclasses.dataclass(frozen=True)
class Arr:
  """A tensor's observable result."""
  shape: tuple
  dtype: str
  value: np.ndarray | None

def observe(lib: Lib, x: Any, values: bool = True) -> Any:
  """What a result looks like from outside: tensors become Arr (realized), containers recurse, dtypes become names."""
  if isinstance(x, lib.Tensor):
    return Arr(tuple(x.shape), dtype_name(lib, x.dtype), (x.float() if dtype_name(lib, x.dtype) == "bfloat16" else x).numpy() if values else None)
  if isinstance(x, (tuple, list)): return type(x)(observe(lib, v, values) for v in x)
  if isinstance(x, dict): return {k: observe(lib, v, values) for k, v in sorted(x.items())}
  if isinstance(x, type(lib.dtypes.float32)): return f"dtypes.{dtype_name(lib, x)}"
  if isinstance(x, np.generic): return x.item()
  if isinstance(x, (bool, int, float, str, type(None), memoryview)): return x.tolist() if isinstance(x, memoryview) else x
  return f"<{type(x).__name__}>"

def _tensors(lib: Lib, x: Any) -> list:
  if isinstance(x, lib.Tensor): return [x]
  if isinstance(x, (tuple, list)): return [t for v in x for t in _tensors(lib, v)]
  if isinstance(x, dict): return [t for v in x.values() for t in _tensors(lib, v)]
  return []

def run(lib: Lib, case: Case) -> dict[str, Any]:
  """Run a case in one library: {"out": ..., and with gradients "gradient": [...], "grad": [...]}; exceptions are
  recorded as Raised, never propagated. The gradient graph, gradient() and backward() are all built before anything
  is realized: in tinygrad 0.14 a realized tensor no longer leads back to its inputs (their gradient becomes zeros,
  their .grad None)."""
  inputs: list = []
  try: out = case.call(lib, inputs)
  except Exception as e: return {"out": Raised(e)}
  outs = [t for t in _tensors(lib, out) if dtype_name(lib, t.dtype).startswith("float")]
  grads: Any = None
  grad_attrs: Any = None
  if case.grad and case.values and inputs and outs:
    try:
      rng = np.random.default_rng(7)
      loss = sum(((o * lib.Tensor(rng.standard_normal(o.shape).astype(np.float32)).cast(o.dtype)).sum() for o in outs[1:]),
                 (outs[0] * lib.Tensor(rng.standard_normal(outs[0].shape).astype(np.float32)).cast(outs[0].dtype)).sum())
      grads = loss.gradient(*inputs)
    except Exception as e: grads = Raised(e)
    if not isinstance(grads, Raised):
      try:
        loss.backward()
        grad_attrs = [t.grad for t in inputs]
      except Exception as e: grad_attrs = Raised(e)
  try: res: dict[str, Any] = {"out": observe(lib, out, case.values)}
  except Exception as e: return {"out": Raised(e)}
  if grads is None: return res
  try: res["gradient"] = grads if isinstance(grads, Raised) else [g.numpy() for g in grads]
  except Exception as e: res["gradient"] = Raised(e)
  if isinstance(res["gradient"], Raised): return res
  # tinygrad 0.14 makes a 0-d tensor of a number a constant without a device, and backward() skips those (.grad None);
  # tinycore gives it its gradient, as torch does: the reference for such an input is its gradient(), or None where
  # that is zeros (tinygrad cannot tell us whether the input is in the graph: zeros if it is, None if not)
  try: res["grad"] = grad_attrs if isinstance(grad_attrs, Raised) else \
    [(Either((g, None)) if not np.any(g) else g) if ga is None and lib is TG and t.device is None else None if ga is None else ga.numpy()
     for t, g, ga in zip(inputs, res["gradient"], grad_attrs)]
  except Exception as e: res["grad"] = Raised(e)
  return res

TOL = {"float16": (1e-3, 1e-2), "bfloat16": (1e-2, 5e-2), "float32": (1e-5, 1e-4), "float64": (1e-10, 1e-8)}

def _exc_ok(ref: BaseException, got: BaseException) -> bool:
  if isinstance(ref, (AssertionError, ZeroDivisionError)): return True
  base = next(c for c in type(ref).__mro__ if c.__module__ == "builtins")
  return isinstance(got, base) and getattr(builtins, base.__name__, None) is base

def compare(ref: Any, got: Any, where: str, tol: float, dtype: str = "float32") -> list[str]:
  """The differences between tinygrad's outcome (ref) and tinycore's (got), one line each; [] when they agree."""
  if isinstance(ref, Either):
    return next(([] for r in ref.options if not compare(r, got, where, tol, dtype)), compare(ref.options[0], got, where, tol, dtype))
  if isinstance(ref, Raised) or isinstance(got, Raised):
    if isinstance(ref, Raised) and isinstance(got, Raised):
      return [] if _exc_ok(ref.exc, got.exc) else [f"{where}: exception class: tinygrad {ref!r}, tinycore {got!r}"]
    if isinstance(ref, Raised): return [f"{where}: tinygrad raises {ref!r}, tinycore does not"]
    return [f"{where}: tinycore raises {got!r}"]
  if isinstance(ref, Arr):
    if not isinstance(got, Arr): return [f"{where}: tinygrad gives a Tensor, tinycore {type(got).__name__} {got!r:.80}"]
    if ref.shape != got.shape: return [f"{where}: shape: tinygrad {ref.shape}, tinycore {got.shape}"]
    if ref.dtype != got.dtype: return [f"{where}: dtype: tinygrad {ref.dtype}, tinycore {got.dtype}"]
    return compare(ref.value, got.value, where, tol, ref.dtype)
  if isinstance(ref, np.ndarray) or isinstance(got, np.ndarray):
    if not isinstance(ref, np.ndarray) or not isinstance(got, np.ndarray): return [f"{where}: tinygrad {ref!r:.80}, tinycore {got!r:.80}"]
    if ref.shape != got.shape: return [f"{where}: shape: tinygrad {ref.shape}, tinycore {got.shape}"]
    if ref.dtype.kind in "biu" and got.dtype.kind in "biu":
      if np.array_equal(ref, got): return []
      return [f"{where}: values: tinygrad {ref.ravel()[:8].tolist()}, tinycore {got.ravel()[:8].tolist()}"]
    atol, rtol = TOL.get(dtype if dtype == "bfloat16" else str(ref.dtype), TOL["float32"])
    try: np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), atol=atol * tol, rtol=rtol * tol, equal_nan=True)
    except AssertionError:
      bad = ~np.isclose(got.astype(np.float64), ref.astype(np.float64), atol=atol * tol, rtol=rtol * tol, equal_nan=True)
      return [f"{where}: values differ at {int(bad.sum())} of {ref.size}: tinygrad {ref[bad][:4].tolist()}, tinycore {got[bad][:4].tolist()}"]
    return []
  if isinstance(ref, (tuple, list)):
    if not isinstance(got, (tuple, list)) or len(ref) != len(got):
      return [f"{where}: tinygrad {type(ref).__name__} of {len(ref)}, tinycore {type(got).__name__} {got!r:.80}"]
    return [p for i, (r, g) in enumerate(zip(ref, got)) for p in compare(r, g, f"{where}[{i}]", tol, dtype)]
  if isinstance(ref, dict):
    if not isinstance(got, dict) or ref.keys() != got.keys(): return [f"{where}: keys: tinygrad {sorted(ref)}, tinycore {got!r:.80}"]
    return [p for k in ref for p in compare(ref[k], got[k], f"{where}[{k!r}]", tol, dtype)]
  if isinstance(ref, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
    atol, rtol = TOL["float32"]
    return [] if np.isclose(got, ref, atol=atol * tol, rtol=rtol * tol, equal_nan=True) else [f"{where}: tinygrad {ref!r}, tinycore {got!r}"]
  if type(ref) is not type(got) or ref != got:
    return [f"{where}: tinygrad {type(ref).__name__} {ref!r:.80}, tinycore {type(got).__name__} {got!r:.80}"]
  return []

def differences(ref: dict, got: dict, tol: float, torch_out: np.ndarray | None = None) -> list[str]:
  """All differences of two run() outcomes: the result first, then gradients where tinygrad computed them. With
  torch_out (edge-value cases), a result that differs from tinygrad's but equals torch's is accepted: at inf and nan
  tinygrad 0.14 itself is sometimes off (atan(inf) is nan there), and the suite must not ask tinycore to copy that."""
  probs = compare(ref["out"], got["out"], "result", tol)
  if probs and torch_out is not None and isinstance(got["out"], Arr) and isinstance(ref["out"], Arr) and got["out"].dtype == ref["out"].dtype:
    if not compare(Arr(got["out"].shape, got["out"].dtype, torch_out.astype(got["out"].value.dtype)), got["out"], "result", tol): probs = []
  for k in ("gradient", "grad"):
    if k not in ref or (k not in got and isinstance(got.get("gradient"), Raised)): continue  # (tinycore's gradient() failure is reported once)
    probs += compare(ref[k], got.get(k, Raised(RuntimeError(f"no {k}: tinycore stopped before it"))), k + "()" * (k == "gradient"), tol * 10)
  return probs

def seed_of(name: str) -> int: return zlib.crc32(name.encode())
