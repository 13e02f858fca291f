"""ONNX's element types as tinycore dtypes, and the small conversions the ops share.

ONNX names an element type by a number (TensorProto.DataType); the ones tinycore has a dtype for are listed in DTYPES.
The narrow ones (4- and 2-bit ints, 8- and 4-bit floats) are carried in a wider dtype (narrow.py); the others
(strings, complex numbers) are refused when a model is loaded. An
input an op needs as Python numbers (a shape, axes, pads) is read off its Tensor with `ints` or `floats`: such inputs
are small, and most are initializers or Constant nodes whose values are on the host already. A *host value* (shapes.py)
is a small integer Tensor whose Python value is remembered here: `ints` reads it without touching the device.

Every op reads Tensor values into Python through `read` (and `ints`, `floats`, `scalar` on top of it), never by .item() or
.tolist() itself: `read` counts the reads of values that are neither host values nor the graph's constants
(`DeviceReads`), and a run that made such a read depends on the data as well as the shapes (If's condition, NonZero's
count), so the runner does not replay its kernels for the next call (runner.py)."""
from __future__ import annotations
import weakref
from typing import Any
from tinycore.tensor import Tensor
from tinycore.dtype import DType, dtypes
from tinycore.nn.onnx.narrow import NARROW

# TensorProto.DataType numbers -> tinycore dtypes
DTYPES: dict[int, DType] = {1: dtypes.float32, 2: dtypes.uint8, 3: dtypes.int8, 4: dtypes.uint16, 5: dtypes.int16, 6: dtypes.int32, 7: dtypes.int64,
                            9: dtypes.bool, 10: dtypes.float16, 11: dtypes.float64, 12: dtypes.uint32, 13: dtypes.uint64, 16: dtypes.bfloat16}
UNSUPPORTED: dict[int, str] = {0: "UNDEFINED", 8: "STRING", 14: "COMPLEX64", 15: "COMPLEX128"}

HOST_MAX = 16
_HOST: dict[int, tuple[weakref.ref, Any]] = {}  # id(tensor) -> (weakref to it, its Python value)

def host_value(t: Any) -> Any:
  """The Python value of a host-value Tensor, else None."""
  e = _HOST.get(id(t)) if isinstance(t, Tensor) else None
  return e[1] if e is not None and e[0]() is t else None

def remember(t: Tensor, v: Any) -> Tensor:
  """Mark t as the host value v (an int or a list of ints); returns t."""
  key = id(t)
  _HOST[key] = (weakref.ref(t, lambda _: _HOST.pop(key, None)), v)
  return t

def host_tensor(v: Any, dtype: DType, device: str | None = None) -> Tensor:
  """A host value as a Tensor: one element as a constant (a kernel that reads it gets an immediate, not a buffer)."""
  if isinstance(v, list) and len(v) == 1: return remember(Tensor.full((1,), v[0], dtype=dtype, device=device), v)
  return remember(Tensor(v, dtype=dtype, device=device), v)

HOST_FLOATS = (dtypes.float32, dtypes.float64)  # float host values: each step rounded to the dtype (shapes.py)
def host_kind(t: Tensor) -> bool:
  """Whether t may be a host value: a small integer, float32 or float64 Tensor, 0-d or 1-d."""
  return (dtypes.is_int(t.dtype) or t.dtype in HOST_FLOATS) and t.ndim <= 1 and t.numel() <= HOST_MAX

def dtype_of(code: int, what: str) -> DType:
  """The tinycore dtype of ONNX element type `code`; NotImplementedError naming `what` needs it otherwise."""
  if code in DTYPES: return DTYPES[code]
  if code in NARROW: return NARROW[code].carrier
  raise NotImplementedError(f"{what}: ONNX element type {UNSUPPORTED.get(code, code)} has no tinycore dtype")

_CONSTANTS: dict[int, weakref.ref] = {}  # id(tensor) -> weakref to it, for the graph's initializers and tensor attributes

def constant(t: Tensor) -> Tensor:
  """Mark t as one of the graph's constants (its value is the same on every run); returns t."""
  key = id(t)
  _CONSTANTS[key] = weakref.ref(t, lambda _: _CONSTANTS.pop(key, None))
  return t

class DeviceReads:
  """How many times an op read a value computed on the device at run time (not a host value, not a constant)."""
  count = 0

def read(t: Tensor) -> Any:
  """t's value as Python numbers (nested lists, as Tensor.tolist), counting a read of a run-time value in DeviceReads."""
  v = host_value(t)
  if v is not None: return v
  if (e := _CONSTANTS.get(id(t))) is None or e() is not t: DeviceReads.count += 1
  return t.tolist()

def scalar(t: Tensor) -> Any:
  """The one element of t as a Python number (read with `read`)."""
  v = read(t)
  while isinstance(v, list): v = v[0]
  return v

def ints(t: Tensor | None, default: Any = None) -> Any:
  """A 0-d or 1-d integer Tensor as a Python int or list of ints (`default` for an absent input)."""
  if t is None: return default
  v = read(t)
  return [int(x) for x in v] if isinstance(v, list) else int(v)

def int_list(t: Tensor | None, default: Any = None) -> Any:
  """ints(), with a 0-d Tensor as a list of one (some exporters give a scalar where ONNX says 1-d)."""
  v = ints(t, default)
  return [v] if isinstance(v, int) else v

def floats(t: Tensor | None, default: Any = None) -> Any:
  """A 0-d or 1-d Tensor as a Python float or list of floats (`default` for an absent input)."""
  if t is None: return default
  v = read(t)
  return [float(x) for x in v] if isinstance(v, list) else float(v)

def axis_of(axis: int, ndim: int) -> int: return axis + ndim if axis < 0 else axis
