"""Shape arithmetic on the host: the small integer tensors that exporters compute shapes with stay Python values.

Exported models compute the shapes they reshape to from Shape: Shape -> Gather -> Unsqueeze -> Concat -> Reshape, per
layer. As device ops each of those is a kernel of a few elements whose result the host reads back at once (Reshape
needs ints): a kernel launch and a sync for every step, and a TinyJit capture replays them on every call. Instead a
*host value* is a 0-d or 1-d integer Tensor of at most HOST_MAX elements whose Python value is known: Shape and Size
outputs, small integer initializers and constants, and the outputs of the ops below when every input is a host value.
Those ops compute the Python value and return it as a Tensor made from it (a copy from the host, no kernel); `ints`
reads a host value without touching the device (the registry of host values is in tensors.py). The ops: Gather,
Unsqueeze and Squeeze (0-d <-> 1-d), Concat, Slice, Cast, Identity, Add, Sub, Mul, Div, Max, Min, Equal (on same-length
or scalar operands), Sqrt. A float32/float64 scalar is a host value too (float initializers, and the ops above on
host values): exporters compute attention's scale as 1 / sqrt(float(head size)) from Shape on every call, four
one-element kernels per layer otherwise. Each float step is rounded to the dtype, as the device would hold it (IEEE
division and sqrt are correctly rounded either way). Anything else runs as Tensor ops, as always."""
from __future__ import annotations
import math, operator
from typing import Any, Callable
from tinycore.tensor import Tensor
from tinycore.dtype import DType, dtypes, to_np_dtype
from tinycore.nn.onnx.tensors import DTYPES, HOST_FLOATS, HOST_MAX, host_value, host_tensor

def _elementwise(fn: Callable[[int, int], Any]) -> Callable[..., Any]:
  def run(a: Any, b: Any, **_: Any) -> Any:
    if isinstance(a, list) and isinstance(b, list):
      if len(a) != len(b): return None
      return [fn(x, y) for x, y in zip(a, b)]
    if isinstance(a, list): return [fn(x, b) for x in a]
    if isinstance(b, list): return [fn(a, y) for y in b]
    return fn(a, b)
  return run

def _gather(data: Any, idx: Any, axis: int = 0, **_: Any) -> Any:
  if not isinstance(data, list) or axis not in (0, -1): return None
  return [data[i] for i in idx] if isinstance(idx, list) else data[idx]

def _unsqueeze(x: Any, axes: Any = None, **_: Any) -> Any: return [x] if not isinstance(x, list) and (axes in (None, 0, [0], [-1])) else None
def _squeeze(x: Any, axes: Any = None, **_: Any) -> Any: return x[0] if isinstance(x, list) and len(x) == 1 else None
def _concat(*xs: Any, axis: int = 0, **_: Any) -> Any: return sum(xs, []) if all(isinstance(x, list) for x in xs) else None
def _slice(x: Any, starts: Any, ends: Any, axes: Any = None, steps: Any = None, **_: Any) -> Any:
  if not isinstance(x, list): return None
  one = (lambda v: v[0] if isinstance(v, list) and len(v) == 1 else v)
  s, e, st = one(starts), one(ends), one(steps) if steps is not None else 1
  return x[slice(s, e, st)] if all(isinstance(v, int) for v in (s, e, st)) and one(axes) in (None, 0, -1) else None

def _div(a: Any, b: Any) -> Any:
  """Integers: ONNX's truncating division; floats: IEEE division (rounded to the dtype by run_on_host)."""
  if b == 0: return None
  if isinstance(a, float) or isinstance(b, float): return a / b
  return (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1)

def _sqrt(x: Any, **_: Any) -> Any:
  if isinstance(x, list): return [_sqrt(v) for v in x]
  return math.sqrt(x) if isinstance(x, float) and x >= 0 else None

HOST_OPS: dict[str, Callable[..., Any]] = {
  "Gather": _gather, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Concat": _concat, "Slice": _slice, "Identity": lambda x, **_: x,
  "Add": _elementwise(operator.add), "Sub": _elementwise(operator.sub), "Mul": _elementwise(operator.mul), "Div": _elementwise(_div),
  "Max": _elementwise(max), "Min": _elementwise(min), "Equal": _elementwise(operator.eq), "Sqrt": _sqrt}

def run_on_host(op: str, args: list[Any], attrs: dict[str, Any]) -> Tensor | None:
  """The node's output as a host value when the op is one of HOST_OPS and every given input is a host value, else None."""
  if op not in HOST_OPS and op != "Cast": return None
  given = [a for a in args if a is not None]
  vals = [host_value(a) for a in args]
  if not given or any(a is not None and v is None for a, v in zip(args, vals)): return None
  if op == "Cast": return _cast(vals[0], given[0].dtype, DTYPES.get(attrs.get("to", 0)), given[0].device)
  kw = {k: v for k, v in attrs.items() if k in ("axis", "axes")}
  try: out = HOST_OPS[op](*vals, **kw)
  except (TypeError, IndexError): return None  # a form the host path does not take (attribute bounds, an index out of range)
  if out is None or any(v is None for v in (out if isinstance(out, list) else [out])) or (isinstance(out, list) and len(out) > HOST_MAX): return None
  if op == "Equal": return host_tensor(out, dtypes.bool, given[0].device)
  dt = given[0].dtype
  if dt in HOST_FLOATS: return host_tensor(_each(out, lambda v: _round(v, dt)), dt, given[0].device)
  return None if any(isinstance(v, float) for v in _items(out)) else host_tensor(out, dt, given[0].device)

def _items(v: Any) -> list[Any]: return v if isinstance(v, list) else [v]
def _each(v: Any, fn: Callable[[Any], Any]) -> Any: return [fn(x) for x in v] if isinstance(v, list) else fn(v)
def _round(v: float, dt: DType) -> float: return float(to_np_dtype(dt)(v))  # the value the device's dtype holds

def _cast(v: Any, src: DType, dst: DType | None, device: str) -> Tensor | None:
  """Cast of a host value between integers, float32 and float64 (floats to integers truncate, as numpy)."""
  if dst is None: return None
  if dtypes.is_int(dst) and dtypes.is_int(src): return host_tensor(v, dst, device)
  if dst in HOST_FLOATS and (dtypes.is_int(src) or src in HOST_FLOATS): return host_tensor(_each(v, lambda x: _round(float(x), dst)), dst, device)
  if dtypes.is_int(dst) and src in HOST_FLOATS and all(math.isfinite(x) for x in _items(v)): return host_tensor(_each(v, int), dst, device)
  return None
