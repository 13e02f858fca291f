"""Tensor: the user API. Lazy: every op builds a LazyBuffer graph; realize() schedules, compiles and runs it.
Autograd records the Function that made each tensor; backward() walks that graph in reverse.

The API follows tinygrad's Tensor name for name (argument names, defaults, broadcasting and dtype promotion), so
code written for tinygrad runs after changing the import. Everything here is composed of the few primitives in
function.py; there is no gather or scan primitive, so indexing with tensors builds one-hot masks and reduces, and
cumulative ops reduce over triangular masks or run a log-depth scan."""
from __future__ import annotations
import ctypes, functools, math, time, itertools
from contextlib import ContextDecorator
from typing import Any, Callable, ClassVar, Sequence
import numpy as np
import tinycore.function as F
from tinycore.device import Buffer, Device
from tinycore.dtype import DType, dtypes, least_upper_dtype, least_upper_float, to_dtype, from_np_dtype, to_np_dtype, bf16_to_f32
from tinycore.helpers import argfix, prod, all_int, make_tuple, flatten, ceildiv, TRAINING
from tinycore.lazy import LazyBuffer, merge_var_vals
from tinycore.errors import ShapeError, ArgumentError, ArgumentTypeError, DimError, DTypeError, DataError
from tinycore.ops import Ops
from tinycore.engine.schedule import ScheduleItem, create_schedule, create_schedule_with_vars
from tinycore.engine.realize import run_schedule
from tinycore.index_errors import raise_index_errors
from tinycore.uop.uop import UOp, BoundVariable, sint, sym_infer, ssimplify

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

def _frompy(x: Any, dtype: DType | None, device: str) -> LazyBuffer:
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

def _pad_arg(padding: int | Sequence[int], dims: int) -> tuple[tuple[int, int], ...]:
  """conv/pool padding: an int, one per spatial dim, or (left, right, top, bottom, ...) pairs from the last dim, as torch."""
  if isinstance(padding, int): return ((padding, padding),) * dims
  p = list(padding)
  if len(p) == dims: return tuple((x, x) for x in p)
  if len(p) == 2 * dims: return tuple((p[2 * i], p[2 * i + 1]) for i in reversed(range(dims)))
  raise ValueError(f"padding {padding} must be an int or have {dims} or {2*dims} values")

def _sym(x: Any) -> Any:
  """A shape entry: ints stay ints, a bound Variable becomes its Variable (a symbolic size)."""
  return x.var if isinstance(x, BoundVariable) else x
def _is_sym(x: Any) -> bool: return isinstance(x, (UOp, BoundVariable))
def _bound_vals(*xs: Any) -> dict[UOp, int]:
  """The values of the bound Variables among shape arguments (nested in tuples and lists)."""
  found = [{x.var: x.val} if isinstance(x, BoundVariable) else _bound_vals(*x) for x in xs if isinstance(x, (BoundVariable, tuple, list))]
  return merge_var_vals(*found) if found else {}
def _bind(t: Tensor, var_vals: dict[UOp, int]) -> Tensor:
  """t, its lazy graph carrying the bound values (the scheduler collects them for the kernels)."""
  if var_vals: t.lazydata = t.lazydata.bind(var_vals)
  return t
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

def _check_shape(shape: tuple, what: str = "shape") -> tuple:
  out = []
  for s in shape:
    if _is_sym(s):
      out.append(_sym(s))
      continue
    if not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s < 0:
      raise ValueError(f"{what} {shape} must be non-negative ints (or Variables)")
    out.append(int(s))
  return tuple(out)

def _shape_arg(*shape: Any) -> tuple[int, ...]: return _check_shape(argfix(*shape))

_iota_cache: dict[tuple[int, str, DType], LazyBuffer] = {}

def _check_differentiable(t: Tensor) -> None:
  if not dtypes.is_float(t.dtype):
    raise RuntimeError(f"only float tensors can require gradients, this one is {t.dtype}: cast it to a float dtype first")

class _train(ContextDecorator):
  """Context manager and decorator that sets TRAINING (mode=True by default) and restores it on exit."""
  def __init__(self, mode: bool = True): self.mode = mode
  def __enter__(self) -> None: self.prev, TRAINING.value = TRAINING.value, int(self.mode)
  def __exit__(self, *args: Any) -> None: TRAINING.value = self.prev

class _TensorType(type):
  """`Tensor.training` is a view of the TRAINING context variable (tinygrad 0.14 reads `Context(TRAINING=1)`): reading
  it, assigning it and `Context` all see one value."""
  @property
  def training(cls) -> bool: return bool(TRAINING.value)
  @training.setter
  def training(cls, mode: bool) -> None: TRAINING.value = int(bool(mode))

class _test(ContextDecorator):
  """Context manager and decorator that sets Tensor.no_grad (mode=True by default) and restores it on exit."""
  def __init__(self, mode: bool = True): self.mode = mode
  def __enter__(self) -> None: self.prev, Tensor.no_grad = Tensor.no_grad, self.mode
  def __exit__(self, *args: Any) -> None: Tensor.no_grad = self.prev

