"""What the Tensor modules share: python data to LazyBuffers, the checks of shape and dtype arguments, shapes
that may be symbolic and their broadcasting."""
from __future__ import annotations
from typing import TYPE_CHECKING, Any
import numpy as np
from tinycore.device import Buffer, Device
from tinycore.dtype import DType, dtypes, from_np_dtype, to_np_dtype
from tinycore.lazy import LazyBuffer, merge_var_vals
from tinycore.errors import DataError
from tinycore.multi import to_devices
from tinycore.ops import Ops
from tinycore.uop.uop import UOp, BoundVariable, sint
if TYPE_CHECKING: from tinycore.tensor import Tensor

def _int_overflow(v: Any, dtype: DType) -> OverflowError:
  return OverflowError(f"Python integer {v} does not fit {dtype} (range {dtypes.min(dtype)} to {dtypes.max(dtype)}): "
                       "give a wider dtype (dtype=dtypes.int64) or cast the tensor first; tinycore never truncates it silently")

def _py_int_dtype(v: int, dtype: DType | None) -> DType:
  """The dtype of a Python int scalar: the given one, which must hold it, else the default int, or int64 for a value
  outside it (as torch)."""
  dt = dtype or (dtypes.default_int if dtypes.min(dtypes.default_int) <= v <= dtypes.max(dtypes.default_int) else dtypes.int64)
  if dtypes.is_int(dt) and not dtypes.min(dt) <= v <= dtypes.max(dt): raise _int_overflow(v, dt)
  return dt

def _fits(arr: np.ndarray, dtype: DType) -> bool: return dtypes.min(dtype) <= int(arr.min()) and int(arr.max()) <= dtypes.max(dtype)

def _frompy(x: Any, dtype: DType | None, device: str | tuple[str, ...]) -> Any:
  if isinstance(device, tuple): return to_devices(_frompy(x, dtype, device[0]), device)  # made on the first device, replicated
  py = not isinstance(x, (np.ndarray, np.generic))  # python data: its ints must fit the dtype (a numpy array's cast is the user's)
  try: arr = np.asarray(x) if not isinstance(x, np.ndarray) else x
  except ValueError: raise DataError(f"cannot make a Tensor from ragged or non-numeric data: {str(x)[:80]}") from None
  if arr.dtype == object:
    if py and (big := [v for v in arr.ravel().tolist() if isinstance(v, int) and not -2**63 <= v < 2**64]):
      raise _int_overflow(big[0], dtype or dtypes.int64)
    raise DataError(f"cannot make a Tensor from ragged or non-numeric data: {str(x)[:80]}")
  if dtype is None:
    dtype = dtypes.from_py(x) if py and arr.size else None
    if dtype is None: dtype = from_np_dtype(arr.dtype) if arr.size or not py else dtypes.default_float
    # a Python int outside the default int makes the tensor int64, as torch does
    elif dtypes.is_int(dtype) and arr.dtype.kind in "iu" and not _fits(arr, dtype): dtype = dtypes.int64
  if py and dtypes.is_int(dtype) and arr.dtype.kind in "iu" and arr.size and not _fits(arr, dtype):
    raise _int_overflow(int(arr.max()) if int(arr.max()) > dtypes.max(dtype) else int(arr.min()), dtype)
  if dtype == dtypes.bfloat16:
    from tinycore.dtype import f32_to_bf16
    data = f32_to_bf16(arr.astype(np.float32))
  else: data = np.ascontiguousarray(arr, dtype=to_np_dtype(dtype))
  data = data.reshape(arr.shape)  # (ascontiguousarray makes a 0-d array 1-d)
  # a device that cannot open here (a compile-only run without its driver) gets the data through a lazy COPY from the
  # host: graphs still build and schedule, and a realize fails with the device's own reason, never elsewhere
  host = device if Device.can_open(device) else "PYTHON"
  buf = Buffer(host, data.size, dtype)
  if data.size: buf.copyin(memoryview(data.reshape(-1)).cast("B"))
  lb = LazyBuffer.from_buffer(buf, tuple(data.shape))
  return lb if host == device else lb.copy_to_device(device)

def _sym(x: Any) -> Any:
  """A shape entry: ints stay ints, a bound Variable becomes its Variable (a symbolic size)."""
  return x.var if isinstance(x, BoundVariable) else x

def _is_sym(x: Any) -> bool: return isinstance(x, (UOp, BoundVariable))

def _bound_vals(*xs: Any) -> dict[UOp, int]:
  """The values of the bound Variables among shape arguments (nested in tuples and lists)."""
  found = [x.vals if isinstance(x, BoundVariable) else _bound_vals(*x) for x in xs if isinstance(x, (BoundVariable, tuple, list))]
  return merge_var_vals(*found) if found else {}

def _same(a: Any, b: Any) -> bool:
  """Shape entries equal without asking a symbolic value for a truth value."""
  a, b = _sym(a), _sym(b)
  if not isinstance(a, UOp) and not isinstance(b, UOp): return a == b
  if a is b: return True
  from tinycore.uop.symbolic import simplify
  d = simplify(a - b) if isinstance(a, UOp) else simplify(b - a)
  return d.op is Ops.CONST and d.arg == 0

def _broadcast_shape(*shapes: tuple[sint, ...]) -> tuple[sint, ...]:
  """numpy's broadcast of shapes that may hold symbolic sizes (ValueError where they do not broadcast)."""
  n = max((len(s) for s in shapes), default=0)
  out: list[sint] = []
  for dims in zip(*[(1,) * (n - len(s)) + tuple(s) for s in shapes]):
    big = [d for d in dims if not _same(d, 1)]
    if any(not _same(d, big[0]) for d in big): raise ValueError(f"shapes {shapes} cannot be broadcast together")
    out.append(big[0] if big else 1)
  return tuple(out)

def _check_differentiable(t: Tensor) -> None:
  if not dtypes.is_float(t.dtype):
    raise RuntimeError(f"only float tensors can require gradients, this one is {t.dtype}: cast it to a float dtype first")
