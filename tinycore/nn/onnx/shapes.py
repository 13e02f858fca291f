"""Shape arithmetic on the host: the small integer tensors that exporters compute shapes with stay Python values.

Exported models compute the shapes they reshape to from Shape: Shape -> Gather -> Unsqueeze -> Concat -> Reshape, per
layer. As device ops each of those is a kernel of a few elements whose result the host reads back at once (Reshape
needs ints): a kernel launch and a sync for every step, and a TinyJit capture replays them on every call. Instead a
*host value* is a 0-d or 1-d integer Tensor of at most HOST_MAX elements whose Python value is known: Shape and Size
outputs, small integer initializers and constants, and the outputs of the ops below when every input is a host value.
Those ops compute the Python value and return it as a Tensor made from it (a copy from the host, no kernel); `ints`
reads a host value without touching the device (the registry of host values is in tensors.py). The ops: Gather,
Unsqueeze and Squeeze (0-d <-> 1-d), Concat, Slice, Cast to an integer type, Identity, Add, Sub, Mul, Div, Max, Min,
Equal (on same-length or scalar operands). Anything else runs as Tensor ops, as always."""
from __future__ import annotations
import operator
from typing import Any, Callable
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.nn.onnx.tensors import DTYPES, HOST_MAX, host_value, host_tensor

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

def _trunc_div(a: int, b: int) -> int | None: return None if b == 0 else (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1)

HOST_OPS: dict[str, Callable[..., Any]] = {
  "Gather": _gather, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Concat": _concat, "Slice": _slice, "Identity": lambda x, **_: x,
  "Add": _elementwise(operator.add), "Sub": _elementwise(operator.sub), "Mul": _elementwise(operator.mul), "Div": _elementwise(_trunc_div),
  "Max": _elementwise(max), "Min": _elementwise(min), "Equal": _elementwise(operator.eq)}

def run_on_host(op: str, args: list[Any], attrs: dict[str, Any]) -> Tensor | None:
  """The node's output as a host value when the op is one of HOST_OPS and every given input is a host value, else None."""
  if op not in HOST_OPS and op != "Cast": return None
  given = [a for a in args if a is not None]
  vals = [host_value(a) for a in args]
  if not given or any(a is not None and v is None for a, v in zip(args, vals)): return None
  if op == "Cast":
    dt = DTYPES.get(attrs.get("to", 0))
    return host_tensor(vals[0], dt, given[0].device) if dt is not None and dtypes.is_int(dt) and dtypes.is_int(given[0].dtype) else None
  kw = {k: v for k, v in attrs.items() if k in ("axis", "axes")}
  try: out = HOST_OPS[op](*vals, **kw)
  except (TypeError, IndexError): return None  # a form the host path does not take (attribute bounds, an index out of range)
  if out is None or any(v is None for v in (out if isinstance(out, list) else [out])) or (isinstance(out, list) and len(out) > HOST_MAX): return None
  if op == "Equal": return host_tensor(out, dtypes.bool, given[0].device)
  return host_tensor(out, given[0].dtype, given[0].device)