class Tensor(metaclass=_TensorType):
  """A multi-dimensional array on a device, with autograd. Operations are lazy until realize(), numpy() or item()."""
  __slots__ = ("lazydata", "_rg", "grad", "_ctx", "is_param", "__weakref__")
  @property
  def training(self) -> bool:
    """Whether TRAINING is set (dropout, BatchNorm batch statistics, Optimizer.step); `Tensor.training` reads and assigns it
    on the class."""
    return bool(TRAINING.value)
  no_grad: ClassVar[bool] = False
  _seed: ClassVar[int] = int(time.time())
  _rng_counter: ClassVar[dict[str, Tensor]] = {}
  _rng_key: ClassVar[dict[str, Tensor]] = {}
  train = _train
  """`with Tensor.train():` (or as a decorator) sets TRAINING (Tensor.training), which turns dropout, BatchNorm's batch
  statistics and Optimizer.step on; `train(False)` clears it. `with Context(TRAINING=1):` does the same."""
  test = _test
  """`with Tensor.test():` sets Tensor.no_grad: no autograd graph is recorded inside (as tinygrad)."""

  def __init__(self, data: Any, device: str | None = None, dtype: DType | str | None = None, requires_grad: bool | None = None):
    """Make a tensor from a python scalar, (nested) list or tuple, numpy array, bytes (as uint8), a LazyBuffer or
    another Tensor (copied to `device`). The dtype is inferred as tinygrad does unless given."""
    device = Device.canonicalize(device)
    dtype = to_dtype(dtype) if dtype is not None else None
    self.grad: Tensor | None = None
    self._rg: bool | None = requires_grad
    self._ctx: F.Function | None = None
    self.is_param: bool = True
    if isinstance(data, LazyBuffer): lb = data if dtype is None or dtype == data.dtype else data.cast(dtype)
    elif isinstance(data, Tensor): lb = data.lazydata.copy_to_device(device) if dtype is None else data.lazydata.cast(dtype).copy_to_device(device)
    elif isinstance(data, (bool, int, float)) and not isinstance(data, np.generic):
      dt = _py_int_dtype(data, dtype) if isinstance(data, int) and not isinstance(data, bool) else dtype or dtypes.from_py(data)
      lb = LazyBuffer.const_of(data, dt, device, ())
    elif isinstance(data, (bytes, bytearray)): lb = _frompy(np.frombuffer(bytes(data), np.uint8), dtype or dtypes.uint8, device)
    elif isinstance(data, (list, tuple, np.ndarray, np.generic)): lb = _frompy(data, dtype, device)
    elif data is None: lb = _frompy(np.zeros((0,), np.float32), dtype or dtypes.default_float, device)
    else: raise TypeError(f"cannot make a Tensor from {type(data).__name__}")
    if isinstance(data, LazyBuffer) or lb.device == device: self.lazydata = lb
    else: self.lazydata = lb.copy_to_device(device)
    if requires_grad: _check_differentiable(self)

  # *** properties ***
  @property
  def device(self) -> str:
    """The device name, e.g. "CLANG"."""
    return self.lazydata.device
  @property
  def shape(self) -> tuple[sint, ...]:
    """The shape, a tuple of ints."""
    return self.lazydata.shape
  @property
  def dtype(self) -> DType:
    """The element dtype."""
    return self.lazydata.dtype
  @property
  def uop(self) -> LazyBuffer:
    """The lazy graph node behind this tensor (tinygrad's newer name for lazydata)."""
    return self.lazydata
  @property
  def ndim(self) -> int:
    """The number of dimensions."""
    return len(self.shape)
  def dim(self) -> int:
    """The number of dimensions (as torch)."""
    return self.ndim
  def numel(self) -> sint:
    """The number of elements."""
    return ssimplify(prod(self.shape))
  @property
  def max_shape(self) -> tuple[int, ...]:
    """The shape with every symbolic size replaced by its largest value."""
    return tuple(int(s.vmax) if isinstance(s, UOp) else s for s in self.shape)
  def max_numel(self) -> int:
    """The number of elements of max_shape."""
    return prod(self.max_shape)
  def size(self, dim: int | None = None) -> sint | tuple[sint, ...]:
    """The shape, or the size of one dim."""
    return self.shape if dim is None else self.shape[self._resolve_dim(dim)]
  def element_size(self) -> int:
    """Bytes per element."""
    return self.dtype.itemsize
  def nbytes(self) -> int:
    """Bytes of the whole tensor."""
    return self.numel() * self.element_size()
  def is_floating_point(self) -> bool:
    """True for float dtypes."""
    return dtypes.is_float(self.dtype)
  def __len__(self) -> int:
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]
  def __iter__(self) -> Any:
    if not self.shape: raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in range(self.shape[0]))
  def __repr__(self) -> str: return f"<Tensor {self.lazydata!r} on {self.device} with grad {self.grad.lazydata if self.grad is not None else None!r}>"
  def __hash__(self) -> int: return id(self)
  def __bool__(self) -> bool: raise TypeError("the truth value of a Tensor is ambiguous: use .item(), .any() or .all()")

  # *** realizing ***
  def schedule(self, *lst: Tensor) -> list[ScheduleItem]:
    """The kernels realize() would run, without running them."""
    return create_schedule([t.lazydata for t in (self,) + lst])
  def realize(self, *lst: Tensor) -> Tensor:
    """Compute this tensor (and the others given) now. Each one computed here (not realized before) becomes a leaf of
    the autograd graph, as in tinygrad: gradients no longer flow through it, and the graph it came from is let go."""
    cut = [t for t in (self, *lst) if t._ctx is not None and not t.lazydata.is_realized()]
    run_schedule(*create_schedule_with_vars([self.lazydata, *[t.lazydata for t in lst]]))
    # kept, a realized graph would hold its unrealized intermediates, which an optimizer step must then compute early
    for t in cut: t._ctx = None
    return self
  def contiguous(self, **kwargs: Any) -> Tensor:
    """A tensor whose data is laid out row-major in a buffer of its own (a no-op when it already is). kwargs: tinygrad
    0.14's scheduler hints, accepted and ignored (they do not change the result)."""
    return F.Contiguous.apply(self)
  def contiguous_backward(self) -> Tensor:
    """Identity forward; makes the gradient contiguous in backward."""
    return F.ContiguousBackward.apply(self)
  def _buffer(self) -> Buffer:
    t = self if self.lazydata.is_realized() and self.lazydata.st.contiguous and self.lazydata._base is None else self.contiguous()
    t.realize()
    return t.lazydata.base.buffer
  def numpy(self) -> np.ndarray:
    """A numpy copy of the data (bfloat16 comes back as float32); a symbolic shape is resolved with its bound values."""
    shape = self._bound_shape()
    if prod(shape) == 0: return np.zeros(shape, dtype=to_np_dtype(self.dtype) if self.dtype != dtypes.bfloat16 else np.float32)
    # a symbolic buffer is allocated for the Variables' largest values: the bound ones select its first elements
    arr = self._buffer().numpy()[:prod(shape)]
    raise_index_errors(self.device)  # a sync: an index out of range in the kernels that ran is an error now
    if self.dtype == dtypes.bfloat16: arr = bf16_to_f32(arr)
    return arr.reshape(shape)
  def _bound_shape(self) -> tuple[int, ...]:
    if all_int(self.shape): return self.shape
    try: return tuple(sym_infer(s, self.lazydata.var_vals) for s in self.shape)
    except ValueError as e:
      shape = "(" + ", ".join(s.render() if isinstance(s, UOp) else str(s) for s in self.shape) + ")"
      raise ValueError(f"cannot copy out a tensor of symbolic shape {shape}: {e}") from None
  def data(self) -> memoryview:
    """The data as a memoryview of self's shape and element format (as tinygrad: `.tolist()` gives nested lists, `[i]`
    an element); raw bytes where memoryview has no format for the dtype (float16, bfloat16)."""
    arr = self.numpy()
    mv = memoryview(np.ascontiguousarray(arr).tobytes())
    fmt = {np.dtype(np.bool_): "?"}.get(arr.dtype, arr.dtype.char)
    if fmt in "e" or self.dtype == dtypes.bfloat16: return mv
    return mv.cast(fmt, arr.shape) if arr.size else mv.cast(fmt)
  def item(self) -> Any:
    """The single element as a python scalar."""
    if self.numel() != 1: raise ValueError(f"item() needs a tensor with one element, this one has shape {self.shape}")
    return self.numpy().reshape(-1)[0].item()
  def tolist(self) -> Any:
    """The data as (nested) python lists."""
    return self.numpy().tolist()
  def to(self, device: str | None) -> Tensor:
    """A copy on another device (self when it is already there)."""
    device = Device.canonicalize(device)
    if device == self.device: return self
    ret = Tensor(self.lazydata.copy_to_device(device), requires_grad=self._rg)
    if self.grad is not None: ret.grad = self.grad.to(device)
    ret.is_param = self.is_param
    return ret
  def to_(self, device: str | None) -> Tensor:
    """Move this tensor (and its grad) to another device in place."""
    self.lazydata = self.lazydata.copy_to_device(Device.canonicalize(device))
    if self.grad is not None: self.grad.to_(device)
    return self
  def detach(self) -> Tensor:
    """The same data, cut from the autograd graph."""
    return Tensor(self.lazydata, requires_grad=False)
  def clone(self, device: str | None = None) -> Tensor:
    """A copy in a new buffer (on `device` when given); gradients flow through it. The copy keeps is_param and a copy of
    .grad (as tinygrad)."""
    ret = F.Clone.apply(self if device is None else self.to(device))
    if self.grad is not None: ret.grad = self.grad.clone(device)
    ret.is_param = self.is_param
    return ret
  def replace(self, x: Tensor) -> Tensor:
    """Make this tensor refer to x's data (shapes must match); drops the autograd history."""
    if x.shape != self.shape: raise ValueError(f"replace shape mismatch: {self.shape} vs {x.shape}")
    self.lazydata, self._ctx = x.lazydata, None
    return self
  def assign(self, x: Any) -> Tensor:
    """Write x (broadcast to self's shape) into this tensor's buffer (in place once realized). Gradients then flow to x,
    not to what self held before (as tinygrad)."""
    if not isinstance(x, Tensor): x = Tensor(x, device=self.device, dtype=self.dtype)
    if x.device != self.device: raise ValueError(f"assign device mismatch: {self.device} vs {x.device}")
    if x.dtype != self.dtype: raise DTypeError(f"assign dtype mismatch: {self.dtype} vs {x.dtype}")
    if x.shape != self.shape:
      if x.ndim > self.ndim or any(a != b and a != 1 for a, b in zip(x.shape[::-1], self.shape[::-1])):
        raise ShapeError(f"assign shape mismatch: cannot broadcast {x.shape} to {self.shape}")
      x = x.expand(self.shape)
    if x is self: return self
    # a graph that reads self (x = self + y) reads what self held: a snapshot takes its place there, self is rewritten
    old = Tensor.__new__(Tensor)
    old.lazydata, old._rg, old.grad, old._ctx, old.is_param = self.lazydata, self._rg, self.grad, self._ctx, self.is_param
    for t in x._deepwalk():
      if any(p is self for p in t._ctx.parents): t._ctx.parents = tuple(old if p is self else p for p in t._ctx.parents)  # type: ignore[union-attr]
    buffer = not (self.lazydata._base is not None or not self.lazydata.st.contiguous or self.lazydata.base.op is Ops.CONST)
    r = F.Assign.apply(x, target=self.lazydata if buffer else None)
    self.lazydata = r.lazydata
    self._ctx = r._ctx
    if self._rg is None and r._rg: self._rg = True
    return self

  # *** creation ***
  @staticmethod
  def from_blob(ptr: int, shape: tuple[int, ...], **kwargs: Any) -> Tensor:
    """A tensor of `shape` (and `dtype`, default float) read from host memory at address ptr (as from numpy's
    `arr.ctypes.data`). The memory is copied now, so it needs to stay valid only for this call (tinygrad 0.14 aliases it
    on its CPU device: later writes through ptr are not seen here)."""
    dt = to_dtype(kwargs.pop("dtype")) if kwargs.get("dtype") is not None else dtypes.default_float
    kwargs.pop("dtype", None)
    if not isinstance(ptr, int) or ptr <= 0: raise ArgumentError(f"from_blob needs a host address (an int > 0), got {ptr!r}")
    shp = _shape_arg(shape)
    if not all_int(shp): raise ShapeError(f"from_blob needs a concrete shape, got {shape}")
    raw = np.frombuffer(ctypes.string_at(ptr, prod(shp) * dt.itemsize), dtype=to_np_dtype(dt)).reshape(shp)
    return Tensor(bf16_to_f32(raw) if dt == dtypes.bfloat16 else raw, dtype=dt, **kwargs)
  @staticmethod
  def empty(*shape: Any, device: str | None = None, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    """An uninitialized tensor."""
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    return Tensor(LazyBuffer.metaop(Ops.EMPTY, _shape_arg(*shape), dt, Device.canonicalize(device), var_vals=_bound_vals(shape)), **kwargs)
  @staticmethod
  def full(shape: tuple[sint, ...] | int, fill_value: Any, dtype: DType | str | None = None, device: str | None = None, buffer: bool = True,
           **kwargs: Any) -> Tensor:
    """A tensor of `shape` filled with fill_value; the dtype follows fill_value unless given. buffer is accepted for
    tinygrad 0.14's signature (tinycore's fill is a lazy constant either way)."""
    if dtype is not None: kwargs["dtype"] = dtype
    if device is not None: kwargs["device"] = device
    shape, bound = _shape_arg(shape), argfix(shape)
    dtype = (to_dtype(kwargs.pop("dtype")) if kwargs.get("dtype") is not None else
             _py_int_dtype(fill_value, None) if isinstance(fill_value, int) and not isinstance(fill_value, bool) else dtypes.from_py(fill_value))
    kwargs.pop("dtype", None)
    rg = kwargs.pop("requires_grad", None)
    ret = Tensor(fill_value, dtype=dtype, **kwargs).reshape((1,) * len(shape)).expand(bound)
    return ret._leaf(rg)
  @staticmethod
  def zeros(*shape: Any, **kwargs: Any) -> Tensor:
    """A tensor of zeros (default float dtype)."""
    return Tensor.full(argfix(*shape), 0.0, **{"dtype": dtypes.default_float, **kwargs})
  @staticmethod
  def ones(*shape: Any, **kwargs: Any) -> Tensor:
    """A tensor of ones (default float dtype)."""
    return Tensor.full(argfix(*shape), 1.0, **{"dtype": dtypes.default_float, **kwargs})
  @staticmethod
  def arange(start: Any, stop: Any = None, step: Any = 1, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    """Like numpy.arange: [start, stop) in steps of step; int unless an argument is a float (int64 when the values do
    not fit the default int). The values are computed on the host and copied to the device."""
    if dtype is not None: kwargs["dtype"] = dtype
    if stop is None: start, stop = 0, start
    if step == 0: raise ValueError("arange step must not be zero")
    n = max(0, math.ceil((stop - start) / step))
    if kwargs.get("dtype") is not None: dtype = to_dtype(kwargs.pop("dtype"))
    elif any(isinstance(x, float) for x in (start, stop, step)): dtype = dtypes.default_float
    else:
      ends = (start, start + step * (n - 1)) if n else (start,)
      dtype = dtypes.default_int if all(dtypes.min(dtypes.default_int) <= v <= dtypes.max(dtypes.default_int) for v in ends) else dtypes.int64
    kwargs.pop("dtype", None)
    vals = start + step * np.arange(n, dtype=np.float64 if dtypes.is_float(dtype) else np.int64)
    return Tensor(vals.astype(to_np_dtype(dtype) if dtype != dtypes.bfloat16 else np.float32), dtype=dtype, **kwargs)
  @staticmethod
  def linspace(start: float, stop: float, steps: int, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    """`steps` evenly spaced values from start to stop, both included (any dtype but bool; ints truncate)."""
    if dtype is not None: kwargs["dtype"] = dtype
    if not isinstance(steps, int) or steps < 0: raise ValueError(f"linspace steps must be a non-negative int, got {steps}")
    dtype = to_dtype(kwargs.pop("dtype")) if kwargs.get("dtype") is not None else dtypes.default_float
    kwargs.pop("dtype", None)
    if dtype == dtypes.bool: raise ArgumentError("linspace to bool is not supported (as torch and tinygrad): cast the result instead")
    vals = np.linspace(start, stop, steps, dtype=np.float64)
    if not dtypes.is_float(dtype): vals = np.trunc(vals)
    return Tensor(vals.astype(to_np_dtype(dtype) if dtype != dtypes.bfloat16 else np.float32), dtype=dtype, **kwargs)
  @staticmethod
  def eye(n: int, m: int | None = None, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    """The n x m identity matrix (ones on the main diagonal)."""
    if dtype is not None: kwargs["dtype"] = dtype
    m = n if m is None else m
    _check_shape((n, m), "eye size")
    if n == 0 or m == 0: return Tensor.zeros(n, m, **kwargs)
    k = min(n, m)
    # a column of ones padded by k to rows of k+1, flattened and cut to k*k, is the k x k identity: pure views
    rg = kwargs.pop("requires_grad", None)
    x = Tensor.ones(k, 1, **kwargs).pad(((0, 0), (0, k))).flatten().shrink(((0, k * k),)).reshape(k, k)
    ret = x.pad(((0, n - k), (0, m - k)))
    return ret._leaf(rg)
  def full_like(self, fill_value: Any, dtype: DType | str | None = None, device: str | None = None, buffer: bool = True, **kwargs: Any) -> Tensor:
    """A tensor of self's shape (and dtype and device unless given) filled with fill_value."""
    return Tensor.full(self.shape, fill_value, dtype if dtype is not None else self.dtype, device if device is not None else self.device, **kwargs)
  def zeros_like(self, **kwargs: Any) -> Tensor:
    """Zeros of self's shape, dtype and device."""
    return self.full_like(0, **kwargs)
  def ones_like(self, **kwargs: Any) -> Tensor:
    """Ones of self's shape, dtype and device."""
    return self.full_like(1, **kwargs)
  def empty_like(self, dtype: DType | str | None = None, device: str | None = None, **kwargs: Any) -> Tensor:
    """An uninitialized tensor of self's shape (and dtype and device unless given)."""
    return Tensor.empty(self.shape, dtype=dtype if dtype is not None else self.dtype, device=device if device is not None else self.device, **kwargs)
  def rand_like(self, **kwargs: Any) -> Tensor:
    """Uniform [0, 1) of self's shape (and float dtype and device unless given)."""
    dt = kwargs.pop("dtype", self.dtype if dtypes.is_float(self.dtype) else dtypes.default_float)
    return Tensor.rand(*self.shape, device=kwargs.pop("device", self.device), dtype=dt, **kwargs)
  def randn_like(self, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    """Standard normal of self's shape (and float dtype and device unless given)."""
    dt = dtype if dtype is not None else self.dtype if dtypes.is_float(self.dtype) else dtypes.default_float
    return Tensor.randn(*self.shape, device=kwargs.pop("device", self.device), dtype=dt, **kwargs)
  def meshgrid(self, *args: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids from 1-D (or 0-d, taken as one element) tensors, indexing "ij" (matrix) or "xy" (cartesian), as
    torch.meshgrid."""
    if indexing not in ("ij", "xy"): raise ArgumentError(f"meshgrid indexing must be 'ij' or 'xy', got {indexing!r}")
    ts = tuple(t.reshape(1) if t.ndim == 0 else t for t in (self,) + args)
    for t in ts:
      if t.ndim != 1: raise ShapeError(f"meshgrid needs 1-D or 0-d tensors, got shape {t.shape}")
    # "xy" is "ij" with the first two inputs (and outputs) swapped
    xy = indexing == "xy" and len(ts) >= 2
    if xy: ts = (ts[1], ts[0]) + ts[2:]
    shape = tuple(t.shape[0] for t in ts)
    out = [t.reshape(*[1] * i, -1, *[1] * (len(ts) - i - 1)).expand(shape) for i, t in enumerate(ts)]
    if xy: out[0], out[1] = out[1], out[0]
    return tuple(out)

  @staticmethod
  def _iota(n: int, device: str, dtype: DType = dtypes.int32) -> Tensor:
    """0..n-1 as a realized buffer, cached per (n, device, dtype); internal: never handed out as a buffer to write."""
    key = (n, device, dtype)
    if (lb := _iota_cache.get(key)) is None:
      if len(_iota_cache) > 256: _iota_cache.clear()
      lb = _iota_cache[key] = _frompy(np.arange(n).astype(to_np_dtype(dtype)), dtype, device)
    return Tensor(lb, requires_grad=False)

  # *** random: counter-based (threefry2x32), so every device draws the same numbers for a seed ***
  @staticmethod
  def manual_seed(seed: int = 0) -> None:
    """Reset the random generator: the same seed gives the same numbers on every device."""
    Tensor._seed, Tensor._rng_counter, Tensor._rng_key = seed, {}, {}
  @staticmethod
  def _threefry(c0: Tensor, key: Tensor) -> Tensor:
    """Threefry-2x32 (20 rounds) of the counts c0 under the key words in the device buffer `key` (k0, k1, k0^k1^C):
    the key is data, not constants, so one kernel serves every seed."""
    def rotl(x: Tensor, r: int) -> Tensor: return (x << r) | (x >> (32 - r))
    ks = [key.shrink(((j, j + 1),)).expand(c0.shape) for j in range(3)]
    x0, x1 = c0 + ks[0], ks[1]
    for i in range(5):
      for r in ((13, 15, 26, 6), (17, 29, 16, 24))[i % 2]:
        x0 = x0 + x1
        x1 = rotl(x1, r) ^ x0
      x0, x1 = x0 + ks[(i + 1) % 3], x1 + (ks[(i + 2) % 3] + (i + 1))  # uint32 arithmetic wraps
    return x0
  @staticmethod
  def _random_bits(num: int, device: str) -> Tensor:
    if num == 0: return Tensor.empty(0, device=device, dtype=dtypes.uint32)
    if device not in Tensor._rng_counter: Tensor._rng_counter[device] = Tensor([0], device=device, dtype=dtypes.uint32).contiguous().realize()
    # draws come in a few padded sizes (powers of two, then multiples of 2^16), so the large threefry kernel is
    # compiled once per size class rather than once per shape
    n = 1 << max(4, (num - 1).bit_length()) if num <= 65536 else ceildiv(num, 65536) * 65536
    # the counter moves on by n; this draw uses the counts just below its new value
    counter = Tensor._rng_counter[device]
    counter.assign(counter + n % 2**32)
    counts = Tensor._iota(n, device, dtypes.uint32) + (counter.expand(n) - n % 2**32)
    if device not in Tensor._rng_key:
      k0, k1 = Tensor._seed & 0xFFFFFFFF, (Tensor._seed >> 32) & 0xFFFFFFFF
      Tensor._rng_key[device] = Tensor(np.array([k0, k1, k0 ^ k1 ^ 0x1BD11BDA], np.uint32), device=device)
    # a draw is its own kernel: fused into a consumer it could read the counter before and after an increment
    bits = Tensor._threefry(counts, Tensor._rng_key[device]).contiguous()
    return bits if n == num else bits.shrink(((0, num),))
  @staticmethod
  def rand(*shape: Any, device: str | None = None, dtype: DType | str | None = None, contiguous: bool = True, **kwargs: Any) -> Tensor:
    """Uniform in [0, 1). Deterministic under manual_seed, and the same numbers on every device."""
    bound, shape, device = argfix(*shape), _shape_arg(*shape), Device.canonicalize(device)
    if not all_int(shape):
      # a symbolic size draws for its largest value (so the generator moves on by the same amount every call), then
      # keeps the part the bound values select
      top = tuple(s if isinstance(s, int) else int(s.vmax) for s in shape)
      return Tensor.rand(*top, device=device, dtype=dtype, contiguous=contiguous, **kwargs).shrink(tuple((0, s) for s in bound))
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if not dtypes.is_float(dt): raise TypeError(f"rand needs a float dtype, got {dt}")
    bits = Tensor._random_bits(prod(shape), device)
    if dt == dtypes.float64: out = bits.cast(dtypes.float64) * (1 / 2**32)
    else:
      # m random bits on a 2^-m grid: every value is exact in the target dtype and below 1
      m = {dtypes.float16: 11, dtypes.bfloat16: 8}.get(dt, 24)
      out = (bits >> (32 - m)).cast(dtypes.float32) * (1 / 2**m)
    return Tensor(out.cast(dt).reshape(shape).lazydata, **kwargs)
  @staticmethod
  def randn(*shape: Any, dtype: DType | str | None = None, requires_grad: bool | None = None, **kwargs: Any) -> Tensor:
    """Standard normal (Box-Muller over two uniform draws), drawn in float32 and cast to dtype (any dtype, as tinygrad:
    an int dtype truncates, bool is x != 0)."""
    shape = _shape_arg(*shape)
    u = Tensor.rand(2, *shape, dtype=dtypes.float32, **kwargs)
    out = (1 - u[0]).log().mul(-2).sqrt() * (u[1] * (2 * math.pi)).cos()
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    return Tensor(out.cast(dt).lazydata, requires_grad=requires_grad)
  @staticmethod
  def randint(*shape: Any, low: int = 0, high: int = 10, dtype: DType | str = dtypes.int32, **kwargs: Any) -> Tensor:
    """Integers uniform in [low, high)."""
    dt = to_dtype(dtype)
    if not isinstance(low, int) or not isinstance(high, int): raise TypeError(f"randint low and high must be ints, got {low!r}, {high!r}")
    if high <= low: raise ValueError(f"randint needs low < high, got low={low} high={high}")
    if not dtypes.is_int(dt): raise TypeError(f"randint needs an integer dtype, got {dt}")
    if high - low > 2**32: raise ValueError(f"randint range {high - low} is larger than 2^32")
    shape = _shape_arg(*shape)
    rg = kwargs.pop("requires_grad", None)
    device = Device.canonicalize(kwargs.pop("device", None))
    if kwargs: raise TypeError(f"randint got unexpected arguments {sorted(kwargs)}")
    bits = Tensor._random_bits(prod(shape), device)
    # floor(u * range) for u = bits / 2^32, exactly, in 64-bit integer arithmetic
    r = ((bits.cast(dtypes.uint64) * (high - low)) >> 32).cast(dtypes.int64) + low
    return Tensor(r.cast(dt).reshape(shape).lazydata, requires_grad=rg)
  @staticmethod
  def normal(*shape: Any, mean: float = 0.0, std: float = 1.0, requires_grad: bool | None = None, **kwargs: Any) -> Tensor:
    """Normal with the given mean and std."""
    return Tensor(((std * Tensor.randn(*shape, **kwargs)) + mean).lazydata, requires_grad=requires_grad)
  @staticmethod
  def uniform(*shape: Any, low: float = 0.0, high: float = 1.0, dtype: DType | str | None = None, requires_grad: bool | None = None,
              **kwargs: Any) -> Tensor:
    """Uniform in [low, high)."""
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if dtypes.is_int(dt): return Tensor.randint(*shape, low=int(low), high=int(high), dtype=dt, requires_grad=requires_grad, **kwargs)
    return Tensor(((high - low) * Tensor.rand(*shape, dtype=dt, **kwargs) + low).cast(dt).lazydata, requires_grad=requires_grad)
  @staticmethod
  def scaled_uniform(*shape: Any, **kwargs: Any) -> Tensor:
    """Uniform in [-1, 1) scaled by 1/sqrt(numel)."""
    return Tensor.uniform(*shape, low=-1.0, high=1.0, **kwargs).mul(prod(_shape_arg(*shape)) ** -0.5)._leaf(kwargs.get("requires_grad"))
  @staticmethod
  def glorot_uniform(*shape: Any, **kwargs: Any) -> Tensor:
    """Glorot/Xavier uniform: bound sqrt(6 / (shape[0] + prod(shape[1:])))."""
    s = _shape_arg(*shape)
    if not s: raise ValueError("glorot_uniform needs at least one dim")
    return Tensor.uniform(*s, low=-1.0, high=1.0, **kwargs).mul((6 / (s[0] + prod(s[1:]))) ** 0.5)._leaf(kwargs.get("requires_grad"))
  @staticmethod
  def kaiming_uniform(*shape: Any, a: float = 0.01, **kwargs: Any) -> Tensor:
    """Kaiming/He uniform with leaky-relu slope a: bound sqrt(3) * sqrt(2 / (1 + a^2)) / sqrt(prod(shape[1:]))."""
    s = _shape_arg(*shape)
    if not s: raise ValueError("kaiming_uniform needs at least one dim")
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(max(1, prod(s[1:])))
    return Tensor.uniform(*s, low=-bound, high=bound, **kwargs)
  @staticmethod
  def kaiming_normal(*shape: Any, a: float = 0.01, **kwargs: Any) -> Tensor:
    """Kaiming/He normal with leaky-relu slope a: std sqrt(2 / (1 + a^2)) / sqrt(prod(shape[1:]))."""
    s = _shape_arg(*shape)
    if not s: raise ValueError("kaiming_normal needs at least one dim")
    std = math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(max(1, prod(s[1:])))
    return Tensor.normal(*s, mean=0.0, std=std, **kwargs)
  @staticmethod
  def randperm(n: int, device: str | None = None, dtype: DType | str = dtypes.int32, **kwargs: Any) -> Tensor:
    """A random permutation of 0..n-1 (sorts n random keys: O(n^2) work)."""
    if not isinstance(n, int) or n < 0: raise ValueError(f"randperm needs a non-negative int, got {n!r}")
    return Tensor(Tensor.rand(n, device=device).argsort().cast(to_dtype(dtype)).lazydata, **kwargs)
  def multinomial(self, num_samples: int = 1, replacement: bool = False) -> Tensor:
    """Draw indices from the (unnormalized, non-negative) weights along the last dim of a 1-D or 2-D tensor."""
    if not 1 <= self.ndim <= 2: raise ValueError(f"multinomial needs a 1-D or 2-D tensor of weights, got shape {self.shape}")
    if num_samples < 1: raise ValueError(f"multinomial needs num_samples >= 1, got {num_samples}")
    if not replacement and num_samples > self.shape[-1]:
      raise ValueError(f"cannot draw {num_samples} samples without replacement from {self.shape[-1]} categories")
    w = (self.reshape(1, -1) if self.ndim == 1 else self).float().detach()
    if replacement or num_samples == 1:
      cdf = w.cumsum(1)
      cdf = cdf / cdf[:, -1:]
      u = Tensor.rand(w.shape[0], num_samples, 1, device=self.device)
      idx = (u >= cdf.unsqueeze(1)).sum(2).minimum(w.shape[1] - 1).cast(dtypes.int32)
    else:
      # weighted sampling without replacement: the largest log(u)/w keys (Efraimidis-Spirakis)
      keys = Tensor.rand(*w.shape, device=self.device).log() / w
      idx = keys.topk(num_samples, dim=1)[1].cast(dtypes.int32)
    return idx.reshape(-1) if self.ndim == 1 else idx
  def dropout(self, p: float = 0.5) -> Tensor:
    """In training (TRAINING, Tensor.training), zero each element with probability p and scale the rest by 1/(1-p)."""
    if not 0 <= p <= 1: raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not TRAINING or p == 0: return self
    if p == 1: return self * 0
    mask = Tensor.rand(*self.shape, device=self.device, requires_grad=False) >= p
    return mask.where(self, 0) * (1 / (1 - p))

  # *** movement ***
  def _infer_symbolic_dim(self, new_shape: list) -> list:
    # the -1 of a reshape with symbolic sizes: equal dims on both sides cancel, the rest must divide exactly
    if sum(isinstance(s, int) and s < 0 for s in new_shape) != 1 or any(isinstance(s, int) and s < -1 for s in new_shape):
      raise ShapeError(f"bad reshape target {tuple(new_shape)}: one -1 at most, other sizes non-negative")
    left, right = list(self.shape), [s for s in new_shape if not (isinstance(s, int) and s == -1)]
    for s in list(right):
      if (i := next((i for i, t in enumerate(left) if _same(s, t)), None)) is not None: left.pop(i), right.remove(s)
    total, known = ssimplify(prod(left)), ssimplify(prod(right))
    inferred = ssimplify(total // known) if isinstance(known, int) and known > 0 else None
    if inferred is None or not _same(ssimplify(inferred * known), total):
      def show(xs: Any) -> str: return "(" + ", ".join(x.render() if isinstance(x, UOp) else str(x) for x in xs) + ")"
      raise ShapeError(f"cannot infer the -1 of reshape {show(new_shape)} from {show(self.shape)}: "
                       f"{show([total])[1:-1]} is not a known multiple of {show([known])[1:-1]}")
    return [inferred if isinstance(s, int) and s == -1 else s for s in new_shape]
  def reshape(self, shape: Any, *args: Any) -> Tensor:
    """A view with a new shape of the same number of elements; one dim may be -1, None keeps that dim."""
    new_shape = [_sym(s) if s is not None else self.shape[i] for i, s in enumerate(argfix(shape, *args))]
    if any(isinstance(s, UOp) for s in new_shape + list(self.shape)):
      # symbolic: the sizes cannot be compared here; the ShapeTracker checks what it can
      if any(isinstance(s, int) and s < 0 for s in new_shape): new_shape = self._infer_symbolic_dim(new_shape)
      return _bind(self if all(_same(a, b) for a, b in zip(new_shape, self.shape)) and len(new_shape) == self.ndim else
                   F.Reshape.apply(self, shape=tuple(new_shape)), _bound_vals(shape, args))
    for s in new_shape:
      if not isinstance(s, (int, np.integer)) or s < -1: raise ShapeError(f"bad reshape target {tuple(new_shape)}")
    if new_shape.count(-1) > 1: raise ShapeError(f"only one dimension can be -1 in reshape {tuple(new_shape)}")
    if -1 in new_shape:
      known = prod(s for s in new_shape if s != -1)
      if known == 0 or self.numel() % known: raise ShapeError(f"cannot reshape {self.shape} to {tuple(new_shape)}")
      new_shape[new_shape.index(-1)] = self.numel() // known
    new_shape = [int(s) for s in new_shape]
    if prod(new_shape) != self.numel():
      raise ShapeError(f"cannot reshape tensor of shape {self.shape} ({self.numel()} elements) to {tuple(new_shape)}")
    return self if tuple(new_shape) == self.shape else F.Reshape.apply(self, shape=tuple(new_shape))
  def view(self, shape: Any, *args: Any) -> Tensor:
    """Same as reshape."""
    return self.reshape(shape, *args)
  def expand(self, shape: Any, *args: Any) -> Tensor:
    """Broadcast size-1 dims to a larger size (a view); -1 keeps a dim; new leading dims may be added."""
    new_shape = tuple(_sym(s) for s in argfix(shape, *args))
    if len(new_shape) < self.ndim: raise ShapeError(f"cannot expand {self.shape} to fewer dims {new_shape}")
    src = self.reshape((1,) * (len(new_shape) - self.ndim) + self.shape) if len(new_shape) > self.ndim else self
    out = tuple(s if _same(n, -1) else n for s, n in zip(src.shape, new_shape))
    for s, n in zip(src.shape, out):
      if not _same(s, n) and not _same(s, 1): raise ShapeError(f"cannot expand {self.shape} to {new_shape}: only dims of size 1 can grow")
    return _bind(src if all(_same(a, b) for a, b in zip(out, src.shape)) else F.Expand.apply(src, shape=out), _bound_vals(shape, args))
  def broadcast_to(self, shape: Any) -> Tensor:
    """Broadcast to `shape` following numpy rules."""
    return self.expand(shape)
  def permute(self, order: Any, *args: Any) -> Tensor:
    """Reorder the dims (a view)."""
    order = tuple(self._resolve_dim(d) for d in argfix(order, *args))
    if sorted(order) != list(range(self.ndim)): raise ShapeError(f"permute order {order} is not a permutation of {self.ndim} dims")
    return F.Permute.apply(self, order=order)
  def flip(self, axis: Any, *args: Any) -> Tensor:
    """Reverse the order along the given dims (a view)."""
    axes = tuple(self._resolve_dim(a) for a in argfix(axis, *args))
    if len(set(axes)) != len(axes): raise ShapeError(f"flip axes {axes} repeat a dim")
    return F.Flip.apply(self, axis=axes)
  def shrink(self, arg: Sequence[tuple[sint, sint] | None]) -> Tensor:
    """Keep [begin, end) along each dim (None keeps the dim whole); a view."""
    if len(arg) != self.ndim: raise ShapeError(f"shrink needs one (begin, end) per dim of {self.shape}, got {arg}")
    a = tuple((_sym(x[0]), _sym(x[1])) if x is not None else (0, s) for x, s in zip(arg, self.shape))
    for (b, e), s in zip(a, self.shape):
      # a symbolic bound is checked through its range
      lo_b, hi_e = (b.vmin if isinstance(b, UOp) else b), (e.vmax if isinstance(e, UOp) else e)
      if isinstance(s, UOp): continue
      if not (0 <= lo_b and hi_e <= s and (isinstance(b, UOp) or isinstance(e, UOp) or b <= e)):
        raise ShapeError(f"shrink {arg} is out of bounds for shape {self.shape}")
    return _bind(self if all(_same(x[0], 0) and _same(x[1], s) for x, s in zip(a, self.shape)) else F.Shrink.apply(self, arg=a), _bound_vals(arg))
  def pad(self, padding: Sequence[Any], mode: str = "constant", value: float = 0.0) -> Tensor:
    """Pad with one (before, after) per dim (None for none), or torch style (left, right, top, bottom, ...) from the
    last dim. mode is "constant" (with `value`), "reflect", "replicate" or "circular"; negative pads crop."""
    if mode not in ("constant", "reflect", "replicate", "circular"):
      raise ArgumentError(f"pad mode must be constant, reflect, replicate or circular, got {mode!r}")
    if mode != "constant" and value != 0: raise ArgumentError(f"pad value only applies to mode 'constant', not {mode!r}")
    if len(padding) and all(isinstance(p, (int, np.integer)) for p in padding):
      flat = [int(p) for p in padding]
      if len(flat) % 2: raise ShapeError(f"flat padding {tuple(padding)} needs pairs")
      if len(flat) // 2 > self.ndim: raise ShapeError(f"padding {tuple(padding)} has more pairs than the {self.ndim} dims of {self.shape}")
      pads = [(0, 0)] * (self.ndim - len(flat) // 2) + [(flat[2 * i], flat[2 * i + 1]) for i in reversed(range(len(flat) // 2))]
    else: pads = [tuple(p) if p is not None else (0, 0) for p in padding]  # type: ignore[misc]
    if len(pads) != self.ndim: raise ShapeError(f"padding {padding} does not match the {self.ndim} dims of {self.shape}")
    if any(len(p) != 2 for p in pads): raise ShapeError(f"padding {padding} needs (before, after) pairs")
    if any(b < 0 or a < 0 for b, a in pads) and mode in ("reflect", "replicate"):
      # as torch: pad first, then crop the padded tensor (the reflected or replicated part may be what is kept)
      x = self.pad(tuple((max(b, 0), max(a, 0)) for b, a in pads), mode)
      for (b, a), s in zip(pads, x.shape):
        if -min(b, 0) - min(a, 0) > s: raise ShapeError(f"negative padding {padding} crops more than the padded shape {x.shape}")
      return x.shrink(tuple((-min(b, 0), s + min(a, 0)) for (b, a), s in zip(pads, x.shape)))
    if any(b < 0 or a < 0 for b, a in pads):  # negative pads crop (circular, as torch, crops first)
      for (b, a), s in zip(pads, self.shape):
        if -min(b, 0) - min(a, 0) > s: raise ShapeError(f"negative padding {padding} crops more than the shape {self.shape}")
      x = self.shrink(tuple((-min(b, 0), s + min(a, 0)) for (b, a), s in zip(pads, self.shape)))
      return x.pad(tuple((max(b, 0), max(a, 0)) for b, a in pads), mode, value)
    if all(p == (0, 0) for p in pads): return self
    if mode == "constant":
      ret = F.Pad.apply(self, arg=tuple(pads))
      if value == 0 and not (isinstance(value, float) and math.copysign(1, value) < 0): return ret
      mask = F.Pad.apply(Tensor.ones(self.shape, dtype=dtypes.bool, device=self.device), arg=tuple(pads))
      return mask.where(ret, value)
    x = self
    for d, (b, a) in enumerate(pads):
      if b == 0 and a == 0: continue
      s = x.shape[d]
      def sl(lo: int, hi: int, x: Tensor = x, d: int = d) -> Tensor: return x.shrink(tuple((lo, hi) if i == d else None for i in range(x.ndim)))
      if mode == "reflect":
        if b >= s or a >= s: raise ShapeError(f"reflect padding ({b}, {a}) must be smaller than the dim size {s} of {self.shape}")
        x = Tensor.cat(sl(1, b + 1).flip(d), x, sl(s - 1 - a, s - 1).flip(d), dim=d)
      elif mode == "replicate":
        if s == 0: raise ShapeError(f"cannot replicate-pad an empty dim of {self.shape}")
        e = [(-1 if i != d else b) for i in range(x.ndim)]
        e2 = [(-1 if i != d else a) for i in range(x.ndim)]
        x = Tensor.cat(sl(0, 1).expand(e), x, sl(s - 1, s).expand(e2), dim=d)
      else:
        if b > s or a > s: raise ShapeError(f"circular padding ({b}, {a}) must not exceed the dim size {s} of {self.shape}")
        x = Tensor.cat(sl(s - b, s), x, sl(0, a), dim=d)
    return x
  def _resolve_dim(self, dim: int, extra: bool = False) -> int:
    total = self.ndim + int(extra)
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool): raise TypeError(f"dim must be an int, got {dim!r}")
    if not -max(1, total) <= dim < max(1, total): raise IndexError(f"dim {dim} is out of range for a tensor of {self.ndim} dims")
    return int(dim) + total if dim < 0 else int(dim)
  def _axes(self, axis: int | Sequence[int] | None) -> tuple[int, ...]:
    if axis is None: return tuple(range(self.ndim))
    axes = tuple(self._resolve_dim(a) for a in (axis if isinstance(axis, (list, tuple)) else [axis]))
    if len(set(axes)) != len(axes): raise ShapeError(f"axis {axis} repeats a dim")
    return axes if self.ndim else ()
  def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
    """Swap two dims (a view)."""
    order = list(range(self.ndim))
    a, b = self._resolve_dim(dim0), self._resolve_dim(dim1)
    order[a], order[b] = order[b], order[a]
    return self.permute(order)
  @property
  def T(self) -> Tensor:
    """Swaps dims 0 and 1, as tinygrad (not torch's reversal of every dim for ndim > 2); 0-d and 1-d tensors unchanged."""
    return self.transpose() if self.ndim >= 2 else self
  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims start_dim..end_dim into one."""
    if self.ndim == 0: return self.reshape(1)
    s, e = self._resolve_dim(start_dim), self._resolve_dim(end_dim)
    if s > e: raise ShapeError(f"flatten start_dim {start_dim} comes after end_dim {end_dim}")
    return self.reshape(self.shape[:s] + (prod(self.shape[s:e + 1]),) + self.shape[e + 1:])
  def unflatten(self, dim: int, sizes: tuple[int, ...]) -> Tensor:
    """Split one dim into `sizes` (one of them may be -1)."""
    d = self._resolve_dim(dim)
    return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:]) if -1 in sizes else \
      self._check_unflatten(d, sizes).reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])
  def _check_unflatten(self, d: int, sizes: tuple[int, ...]) -> Tensor:
    if prod(sizes) != self.shape[d]: raise ShapeError(f"unflatten sizes {tuple(sizes)} do not multiply to the size {self.shape[d]} of dim {d}")
    return self
  def squeeze(self, dim: int | Sequence[int] | None = None) -> Tensor:
    """Remove size-1 dims (all of them, or those in dim)."""
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    if self.ndim == 0:
      for d in (dim if isinstance(dim, (list, tuple)) else [dim]): self._resolve_dim(d)  # a 0-d tensor takes dim 0 or -1
      return self
    dims = {self._resolve_dim(d) for d in (dim if isinstance(dim, (list, tuple)) else [dim])}
    return self.reshape(tuple(s for i, s in enumerate(self.shape) if not (i in dims and s == 1)))
  def pad_to(self, shape: Any, *args: Any, value: Any = 0) -> Tensor:
    """Pad with `value` at the end of each dim up to `shape` (None keeps a dim)."""
    new = argfix(shape, *args)
    if len(new) != self.ndim: raise ShapeError(f"pad_to shape {new} needs {self.ndim} dims like {self.shape}")
    for s, n in zip(self.shape, new):
      if n is not None and n < s: raise ShapeError(f"pad_to shape {new} is smaller than {self.shape}")
    return self.pad(tuple((0, n - s if n is not None else 0) for s, n in zip(self.shape, new)), value=value)
  def shrink_to(self, shape: Any, *args: Any) -> Tensor:
    """Keep the first shape[i] elements of each dim (None keeps a dim)."""
    new = argfix(shape, *args)
    if len(new) != self.ndim: raise ValueError(f"shrink_to shape {new} needs {self.ndim} dims like {self.shape}")
    return self.shrink(tuple((0, n) if n is not None else None for n in new))
  def rearrange(self, formula: str, **sizes: int) -> Tensor:
    """einops-style rearrange: "b c (h w) -> b (c h) w" with sizes for split dims (h=2); "..." stands for the rest."""
    if formula.count("->") != 1: raise ValueError(f"rearrange formula {formula!r} needs exactly one '->'")
    def parse(side: str) -> list[list[str]]:
      groups, cur = [], None
      for tok in side.replace("(", " ( ").replace(")", " ) ").split():
        if tok == "(":
          if cur is not None: raise ValueError(f"rearrange formula {formula!r}: nested parentheses")
          cur = []
        elif tok == ")":
          if cur is None: raise ValueError(f"rearrange formula {formula!r}: unbalanced parentheses")
          groups.append(cur)
          cur = None
        elif cur is not None: cur.append(tok)
        else: groups.append([tok])
      if cur is not None: raise ValueError(f"rearrange formula {formula!r}: unbalanced parentheses")
      return groups
    lhs, rhs = (parse(x) for x in formula.split("->"))
    if any(g == ["..."] for g in lhs):
      n = self.ndim - (len(lhs) - 1)
      if n < 0: raise ValueError(f"rearrange {formula!r} names more dims than {self.shape} has")
      ell = [f"__e{i}" for i in range(n)]
      lhs = flatten([[[e] for e in ell] if g == ["..."] else [g] for g in lhs])
      rhs = flatten([[[e] for e in ell] if g == ["..."] else [g] for g in rhs])
    lhs, rhs = ([[n for n in g if n != "1"] for g in side] for side in (lhs, rhs))  # a "1" is a unit axis: dropped on the left, added on the right
    if len(lhs) != self.ndim: raise ValueError(f"rearrange {formula!r} has {len(lhs)} input dims, the tensor has shape {self.shape}")
    known: dict[str, int] = dict(sizes)
    for g, s in zip(lhs, self.shape):
      unknown = [n for n in g if n not in known]
      if len(g) == 1 and unknown: known[g[0]] = s
      elif len(unknown) > 1: raise ValueError(f"rearrange {formula!r}: give the sizes of {unknown[1:]}")
      elif unknown: known[unknown[0]] = s // prod(known[n] for n in g if n != unknown[0])
      if prod(known[n] for n in g) != s: raise ValueError(f"rearrange {formula!r}: group {g} does not multiply to {s}")
    names = flatten(lhs)
    if sorted(flatten(rhs)) != sorted(names): raise ValueError(f"rearrange {formula!r}: both sides need the same names")
    x = self.reshape([known[n] for n in names]).permute([names.index(n) for n in flatten(rhs)])
    return x.reshape([prod(known[n] for n in g) for g in rhs])
  def unsqueeze(self, dim: int) -> Tensor:
    """Insert a size-1 dim at position dim."""
    d = self._resolve_dim(dim, extra=True)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])
  def repeat(self, repeats: Any, *args: Any) -> Tensor:
    """Tile the tensor repeats[i] times along each dim (as torch.Tensor.repeat)."""
    reps = argfix(repeats, *args)
    if len(reps) < self.ndim: raise ShapeError(f"repeat needs at least {self.ndim} repeats for shape {self.shape}, got {reps}")
    if any(not isinstance(r, int) or r < 0 for r in reps): raise ValueError(f"repeats {reps} must be non-negative ints")
    base = (1,) * (len(reps) - self.ndim) + self.shape
    x = self.reshape(flatten((1, b) for b in base)).expand(flatten(zip(reps, base)))
    return x.reshape(tuple(r * b for r, b in zip(reps, base)))
  def repeat_interleave(self, repeats: int, dim: int | None = None) -> Tensor:
    """Repeat each element `repeats` times along dim (the flattened tensor when dim is None)."""
    if not isinstance(repeats, int) or repeats < 0: raise ValueError(f"repeat_interleave needs a non-negative int, got {repeats!r}")
    x, d = (self.flatten(), 0) if dim is None else (self, self._resolve_dim(dim))
    s = x.shape
    return x.reshape(*s[:d + 1], 1, *s[d + 1:]).expand(*s[:d + 1], repeats, *s[d + 1:]).reshape(*s[:d], s[d] * repeats, *s[d + 1:])
  def roll(self, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Tensor:
    """Shift elements cyclically along dims (the flattened tensor when dims is None), as torch.roll."""
    if dims is None: return self.flatten().roll(shifts, 0).reshape(self.shape)
    sh, ds = make_tuple(shifts, 1), make_tuple(dims, 1)
    if len(sh) != len(ds): raise ShapeError(f"roll needs as many shifts as dims, got {sh} and {ds}")
    x = self
    for s, d in zip(sh, ds):
      d = self._resolve_dim(d)
      n = x.shape[d]
      if n == 0 or s % n == 0: continue
      s %= n
      x = x.repeat(*[2 if i == d else 1 for i in range(x.ndim)]).shrink(tuple((n - s, 2 * n - s) if i == d else None for i in range(x.ndim)))
    return x
  def cat(self, *args: Tensor, dim: int = 0) -> Tensor:
    """Concatenate tensors along dim; they must match elsewhere. Dtypes promote. `Tensor.cat([a, b])` works too."""
    if isinstance(self, (list, tuple)): return Tensor._first(self, "cat").cat(*self[1:], *args, dim=dim)
    ts = (self,) + args
    d = self._resolve_dim(dim)
    for t in ts:
      if not isinstance(t, Tensor): raise TypeError(f"cat needs Tensors, got {type(t).__name__}")
      if t.ndim != self.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, self.shape)) if i != d):
        raise ShapeError(f"cat shape mismatch along dim {d}: {[x.shape for x in ts]}")
    dt = least_upper_dtype(*[t.dtype for t in ts])
    ts = tuple(t.cast(dt) for t in ts)
    total = sum(t.shape[d] for t in ts)
    out: Tensor | None = None
    off = 0
    for t in ts:
      n = t.shape[d]
      if n == 0 and len(ts) > 1: continue
      arg = tuple((off, total - off - n) if i == d else (0, 0) for i in range(self.ndim))
      p = t.pad(arg)
      if out is None: out = p
      else:
        mask = Tensor.ones(t.shape, dtype=dtypes.bool, device=t.device).pad(arg)
        out = mask.where(p, out)
      off += n
    return out if out is not None else ts[0]
  @staticmethod
  def _first(ts: Sequence[Tensor], what: str) -> Tensor:
    if not ts or not isinstance(ts[0], Tensor): raise TypeError(f"{what} needs Tensors, got {ts!r}")
    return ts[0]
  def stack(self, *args: Tensor, dim: int = 0) -> Tensor:
    """Stack tensors of one shape along a new dim. `Tensor.stack([a, b])` works too."""
    if isinstance(self, (list, tuple)): return Tensor._first(self, "stack").stack(*self[1:], *args, dim=dim)
    for t in args:
      if t.shape != self.shape: raise ShapeError(f"stack needs tensors of one shape, got {self.shape} and {t.shape}")
    d = self._resolve_dim(dim, extra=True)
    return Tensor.cat(*[t.unsqueeze(d) for t in (self,) + args], dim=d)
  def split(self, sizes: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """Split along dim into chunks of size `sizes` (the last may be smaller), or into the given sizes."""
    d = self._resolve_dim(dim)
    n = self.shape[d]
    if isinstance(sizes, int):
      if sizes <= 0: raise ValueError(f"split size must be positive, got {sizes}")
      sizes = [min(sizes, n - i) for i in range(0, max(n, 1), sizes)] if n else [0]
    if sum(sizes) != n: raise ShapeError(f"split sizes {tuple(sizes)} do not add up to the size {n} of dim {d}")
    offs = list(itertools.accumulate(sizes, initial=0))
    return tuple(self.shrink(tuple((offs[i], offs[i + 1]) if j == d else None for j in range(self.ndim))) for i in range(len(sizes)))
  def chunk(self, chunks: int, dim: int = 0) -> list[Tensor]:
    """Split into `chunks` pieces of ceil(size/chunks) along dim (fewer when it does not divide)."""
    if not isinstance(chunks, int) or chunks <= 0: raise ValueError(f"chunk needs a positive number of chunks, got {chunks!r}")
    d = self._resolve_dim(dim)
    n = self.shape[d]
    return list(self.split(ceildiv(n, chunks), dim=d)) if n else list(self.split([0] * chunks, dim=d))
  def unfold(self, dim: int, size: int, step: int) -> Tensor:
    """Sliding windows of `size` with `step` along dim: that dim becomes the window count, and a last dim of size
    `size` is added (as torch.Tensor.unfold); size 0 gives size+1 empty windows."""
    d = self._resolve_dim(dim)
    if size < 0 or step <= 0: raise ShapeError(f"unfold needs size >= 0 and step > 0, got size={size} step={step}")
    if size > self.shape[d]: raise ShapeError(f"unfold size {size} is larger than the size {self.shape[d]} of dim {d}")
    if size == 0:  # shrunk from self, not fresh zeros, so the (empty) graph still leads back to self and backward() gives it a zero .grad
      count = self.shape[d] // step + 1
      x = self.unsqueeze(-1).shrink(tuple([None] * self.ndim) + ((0, 0),))
      return x.pad(tuple(None if i != d else (0, max(0, count - self.shape[d])) for i in range(x.ndim))) \
        .shrink(tuple(None if i != d else (0, count) for i in range(x.ndim)))
    x = self.transpose(d, -1) if d != self.ndim - 1 else self
    w = x._windows((size,), step)  # (..., o, size)
    return w.transpose(d, -2) if d != self.ndim - 1 else w
  def tril(self, diagonal: int = 0) -> Tensor:
    """Keep the lower triangle of the last two dims (j <= i + diagonal), zero elsewhere."""
    if self.ndim < 2: raise DimError(f"tril needs at least 2 dims, got shape {self.shape}")
    return self._tri_mask(diagonal, lower=True).where(self, self.zeros_like())
  def triu(self, diagonal: int = 0) -> Tensor:
    """Keep the upper triangle of the last two dims (j >= i + diagonal), zero elsewhere."""
    if self.ndim < 2: raise DimError(f"triu needs at least 2 dims, got shape {self.shape}")
    return self._tri_mask(diagonal, lower=False).where(self, self.zeros_like())
  def _tri_mask(self, diagonal: int, lower: bool) -> Tensor:
    r, c = self.shape[-2], self.shape[-1]
    i, j = Tensor._iota(r, self.device).reshape(r, 1), Tensor._iota(c, self.device).reshape(1, c)
    return (j <= i + diagonal) if lower else (j >= i + diagonal)
  def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of dims dim1, dim2 (moved to the last dim), as torch.diagonal."""
    a, b = self._resolve_dim(dim1), self._resolve_dim(dim2)
    if a == b: raise ShapeError(f"diagonal dims must differ, got {dim1} and {dim2}")
    x = self.permute(*[i for i in range(self.ndim) if i not in (a, b)], a, b)
    r, c = x.shape[-2], x.shape[-1]
    x = x.shrink(tuple([None] * (x.ndim - 2)) + ((max(0, -offset), r), (max(0, offset), c))) if (offset < c and -offset < r) else \
      x.shrink(tuple([None] * (x.ndim - 2)) + ((0, 0), (0, 0)))
    return x._diag_last2()
  def _diag_last2(self) -> Tensor:
    r, c = self.shape[-2], self.shape[-1]
    n = min(r, c)
    lead = self.shape[:-2]
    if n == 0: return self.shrink(tuple([None] * len(lead)) + ((0, 0), (0, 0))).reshape(*lead, 0)  # still in self's graph
    # the diagonal of an n x n block is every (n+1)th element of its flattening
    x = self.shrink(tuple([None] * len(lead)) + ((0, n), (0, n))).reshape(*lead, n * n)
    x = x.pad(tuple([None] * len(lead)) + ((0, n),)).reshape(*lead, n, n + 1)
    return x.shrink(tuple([None] * len(lead)) + ((0, n), (0, 1))).reshape(*lead, n)
  def diag(self) -> Tensor:
    """A 1-D tensor becomes a diagonal matrix; a 2-D tensor gives its diagonal."""
    if self.ndim == 1:
      n = self.shape[0]
      if n == 0: return self.reshape(0, 1).shrink(((0, 0), (0, 0)))  # still in self's graph: backward() gives self a zero .grad
      return self.unsqueeze(-1).pad(((0, 0), (0, n))).flatten().shrink(((0, n * n),)).reshape(n, n)
    if self.ndim == 2: return self.diagonal()
    raise ValueError(f"diag needs a 1-D or 2-D tensor, got shape {self.shape}")

  # *** indexing ***
  def _index_tensor(self, t: Any) -> Tensor:
    """A list, numpy array or Tensor used as an index, as a Tensor (int or bool)."""
    if not isinstance(t, Tensor):
      arr = np.asarray(t)
      if arr.size == 0: arr = arr.astype(np.int32)
      if arr.dtype == object or arr.dtype.kind not in "iub": raise IndexError(f"tensors used as indices must be int or bool, got {t!r}")
      t = Tensor(arr.astype(np.int32) if arr.dtype.kind in "iu" and arr.size and arr.max(initial=0) < 2**31 and arr.min(initial=0) >= -2**31 else arr,
                 device=self.device)
    if not (dtypes.is_int(t.dtype) or t.dtype == dtypes.bool): raise IndexError(f"tensors used as indices must be int or bool, got {t.dtype}")
    if t.device != self.device: t = t.to(self.device)
    return t
  @staticmethod
  def _check_index_range(idx: Tensor, size: int, what: str) -> None:
    """Realize an index tensor and check that every entry is in [-size, size)."""
    if idx.numel() == 0: return
    vals = idx.detach().numpy()
    lo, hi = int(vals.min()), int(vals.max())
    if lo < -size or hi >= size: raise IndexError(f"{what}: index {lo if lo < -size else hi} is out of bounds for size {size}")
  def _plan(self, indices: Any) -> tuple[Tensor, list[tuple[int, Tensor]], Callable[[Tensor, bool], Tensor]]:
    """Apply the basic part of an index (ints, slices, None, Ellipsis) as views. Returns the view, the tensor indices
    as (dim in the view, int tensor), and a function that maps a tensor of the view's shape back onto self's
    shape (padding with `fill`), which __setitem__ uses."""
    # a list that holds sequences, slices, None or Ellipsis is a tuple of indices (numpy's old rule, kept by torch and
    # tinygrad: x[[[0, 1], [1, 2]]] is x[[0, 1], [1, 2]]); a tuple inside the index is an index list
    if isinstance(indices, list) and any(isinstance(i, (list, tuple, slice)) or i is None or i is Ellipsis for i in indices): indices = tuple(indices)
    idx = list(indices) if isinstance(indices, tuple) else [indices]
    # bool masks become one int index tensor per dim they cover (a data-dependent shape: the mask is realized)
    norm: list[Any] = []
    for i in idx:
      if isinstance(i, bool): raise IndexError("indexing with a python bool is not supported")
      if isinstance(i, (Tensor, list, tuple, np.ndarray)):
        t = self._index_tensor(i)
        if t.dtype == dtypes.bool:
          nz = np.nonzero(t.numpy())
          norm.extend(Tensor(n.astype(np.int32), device=self.device) for n in nz)
          norm.append(("mask", t.ndim, t.shape))
          continue
        norm.append(t)
      elif i is None or i is Ellipsis or isinstance(i, slice) or isinstance(i, (int, np.integer)): norm.append(i)
      else: raise IndexError(f"cannot index with {type(i).__name__}: {i!r}")
    # a mask marker covers mask.ndim dims and checks their sizes; drop the marker, keep the int tensors
    items: list[Any] = []
    mask_dims: list[tuple[int, tuple]] = []
    for i in norm:
      if isinstance(i, tuple): mask_dims.append((len(items) - i[1], i[2]))
      else: items.append(i)
    if sum(1 for i in items if i is Ellipsis) > 1: raise IndexError("an index can only have a single ellipsis")
    n_real = sum(1 for i in items if i is not None and i is not Ellipsis)
    if n_real > self.ndim: raise IndexError(f"too many indices for tensor of dimension {self.ndim}: got {n_real}")
    if any(i is Ellipsis for i in items):
      e = next(k for k, i in enumerate(items) if i is Ellipsis)
      items[e:e + 1] = [slice(None)] * (self.ndim - n_real)
      mask_dims = [(p + (self.ndim - n_real - 1 if p > e else 0), s) for p, s in mask_dims]
    items += [slice(None)] * (self.ndim - sum(1 for i in items if i is not None))
    shrink, flips, strides, kinds = [], [], [], []
    tensors: list[tuple[int, Tensor]] = []
    dim = 0
    vdim = 0  # position in the view after ints are dropped and Nones inserted
    dim_of_item: dict[int, int] = {}
    for k, i in enumerate(items):
      if i is None:
        kinds.append("none"); vdim += 1  # noqa: E702
        continue
      size = self.shape[dim]
      dim_of_item[k] = dim
      if isinstance(i, Tensor):
        shrink.append((0, size)); flips.append(False); strides.append(1); kinds.append("tensor")  # noqa: E702
        tensors.append((vdim, i))
        vdim += 1
      elif isinstance(i, (int, np.integer)):
        j = int(i) + size if i < 0 else int(i)
        if not 0 <= j < size: raise IndexError(f"index {i} is out of bounds for dim {dim} with size {size}")
        shrink.append((j, j + 1)); flips.append(False); strides.append(1); kinds.append("int")  # noqa: E702
      elif any(_is_sym(v) for v in (i.start, i.stop)) or (isinstance(size, UOp) and i == slice(None)):
        # symbolic bounds: a plain [start:stop] shrink
        if i.step not in (None, 1): raise IndexError(f"a slice with a symbolic bound cannot have a step, got {i}")
        b, e = i.start if i.start is not None else 0, i.stop if i.stop is not None else size  # (shrink binds bound values)
        shrink.append((b, e)); flips.append(False); strides.append(1); kinds.append("slice")  # noqa: E702
        vdim += 1
      else:
        if i.step == 0: raise ValueError("slice step cannot be zero")
        start, stop, step = i.indices(size)
        if step > 0: b, e = start, max(start, stop)
        else: b, e = stop + 1, max(stop + 1, start + 1)
        shrink.append((b, e)); flips.append(step < 0); strides.append(abs(step)); kinds.append("slice")  # noqa: E702
        vdim += 1
      dim += 1
    for p, s in mask_dims:
      got = tuple(self.shape[dim_of_item[p + q]] for q in range(len(s))) if all(p + q in dim_of_item for q in range(len(s))) else None
      if got != tuple(s): raise IndexError(f"boolean mask of shape {tuple(s)} does not match the indexed dims {got} of {self.shape}")
    x = self.shrink(tuple(shrink))
    shrunk_shape = x.shape
    if any(flips): x = x.flip(tuple(d for d, f in enumerate(flips) if f))
    if any(s != 1 for s in strides):
      # a step is a pad to a multiple of it, a reshape into (n, step), and taking column 0
      x = x.pad(tuple((0, ceildiv(s, st) * st - s) for s, st in zip(x.shape, strides)))
      x = x.reshape(flatten((ceildiv(s, st), st) for s, st in zip(x.shape, strides)))
      x = x.shrink(tuple(flatten(((0, s), (0, 1)) for s in x.shape[::2]))).reshape(x.shape[::2])
    pre_shape = x.shape
    view_shape: list[int] = []
    it = iter(pre_shape)
    for kd in kinds:
      if kd == "none": view_shape.append(1)
      elif kd == "int": next(it)
      else: view_shape.append(next(it))
    x = x.reshape(tuple(view_shape))
    def unview(v: Tensor, fill: bool = False) -> Tensor:
      v = v.reshape(pre_shape)
      if any(s != 1 for s in strides):
        v = v.reshape(flatten((s, 1) for s in v.shape)).pad(tuple(flatten(((0, 0), (0, st - 1)) for st in strides)))
        v = v.reshape(tuple(s * st for s, st in zip(pre_shape, strides)))
        v = v.shrink(tuple((0, s) for s in shrunk_shape))
      if any(flips): v = v.flip(tuple(d for d, f in enumerate(flips) if f))
      return v.pad(tuple((b, s - e) for (b, e), s in zip(shrink, self.shape)), value=fill) if v.dtype != dtypes.bool or not fill else \
        v.pad(tuple((b, s - e) for (b, e), s in zip(shrink, self.shape)))
    return x, tensors, unview
  def _advanced(self, x: Tensor, tensors: list[tuple[int, Tensor]]) -> tuple[Tensor, tuple[int, ...], tuple[int, ...], Tensor, int, bool]:
    """Shared by get and set: x permuted to (rest..., indexed...) and flattened over the indexed dims, the broadcast
    index shape, the rest dims, the flat index (negatives wrapped), its range, and whether B goes in place."""
    tdims = [d for d, _ in tensors]
    try: bshape = _broadcast_shape(*[t.shape for _, t in tensors])
    except ValueError: raise IndexError(f"index tensors of shapes {[t.shape for _, t in tensors]} cannot be broadcast together") from None
    sizes = [x.shape[d] for d in tdims]
    pnum = prod(sizes)
    idt = dtypes.int64 if pnum >= 2**31 else dtypes.int32
    flat: Tensor | None = None
    bad: Tensor | None = None
    for (_, t), s, stride in zip(tensors, sizes, [prod(sizes[k + 1:]) for k in range(len(sizes))]):
      t = t.cast(idt).expand(bshape)
      out = (t < -s) | (t >= s)
      bad = out if bad is None else bad | out
      t = (t < 0).where(t + s, t) * stride
      flat = t if flat is None else flat + t
    assert flat is not None
    # with several index tensors, one out of range makes the flat index pnum: out of range too (the error names pnum)
    if bad is not None: flat = bad.where(pnum, flat)
    rest = [d for d in range(x.ndim) if d not in tdims]
    xp = x.permute(*rest, *tdims).reshape(*[x.shape[d] for d in rest], pnum)
    adjacent = tdims == list(range(tdims[0], tdims[0] + len(tdims)))
    return xp, bshape, tuple(rest), flat, pnum, adjacent
  def __getitem__(self, indices: Any) -> Tensor:
    """numpy/torch indexing: ints, slices with any step (negative too), None, Ellipsis, integer tensors/lists (a gather:
    cost of the output; an index out of range raises IndexError at the next sync) and bool masks (realized to find
    their true entries)."""
    x, tensors, _ = self._plan(indices)
    if not tensors: return x
    if len(tensors) == 1:
      # one index tensor: a gather along its dim, the result's other dims in place (rows of the table stay contiguous)
      (p, t), n = tensors[0], tensors[0][1].numel()
      idx = t.reshape(*[1] * p, n, *[1] * (x.ndim - p - 1)).expand(*x.shape[:p], n, *x.shape[p + 1:])
      return x._gather(idx, p).reshape(*x.shape[:p], *t.shape, *x.shape[p + 1:])
    xp, bshape, rest, flat, pnum, adjacent = self._advanced(x, tensors)
    nr, nb = len(rest), len(bshape)
    rshape, nbt = xp.shape[:-1], prod(bshape)
    out = xp._gather(flat.reshape(*[1] * nr, nbt).expand(*rshape, nbt), nr).reshape(*rshape, *bshape)  # (rest..., B...)
    if adjacent and nr:
      p = tensors[0][0]
      out = out.permute(*range(p), *range(nr, nr + nb), *range(p, nr))
    elif nr: out = out.permute(*range(nr, nr + nb), *range(nr))
    return out
  def _gather(self, idx: Tensor, axis: int) -> Tensor:
    """self's entries at idx along axis (idx has self's shape except at axis): a load at the loaded index, O(idx's
    size). A negative index counts from the end; one out of range raises IndexError at the next sync."""
    return F.Gather.apply(self, idx, axis=axis)
  def _scatter(self, idx: Tensor, src: Tensor | float, axis: int, op: Ops | None = Ops.ADD) -> Tensor:
    """self with src added (op ADD) or written (None: the last write wins) at idx along axis (idx and src: self's shape
    except at axis), repeated indices combining in order: O(idx's size) plus a copy of self."""
    if not isinstance(src, Tensor): src = Tensor.full(idx.shape, src, dtype=self.dtype, device=self.device)
    return F.Scatter.apply(self, idx, src.cast(self.dtype), axis=axis, op=op)
  @staticmethod
  def _select_sum(mask: Tensor, x: Tensor, axis: int = -1) -> Tensor:
    """sum over axis of where(mask, x, 0), exact for every dtype when at most one entry is selected."""
    if x.dtype == dtypes.bool: return Tensor._select_sum(mask, x.cast(dtypes.uint8), axis).cast(dtypes.bool)
    return mask.where(x, 0).sum(axis, dtype=x.dtype)
  def __setitem__(self, indices: Any, v: Any) -> None:
    """Write v (broadcast to the indexed shape) into the indexed elements; with repeated tensor indices the last write
    wins (a scatter; an index out of range raises IndexError at the next sync). Not differentiable."""
    if self.requires_grad or (isinstance(v, Tensor) and v.requires_grad):
      raise RuntimeError("setitem on a tensor that requires grad is not supported")
    x, tensors, unview = self._plan(indices)
    if not isinstance(v, Tensor): v = Tensor(v, device=self.device, dtype=self.dtype)
    v = v.cast(self.dtype)
    if not tensors:
      try: v = v.expand(x.shape) if v.shape != x.shape else v
      except ValueError: raise ValueError(f"cannot assign a value of shape {v.shape} to an index of shape {x.shape}") from None
      vfull = unview(v.contiguous() if v.lazydata.st.contiguous is False else v)
      mask = unview(Tensor.ones(x.shape, dtype=dtypes.bool, device=self.device), True)
    else:
      xp, bshape, rest, flat, pnum, adjacent = self._advanced(x, tensors)
      nr, nb = len(rest), len(bshape)
      rshape = tuple(x.shape[d] for d in rest)
      oshape = (rshape[:tensors[0][0]] + bshape + rshape[tensors[0][0]:]) if adjacent else bshape + rshape
      try: v = v.expand(oshape) if v.shape != oshape else v
      except ValueError: raise ValueError(f"cannot assign a value of shape {v.shape} to an index of shape {oshape}") from None
      # v as (rest..., B...)
      if adjacent and nr:
        p = tensors[0][0]
        v = v.permute(*range(p), *range(p + nb, nb + nr), *range(p, p + nb))
      elif nr: v = v.permute(*range(nb, nb + nr), *range(nb))
      nbt = prod(bshape)
      # xp with v written at the flat index (a scatter: the last write wins), (rest..., P)
      vals = xp._scatter(flat.reshape(*[1] * nr, nbt).expand(*rshape, nbt), v.reshape(*rshape, nbt), nr, None)
      tsz = [x.shape[d] for d, _ in tensors]
      tdims = [d for d, _ in tensors]
      inv = np.argsort(list(rest) + tdims).tolist()
      vview = vals.reshape(*rshape, *tsz).permute(*inv)
      vfull, mask = unview(vview), unview(Tensor.ones(x.shape, dtype=dtypes.bool, device=self.device), True)
    self.assign(mask.where(vfull, self)).realize()
  def gather(self, dim: int, index: Tensor) -> Tensor:
    """out[i][j] = self[index[i][j]][j] for dim=0 (as torch.gather): index has self's ndim and is no larger elsewhere."""
    d = self._resolve_dim(dim)
    if isinstance(index, Tensor) and not dtypes.is_int(index.dtype): raise DTypeError(f"gather index must be an integer tensor, got {index.dtype}")
    index = self._index_tensor(index)
    if not dtypes.is_int(index.dtype): raise DTypeError(f"gather index must be an integer tensor, got {index.dtype}")
    if index.ndim != self.ndim: raise ShapeError(f"gather index needs {self.ndim} dims like self {self.shape}, got {index.shape}")
    for i, (a, b) in enumerate(zip(index.shape, self.shape)):
      if i != d and a > b: raise ShapeError(f"gather index shape {index.shape} is larger than self {self.shape} at dim {i}")
    return self.shrink(tuple((0, s) if i != d else None for i, s in enumerate(index.shape)))._gather(index, d)
  def _scatter_setup(self, dim: int, index: Tensor, src: Any, name: str) -> tuple[int, Tensor, Tensor, tuple]:
    """The checked dim, index and src (cut to index's shape, in self's dtype), and the pad from index's sizes back to self's."""
    d = self._resolve_dim(dim)
    if isinstance(index, Tensor) and not dtypes.is_int(index.dtype): raise DTypeError(f"{name} index must be an integer tensor, got {index.dtype}")
    index = self._index_tensor(index)
    if not dtypes.is_int(index.dtype): raise DTypeError(f"{name} index must be an integer tensor, got {index.dtype}")
    if index.ndim != self.ndim: raise ShapeError(f"{name} index needs {self.ndim} dims like self {self.shape}, got {index.shape}")
    if not isinstance(src, Tensor): src = Tensor.full(index.shape, src, dtype=self.dtype, device=self.device)
    if src.ndim != self.ndim: raise ShapeError(f"{name} src needs {self.ndim} dims, got {src.shape}")
    for i, (a, b, c) in enumerate(zip(index.shape, self.shape, src.shape)):
      if (i != d and a > b) or a > c:
        raise ShapeError(f"{name} index shape {index.shape} is larger than self {self.shape} or src {src.shape} at dim {i}")
    src = src.shrink(tuple((0, a) for a in index.shape)).cast(self.dtype)
    pad = tuple((0, self.shape[i] - index.shape[i]) if i != d else (0, 0) for i in range(self.ndim))
    return d, index, src, pad
  def _in_region(self, pad: tuple, fn: Callable[[Tensor], Tensor]) -> Tensor:
    """fn of the part of self that a scatter's index covers (self cut by pad), self elsewhere."""
    part = fn(self.shrink(tuple((0, s - p[1]) for s, p in zip(self.shape, pad))))
    if not any(p[1] for p in pad): return part
    return Tensor.ones(part.shape, dtype=dtypes.bool, device=self.device).pad(pad).where(part.pad(pad), self)
  def _scatter_onehot(self, d: int, index: Tensor, src: Tensor, name: str) -> tuple[Tensor, Tensor]:
    """For the reductions without a scatter op of their own (multiply, prod, amax, amin): src as (..., K, 1) and a
    one-hot (..., K, S) of index, both with dim d last (the index is checked on the host first)."""
    Tensor._check_index_range(index, self.shape[d], name)
    s = self.shape[d]
    idx = index.transpose(d, -1)
    idx = (idx < 0).where(idx + s, idx)
    return src.transpose(d, -1).unsqueeze(-1), idx.unsqueeze(-1) == Tensor._iota(s, self.device, idx.dtype)  # rows cover index's other dims
  def _scatter_finish(self, d: int, val: Tensor, hit: Tensor, pad: Any) -> Tensor:
    """val, hit: (..., S) over index's other dims, dim d last; place them into self."""
    val, hit = val.transpose(d, -1).pad(pad), hit.transpose(d, -1).pad(pad)
    return hit.where(val, self)
  def scatter(self, dim: int, index: Tensor, src: Tensor | float, reduce: str | None = None) -> Tensor:
    """self with src[i][j] written to position index[i][j] along dim (as torch.scatter); reduce None (the last write
    to a position wins), 'add' or 'multiply'. An index out of range raises IndexError at the next sync."""
    if reduce not in (None, "add", "multiply"): raise ArgumentTypeError(f"scatter reduce must be None, 'add' or 'multiply', got {reduce!r}")
    d, index, src, pad = self._scatter_setup(dim, index, src, "scatter")
    if reduce != "multiply": return self._in_region(pad, lambda r: r._scatter(index, src, d, Ops.ADD if reduce == "add" else None))
    src, onehot = self._scatter_onehot(d, index, src, "scatter")
    return self._scatter_finish(d, onehot.where(src, 1).prod(-2) * self._dim_last(d, pad), onehot.any(-2), pad)
  def _dim_last(self, d: int, pad: Any) -> Tensor:
    """self shrunk to the scatter index's other dims, with dim d last."""
    return self.shrink(tuple((0, s - p[1]) for s, p in zip(self.shape, pad))).transpose(d, -1)
  def scatter_reduce(self, dim: int, index: Tensor, src: Tensor, reduce: str, include_self: bool = True) -> Tensor:
    """Reduce src into self at index along dim (as torch.scatter_reduce): reduce 'sum', 'prod', 'mean', 'amax' or 'amin';
    include_self=False leaves self's value out of positions that receive something."""
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
      raise ArgumentError(f"scatter_reduce reduce must be sum, prod, mean, amax or amin, got {reduce!r}")
    d, index, src, pad = self._scatter_setup(dim, index, src, "scatter_reduce")
    if reduce in ("sum", "mean"):
      def part(r: Tensor) -> Tensor:
        cnt = Tensor.zeros(r.shape, dtype=r.dtype, device=r.device)._scatter(index, 1, d)
        hit = cnt > 0
        v = (r if include_self else hit.where(0, r))._scatter(index, src, d)
        if reduce == "sum": return v
        n = (cnt + (1 if include_self else 0)).maximum(1)
        return hit.where((v / n if dtypes.is_float(r.dtype) else v // n).cast(r.dtype), r)
      return self._in_region(pad, part)
    src, onehot = self._scatter_onehot(d, index, src, "scatter_reduce")
    base = self._dim_last(d, pad)
    hit = onehot.any(-2)
    if reduce == "prod":
      v = onehot.where(src, 1).prod(-2)
      return self._scatter_finish(d, v * base if include_self else v, hit, pad)
    lo = dtypes.min(self.dtype) if reduce == "amax" else dtypes.max(self.dtype)
    sgn = src if reduce == "amax" else -src if dtypes.is_float(self.dtype) else ~src
    v = onehot.where(sgn, lo if reduce == "amax" else (-lo if dtypes.is_float(self.dtype) else ~lo)).max(-2)
    if reduce == "amin": v = -v if dtypes.is_float(self.dtype) else ~v
    if include_self: v = v.maximum(base) if reduce == "amax" else v.minimum(base)
    return self._scatter_finish(d, v, hit, pad)
  def masked_fill(self, mask: Tensor, value: Any) -> Tensor:
    """self with value where mask is True (mask broadcasts)."""
    return Tensor._as_bool(mask, self.device).where(value, self)
  @staticmethod
  def _as_bool(mask: Any, device: str) -> Tensor:
    m = mask if isinstance(mask, Tensor) else Tensor(mask, device=device)
    if m.dtype != dtypes.bool: raise TypeError(f"a mask must be a bool tensor, got {m.dtype}")
    return m
  def masked_select(self, mask: Tensor, size: int | None = None, fill_value: Any = 0) -> Tensor:
    """The elements where mask (broadcast with self) is True, as a 1-D tensor. With size=None the mask is realized to
    count them; with size=N the result has N elements, the selected ones first, cut or padded with fill_value, and
    nothing is realized (so it can run inside a TinyJit)."""
    m = Tensor._as_bool(mask, self.device)
    x, m = self._broadcast_pair(m)
    if size is None: return x[m]
    return x.flatten()._first_selected(m.flatten(), size, fill_value)
  def _first_selected(self, m: Tensor, size: int, fill_value: Any) -> Tensor:
    """(size, ...): the rows of self (M, ...) where the bool m (M,) is True, in order, then fill_value rows."""
    if not isinstance(size, int) or size < 0: raise ArgumentError(f"size must be a non-negative int, got {size!r}")
    n = self.shape[0]
    if n == 0 or size == 0: return Tensor.full((size, *self.shape[1:]), fill_value, dtype=self.dtype, device=self.device)
    # slot k takes the element whose running count of selected ones is k+1
    rank = m.cast(dtypes.int32).cumsum() - 1
    pick = m & (rank.reshape(1, n) == Tensor._iota(size, self.device).reshape(size, 1))  # (size, M)
    rows = Tensor._select_sum(pick.reshape(size, n, *[1] * (self.ndim - 1)), self.unsqueeze(0), axis=1)
    hit = pick.any(1).reshape(size, *[1] * (self.ndim - 1))
    return hit.where(rows, Tensor(fill_value, device=self.device).cast(self.dtype))
  def nonzero(self, size: int | None = None, fill_value: Any = 0) -> Tensor:
    """(n, ndim) int32 indices of the nonzero elements, in row-major order (as torch.nonzero). size=None realizes self
    to count them; size=N gives N rows, cut or padded with fill_value, without realizing."""
    if size is None:
      return Tensor(np.argwhere(self.detach().numpy() != 0).astype(np.int32), device=self.device)  # (n, ndim), also for 0-d
    coords = [Tensor._iota(self.numel(), self.device).reshape(self.shape) // prod(self.shape[d + 1:]) % s for d, s in enumerate(self.shape)]
    flat = Tensor.stack(*[c.flatten() for c in coords], dim=-1) if coords else Tensor.zeros(1, 0, dtype=dtypes.int32, device=self.device)
    return flat._first_selected((self != 0).flatten(), size, fill_value)
  def _broadcast_pair(self, m: Tensor) -> tuple[Tensor, Tensor]:
    try: shape = _broadcast_shape(self.shape, m.shape)
    except ValueError: raise ShapeError(f"mask of shape {m.shape} cannot be broadcast with {self.shape}") from None
    return self.expand(shape), m.expand(shape)

  # *** broadcasting and elementwise ***
  def _broadcasted(self, y: Any, reverse: bool = False) -> tuple[Tensor, Tensor]:
    x = self
    if y.__class__ is Tensor and (xl := x.lazydata).dtype is (yl := y.lazydata).dtype and xl.shape == yl.shape and xl.device == yl.device:
      return (y, x) if reverse else (x, y)  # the common case: nothing to cast or broadcast
    if not isinstance(y, Tensor):
      if isinstance(y, (np.ndarray, list, tuple)): y = Tensor(y, device=x.device)
      else:
        if isinstance(y, np.generic): y = y.item()
        if not isinstance(y, (bool, int, float)): raise TypeError(f"cannot combine a Tensor with {type(y).__name__}")
        # a python scalar takes the tensor's dtype unless it needs a wider kind (a float with an int tensor)
        ydt = x.dtype if (dtypes.is_float(x.dtype) or (dtypes.is_int(x.dtype) and not isinstance(y, float)) or
                          (x.dtype == dtypes.bool and isinstance(y, bool))) else dtypes.from_py(y)
        if dtypes.is_int(ydt) and isinstance(y, int) and not isinstance(y, bool): _py_int_dtype(y, ydt)  # a scalar that does not fit: an error
        y = Tensor(dtypes.as_const(y, ydt) if not (isinstance(y, float) and math.isnan(y)) else y, device=x.device, dtype=ydt, requires_grad=False)
    if x.device != y.device: raise ValueError(f"tensors are on different devices: {x.device} and {y.device}")
    if reverse: x, y = y, x
    out_dtype = least_upper_dtype(x.dtype, y.dtype)
    x, y = x.cast(out_dtype), y.cast(out_dtype)
    if x.shape == y.shape: return x, y
    sx, sy = (1,) * (max(x.ndim, y.ndim) - x.ndim) + x.shape, (1,) * (max(x.ndim, y.ndim) - y.ndim) + y.shape
    out = []
    for a, b in zip(sx, sy):
      if a != b and a != 1 and b != 1: raise ShapeError(f"shapes {x.shape} and {y.shape} cannot be broadcast together")
      out.append(b if a == 1 else a)
    return x.reshape(sx).expand(tuple(out)), y.reshape(sy).expand(tuple(out))

  def cast(self, dtype: DType | str) -> Tensor:
    """Convert to dtype (floats to ints truncate toward zero)."""
    dt = to_dtype(dtype)
    return self if self.dtype == dt else F.Cast.apply(self, dtype=dt)
  def bitcast(self, dtype: DType | str) -> Tensor:
    """Reinterpret the bits as dtype. With a different item size the last dim scales (little-endian)."""
    dt = to_dtype(dtype)
    if self.requires_grad: raise RuntimeError("bitcast is not differentiable: detach() first")
    if dt == self.dtype: return self
    if dt.itemsize == self.dtype.itemsize: return F.Cast.apply(self, dtype=dt, bitcast=True)
    if dt == dtypes.bool or self.dtype == dtypes.bool: raise TypeError(f"cannot bitcast between {self.dtype} and {dt}")
    uint = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}
    a, b = self.dtype.itemsize, dt.itemsize
    if self.ndim == 0: raise DimError(f"bitcast from {self.dtype} to {dt} needs at least one dim")  # as tinygrad 0.14: there is no last dim
    x = self if self.dtype == uint[a] else F.Cast.apply(self, dtype=uint[a], bitcast=True)
    if a > b:  # split each element into a//b pieces
      parts = [((x >> (8 * b * k)) & (2 ** (8 * b) - 1)).cast(uint[b]) for k in range(a // b)]
      y = Tensor.stack(*parts, dim=-1).reshape(*self.shape[:-1], self.shape[-1] * (a // b))
    else:
      if self.shape[-1] % (b // a): raise ValueError(f"bitcast {self.dtype} to {dt} needs the last dim {self.shape[-1]} divisible by {b // a}")
      x = x.reshape(*self.shape[:-1], self.shape[-1] // (b // a), b // a).cast(uint[b])
      y = x[..., 0]
      for k in range(1, b // a): y = y | (x[..., k] << (8 * a * k))
    return y if dt == uint[dt.itemsize] else F.Cast.apply(y, dtype=dt, bitcast=True)
  def float(self) -> Tensor:
    """Cast to float32."""
    return self.cast(dtypes.float32)
  def half(self) -> Tensor:
    """Cast to float16."""
    return self.cast(dtypes.float16)
  def double(self) -> Tensor:
    """Cast to float64."""
    return self.cast(dtypes.float64)
  def bfloat16(self) -> Tensor:
    """Cast to bfloat16."""
    return self.cast(dtypes.bfloat16)
  def int(self) -> Tensor:
    """Cast to int32."""
    return self.cast(dtypes.int32)
  def long(self) -> Tensor:
    """Cast to int64."""
    return self.cast(dtypes.int64)
  def short(self) -> Tensor:
    """Cast to int16."""
    return self.cast(dtypes.int16)
  def char(self) -> Tensor:
    """Cast to int8."""
    return self.cast(dtypes.int8)
  def bool(self) -> Tensor:
    """Cast to bool (x != 0)."""
    return self.cast(dtypes.bool)
  def const_like(self, b: Any, dtype: DType | None = None) -> Tensor:
    """A constant of self's shape and device, in self's dtype unless given."""
    dt = to_dtype(dtype) if dtype is not None else self.dtype
    c = Tensor(dtypes.as_const(b, dt) if not (isinstance(b, float) and math.isnan(b)) else b, device=self.device, dtype=dt)
    return c.expand(self.shape) if self.shape else c

  def add(self, x: Any, reverse: bool = False) -> Tensor:
    """self + x with broadcasting and dtype promotion."""
    return F.Add.apply(*self._broadcasted(x, reverse))
  def sub(self, x: Any, reverse: bool = False) -> Tensor:
    """self - x."""
    a, b = self._broadcasted(x, reverse)
    if a.dtype == dtypes.bool: raise TypeError("subtraction of bool tensors is not supported: use logical_xor or ^")
    return a + (-b)
  def mul(self, x: Any, reverse: bool = False) -> Tensor:
    """self * x."""
    return F.Mul.apply(*self._broadcasted(x, reverse))
  def div(self, x: Any, reverse: bool = False, rounding_mode: str | None = None) -> Tensor:
    """True division (integers promote to the default float); rounding_mode "trunc" or "floor" rounds the quotient."""
    a, b = self._broadcasted(x, reverse)
    if rounding_mode is not None:
      if rounding_mode not in ("trunc", "floor"): raise ArgumentError(f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
      if dtypes.is_int(a.dtype): return a.idiv(b) if rounding_mode == "trunc" else a._floordiv(b)
      q = a.div(b)
      return q.trunc() if rounding_mode == "trunc" else q.floor()
    if not dtypes.is_float(a.dtype): a, b = a.cast(least_upper_float(a.dtype)), b.cast(least_upper_float(b.dtype))
    return a * b.reciprocal()
  def idiv(self, x: Any, reverse: bool = False) -> Tensor:
    """Integer division truncating toward zero (C semantics)."""
    a, b = self._broadcasted(x, reverse)
    if not dtypes.is_int(a.dtype): raise TypeError(f"idiv needs integer tensors, got {a.dtype}")
    return F.IDiv.apply(a, b)
  def __floordiv__(self, x: Any) -> Tensor: return self._floordiv(x)
  def __rfloordiv__(self, x: Any) -> Tensor: return self._floordiv(x, True)
  def _floordiv(self, x: Any, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if dtypes.is_float(a.dtype):
      # as numpy and torch (Python's float //): from the remainder, so a == (a // b) * b + a % b; floor(a / b) differs
      # where a / b rounds up to an integer (1 // 0.1 is 9), at inf (inf // 2 is nan) and for -1 // inf (-1)
      m = a.fmod(b)
      div = (a - m) / b
      div = ((m != 0) & ((b < 0) != (m < 0))).where(div - 1, div)
      fl = div.floor()
      fl = (div - fl > 0.5).where(fl + 1, fl)
      q = a / b
      return (b == 0).where(q, (div == 0).where(q * 0, fl))  # a zero quotient keeps the sign of a / b
    if a.dtype == dtypes.bool: raise TypeError("floor division of bool tensors is not supported")
    q = F.IDiv.apply(a, b)
    # round toward negative infinity: subtract one where the signs differ and there is a remainder
    fix = ((a.mod_c(b) != 0) & ((a < 0) != (b < 0))).cast(q.dtype)
    return q - fix
  def mod_c(self, b: Tensor) -> Tensor:
    """C remainder of integers (sign of the dividend); internal building block."""
    return F.Mod.apply(self, b)
  def __mod__(self, x: Any) -> Tensor: return self.mod(x)
  def __rmod__(self, x: Any) -> Tensor: return self.mod(x, True)
  def mod(self, x: Any, reverse: bool = False) -> Tensor:
    """Python modulo (torch.remainder): the result takes the divisor's sign."""
    a, b = self._broadcasted(x, reverse)
    if dtypes.is_float(a.dtype):
      r = a.fmod(b)
      return ((r != 0) & ((r < 0) != (b < 0))).where(r + b, r)
    if a.dtype == dtypes.bool: raise TypeError("modulo of bool tensors is not supported")
    r = F.Mod.apply(a, b)
    return ((r != 0) & ((r < 0) != (b < 0))).where(r + b, r)
  remainder = mod
  def fmod(self, x: Any) -> Tensor:
    """C fmod: the remainder of self / x truncated toward zero, with the sign of self (as torch.fmod)."""
    a, b = self._broadcasted(x)
    if not dtypes.is_float(a.dtype):
      if a.dtype == dtypes.bool: raise TypeError("fmod of bool tensors is not supported")
      return F.Mod.apply(a, b)
    q = (a / b).trunc()
    r = a - q * b
    # the quotient may round across an integer: bring r back into (-|b|, |b|) with self's sign
    ab = b.abs()
    r = ((r != 0) & ((r < 0) != (a < 0))).where(r + a.sign() * ab, r)
    r = (r.abs() >= ab).where(r - a.sign() * ab, r)
    # b == 0 and a == +-inf give NaN through the arithmetic itself; b == +-inf leaves a
    return ab.isinf().where(a, r)
  def neg(self) -> Tensor:
    """-self (logical not for bool)."""
    return self.logical_not() if self.dtype == dtypes.bool else F.Neg.apply(self)
  def reciprocal(self) -> Tensor:
    """1 / self (as a float)."""
    return F.Reciprocal.apply(self.cast(least_upper_float(self.dtype)))
  def maximum(self, x: Any) -> Tensor:
    """Elementwise max with broadcasting; NaN propagates."""
    return F.Maximum.apply(*self._broadcasted(x))
  def minimum(self, x: Any) -> Tensor:
    """Elementwise min with broadcasting; NaN propagates."""
    a, b = self._broadcasted(x)
    if a.dtype == dtypes.bool: return a & b
    if dtypes.is_int(a.dtype): return ~((~a).maximum(~b))
    return -((-a).maximum(-b))
  def where(self, x: Any, y: Any) -> Tensor:
    """self ? x : y elementwise, broadcasting all three (self is read as bool)."""
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
      dt = least_upper_dtype(dtypes.from_py(x), dtypes.from_py(y))
      x = Tensor(x, device=self.device, dtype=dt)
    if isinstance(x, Tensor): x, y = x._broadcasted(y)
    else: y, x = y._broadcasted(x)
    cond = self.cast(dtypes.bool)
    try: shape = _broadcast_shape(cond.shape, x.shape)
    except ValueError: raise ShapeError(f"where condition of shape {cond.shape} cannot be broadcast with values of shape {x.shape}") from None
    return F.Where.apply(cond._expand_to(shape), x._expand_to(shape), y._expand_to(shape))
  def _expand_to(self, shape: tuple[int, ...]) -> Tensor:
    return self if self.shape == shape else self.reshape((1,) * (len(shape) - self.ndim) + self.shape).expand(shape)
  def _cmp(self, x: Any) -> Tensor:
    """self, widened when x is a Python int outside its int dtype: a comparison with it is well defined (as numpy's),
    where arithmetic would overflow."""
    if isinstance(x, int) and not isinstance(x, bool) and dtypes.is_int(self.dtype) and not dtypes.min(self.dtype) <= x <= dtypes.max(self.dtype):
      return self.cast(dtypes.int64 if self.dtype != dtypes.uint64 and -2**63 <= x < 2**63 else dtypes.float64)
    return self
  def __lt__(self, x: Any) -> Tensor: return F.Less.apply(*self._cmp(x)._broadcasted(x))
  def __gt__(self, x: Any) -> Tensor: return F.Less.apply(*self._cmp(x)._broadcasted(x, True))
  def __ge__(self, x: Any) -> Tensor:
    a, b = self._cmp(x)._broadcasted(x)
    return F.Less.apply(b, a) | (a == b) if dtypes.is_float(a.dtype) else F.Less.apply(a, b).logical_not()
  def __le__(self, x: Any) -> Tensor:
    a, b = self._cmp(x)._broadcasted(x)
    return F.Less.apply(a, b) | (a == b) if dtypes.is_float(a.dtype) else F.Less.apply(b, a).logical_not()
  def __ne__(self, x: Any) -> Tensor: return F.Neq.apply(*self._cmp(x)._broadcasted(x))  # type: ignore[override]
  def __eq__(self, x: Any) -> Tensor: return (self != x).logical_not()  # type: ignore[override]
  def eq(self, x: Any) -> Tensor:
    """self == x elementwise."""
    return self == x
  def ne(self, x: Any) -> Tensor:
    """self != x elementwise."""
    return self != x
  def lt(self, x: Any) -> Tensor:
    """self < x elementwise."""
    return self < x
  def gt(self, x: Any) -> Tensor:
    """self > x elementwise."""
    return self > x
  def le(self, x: Any) -> Tensor:
    """self <= x elementwise."""
    return self <= x
  def ge(self, x: Any) -> Tensor:
    """self >= x elementwise."""
    return self >= x
  def logical_not(self) -> Tensor:
    """not self (read as bool)."""
    return F.Neq.apply(*self.cast(dtypes.bool)._broadcasted(True))
  def logical_and(self, x: Any) -> Tensor:
    """self and x (read as bool)."""
    return self.bool() & (x.bool() if isinstance(x, Tensor) else bool(x))
  def logical_or(self, x: Any) -> Tensor:
    """self or x (read as bool)."""
    return self.bool() | (x.bool() if isinstance(x, Tensor) else bool(x))
  def logical_xor(self, x: Any) -> Tensor:
    """self xor x (read as bool)."""
    return self.bool() ^ (x.bool() if isinstance(x, Tensor) else bool(x))
  def _bitwise(self, x: Any, op: Ops, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if not (dtypes.is_int(a.dtype) or a.dtype == dtypes.bool): raise DTypeError(f"{op.name} needs integer or bool tensors, got {a.dtype}")
    if op in (Ops.SHL, Ops.SHR) and a.dtype == dtypes.bool: raise DTypeError(f"{op.name} needs integer tensors, got bool")
    return F.BitwiseOp.apply(a, b, op=op)
  def bitwise_and(self, x: Any, reverse: bool = False) -> Tensor:
    """self & x (x & self with reverse) for int or bool tensors."""
    return self._bitwise(x, Ops.AND, reverse)
  def bitwise_or(self, x: Any, reverse: bool = False) -> Tensor:
    """self | x (x | self with reverse) for int or bool tensors."""
    return self._bitwise(x, Ops.OR, reverse)
  def bitwise_xor(self, x: Any, reverse: bool = False) -> Tensor:
    """self ^ x (x ^ self with reverse) for int or bool tensors."""
    return self._bitwise(x, Ops.XOR, reverse)
  def bitwise_not(self) -> Tensor:
    """~self for int or bool tensors."""
    if not (dtypes.is_int(self.dtype) or self.dtype == dtypes.bool): raise DTypeError(f"bitwise_not needs integer or bool tensors, got {self.dtype}")
    return self.logical_not() if self.dtype == dtypes.bool else self ^ (-1 if not dtypes.is_unsigned(self.dtype) else dtypes.max(self.dtype))
  def lshift(self, x: Any, reverse: bool = False) -> Tensor:
    """self << x (x << self with reverse) for integer tensors."""
    return self._bitwise(x, Ops.SHL, reverse)
  def rshift(self, x: Any, reverse: bool = False) -> Tensor:
    """self >> x (x >> self with reverse) for integer tensors (arithmetic for signed)."""
    return self._bitwise(x, Ops.SHR, reverse)
  def pow(self, x: Any, reverse: bool = False) -> Tensor:
    """self ** x. Integer tensors to non-negative integer powers stay integers; floats follow C's pow as torch does
    (0 ** 0 == 1, 0 ** negative is inf, negative bases keep their sign for odd integer exponents, NaN where the real
    result is undefined, (-inf) ** 0.3 is inf), with torch's gradients. An integer tensor to a python float power is a
    float; to a negative python int power it is an error (as torch and tinygrad)."""
    if not reverse and dtypes.is_int(self.dtype) and isinstance(x, (int, float)) and not isinstance(x, bool):
      if isinstance(x, float): return self._float().pow(x)
      if x < 0: raise ArgumentError(f"an integer tensor ({self.dtype}) to the negative integer power {x}: cast it to a float first")
    if not reverse and not isinstance(x, Tensor) and isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
      # constant exponents: multiplications (exact, and the gradient is right at 0)
      if x == int(x) and 0 < abs(x) <= 64 and (x > 0 or dtypes.is_float(self.dtype)):
        n = int(abs(x))
        base = self if x > 0 else self.reciprocal()
        acc: Tensor | None = None
        while n:
          if n & 1: acc = base if acc is None else acc * base
          n >>= 1
          if n: base = base * base
        return acc  # type: ignore[return-value]
      if x == 0 and not dtypes.is_float(self.dtype): return self.const_like(1)
      if x == 0.5 and dtypes.is_float(self.dtype): return self.sqrt()  # as torch, (-inf) ** 0.5 is NaN
    base, exponent = self._broadcasted(x, reverse)
    if dtypes.is_int(base.dtype):
      # binary exponentiation; negative exponents give 1/b^|e| truncated: only |b| == 1 survive
      e, b, acc = exponent, base, base.const_like(1)
      for _ in range(8 * base.dtype.itemsize - (0 if dtypes.is_unsigned(base.dtype) else 1)):
        acc = ((e & 1) != 0).where(acc * b, acc)
        e, b = e >> 1, b * b
      if dtypes.is_unsigned(base.dtype): return acc
      neg = exponent < 0
      return neg.where((base == 1).where(1, (base == -1).where(((exponent & 1) != 0).where(-1, 1), 0)), acc).cast(base.dtype)
    if base.dtype == dtypes.bool: base, exponent = base.cast(dtypes.int32), exponent.cast(dtypes.int32)
    if not dtypes.is_float(base.dtype): base, exponent = base.float(), exponent.float()
    return F.Pow.apply(base, exponent)

  __add__ = add
  def __radd__(self, x: Any) -> Tensor: return self.add(x, True)
  __sub__ = sub
  def __rsub__(self, x: Any) -> Tensor: return self.sub(x, True)
  __mul__ = mul
  def __rmul__(self, x: Any) -> Tensor: return self.mul(x, True)
  def __truediv__(self, x: Any) -> Tensor: return self.div(x)
  def __rtruediv__(self, x: Any) -> Tensor: return self.div(x, True)
  def __pow__(self, x: Any) -> Tensor: return self.pow(x)
  def __rpow__(self, x: Any) -> Tensor: return self.pow(x, True)
  def __neg__(self) -> Tensor: return self.neg()
  def __abs__(self) -> Tensor: return self.abs()
  def __and__(self, x: Any) -> Tensor: return self.bitwise_and(x)
  def __or__(self, x: Any) -> Tensor: return self.bitwise_or(x)
  def __xor__(self, x: Any) -> Tensor: return self.bitwise_xor(x)
  def __rand__(self, x: Any) -> Tensor: return self._bitwise(x, Ops.AND, True)
  def __ror__(self, x: Any) -> Tensor: return self._bitwise(x, Ops.OR, True)
  def __rxor__(self, x: Any) -> Tensor: return self._bitwise(x, Ops.XOR, True)
  def __lshift__(self, x: Any) -> Tensor: return self.lshift(x)
  def __rshift__(self, x: Any) -> Tensor: return self.rshift(x)
  def __rlshift__(self, x: Any) -> Tensor: return self._bitwise(x, Ops.SHL, True)
  def __rrshift__(self, x: Any) -> Tensor: return self._bitwise(x, Ops.SHR, True)
  def __invert__(self) -> Tensor: return self.bitwise_not()
  def __matmul__(self, x: Tensor) -> Tensor: return self.matmul(x)
  def __rmatmul__(self, x: Tensor) -> Tensor: return self.matmul(x, reverse=True)
  def __iadd__(self, x: Any) -> Tensor: return self.assign(self + x)
  def __isub__(self, x: Any) -> Tensor: return self.assign(self - x)
  def __imul__(self, x: Any) -> Tensor: return self.assign(self * x)
  def __itruediv__(self, x: Any) -> Tensor: return self.assign(self / x)
  def __imatmul__(self, x: Any) -> Tensor: return self.assign(self @ x)
  def __ipow__(self, x: Any) -> Tensor: return self.assign(self ** x)
  def __iand__(self, x: Any) -> Tensor: return self.assign(self & x)
  def __ior__(self, x: Any) -> Tensor: return self.assign(self | x)
  def __ixor__(self, x: Any) -> Tensor: return self.assign(self ^ x)
  def __ifloordiv__(self, x: Any) -> Tensor: return self.assign(self // x)
  def __ilshift__(self, x: Any) -> Tensor: return self.assign(self << x)
  def __irshift__(self, x: Any) -> Tensor: return self.assign(self >> x)

  # *** unary math ***
  def _float(self) -> Tensor: return self.cast(least_upper_float(self.dtype))
  def exp(self) -> Tensor:
    """e ** self."""
    return F.Exp.apply(self._float())
  def exp2(self) -> Tensor:
    """2 ** self."""
    return F.Exp2.apply(self._float())
  def log(self) -> Tensor:
    """Natural log (NaN below 0, -inf at 0)."""
    return F.Log.apply(self._float())
  def log2(self) -> Tensor:
    """Base-2 log."""
    return F.Log2.apply(self._float())
  def log10(self) -> Tensor:
    """Base-10 log."""
    return self.log2() * math.log10(2)
  def log1p(self) -> Tensor:
    """log(1 + self), accurate near 0."""
    x = self._float()
    u = x + 1
    # log(u) * x / (u - 1) corrects the rounding of 1 + x (Goldberg); far from 0 there is nothing to correct
    return (x.abs() > 1e4).where(u.log(), (u == 1).where(x, u.log() * x / (u == 1).where(1, u - 1)))
  def expm1(self) -> Tensor:
    """exp(self) - 1, accurate near 0."""
    x = self._float()
    u = x.exp()
    return (x.abs() > 0.5).where(u - 1, (u == 1).where(x, (u - 1) * x / (u == 1).where(1, u.log())))
  def sqrt(self) -> Tensor:
    """Square root (NaN below 0)."""
    return F.Sqrt.apply(self._float())
  def rsqrt(self) -> Tensor:
    """1 / sqrt(self)."""
    return self.sqrt().reciprocal()
  def sin(self) -> Tensor:
    """Sine."""
    return F.Sin.apply(self._float())
  def cos(self) -> Tensor:
    """Cosine."""
    return ((math.pi / 2) - self._float()).sin()
  def tan(self) -> Tensor:
    """Tangent."""
    return self.sin() / self.cos()
  def asin(self) -> Tensor:
    """Arc sine (NaN outside [-1, 1])."""
    x = self._float()
    a = x.abs()
    # Abramowitz & Stegun 4.4.46: asin(a) = pi/2 - sqrt(1 - a) * poly(a) on [0, 1], error below 2e-8
    coeffs = [-0.0012624911, 0.0066700901, -0.0170881256, 0.0308918810, -0.0501743046, 0.0889789874, -0.2145988016, 1.5707963050]
    p = a * 0 + coeffs[0]
    for c in coeffs[1:]: p = p * a + c
    r = math.pi / 2 - (1 - a).sqrt() * p
    return (a > 1).where(math.nan, x.sign() * r)
  def acos(self) -> Tensor:
    """Arc cosine (NaN outside [-1, 1])."""
    return math.pi / 2 - self.asin()
  def atan(self) -> Tensor:
    """Arc tangent."""
    x = self._float()
    big = x.abs() > 1
    t = big.where(x.reciprocal(), x)
    r = (t / (1 + t * t).sqrt()).asin()
    return big.where(x.sign() * (math.pi / 2) - r, r)
  def sinh(self) -> Tensor:
    """Hyperbolic sine."""
    x = self._float()
    return (x.exp() - (-x).exp()) / 2
  def cosh(self) -> Tensor:
    """Hyperbolic cosine."""
    x = self._float()
    return (x.exp() + (-x).exp()) / 2
  def tanh(self) -> Tensor:
    """Hyperbolic tangent."""
    return 2.0 * ((2.0 * self._float()).sigmoid()) - 1.0
  def asinh(self) -> Tensor:
    """Inverse hyperbolic sine."""
    x = self._float()
    a = x.abs()
    big = a > 1e15
    r = big.where(a.log() + math.log(2), (a + (big.where(0, a * a) + 1).sqrt()).log())
    return x.sign() * r
  def acosh(self) -> Tensor:
    """Inverse hyperbolic cosine (NaN below 1)."""
    x = self._float()
    big = x > 1e15
    return big.where(x.log() + math.log(2), (x + (big.where(2, x * x) - 1).sqrt()).log())
  def atanh(self) -> Tensor:
    """Inverse hyperbolic tangent (NaN outside [-1, 1], inf at +-1)."""
    x = self._float()
    return 0.5 * ((1 + x) / (1 - x)).log()
  def square(self) -> Tensor:
    """self * self."""
    return self * self
  def abs(self) -> Tensor:
    """|self|."""
    if self.dtype == dtypes.bool or dtypes.is_unsigned(self.dtype): return self
    return self * self.sign()
  def sign(self) -> Tensor:
    """-1, 0 or 1 by the sign of each element (0 for NaN, as torch)."""
    return F.Sign.apply(self)
  def _signbit(self) -> Tensor:
    if not dtypes.is_float(self.dtype): return self < 0
    it = {2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[self.dtype.itemsize]
    return self.detach().bitcast(it) < 0
  def copysign(self, other: Any) -> Tensor:
    """|self| with the sign of other (the sign bit: -0.0 counts as negative)."""
    a, b = self._broadcasted(other)
    if not dtypes.is_float(a.dtype):  # integers keep their dtype (as tinygrad): -|a| where b < 0
      mag = a.abs() if a.dtype != dtypes.bool else a
      return (b < 0).where(-mag, mag)
    a, b = a._float(), b._float()
    mag = a._signbit().where(-a, a)
    return b._signbit().where(-mag, mag)
  def trunc(self) -> Tensor:
    """Round toward zero (integers pass through); zero gradient."""
    return F.Trunc.apply(self)
  def floor(self) -> Tensor:
    """Round down; zero gradient."""
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self < t).where(t - 1, t)
  def ceil(self) -> Tensor:
    """Round up; zero gradient."""
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self > t).where(t + 1, t)
  def round(self) -> Tensor:
    """Round half to even, as torch and numpy; zero gradient."""
    if self.dtype == dtypes.bool: return self.cast(dtypes.default_float)  # as tinygrad 0.14 (torch has no round of bool)
    if not dtypes.is_float(self.dtype): return self
    f = self.floor()
    d = self.detach() - f
    odd = (f * 0.5).floor() != f * 0.5
    return (d > 0.5).where(f + 1, (d < 0.5).where(f, odd.where(f + 1, f)))
  def isnan(self) -> Tensor:
    """True where NaN."""
    return self != self
  def isinf(self, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
    """True where +inf (detect_positive) or -inf (detect_negative)."""
    if not dtypes.is_float(self.dtype): return self.full_like(False, dtype=dtypes.bool)
    return ((self == math.inf) & detect_positive) | ((self == -math.inf) & detect_negative)
  def isfinite(self) -> Tensor:
    """True where neither inf nor NaN."""
    if not dtypes.is_float(self.dtype): return self.full_like(True, dtype=dtypes.bool)
    return (self - self) == 0
  def lerp(self, end: Any, weight: Any) -> Tensor:
    """self + (end - self) * weight."""
    return self + (end - self) * weight
  def erf(self) -> Tensor:
    """The error function (Abramowitz & Stegun 7.1.26, error below 1.5e-7)."""
    x = self._float()
    t = 1.0 / (1.0 + 0.3275911 * x.abs())
    p = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    return x.sign() * (1.0 - p * (-(x * x)).exp())
  def clip(self, min_: Any = None, max_: Any = None) -> Tensor:
    """Clamp into [min_, max_] (either may be None); NaN stays NaN."""
    if min_ is None and max_ is None: raise ValueError("at least one of 'min_' or 'max_' must not be None")
    x = self.maximum(min_) if min_ is not None else self
    return x.minimum(max_) if max_ is not None else x
  def clamp(self, min_: Any = None, max_: Any = None) -> Tensor:
    """Same as clip."""
    return self.clip(min_, max_)

  def isclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """|self - other| <= atol + rtol * |other| elementwise (as torch.isclose); equal infinities are close."""
    a, b = self._broadcasted(other)
    if dtypes.is_int(a.dtype) or a.dtype == dtypes.bool: close = a == b
    else: close = (a == b) | (((a - b).abs() <= atol + rtol * b.abs()) & a.isfinite() & b.isfinite())
    return close | (a.isnan() & b.isnan()) if equal_nan else close
  def allclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """A 0-d bool tensor, True when every element isclose (tinygrad 0.14 returns a Tensor: `.item()` gives a python bool)."""
    return self.isclose(other, rtol, atol, equal_nan).all()
  def sequential(self, ll: Sequence[Callable[[Tensor], Tensor]]) -> Tensor:
    """Apply each callable of ll in turn: ll[-1](...ll[0](self))."""
    return functools.reduce(lambda x, f: f(x), ll, self)

  # *** activations ***
  def relu(self) -> Tensor:
    """max(self, 0)."""
    return F.Relu.apply(self)
  def relu6(self) -> Tensor:
    """min(max(self, 0), 6)."""
    return self.relu().minimum(6)
  def sigmoid(self) -> Tensor:
    """1 / (1 + exp(-self))."""
    return F.Sigmoid.apply(self._float())
  def hardsigmoid(self, alpha: float = 1 / 6, beta: float = 0.5) -> Tensor:
    """max(0, min(1, alpha * self + beta))."""
    return (alpha * self + beta).relu().minimum(1)
  def leaky_relu(self, neg_slope: float = 0.01) -> Tensor:
    """self where positive, neg_slope * self elsewhere."""
    return (self < 0).where(neg_slope * self, self)
  def elu(self, alpha: float = 1.0) -> Tensor:
    """self where positive, alpha * (exp(self) - 1) elsewhere."""
    return (self > 0).where(self, alpha * (self.minimum(0).exp() - 1))
  def celu(self, alpha: float = 1.0) -> Tensor:
    """max(0, self) + min(0, alpha * (exp(self / alpha) - 1))."""
    return self.maximum(0) + (alpha * ((self / alpha).minimum(0).exp() - 1)).minimum(0)
  def selu(self, alpha: float = 1.67326, gamma: float = 1.0507) -> Tensor:
    """gamma * elu(self, alpha) with the self-normalizing constants."""
    return gamma * self.elu(alpha)
  def gelu(self, approximate: str = "tanh") -> Tensor:
    """GELU: approximate="tanh" (the default, as tinygrad) or "none", the exact self * Phi(self) through erf (torch's
    default)."""
    if approximate == "none": return 0.5 * self * (1 + (self * (1 / math.sqrt(2))).erf())
    if approximate != "tanh": raise ArgumentError(f"gelu approximate must be 'tanh' or 'none', got {approximate!r}")
    return 0.5 * self * (1 + (math.sqrt(2 / math.pi) * (self + 0.044715 * self * self * self)).tanh())
  def quick_gelu(self) -> Tensor:
    """self * sigmoid(1.702 * self)."""
    return self * (self * 1.702).sigmoid()
  def silu(self) -> Tensor:
    """self * sigmoid(self)."""
    return self * self.sigmoid()
  def swish(self) -> Tensor:
    """Same as silu."""
    return self.silu()
  def mish(self) -> Tensor:
    """self * tanh(softplus(self))."""
    return self * self.softplus().tanh()
  def softplus(self, beta: float = 1.0) -> Tensor:
    """log(1 + exp(beta * self)) / beta, computed without overflow."""
    x = self._float() * beta
    return (x.relu() + (1 + (-x.abs()).exp()).log()) * (1 / beta)
  def softsign(self) -> Tensor:
    """self / (1 + |self|)."""
    return self / (1 + self.abs())
  def hardswish(self) -> Tensor:
    """self * relu6(self + 3) / 6."""
    return self * (self + 3).relu6() * (1 / 6)
  def hardtanh(self, min_val: float = -1, max_val: float = 1) -> Tensor:
    """clip(self, min_val, max_val)."""
    return self.clip(min_val, max_val)
  def logsigmoid(self) -> Tensor:
    """log(sigmoid(self)), computed without overflow."""
    return -(-self).softplus()

  # *** reductions ***
  def _reduce(self, fxn: type[F.Function], axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    axes = self._axes(axis)
    ret = fxn.apply(self, axis=axes)
    return ret if keepdim else ret.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))
  def sum(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, dtype: DType | str | None = None,
          acc_dtype: DType | str | None = None) -> Tensor:
    """Sum over axis (all axes when None). Small ints and bools sum in int32 (uint32 for unsigned); half floats
    accumulate in float32 and return their own dtype; `dtype` picks the accumulation and output dtype."""
    dtype = dtype if dtype is not None else acc_dtype
    if dtype is None:
      if self.dtype == dtypes.bool or (dtypes.is_int(self.dtype) and self.dtype.itemsize < 4):
        acc = dtypes.uint32 if dtypes.is_unsigned(self.dtype) else dtypes.int32
      elif self.dtype in (dtypes.float16, dtypes.bfloat16): acc = dtypes.float32
      else: acc = self.dtype
    else: acc = to_dtype(dtype)
    out = self.cast(acc)._reduce(F.Sum, axis, keepdim)
    return out.cast(self.dtype) if dtype is None and self.dtype in (dtypes.float16, dtypes.bfloat16) else out
  def _check_nonempty(self, axis: Any, what: str) -> None:
    for a in self._axes(axis):
      if self.shape[a] == 0: raise ShapeError(f"{what} of an empty dim: dim {a} of shape {self.shape} has size 0")
  def max(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """Max over axis (all when None); NaN propagates; the gradient is shared between ties. An empty reduction gives the
    dtype's smallest value (-inf for floats), as tinygrad."""
    return self._reduce(F.Max, axis, keepdim)
  def min(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """Min over axis (all when None); NaN propagates; an empty reduction gives the dtype's largest value (inf)."""
    if self.dtype == dtypes.bool: return self.logical_not().max(axis, keepdim).logical_not()
    if dtypes.is_int(self.dtype): return ~((~self).max(axis, keepdim))
    return -((-self).max(axis, keepdim))
  def mean(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """Arithmetic mean over axis (ints give a float); NaN for an empty reduction."""
    out = self._float().sum(axis, keepdim)
    n = ssimplify(prod(s for i, s in enumerate(self.shape) if i in self._axes(axis)))
    if isinstance(n, UOp): return out / self._symbolic_count(n, out)
    return out / n if n else out * math.nan
  def _symbolic_count(self, n: UOp, like: Tensor) -> Tensor:
    # a count over symbolic dims: a constant whose value the kernel works out from this tensor's bound Variables
    return Tensor(LazyBuffer.const_of(n, like.dtype, self.device, (), self.lazydata.var_vals), requires_grad=False)
  def var(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor:
    """Variance over axis with Bessel's correction (correction=1) by default."""
    x = self._float()
    sq = (x - x.mean(axis, keepdim=True)).square().sum(axis, keepdim)
    n = ssimplify(prod(s for i, s in enumerate(self.shape) if i in self._axes(axis)))
    if isinstance(n, UOp): return sq / self._symbolic_count((n - correction).maximum(0), sq)  # n - correction <= 0: inf or NaN
    return sq / max(0, n - correction) if n - correction > 0 else sq * math.inf if n else sq * math.nan
  def std(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor:
    """Standard deviation over axis; where it is 0 its gradient is 0 (as torch and tinygrad 0.14), not sqrt's inf * 0 = NaN."""
    v = self.var(axis, keepdim, correction)
    return (v == 0).detach().where(0, v).sqrt()
  def var_mean(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
    """(var, mean) over axis."""
    return self.var(axis, keepdim, correction), self.mean(axis, keepdim)
  def std_mean(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
    """(std, mean) over axis."""
    return self.std(axis, keepdim, correction), self.mean(axis, keepdim)
  def prod(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, dtype: DType | str | None = None) -> Tensor:
    """Product over axis (all when None): a tree of multiplications, exact for integers; 1 for an empty reduction."""
    x = self.cast(to_dtype(dtype)) if dtype is not None else self
    axes = self._axes(axis)
    keep = [i for i in range(self.ndim) if i not in axes]
    y = x.permute(*keep, *axes).reshape(*[self.shape[i] for i in keep], prod(self.shape[i] for i in axes)) if self.ndim else x.reshape(1)
    n, levels = y.shape[-1], 0
    # pad once with ones to a power of two, then halve: each level multiplies pairs; a kernel every four levels
    p2 = 1 << max(0, (n - 1).bit_length())
    if p2 != n: y, n = y.pad(((0, 0),) * (y.ndim - 1) + ((0, p2 - n),), value=1), p2
    while n > 1:
      y = y.reshape(*y.shape[:-1], n // 2, 2)
      y = y[..., 0] * y[..., 1]
      n, levels = n // 2, levels + 1
      # the gradient is realized at the same places: through all levels it would be read along every path (2**levels views)
      if levels % 4 == 0 and n > 1: y = y.contiguous().contiguous_backward()
    y = y.reshape(y.shape[:-1])
    return y.reshape(tuple(1 if i in axes else s for i, s in enumerate(self.shape))) if keepdim else y
  def _argfirst(self, mask: Tensor, axis: int, keepdim: bool) -> Tensor:
    n = self.shape[axis]
    rev = (n - 1) - Tensor._iota(n, self.device).reshape(n, *[1] * (self.ndim - axis - 1))
    return ((n - 1) - mask.where(rev, -1).max(axis, keepdim)).cast(dtypes.int32)
  def argmax(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the first max along axis (of the flattened tensor when None); a NaN counts as the max. int32."""
    if axis is None: return self.flatten().argmax(0).reshape((1,) * self.ndim if keepdim else ())
    a = self._resolve_dim(axis)
    self._check_nonempty(a, "argmax")
    x = self.detach()
    m = x.max(a, keepdim=True)
    mask = (x == m) | (x != x) if dtypes.is_float(x.dtype) else (x == m)
    return self._argfirst(mask, a, keepdim)
  def argmin(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the first min along axis (of the flattened tensor when None); a NaN counts as the min. int32."""
    x = self.detach()
    neg = x.logical_not() if x.dtype == dtypes.bool else ~x if dtypes.is_int(x.dtype) else -x
    return neg.argmax(axis, keepdim)
  def any(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """True where any element along axis is nonzero."""
    return self.bool().max(axis, keepdim) if all(self.shape[a] for a in self._axes(axis)) else \
      Tensor.full(tuple(1 if i in self._axes(axis) else s for i, s in enumerate(self.shape)) if keepdim else
                  tuple(s for i, s in enumerate(self.shape) if i not in self._axes(axis)), False, device=self.device)
  def all(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """True where every element along axis is nonzero."""
    return self.logical_not().any(axis, keepdim).logical_not()
  def logsumexp(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """log(sum(exp(self))) over axis, computed stably."""
    x = self._float()
    m = x.detach().max(axis, keepdim=True)
    m = m.isinf().where(0, m)
    out = (x - m).exp().sum(axis, keepdim=True).log() + m
    return out if keepdim else out.reshape(tuple(s for i, s in enumerate(self.shape) if i not in self._axes(axis)))
  def softmax(self, axis: int = -1, dtype: DType | str | None = None) -> Tensor:
    """exp(self) / sum(exp(self)) along axis, computed stably."""
    x = self.cast(to_dtype(dtype)) if dtype is not None else self._float()
    e = (x - x.detach().max(axis, keepdim=True)).exp()
    return e / e.sum(axis, keepdim=True)
  def softmin(self, axis: int = -1, dtype: DType | str | None = None) -> Tensor:
    """softmax(-self): weights that favour the smallest elements."""
    return (-self).softmax(axis, dtype)
  def logaddexp(self, other: Any) -> Tensor:
    """log(exp(self) + exp(other)) elementwise, computed stably (-inf with -inf gives -inf, inf gives inf)."""
    a, b = self._broadcasted(other)
    a, b = a._float(), b._float()
    m = a.detach().maximum(b.detach())
    m = m.isinf().where(0, m)  # both infinite: shifting by them would give inf - inf
    return ((a - m).exp() + (b - m).exp()).log() + m
  def log_softmax(self, axis: int = -1, dtype: DType | str | None = None) -> Tensor:
    """self - logsumexp(self) along axis."""
    x = self.cast(to_dtype(dtype)) if dtype is not None else self._float()
    m = x - x.detach().max(axis, keepdim=True)
    return m - m.exp().sum(axis, keepdim=True).log()

  # *** cumulative ops and sorting ***
  def _to_last(self, axis: int) -> tuple[Tensor, Callable[[Tensor], Tensor]]:
    a = self._resolve_dim(axis)
    if self.ndim == 0: return self.reshape(1), lambda t: t.reshape(())
    if a == self.ndim - 1: return self, lambda t: t
    return self.transpose(a, -1), lambda t: t.transpose(a, -1)
  @staticmethod
  def _cumsum_last(x: Tensor) -> Tensor:
    n = x.shape[-1]
    if n <= 1: return x
    if n <= 512:
      # out[i] = sum over j <= i: a triangular mask and one reduce
      tri = Tensor._iota(n, x.device).reshape(n, 1) >= Tensor._iota(n, x.device).reshape(1, n)
      return tri.where(x.unsqueeze(-2), 0).sum(-1, dtype=x.dtype)
    # long axes: scan blocks of 256, then add the scanned block totals
    b, m = 256, ceildiv(n, 256)
    lead = x.shape[:-1]
    xb = x.pad(((0, 0),) * len(lead) + ((0, m * b - n),)).reshape(*lead, m, b)
    inner = Tensor._cumsum_last(xb)
    tot = Tensor._cumsum_last(inner[..., -1])
    offs = tot.pad(((0, 0),) * len(lead) + ((1, 0),)).shrink(tuple([None] * len(lead)) + ((0, m),))
    return (inner + offs.unsqueeze(-1)).reshape(*lead, m * b).shrink(tuple([None] * len(lead)) + ((0, n),))
  def cumsum(self, axis: int = 0) -> Tensor:
    """Running sum along axis (dtype as sum)."""
    x, back = self._to_last(axis)
    acc = x.sum(-1, keepdim=True).dtype if x.shape[-1] else x.dtype
    return back(Tensor._cumsum_last(x.cast(acc)).cast(acc if self.dtype not in (dtypes.float16, dtypes.bfloat16) else self.dtype))
  @staticmethod
  def _scan_last(x: Tensor, fn: Callable[[Tensor, Tensor], Tensor], identity: Any) -> Tensor:
    """Hillis-Steele inclusive scan: log2(n) steps of fn(x, x shifted), a kernel every three steps."""
    n, s, steps = x.shape[-1], 1, 0
    pads = ((0, 0),) * (x.ndim - 1)
    while s < n:
      # shift by s, filling with the identity: a zero pad plus a constant that is the identity only where padded
      # (no WHERE, so the next step's pad can still fuse through)
      fill = Tensor.full((*x.shape[:-1], s), identity, dtype=x.dtype, device=x.device).pad(pads + ((0, n - s),))
      shifted = x.shrink(tuple([None] * (x.ndim - 1)) + ((0, n - s),)).pad(pads + ((s, 0),)) + fill
      x = fn(x, shifted)
      s, steps = s * 2, steps + 1
      if steps % 3 == 0 and s < n: x = x.contiguous().contiguous_backward()  # (the gradient too: see prod)
    return x
  @staticmethod
  def _tri_last(x: Tensor, identity: Any) -> Tensor:
    """(..., n, n): row i holds x[..., j] for j <= i and the identity after."""
    n = x.shape[-1]
    tri = Tensor._iota(n, x.device).reshape(n, 1) >= Tensor._iota(n, x.device).reshape(1, n)
    return tri.where(x.unsqueeze(-2), identity)
  def cumprod(self, axis: int) -> Tensor:
    """Running product along axis (a triangular mask and a product tree up to 512, a log-depth scan beyond)."""
    x, back = self._to_last(axis)
    if x.shape[-1] <= 512: return back(Tensor._tri_last(x, 1).prod(-1))
    return back(Tensor._scan_last(x, lambda a, b: a * b, 1))
  @staticmethod
  def _cummax_last(x: Tensor) -> Tensor:
    if 0 < x.shape[-1] <= 512: return Tensor._tri_last(x, dtypes.min(x.dtype)).max(-1)
    return Tensor._scan_last(x, lambda a, b: a.maximum(b), dtypes.min(x.dtype))
  def cummax(self, axis: int = 0) -> tuple[Tensor, Tensor]:
    """(values, indices) of the running max along axis, as tinygrad 0.14: the index (int32) is where the running max
    took its value first (torch names the last of equal values); a NaN is the max from where it appears."""
    x, back = self._to_last(axis)
    v = Tensor._cummax_last(x)
    n = x.shape[-1]
    if n == 0: return back(v), back(v.cast(dtypes.int32))
    vd, io = v.detach(), Tensor._iota(n, x.device)
    prev = vd.shrink(tuple([None] * (x.ndim - 1)) + ((0, n - 1),)).pad(((0, 0),) * (x.ndim - 1) + ((1, 0),))
    new = (vd != prev) & ~(vd.isnan() & prev.isnan()) if dtypes.is_float(x.dtype) else vd != prev
    if dtypes.is_float(x.dtype): new = new | x.detach().isnan()
    new = new | (io == 0)  # the first element always starts a run
    return back(v), back(Tensor._cummax_last(new.where(io, 0)))
  def cummin(self, axis: int = 0) -> tuple[Tensor, Tensor]:
    """(values, indices) of the running min along axis (see cummax)."""
    neg = self.logical_not() if self.dtype == dtypes.bool else ~self if dtypes.is_int(self.dtype) else -self
    v, i = neg.cummax(axis)
    return (v.logical_not() if self.dtype == dtypes.bool else ~v if dtypes.is_int(self.dtype) else -v), i
  def logcumsumexp(self, axis: int | None = 0) -> Tensor:
    """log(cumsum(exp(self))) along axis, computed stably (O(n^2) work along the axis); axis None: over the flattened tensor."""
    if axis is None: return self.flatten().logcumsumexp(0).reshape(self.shape if self.ndim == 0 else (-1,))
    x, back = self._to_last(axis)
    x = x._float()
    n = x.shape[-1]
    if n == 0: return back(x)
    c = Tensor._cummax_last(x.detach())
    c = c.isinf().where(0, c)
    tri = Tensor._iota(n, x.device).reshape(n, 1) >= Tensor._iota(n, x.device).reshape(1, n)
    z = tri.where(x.unsqueeze(-2) - c.unsqueeze(-1), -math.inf)
    return back(z.exp().sum(-1).log() + c)
  def sort(self, dim: int = -1, descending: bool = False) -> tuple[Tensor, Tensor]:
    """(values, indices) sorted along dim; NaN sorts as the largest, ties keep their order. O(n^2) work along dim."""
    x, back = self._to_last(dim)
    n = x.shape[-1]
    if n == 0: return back(x), back(x.cast(dtypes.int32))
    xd = x.detach()
    xi, xj = xd.unsqueeze(-1), xd.unsqueeze(-2)  # element i (rows) vs element j (columns)
    before = (xj > xi) if descending else (xj < xi)
    tie = xj == xi
    if dtypes.is_float(x.dtype):
      ni, nj = xi != xi, xj != xj
      before = (before | (nj & ni.logical_not())) if descending else (before | (ni & nj.logical_not()))
      tie = tie | (ni & nj)
    io = Tensor._iota(n, x.device)
    earlier = io.reshape(1, n) < io.reshape(n, 1)
    rank = (before | (tie & earlier)).sum(-1, dtype=dtypes.int32)  # (..., n) position of element i
    onehot = rank.unsqueeze(-1) == io.reshape(1, n)  # (..., i, r)
    values = Tensor._select_sum(onehot, x.unsqueeze(-1), axis=-2)
    indices = Tensor._select_sum(onehot, io.reshape(n, 1).expand(*x.shape, 1), axis=-2)
    return back(values), back(indices)
  def argsort(self, dim: int = -1, descending: bool = False) -> Tensor:
    """The indices that sort along dim (int32)."""
    return self.sort(dim, descending)[1]
  def topk(self, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True) -> tuple[Tensor, Tensor]:
    """(values, indices) of the k largest (smallest with largest=False) along dim, always sorted."""
    d = self._resolve_dim(dim)
    if not isinstance(k, int) or not 0 <= k <= (self.shape[d] if self.ndim else 1):
      raise ValueError(f"topk k={k} is out of range for dim {d} of {self.shape}")
    v, i = self.sort(d, descending=largest)
    sl = tuple((0, k) if j == d else None for j in range(self.ndim))
    return (v.shrink(sl), i.shrink(sl)) if self.ndim else (v, i)

  # *** linear algebra ***
  def dot(self, w: Tensor, dtype: DType | str | None = None) -> Tensor:
    """Matrix product as torch.matmul: 1-D and 2-D operands, with broadcasting over leading dims."""
    if not isinstance(w, Tensor): raise TypeError(f"matmul needs a Tensor, got {type(w).__name__}")
    if self.ndim == 0 or w.ndim == 0: raise ShapeError(f"matmul needs tensors with at least 1 dim, got {self.shape} and {w.shape}")
    k_self, k_w = self.shape[-1], w.shape[-min(w.ndim, 2)]
    if k_self != k_w: raise ShapeError(f"matmul shape mismatch: {self.shape} @ {w.shape} ({k_self} != {k_w})")
    try: _broadcast_shape(self.shape[:-2], w.shape[:-2])
    except ValueError: raise ShapeError(f"matmul batch dims of {self.shape} and {w.shape} cannot be broadcast") from None
    n1 = min(self.ndim - 1, w.ndim - 1, 1)
    x = self.reshape(*self.shape[:-1], *[1] * n1, self.shape[-1])
    w = w.reshape(*w.shape[:-2], *[1] * n1, *w.shape[-min(w.ndim, 2):]).transpose(-1, -min(w.ndim, 2))
    out_dt = least_upper_dtype(x.dtype, w.dtype)
    return (x * w).sum(-1, dtype=dtype).cast(to_dtype(dtype) if dtype is not None else out_dt)
  def matmul(self, x: Tensor, reverse: bool = False, dtype: DType | str | None = None) -> Tensor:
    """self @ x (x @ self with reverse)."""
    if not isinstance(x, Tensor): x = Tensor(x, device=self.device)
    return x.dot(self, dtype=dtype) if reverse else self.dot(x, dtype=dtype)
  def newton_schulz(self, steps: int, params: tuple[float, ...], eps: float = 1.0e-7) -> Tensor:
    """Orthogonalize the last two dims: scale to a Frobenius norm below one, then `steps` times X <- sum_i params[i] *
    (X X^T)^i X (the odd polynomial iteration Muon uses); a tall matrix is worked on transposed."""
    if self.ndim < 2: raise ShapeError(f"newton_schulz needs at least 2 dims, got shape {self.shape}")
    if self.shape[-2] > self.shape[-1]: return self.transpose(-2, -1).newton_schulz(steps, params, eps).transpose(-2, -1)
    x = self / ((self * self).sum(axis=(-2, -1), keepdim=True).sqrt() + eps)
    for _ in range(steps):
      gram, term = x @ x.transpose(-2, -1), x
      out = params[0] * x
      for c in params[1:]:
        term = gram @ term
        out = out + c * term
      x = out
    return x
  def linear(self, weight: Tensor, bias: Tensor | None = None, dtype: DType | str | None = None) -> Tensor:
    """self @ weight + bias, weight shaped (in, out) (a 1-D weight multiplies elementwise)."""
    x = self.mul(weight) if weight.ndim == 1 else self.dot(weight, dtype=dtype)
    return x.add(bias) if bias is not None else x
  @staticmethod
  def einsum(formula: str, *operands: Tensor | Sequence[Tensor], dtype: DType | str | None = None) -> Tensor:
    """Einstein summation, as numpy/torch: "ij,jk->ik", implicit output, "..." broadcasting, repeated indices (diagonals)."""
    ops = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], (list, tuple)) else list(operands)
    f = formula.replace(" ", "")
    lhs, rhs = (f.split("->") + [None])[:2] if "->" in f else (f, None)
    ins = lhs.split(",")
    if len(ins) != len(ops): raise ShapeError(f"einsum {formula!r} names {len(ins)} operands, got {len(ops)}")
    # expand "..." into fresh letters
    ell_n = max([t.ndim - len(s.replace("...", "")) for s, t in zip(ins, ops) if "..." in s] + [0])
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in f][:ell_n]
    def expand(s: str, nd: int) -> str:
      if "..." not in s: return s
      k = nd - len(s.replace("...", ""))
      return s.replace("...", "".join(free[ell_n - k:]))
    ins = [expand(s, t.ndim) for s, t in zip(ins, ops)]
    for s, t in zip(ins, ops):
      if not all(c.isalpha() for c in s): raise ShapeError(f"einsum {formula!r}: bad subscript {s!r}")
      if len(s) != t.ndim: raise ShapeError(f"einsum {formula!r}: subscript {s!r} does not match an operand of shape {t.shape}")
    if rhs is None:
      counts = {c: sum(s.count(c) for s in ins) for c in set("".join(ins))}
      rhs = "".join(free[:ell_n]) + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in free))
    else: rhs = rhs.replace("...", "".join(free[:ell_n]))  # an explicit output without "..." sums the ellipsis dims away
    # operands with a repeated letter: take the diagonal
    tensors: list[Tensor] = []
    subs: list[str] = []
    for s, t in zip(ins, ops):
      while len(set(s)) != len(s):
        c = next(ch for ch in s if s.count(ch) > 1)
        i, j = s.index(c), s.index(c, s.index(c) + 1)
        if t.shape[i] != t.shape[j]: raise ShapeError(f"einsum {formula!r}: repeated index {c!r} has sizes {t.shape[i]} and {t.shape[j]}")
        t = t.diagonal(0, i, j)
        s = "".join(ch for k, ch in enumerate(s) if k not in (i, j)) + c
      tensors.append(t)
      subs.append(s)
    letters = sorted(set("".join(subs)))
    sizes: dict[str, int] = {}
    for s, t in zip(subs, tensors):
      for c, n in zip(s, t.shape):
        if sizes.get(c, n) != n and n != 1 and sizes[c] != 1: raise ShapeError(f"einsum {formula!r}: index {c!r} has sizes {sizes[c]} and {n}")
        sizes[c] = max(sizes.get(c, n), n)
    for c in rhs:
      if c not in sizes: raise ShapeError(f"einsum {formula!r}: output index {c!r} is not in the inputs")
    aligned = []
    for s, t in zip(subs, tensors):
      order = sorted(range(len(s)), key=lambda k: letters.index(s[k]))
      t = t.permute(order) if order else t
      ss = "".join(s[k] for k in order)
      aligned.append(t.reshape(*[t.shape[ss.index(c)] if c in ss else 1 for c in letters]) if letters else t)
    out = aligned[0]
    for t in aligned[1:]: out = out * t
    out = out.expand(*[sizes[c] for c in letters]) if letters else out
    red = [k for k, c in enumerate(letters) if c not in rhs]
    if red: out = out.sum(red, dtype=dtype)
    kept = [c for c in letters if c in rhs]
    return out.permute([kept.index(c) for c in rhs]) if rhs else out

  # *** convolution and pooling ***
  def _windows(self, kernel: tuple[int, ...], stride: int | tuple[int, ...] = 1, dilation: int | tuple[int, ...] = 1) -> Tensor:
    """Sliding windows over the last len(kernel) dims: (..., *spatial) -> (..., *out, *kernel), all views.

    Along one dim of size i: repeat it k times, flatten, pad to rows of i+d and read row b from column a*s; the
    element there is x[a*s + b*d], exactly the window element (see docs/design.md)."""
    k_ = kernel
    s_, d_ = make_tuple(stride, len(k_)), make_tuple(dilation, len(k_))
    if any(s <= 0 for s in s_) or any(d <= 0 for d in d_): raise ValueError(f"stride {stride} and dilation {dilation} must be positive")
    nlead = self.ndim - len(k_)
    x = self
    for j, (k, s, d) in enumerate(zip(k_, s_, d_)):
      ax = nlead + j
      # move the dim to the end, window it, and keep (out, k) at the end
      x = x.permute(*[a for a in range(x.ndim) if a != ax], ax)
      i = x.shape[-1]
      o = (i - d * (k - 1) - 1) // s + 1
      if o <= 0: raise ShapeError(f"kernel {k} with dilation {d} does not fit in an input of {i}")
      lead = x.shape[:-1]
      if d == 1 and s >= k:
        # windows that do not overlap (pooling) are a reshape: no repeated input, and a gradient without a fold
        x = x.pad(((0, 0),) * len(lead) + ((0, o * s - i),)) if o * s > i else x.shrink(tuple((0, n) for n in lead) + ((0, o * s),))
        x = x.reshape(*lead, o, s).shrink(tuple((0, n) for n in lead) + ((0, o), (0, k)))
      else:
        x = x.reshape(*lead, 1, i).expand(*lead, k, i).reshape(*lead, k * i)
        x = x.pad(((0, 0),) * len(lead) + ((0, k * d),)).reshape(*lead, k, i + d)
        if o * s > i + d: x = x.pad(((0, 0),) * (len(lead) + 1) + ((0, o * s - i - d),))
        x = x.shrink(tuple((0, n) for n in lead) + ((0, k), (0, o * s))).reshape(*lead, k, o, s)
        x = x.shrink(tuple((0, n) for n in lead) + ((0, k), (0, o), (0, 1))).reshape(*lead, k, o)
        x = x.transpose(-1, -2)  # (..., o, k)
      # the windowed dim's (o, k) went to the end: restore o to position ax, keep the k's gathered at the end
      nd = x.ndim
      order = list(range(nd - 2))
      order.insert(ax, nd - 2)
      x = x.permute(*order, nd - 1)
    return x

  def conv2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: int | tuple[int, ...] = 1,
             dilation: int | tuple[int, ...] = 1, padding: int | Sequence[int] = 0, dtype: DType | str | None = None) -> Tensor:
    """N-d convolution (cross-correlation, as torch): x (bs, cin, *spatial), weight (cout, cin/groups, *kernel).
    padding: an int, one per spatial dim, or (left, right, top, bottom, ...) for asymmetric padding."""
    if self.ndim < 3: raise ShapeError(f"conv input needs (batch, channels, *spatial) dims, got {self.shape}")
    if self.ndim != weight.ndim: raise ShapeError(f"conv input {self.shape} and weight {weight.shape} need the same number of dims")
    (bs, cin_), (cout, cin), hw = self.shape[:2], weight.shape[:2], weight.shape[2:]
    if not isinstance(groups, int) or groups < 1: raise ArgumentError(f"conv groups must be a positive int, got {groups!r}")
    if groups * cin != cin_: raise ShapeError(f"conv input has {cin_} channels, weight {weight.shape} with groups={groups} expects {groups*cin}")
    if cout % groups: raise ShapeError(f"conv output channels {cout} are not divisible by groups={groups}")
    if bias is not None and bias.shape != (cout,): raise ShapeError(f"conv bias must have shape ({cout},), got {bias.shape}")
    x = self.pad(((0, 0), (0, 0)) + _pad_arg(padding, len(hw)))
    x = x._windows(hw, stride, dilation)  # (bs, cin_, *out, *k)
    oyx = x.shape[2:2 + len(hw)]
    rcout = cout // groups
    x = x.reshape(bs, groups, cin, 1, *oyx, *hw).expand(bs, groups, cin, rcout, *oyx, *hw)
    x = x.permute(0, 1, 3, *[4 + i for i in range(len(oyx))], 2, *[4 + len(oyx) + i for i in range(len(hw))])
    w = weight.reshape(1, groups, rcout, *[1] * len(oyx), cin, *hw)
    ret = (x * w).sum([-1 - i for i in range(1 + len(hw))], keepdim=True, dtype=dtype).reshape(bs, cout, *oyx)
    return ret if bias is None else ret.add(bias.reshape(1, -1, *[1] * len(hw)))
  def conv_transpose2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: int | tuple[int, ...] = 1,
                       dilation: int | tuple[int, ...] = 1, padding: int | Sequence[int] = 0, output_padding: int | Sequence[int] = 0) -> Tensor:
    """Transposed convolution (as torch.conv_transpose2d): weight (cin, cout/groups, *kernel)."""
    if self.ndim < 3 or self.ndim != weight.ndim:
      raise ShapeError(f"conv_transpose input {self.shape} and weight {weight.shape} need matching (batch, channels, *spatial) dims")
    hw = weight.shape[2:]
    cin, rcout = weight.shape[:2]
    if self.shape[1] != cin: raise ShapeError(f"conv_transpose input has {self.shape[1]} channels, weight {weight.shape} expects {cin}")
    if cin % groups: raise ShapeError(f"conv_transpose input channels {cin} are not divisible by groups={groups}")
    nd = len(hw)
    s_, d_, op_ = make_tuple(stride, nd), make_tuple(dilation, nd), make_tuple(output_padding, nd)
    pads = _pad_arg(padding, nd)
    for o, s, d in zip(op_, s_, d_):
      if o >= max(s, d): raise ArgumentError(f"output_padding {output_padding} must be smaller than stride {stride} or dilation {dilation}")
    # weight (groups, cin/g, cout/g, *k) -> (groups * cout/g, cin/g, *k), flipped spatially
    w = weight.reshape(groups, cin // groups, rcout, *hw).permute(0, 2, 1, *range(3, 3 + nd)).flip(*range(3, 3 + nd))
    w = w.reshape(groups * rcout, cin // groups, *hw)
    x = self
    # spread the input: stride-1 zeros between elements
    for j, s in enumerate(s_):
      if s == 1: continue
      ax = 2 + j
      n = x.shape[ax]
      x = x.unsqueeze(ax + 1).pad(tuple((0, s - 1) if i == ax + 1 else (0, 0) for i in range(x.ndim + 1)))
      x = x.reshape(*x.shape[:ax], n * s, *x.shape[ax + 2:]).shrink(tuple((0, n * s - (s - 1)) if i == ax else None for i in range(x.ndim - 1)))
    full = []
    for (pb, pa), k, d, o in zip(pads, hw, d_, op_):
      full += [d * (k - 1) - pb, d * (k - 1) - pa + o]
    flat: list[int] = []
    for i in reversed(range(nd)): flat += [full[2 * i], full[2 * i + 1]]
    return x.conv2d(w, bias, groups=groups, dilation=dilation, padding=flat)
  def _pool_setup(self, kernel_size: Any, stride: Any, dilation: Any, padding: Any, ceil_mode: bool) -> tuple:
    k = make_tuple(kernel_size, 2)
    if self.ndim < len(k): raise ShapeError(f"pool kernel {k} needs at least {len(k)} dims, got shape {self.shape}")
    s = make_tuple(stride if stride is not None else k, len(k))
    d = make_tuple(dilation, len(k))
    pads = _pad_arg(padding, len(k))
    extra = []
    for i, (kk, ss, dd, (pb, pa)) in enumerate(zip(k, s, d, pads)):
      n = self.shape[self.ndim - len(k) + i] + pb + pa
      eff = dd * (kk - 1) + 1
      if eff > n: raise ShapeError(f"pool kernel {kk} with dilation {dd} does not fit in a padded input of {n}")
      if ceil_mode:
        o = ceildiv(n - eff, ss) + 1
        # the last window must start inside the input or the left padding (as torch)
        if (o - 1) * ss >= self.shape[self.ndim - len(k) + i] + pb: o -= 1
        extra.append(max(0, (o - 1) * ss + eff - n))
      else: extra.append(0)
    return k, s, d, pads, extra
  def max_pool2d(self, kernel_size: int | tuple[int, ...] = (2, 2), stride: int | tuple[int, ...] | None = None, dilation: int | tuple[int, ...] = 1,
                 padding: int | Sequence[int] = 0, ceil_mode: bool = False, return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """Max pooling over the last len(kernel_size) dims (padding counts as -inf). With return_indices, also the flat
    spatial index of each max (int32, as tinygrad; torch gives int64), for max_unpool2d."""
    k, s, d, pads, extra = self._pool_setup(kernel_size, stride, dilation, padding, ceil_mode)
    lead = self.ndim - len(k)
    full = ((0, 0),) * lead + tuple((pb, pa + e) for (pb, pa), e in zip(pads, extra))
    x = self.pad(full, value=-math.inf if dtypes.is_float(self.dtype) else dtypes.min(self.dtype)) if any(p != (0, 0) for p in full) else self
    w = x._windows(k, s, d)
    axes = tuple(range(-len(k), 0))
    out = w.max(axis=axes)
    if not return_indices: return out
    sp = self.shape[lead:]
    idx = Tensor._iota(prod(sp), self.device).reshape(sp)
    idx = idx.pad(full[lead:], value=-1) if any(p != (0, 0) for p in full) else idx
    iw = idx._windows(k, s, d)
    wd = w.detach()
    od = out.detach().reshape(*out.shape, *[1] * len(k))
    hit = (wd == od) | (wd != wd) if dtypes.is_float(self.dtype) else wd == od
    # the first hit in window order: flatten the window dims, take the first true
    nw = prod(k)
    hitf = hit.reshape(*hit.shape[:-len(k)], nw)
    first = Tensor._argfirst_static(hitf)
    onehot = first.unsqueeze(-1) == Tensor._iota(nw, self.device)
    ind = Tensor._select_sum(onehot, iw.reshape(*iw.shape[:-len(k)], nw).expand(*hitf.shape)).cast(dtypes.int32)
    return out, ind
  @staticmethod
  def _argfirst_static(mask: Tensor) -> Tensor:
    n = mask.shape[-1]
    rev = (n - 1) - Tensor._iota(n, mask.device)
    return ((n - 1) - mask.where(rev, -1).max(-1)).cast(dtypes.int32)
  def max_unpool2d(self, indices: Tensor, kernel_size: int | tuple[int, ...] = (2, 2), stride: int | tuple[int, ...] | None = None,
                   dilation: int | tuple[int, ...] = 1, padding: int | Sequence[int] = 0, output_size: Sequence[int] | None = None) -> Tensor:
    """The inverse of max_pool2d(return_indices=True): each value goes to its flat spatial index, zeros elsewhere."""
    k = make_tuple(kernel_size, 2)
    s = make_tuple(stride if stride is not None else k, len(k))
    d = make_tuple(dilation, len(k))
    pads = _pad_arg(padding, len(k))
    if indices.shape != self.shape: raise ShapeError(f"max_unpool2d indices shape {indices.shape} must match the input {self.shape}")
    lead = self.ndim - len(k)
    insp = self.shape[lead:]
    if output_size is None: osp = tuple((i - 1) * ss - pb - pa + dd * (kk - 1) + 1 for i, ss, (pb, pa), dd, kk in zip(insp, s, pads, d, k))
    else: osp = tuple(output_size)[-len(k):]
    n_out = prod(osp)
    xf = self.reshape(*self.shape[:lead], prod(insp), 1)
    idx = indices.reshape(*self.shape[:lead], prod(insp), 1)
    Tensor._check_index_range(idx, n_out, "max_unpool2d")
    onehot = idx == Tensor._iota(n_out, self.device, idx.dtype).reshape(1, n_out)
    out = onehot.where(xf, 0).sum(-2, dtype=self.dtype)
    if any(ss < dd * (kk - 1) + 1 for ss, dd, kk in zip(s, d, k)):
      # overlapping windows may name one position twice, with the same value: the value is their mean, while each
      # input still gets the full gradient of its position (as torch)
      cnt = onehot.sum(-2)
      out = (out / cnt.maximum(1)).detach() + (out - out.detach())
    return out.reshape(*self.shape[:lead], *osp)
  def avg_pool2d(self, kernel_size: int | tuple[int, ...] = (2, 2), stride: int | tuple[int, ...] | None = None, dilation: int | tuple[int, ...] = 1,
                 padding: int | Sequence[int] = 0, ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """Average pooling over the last len(kernel_size) dims. count_include_pad counts zero padding in the divisor;
    the extra padding of ceil_mode never counts (as torch)."""
    k, s, d, pads, extra = self._pool_setup(kernel_size, stride, dilation, padding, ceil_mode)
    lead = self.ndim - len(k)
    full = ((0, 0),) * lead + tuple((pb, pa + e) for (pb, pa), e in zip(pads, extra))
    x = self._float()
    xs = x.pad(full)._windows(k, s, d).sum(axis=tuple(range(-len(k), 0)))
    if count_include_pad and not any(extra): return xs / prod(k)
    # the divisor of each window depends only on shapes: count it on the host
    sp = self.shape[lead:]
    inside = np.ones([n + pb + pa for n, (pb, pa) in zip(sp, pads)], np.int64) if count_include_pad else \
      np.pad(np.ones(sp, np.int64), pads)
    inside = np.pad(inside, [(0, e) for e in extra])
    cnt = np.zeros(xs.shape[lead:], np.int64)
    for pos in itertools.product(*[range(o) for o in cnt.shape]):
      cnt[pos] = inside[tuple(slice(p * ss, p * ss + dd * (kk - 1) + 1, dd) for p, ss, dd, kk in zip(pos, s, d, k))].sum()
    return xs / Tensor(cnt.astype(np.float32), device=self.device).cast(xs.dtype)
  def interpolate(self, size: tuple[int, ...], mode: str = "linear", align_corners: bool = False) -> Tensor:
    """Resize the last len(size) dims: mode "linear" (bi/tri-linear, as torch's linear modes), "nearest" or "nearest-exact".
    The dtype is kept: integer inputs (uint8 images) are rounded half up after each dim, last dim first, as torch."""
    if mode not in ("linear", "nearest", "nearest-exact"):
      raise ArgumentError(f"interpolate mode must be linear, nearest or nearest-exact, got {mode!r}")
    if align_corners and mode != "linear": raise ArgumentError("align_corners only applies to mode 'linear'")
    size = tuple(size)
    if len(size) > self.ndim: raise ShapeError(f"interpolate size {size} has more dims than the input {self.shape}")
    x = self._float()
    for j in reversed(range(len(size))):
      out_n, ax = size[j], self.ndim - len(size) + j
      in_n = x.shape[ax]
      w = np.zeros((in_n, out_n), np.float64)
      dst = np.arange(out_n, dtype=np.float64)
      if mode == "linear":
        if align_corners: src = dst * ((in_n - 1) / (out_n - 1)) if out_n > 1 else dst * 0
        else: src = np.maximum((dst + 0.5) * (in_n / out_n) - 0.5, 0)
        i0 = np.minimum(np.floor(src).astype(np.int64), in_n - 1)
        i1 = np.minimum(i0 + 1, in_n - 1)
        l1 = src - i0
        np.add.at(w, (i0, np.arange(out_n)), 1 - l1)
        np.add.at(w, (i1, np.arange(out_n)), l1)
      else:
        off = 0.5 if mode == "nearest-exact" else 0.0
        src = np.minimum(np.floor((dst + off) * (in_n / out_n)).astype(np.int64), in_n - 1)
        w[src, np.arange(out_n)] = 1
      wt = Tensor(w.astype(to_np_dtype(x.dtype) if x.dtype != dtypes.bfloat16 else np.float32), device=self.device, dtype=x.dtype)
      x = (x.transpose(ax, -1) @ wt).transpose(ax, -1)
      if not dtypes.is_float(self.dtype) and mode == "linear": x = (x + 0.5).floor()
    return x.cast(self.dtype)

  # *** normalization, losses, attention ***
  def normalize(self, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """self divided by its p-norm along dim, the norm clamped below at eps (as torch.nn.functional.normalize); p may
    be inf."""
    x = self._float()
    a = x.abs()
    if p == math.inf: norm = a.max(dim, keepdim=True)
    elif p == 1: norm = a.sum(dim, keepdim=True)
    elif p == 2: norm = (x * x).sum(dim, keepdim=True).sqrt()
    else: norm = a.pow(p).sum(dim, keepdim=True).pow(1 / p)
    return x / norm.maximum(eps)
  def layernorm(self, axis: int | Sequence[int] = -1, eps: float = 1e-5) -> Tensor:
    """(self - mean) / sqrt(var + eps) over axis (biased variance), without affine parameters."""
    y = self - self.mean(axis, keepdim=True)
    return y.mul((y * y).mean(axis, keepdim=True).add(eps).rsqrt())
  def batchnorm(self, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor, axis: int | Sequence[int] = 1) -> Tensor:
    """(self - mean) * invstd * weight + bias, the parameters shaped like self's `axis` dims."""
    axes = tuple(self._resolve_dim(a) for a in (axis if isinstance(axis, (list, tuple)) else [axis]))
    shape = tuple(s if i in axes else 1 for i, s in enumerate(self.shape))
    def fit(t: Tensor, name: str) -> Tensor:
      if t.numel() != prod(self.shape[a] for a in axes):
        raise ValueError(f"batchnorm {name} of shape {t.shape} does not fit dims {axes} of {self.shape}")
      return t.reshape(shape)
    x = self - fit(mean, "mean")
    if weight is not None: x = x * fit(weight, "weight")
    ret = x.mul(fit(invstd, "invstd") if invstd.ndim == len(axes) or invstd.numel() > 1 else invstd)
    return (ret + fit(bias, "bias")) if bias is not None else ret
  def _do_reduction(self, reduction: str = "mean") -> Tensor:
    if reduction not in ("mean", "sum", "none"): raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return self.mean() if reduction == "mean" else self.sum() if reduction == "sum" else self
  def one_hot(self, num_classes: int) -> Tensor:
    """(..., num_classes) int32 with a 1 at each index (the values are realized to check they are in range). num_classes
    is required, as in tinygrad 0.14 (torch's -1, "infer it", is an error)."""
    if not dtypes.is_int(self.dtype): raise DTypeError(f"one_hot needs an integer tensor, got {self.dtype}")
    if not isinstance(num_classes, int) or num_classes < 0:
      raise ArgumentError(f"one_hot needs num_classes >= 0, got {num_classes!r} (tinygrad does not infer it from the data)")
    if self.numel():
      vals = self.detach().numpy()
      if vals.min() < 0 or vals.max() >= num_classes:
        raise ArgumentError(f"one_hot: class values must be in [0, {num_classes}), got {int(vals.min())}..{int(vals.max())}")
    return (self.unsqueeze(-1) == Tensor._iota(num_classes, self.device, self.dtype)).where(1, 0)
  def _one_hot_unchecked(self, n: int) -> Tensor:
    return self.unsqueeze(-1) == Tensor._iota(n, self.device, self.dtype)
  def sparse_categorical_crossentropy(self, Y: Tensor, ignore_index: int = -1, label_smoothing: float = 0.0, reduction: str = "mean") -> Tensor:
    """Cross entropy of logits self (..., classes) against integer labels Y (...); labels equal to ignore_index are
    left out (of the mean too). A label out of range raises IndexError at the next sync."""
    if not 0.0 <= label_smoothing <= 1.0: raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
    if reduction not in ("mean", "sum", "none"): raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if not isinstance(Y, Tensor): Y = Tensor(Y, device=self.device)
    if not dtypes.is_int(Y.dtype): raise TypeError(f"labels must be an integer tensor, got {Y.dtype}")
    if Y.shape != self.shape[:-1]: raise ShapeError(f"labels of shape {Y.shape} do not match logits {self.shape} (expected {self.shape[:-1]})")
    log_probs = self.log_softmax()
    mask = Y != ignore_index
    # each label's log-probability, a gather (an ignored label reads class 0, masked out). A label out of range raises
    # IndexError at the next sync: the labels are checked on the device, not read back here (a negative one, which the
    # gather would count from the end, is reported as the number of classes)
    y = mask.where((Y < 0).where(self.shape[-1], Y), 0)
    picked = log_probs._gather(y.unsqueeze(-1), self.ndim - 1).squeeze(-1)
    unreduced = mask.where(picked, 0)
    if label_smoothing: unreduced = (1 - label_smoothing) * unreduced + label_smoothing * (log_probs.mean(-1) * mask)
    return -(unreduced.sum() / mask.sum() if reduction == "mean" else unreduced.sum() if reduction == "sum" else unreduced)
  def cross_entropy(self, Y: Tensor, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy of logits self (N, C, ...) against class indices Y (N, ...) or probabilities Y (N, C, ...), as torch."""
    if not 0.0 <= label_smoothing <= 1.0: raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
    if self.ndim < 1: raise ShapeError("cross_entropy needs logits with a class dim")
    if not isinstance(Y, Tensor): Y = Tensor(Y, device=self.device)
    cdim = 1 if self.ndim >= 2 else 0
    nc = self.shape[cdim]
    if Y.shape == self.shape and dtypes.is_float(Y.dtype): probs = Y
    elif Y.ndim == self.ndim - 1 and Y.shape == self.shape[:cdim] + self.shape[cdim + 1:]:
      if not dtypes.is_int(Y.dtype): raise TypeError(f"class index targets must be integers, got {Y.dtype}")
      probs = Y.one_hot(nc).float()
      probs = probs.permute(0, -1, *range(1, probs.ndim - 1)) if cdim == 1 else probs
    else: raise ShapeError(f"cross_entropy target of shape {Y.shape} matches neither indices nor probabilities for logits {self.shape}")
    probs = (1 - label_smoothing) * probs + label_smoothing / nc
    return (-(self.log_softmax(axis=cdim) * probs).sum(axis=cdim))._do_reduction(reduction)
  def nll_loss(self, Y: Tensor, weight: Tensor | None = None, ignore_index: int | None = None, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of log-probabilities self (N, C, ...) at class indices Y (N, ...), with optional class
    weights; a weighted mean with reduction "mean" (as torch)."""
    if reduction not in ("mean", "sum", "none"): raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if not isinstance(Y, Tensor): Y = Tensor(Y, device=self.device)
    if not dtypes.is_int(Y.dtype): raise TypeError(f"nll_loss targets must be integers, got {Y.dtype}")
    cdim = 1 if self.ndim >= 2 else 0
    nc = self.shape[cdim]
    if Y.shape != self.shape[:cdim] + self.shape[cdim + 1:]: raise ShapeError(f"nll_loss target of shape {Y.shape} does not fit input {self.shape}")
    if not isinstance(Y.numel(), int) or Y.numel():
      vals = Y.detach().numpy()
      bad = vals[((vals != ignore_index) if ignore_index is not None else np.ones_like(vals, bool)) & ((vals < 0) | (vals >= nc))]
      if bad.size: raise ValueError(f"target {int(bad[0])} is out of range for {nc} classes")
    oh = Y._one_hot_unchecked(nc)  # (N, ..., C)
    if cdim == 1: oh = oh.permute(0, -1, *range(1, oh.ndim - 1))
    picked = oh.where(self, 0).sum(cdim)
    if weight is not None:
      if weight.shape != (nc,): raise ShapeError(f"nll_loss weight must have shape ({nc},), got {weight.shape}")
      w = oh.where(weight.reshape(nc, *[1] * (self.ndim - cdim - 1)), 0).sum(cdim)
    else: w = Y.ones_like(dtype=self.dtype)
    if ignore_index is not None: w = w * (Y != ignore_index)
    nll = -picked * w
    if reduction == "mean" and weight is None and ignore_index is None: return nll.mean()
    return nll.sum() / w.sum() if reduction == "mean" else nll._do_reduction(reduction)
  def binary_crossentropy(self, Y: Tensor, reduction: str = "mean") -> Tensor:
    """Binary cross entropy of probabilities self against targets Y (the logs are clamped at -100, as torch)."""
    if not isinstance(Y, Tensor): Y = Tensor(Y, device=self.device)
    if Y.shape != self.shape: raise ShapeError(f"binary_crossentropy target shape {Y.shape} does not match input {self.shape}")
    return (-Y * self.log().maximum(-100) - (1 - Y) * (1 - self).log().maximum(-100))._do_reduction(reduction)
  def binary_crossentropy_logits(self, Y: Tensor, reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross entropy of logits self against targets Y, computed stably, with an optional weight of positives."""
    if not isinstance(Y, Tensor): Y = Tensor(Y, device=self.device)
    if Y.shape != self.shape: raise ShapeError(f"binary_crossentropy_logits target shape {Y.shape} does not match input {self.shape}")
    log_p, log_1mp = self.logsigmoid(), (-self).logsigmoid()
    return (-((1 if pos_weight is None else pos_weight) * Y * log_p + (1 - Y) * log_1mp))._do_reduction(reduction)
  def scaled_dot_product_attention(self, key: Tensor, value: Tensor, attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                   is_causal: bool = False, enable_gqa: bool = False) -> Tensor:
    """softmax(self @ key^T / sqrt(d) + mask) @ value. A bool mask keeps True positions; is_causal masks the future;
    enable_gqa repeats key/value heads to match the query's."""
    if self.ndim < 2 or key.ndim < 2 or value.ndim < 2: raise ShapeError("attention needs (..., seq, dim) tensors")
    if self.shape[-1] != key.shape[-1]: raise ShapeError(f"query dim {self.shape[-1]} does not match key dim {key.shape[-1]}")
    if key.shape[-2] != value.shape[-2]: raise ShapeError(f"key length {key.shape[-2]} does not match value length {value.shape[-2]}")
    if is_causal and attn_mask is not None: raise ArgumentError("give either attn_mask or is_causal, not both")
    if enable_gqa and self.ndim >= 3 and key.shape[-3] != self.shape[-3]:
      if self.shape[-3] % key.shape[-3]: raise ShapeError(f"query heads {self.shape[-3]} are not a multiple of key heads {key.shape[-3]}")
      r = self.shape[-3] // key.shape[-3]
      key, value = key.repeat_interleave(r, dim=-3), value.repeat_interleave(r, dim=-3)
    qk = self.matmul(key.transpose(-2, -1)) / math.sqrt(self.shape[-1])
    if is_causal: attn_mask = Tensor.ones(qk.shape[-2], qk.shape[-1], dtype=dtypes.bool, device=self.device).tril(0)
    if attn_mask is not None:
      if attn_mask.dtype == dtypes.bool: attn_mask = attn_mask.where(0, -math.inf)
      qk = qk + attn_mask
    return qk.softmax(-1).cast(self.dtype).dropout(dropout_p) @ value

  # *** autograd ***
  # Every float tensor is differentiable unless requires_grad=False (tinygrad 0.14 has no flag at all): each Function
  # applied to one is recorded (see tinycore/function.py for the rules), under Tensor.no_grad nothing is. gradient()
  # returns recorded gradients, which can be differentiated again. backward() fills .grad with plain values, by one of
  # two rules:
  # - tinygrad's: every float tensor in the graph (leaves, intermediates and self) that is not requires_grad=False;
  # - PyTorch's, once the graph holds a tensor marked requires_grad=True (as an Optimizer marks its parameters): only
  #   the marked leaves. A training loop that slices its batches out of one big data tensor would otherwise add a
  #   gradient graph to that tensor's .grad at every step and keep them all alive (tinygrad 0.14 does), and the lazy
  #   .grad of intermediates, read against the parameters, would have to be computed before each optimizer step.
  # realize() makes the tensors it computes leaves (as tinygrad): a graph is let go once its result is a buffer.
  @property
  def requires_grad(self) -> bool | None:
    """None (the default): differentiable when float; True: the same, said explicitly (PyTorch's habit, and it
    propagates to results); False: gets no gradient and lets none through. Only float tensors can be set to True."""
    return self._rg
  @requires_grad.setter
  def requires_grad(self, requires_grad: bool | None) -> None:
    if requires_grad: _check_differentiable(self)
    self._rg = requires_grad
  def requires_grad_(self, requires_grad: bool | None = True) -> Tensor:
    """Set requires_grad in place and return self."""
    self.requires_grad = requires_grad
    return self
  def _leaf(self, requires_grad: bool | None) -> Tensor:
    """self cut from the graph it was computed by, with requires_grad set: what a creation function returns."""
    self._ctx = None
    self.requires_grad = requires_grad
    return self
  def is_param_(self, is_param: bool = True) -> Tensor:
    """Mark this tensor as an optimizer parameter (the default for every tensor) or, with False, as a buffer an
    Optimizer realizes along with each step but does not update (as tinygrad's BatchNorm running statistics)."""
    self.is_param = is_param
    return self
  def _deepwalk(self) -> list[Tensor]:
    """The recorded tensors self depends on (self included when recorded), each after all of its parents."""
    order: list[Tensor] = []
    seen: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(self, False)]
    while stack:
      t, done = stack.pop()
      if done:
        order.append(t)
        continue
      if id(t) in seen or t._ctx is None: continue
      seen.add(id(t))
      stack.append((t, True))
      stack.extend((p, False) for p in t._ctx.parents if id(p) not in seen)
    return order
  def _grads(self, gradient: Tensor | None, targets: set[int] | None, marked: bool = False) -> tuple[list[Tensor], dict[int, Tensor]]:
    if not dtypes.is_float(self.dtype): raise RuntimeError(f"only float Tensors have gradient, this one is {self.dtype}")
    if gradient is None:
      if self.numel() != 1: raise RuntimeError(f"backward() without a gradient needs a scalar, this tensor has shape {self.shape}")
      gradient = Tensor(1.0, dtype=self.dtype, device=self.device, requires_grad=False).reshape(self.shape)
    if gradient.shape != self.shape: raise ValueError(f"gradient shape {gradient.shape} does not match tensor shape {self.shape}")
    order = self._deepwalk()
    if targets is not None:  # only what lies on a path to a target
      keep = set(targets)
      for t in order:
        if any(id(p) in keep for p in t._ctx.parents): keep.add(id(t))  # type: ignore[union-attr]
      order = [t for t in order if id(t) in keep]
    if marked: order = [t for t in order if t._rg is True]  # requires_grad=True flows from the marked leaves to what uses them
    grads: dict[int, Tensor] = {id(self): gradient}
    for t0 in reversed(order):
      if (g0 := grads.get(id(t0))) is None: continue
      ctx = t0._ctx
      assert ctx is not None
      if marked and len(ctx.parents) > 1 and any(n and p._rg is not True for n, p in zip(ctx.needs_input_grad, ctx.parents)):
        # no gradient for the inputs that are not marked (the data a parameter multiplies)
        needs, ctx.needs_input_grad = ctx.needs_input_grad, tuple(n and p._rg is True for n, p in zip(ctx.needs_input_grad, ctx.parents))
        try: gs = ctx.backward(g0)
        finally: ctx.needs_input_grad = needs
      else: gs = ctx.backward(g0)
      for t, g, need in zip(ctx.parents, gs if len(ctx.parents) > 1 else (gs,), ctx.needs_input_grad):
        if g is None or not need: continue
        if g.shape != t.shape: raise RuntimeError(f"{type(ctx).__name__} gave a gradient of shape {g.shape} for an input of shape {t.shape}")
        grads[id(t)] = g if id(t) not in grads else grads[id(t)] + g
    return order, grads
  def gradient(self, *targets: Tensor, gradient: Tensor | None = None) -> list[Tensor]:
    """d(self)/d(target) for each target (a vector-Jacobian product with `gradient` when self is not a scalar). The
    results are recorded like any computation: differentiate them again for higher orders. A target self does not
    depend on gets zeros; .grad is left alone and the graph is kept."""
    for t in targets:
      if not dtypes.is_float(t.dtype): raise RuntimeError(f"only float Tensors have gradient, a target is {t.dtype}")
    _, grads = self._grads(gradient, {id(t) for t in targets})
    return [grads[id(t)] if id(t) in grads else Tensor(t.lazydata.const(0), requires_grad=False) for t in targets]
  def backward(self, gradient: Tensor | None = None) -> Tensor:
    """Add d(self)/d(t) into t.grad for every float tensor t in the graph of self (leaves, intermediates and self) that
    is not requires_grad=False, as tinygrad; when the graph holds a tensor marked requires_grad=True (an Optimizer marks
    its parameters), only for the marked leaves, as PyTorch. The graph is kept: a second backward() adds again. .grad
    holds plain values, not recorded; use gradient() for gradients to differentiate again."""
    marked = self._rg is True
    prev, Tensor.no_grad = Tensor.no_grad, True
    try:
      order, grads = self._grads(gradient, None, marked)
      seen: set[int] = set()
      for t in itertools.chain((self,), (p for t0 in order for p in t0._ctx.parents)):  # type: ignore[union-attr]
        if id(t) in seen or (g := grads.get(id(t))) is None or t._rg is False or (marked and (t._rg is not True or t._ctx is not None)): continue
        seen.add(id(t))
        if t.grad is None: t.grad = Tensor(g.lazydata, requires_grad=False)
        else: t.grad.replace(t.grad + g)  # in place: a reference to .grad sees the sum (as torch and tinygrad)
    finally: Tensor.no_grad = prev
    return self
