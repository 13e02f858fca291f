"""Tensor: the user API. Lazy: every op builds a LazyBuffer graph; realize() schedules, compiles and runs it.
Autograd records the Function that made each tensor; backward() walks that graph in reverse."""
from __future__ import annotations
import math, time
from typing import Any, ClassVar, Sequence
import numpy as np
import tinycore.function as F
from tinycore.device import Buffer, Device
from tinycore.dtype import DType, dtypes, least_upper_dtype, least_upper_float, to_dtype, from_np_dtype, to_np_dtype, bf16_to_f32
from tinycore.helpers import argfix, prod, all_int, make_tuple, flatten, ceildiv
from tinycore.lazy import LazyBuffer
from tinycore.ops import Ops
from tinycore.engine.schedule import ScheduleItem, create_schedule
from tinycore.engine.realize import run_schedule
from tinycore.uop.uop import sint

def _frompy(x: Any, dtype: DType | None, device: str) -> LazyBuffer:
  arr = np.asarray(x) if not isinstance(x, np.ndarray) else x
  if arr.dtype == object: raise TypeError(f"cannot make a Tensor from ragged or non-numeric data: {str(x)[:80]}")
  if dtype is None:
    dtype = dtypes.from_py(x) if not isinstance(x, np.ndarray) and arr.size and not isinstance(x, (np.generic,)) else None
    if dtype is None: dtype = from_np_dtype(arr.dtype) if arr.size or isinstance(x, np.ndarray) else dtypes.default_float
  if dtype == dtypes.bfloat16:
    from tinycore.dtype import f32_to_bf16
    data = f32_to_bf16(arr.astype(np.float32))
  else: data = np.ascontiguousarray(arr, dtype=to_np_dtype(dtype))
  buf = Buffer(device, data.size, dtype)
  if data.size: buf.copyin(memoryview(data.reshape(-1)).cast("B"))
  return LazyBuffer.from_buffer(buf, tuple(data.shape))

def _pad_arg(padding: int | Sequence[int], dims: int) -> tuple[tuple[int, int], ...]:
  """conv padding: an int, one per spatial dim, or (left, right, top, bottom, ...) pairs from the last dim, as torch."""
  if isinstance(padding, int): return ((padding, padding),) * dims
  p = list(padding)
  if len(p) == dims: return tuple((x, x) for x in p)
  if len(p) == 2 * dims: return tuple((p[2 * i], p[2 * i + 1]) for i in reversed(range(dims)))
  raise ValueError(f"padding {padding} must have {dims} or {2*dims} values")

class Tensor:
  """A multi-dimensional array on a device, with autograd. Operations are lazy until realize(), numpy() or item()."""
  __slots__ = ("lazydata", "requires_grad", "grad", "_ctx", "__weakref__")
  training: ClassVar[bool] = False
  no_grad: ClassVar[bool] = False
  _seed: ClassVar[int] = int(time.time())
  _rng_counter: ClassVar[dict[str, Tensor]] = {}

  def __init__(self, data: Any, device: str | None = None, dtype: DType | str | None = None, requires_grad: bool | None = None):
    device = Device.canonicalize(device)
    dtype = to_dtype(dtype) if dtype is not None else None
    self.grad: Tensor | None = None
    self.requires_grad: bool | None = requires_grad
    self._ctx: F.Function | None = None
    if isinstance(data, LazyBuffer): lb = data if dtype is None or dtype == data.dtype else data.cast(dtype)
    elif isinstance(data, Tensor): lb = data.lazydata.copy_to_device(device) if dtype is None else data.lazydata.cast(dtype).copy_to_device(device)
    elif isinstance(data, (bool, int, float)) and not isinstance(data, np.generic):
      dt = dtype or dtypes.from_py(data)
      lb = LazyBuffer.const_of(data, dt, device, ())
    elif isinstance(data, bytes): lb = _frompy(np.frombuffer(data, np.uint8), dtype or dtypes.uint8, device)
    elif isinstance(data, (list, tuple, np.ndarray, np.generic)): lb = _frompy(data, dtype, device)
    elif data is None: lb = _frompy(np.zeros((0,), np.float32), dtype or dtypes.default_float, device)
    else: raise TypeError(f"cannot make a Tensor from {type(data).__name__}")
    if isinstance(data, LazyBuffer) or lb.device == device: self.lazydata = lb
    else: self.lazydata = lb.copy_to_device(device)

  # *** properties ***
  @property
  def device(self) -> str: return self.lazydata.device
  @property
  def shape(self) -> tuple[sint, ...]: return self.lazydata.shape
  @property
  def dtype(self) -> DType: return self.lazydata.dtype
  @property
  def ndim(self) -> int: return len(self.shape)
  def numel(self) -> sint: return prod(self.shape)
  def element_size(self) -> int: return self.dtype.itemsize
  def nbytes(self) -> int: return self.numel() * self.element_size()
  def __len__(self) -> int:
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]
  def __repr__(self) -> str: return f"<Tensor {self.lazydata!r} on {self.device} with grad {self.grad.lazydata if self.grad is not None else None!r}>"
  def __hash__(self) -> int: return id(self)
  def __bool__(self) -> bool: raise TypeError("the truth value of a Tensor is ambiguous: use .item(), .any() or .all()")

  # *** realizing ***
  def schedule(self, *lst: Tensor) -> list[ScheduleItem]:
    """The kernels realize() would run, without running them."""
    return create_schedule([t.lazydata for t in (self,) + lst])
  def realize(self, *lst: Tensor) -> Tensor:
    """Compute this tensor (and the others given) now."""
    run_schedule(self.schedule(*lst))
    return self
  def contiguous(self) -> Tensor: return F.Contiguous.apply(self)
  def contiguous_backward(self) -> Tensor: return F.ContiguousBackward.apply(self)
  def _buffer(self) -> Buffer:
    t = self if self.lazydata.is_realized() and self.lazydata.st.contiguous and self.lazydata._base is None else self.contiguous()
    t.realize()
    return t.lazydata.base.buffer
  def numpy(self) -> np.ndarray:
    """A numpy copy of the data (bfloat16 comes back as float32)."""
    if not all_int(self.shape): raise ValueError(f"cannot copy out a tensor of symbolic shape {self.shape}")
    if self.numel() == 0: return np.zeros(self.shape, dtype=to_np_dtype(self.dtype) if self.dtype != dtypes.bfloat16 else np.float32)
    arr = self._buffer().numpy()
    if self.dtype == dtypes.bfloat16: arr = bf16_to_f32(arr)
    return arr.reshape(self.shape)
  def data(self) -> memoryview: return memoryview(self.numpy().tobytes())
  def item(self) -> Any:
    if self.numel() != 1: raise ValueError(f"item() needs a tensor with one element, this one has shape {self.shape}")
    return self.numpy().reshape(-1)[0].item()
  def tolist(self) -> Any: return self.numpy().tolist()
  def to(self, device: str | None) -> Tensor:
    device = Device.canonicalize(device)
    if device == self.device: return self
    ret = Tensor(self.lazydata.copy_to_device(device), requires_grad=self.requires_grad)
    if self.grad is not None: ret.grad = self.grad.to(device)
    return ret
  def to_(self, device: str | None) -> Tensor:
    self.lazydata = self.lazydata.copy_to_device(Device.canonicalize(device))
    return self
  def detach(self) -> Tensor: return Tensor(self.lazydata, requires_grad=False)
  def clone(self) -> Tensor: return self.contiguous()
  def assign(self, x: Any) -> Tensor:
    """Write x into this tensor's buffer (in place once realized)."""
    if not isinstance(x, Tensor): x = Tensor(x, device=self.device, dtype=self.dtype)
    if x.shape != self.shape: raise ValueError(f"assign shape mismatch: {self.shape} vs {x.shape}")
    if x.device != self.device: raise ValueError(f"assign device mismatch: {self.device} vs {x.device}")
    if x.dtype != self.dtype: raise TypeError(f"assign dtype mismatch: {self.dtype} vs {x.dtype}")
    if self.lazydata._base is not None or not self.lazydata.st.contiguous or self.lazydata.base.op is Ops.CONST:
      self.lazydata = x.lazydata
      return self
    self.lazydata = self.lazydata.assign(x.lazydata)
    return self

  # *** creation ***
  @staticmethod
  def empty(*shape: Any, device: str | None = None, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    return Tensor(LazyBuffer.metaop(Ops.EMPTY, argfix(*shape), dt, Device.canonicalize(device)), **kwargs)
  @staticmethod
  def full(shape: tuple[sint, ...], fill_value: Any, **kwargs: Any) -> Tensor:
    shape = argfix(shape)
    dtype = to_dtype(kwargs.pop("dtype")) if kwargs.get("dtype") is not None else dtypes.from_py(fill_value)
    kwargs.pop("dtype", None)
    return Tensor(fill_value, dtype=dtype, **kwargs).reshape((1,) * len(shape)).expand(shape)
  @staticmethod
  def zeros(*shape: Any, **kwargs: Any) -> Tensor: return Tensor.full(argfix(*shape), 0.0, **{"dtype": dtypes.default_float, **kwargs})
  @staticmethod
  def ones(*shape: Any, **kwargs: Any) -> Tensor: return Tensor.full(argfix(*shape), 1.0, **{"dtype": dtypes.default_float, **kwargs})
  @staticmethod
  def arange(start: Any, stop: Any = None, step: Any = 1, **kwargs: Any) -> Tensor:
    """Like numpy.arange; the values are computed on the host and copied to the device."""
    if stop is None: start, stop = 0, start
    dtype = to_dtype(kwargs.pop("dtype")) if kwargs.get("dtype") is not None else \
      (dtypes.default_float if any(isinstance(x, float) for x in (start, stop, step)) else dtypes.default_int)
    kwargs.pop("dtype", None)
    if step == 0: raise ValueError("arange step must not be zero")
    n = max(0, math.ceil((stop - start) / step))
    vals = start + step * np.arange(n, dtype=np.float64 if dtypes.is_float(dtype) else np.int64)
    return Tensor(vals.astype(to_np_dtype(dtype) if dtype != dtypes.bfloat16 else np.float32), dtype=dtype, **kwargs)
  def full_like(self, fill_value: Any, **kwargs: Any) -> Tensor:
    return Tensor.full(self.shape, fill_value, **{"dtype": self.dtype, "device": self.device, **kwargs})
  def zeros_like(self, **kwargs: Any) -> Tensor: return self.full_like(0, **kwargs)
  def ones_like(self, **kwargs: Any) -> Tensor: return self.full_like(1, **kwargs)

  # *** random: counter-based (threefry2x32), so every device draws the same numbers for a seed ***
  @staticmethod
  def manual_seed(seed: int = 0) -> None:
    """Reset the random generator: the same seed gives the same numbers on every device."""
    Tensor._seed, Tensor._rng_counter = seed, {}
  @staticmethod
  def _threefry(c0: Tensor, key: tuple[int, int]) -> Tensor:
    def rotl(x: Tensor, r: int) -> Tensor: return (x << r) | (x >> (32 - r))
    ks = [key[0], key[1], key[0] ^ key[1] ^ 0x1BD11BDA]
    x0, x1 = c0 + ks[0], c0.const_like(0) + ks[1]
    for i in range(5):
      for r in ((13, 15, 26, 6), (17, 29, 16, 24))[i % 2]:
        x0 = x0 + x1
        x1 = rotl(x1, r) ^ x0
      x0, x1 = x0 + ks[(i + 1) % 3], x1 + (ks[(i + 2) % 3] + i + 1) % 2**32
    return x0
  @staticmethod
  def _random_bits(num: int, device: str) -> Tensor:
    if device not in Tensor._rng_counter: Tensor._rng_counter[device] = Tensor([0], device=device, dtype=dtypes.uint32).contiguous().realize()
    # the counter moves on by num; this draw uses the counts just below its new value
    counter = Tensor._rng_counter[device]
    counter.assign(counter + num % 2**32)
    if num == 0: return Tensor.empty(0, device=device, dtype=dtypes.uint32)
    counts = Tensor.arange(num, device=device, dtype=dtypes.uint32) + (counter.expand(num) - num % 2**32)
    # a draw is its own kernel: fused into a consumer it could read the counter before and after an increment
    return Tensor._threefry(counts, (Tensor._seed & 0xFFFFFFFF, (Tensor._seed >> 32) & 0xFFFFFFFF)).contiguous()
  @staticmethod
  def rand(*shape: Any, device: str | None = None, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    """Uniform in [0, 1)."""
    shape, device = argfix(*shape), Device.canonicalize(device)
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    bits = Tensor._random_bits(prod(shape), device)
    # 24 random bits give every float32 in [0,1) on a 2^-24 grid
    out = (bits >> 8).cast(dtypes.float32) * (1 / 2**24)
    return Tensor(out.cast(dt).reshape(shape).lazydata, **kwargs)
  @staticmethod
  def randn(*shape: Any, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    """Standard normal (Box-Muller)."""
    shape = argfix(*shape)
    u = Tensor.rand(2, *shape, **{k: v for k, v in kwargs.items() if k == "device"})
    out = (1 - u[0]).log().mul(-2).sqrt() * (u[1] * (2 * math.pi)).cos()
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    return Tensor(out.cast(dt).lazydata, **{k: v for k, v in kwargs.items() if k == "requires_grad"})
  @staticmethod
  def uniform(*shape: Any, low: float = 0.0, high: float = 1.0, **kwargs: Any) -> Tensor:
    rg = kwargs.pop("requires_grad", None)
    return Tensor(((high - low) * Tensor.rand(*shape, **kwargs) + low).lazydata, requires_grad=rg)

  # *** movement ***
  def reshape(self, shape: Any, *args: Any) -> Tensor:
    new_shape = list(argfix(shape, *args))
    if new_shape.count(-1) > 1: raise ValueError(f"only one dimension can be -1 in reshape {tuple(new_shape)}")
    if -1 in new_shape:
      known = prod(s for s in new_shape if s != -1)
      if known == 0 or self.numel() % known: raise ValueError(f"cannot reshape {self.shape} to {tuple(new_shape)}")
      new_shape[new_shape.index(-1)] = self.numel() // known
    if prod(new_shape) != self.numel(): raise ValueError(f"cannot reshape tensor of shape {self.shape} ({self.numel()} elements) to {tuple(new_shape)}")
    return self if tuple(new_shape) == self.shape else F.Reshape.apply(self, shape=tuple(new_shape))
  def view(self, *shape: Any) -> Tensor: return self.reshape(*shape)
  def expand(self, shape: Any, *args: Any) -> Tensor:
    new_shape = argfix(shape, *args)
    if len(new_shape) < self.ndim: raise ValueError(f"cannot expand {self.shape} to fewer dims {new_shape}")
    src = self.reshape((1,) * (len(new_shape) - self.ndim) + self.shape) if len(new_shape) > self.ndim else self
    out = tuple(s if n == -1 else n for s, n in zip(src.shape, new_shape))
    for s, n in zip(src.shape, out):
      if s != n and s != 1: raise ValueError(f"cannot expand {self.shape} to {new_shape}: only dims of size 1 can grow")
    return src if out == src.shape else F.Expand.apply(src, shape=out)
  def permute(self, order: Any, *args: Any) -> Tensor:
    order = tuple(self._resolve_dim(d) for d in argfix(order, *args))
    if sorted(order) != list(range(self.ndim)): raise ValueError(f"permute order {order} is not a permutation of {self.ndim} dims")
    return F.Permute.apply(self, order=order)
  def flip(self, axis: Any, *args: Any) -> Tensor:
    axes = tuple(self._resolve_dim(a) for a in argfix(axis, *args))
    if len(set(axes)) != len(axes): raise ValueError(f"flip axes {axes} repeat a dim")
    return F.Flip.apply(self, axis=axes)
  def shrink(self, arg: Sequence[tuple[sint, sint] | None]) -> Tensor:
    a = tuple(x if x is not None else (0, s) for x, s in zip(arg, self.shape))
    if len(a) != self.ndim: raise ValueError(f"shrink needs one (begin, end) per dim of {self.shape}, got {arg}")
    for (b, e), s in zip(a, self.shape):
      if not (0 <= b <= e <= s): raise ValueError(f"shrink {arg} is out of bounds for shape {self.shape}")
    return self if all(x == (0, s) for x, s in zip(a, self.shape)) else F.Shrink.apply(self, arg=a)
  def pad(self, padding: Sequence[tuple[int, int] | None] | Sequence[int], value: float = 0.0) -> Tensor:
    """Pad with `value`: one (before, after) per dim, or torch style (left, right, top, bottom, ...) from the last dim."""
    if padding and all(isinstance(p, int) for p in padding):
      flat = list(padding)
      if len(flat) % 2: raise ValueError(f"flat padding {padding} needs pairs")
      pads = [(0, 0)] * (self.ndim - len(flat) // 2) + [(flat[2 * i], flat[2 * i + 1]) for i in reversed(range(len(flat) // 2))]
    else: pads = [p if p is not None else (0, 0) for p in padding]  # type: ignore[misc]
    if len(pads) != self.ndim: raise ValueError(f"padding {padding} does not match {self.ndim} dims")
    if any(b < 0 or a < 0 for b, a in pads):  # negative pads shrink
      x = self.shrink(tuple((-min(b, 0), s + min(a, 0)) for (b, a), s in zip(pads, self.shape)))
      return x.pad(tuple((max(b, 0), max(a, 0)) for b, a in pads), value)
    ret = F.Pad.apply(self, arg=tuple(pads))
    if value == 0: return ret
    mask = F.Pad.apply(Tensor.ones_like(self, dtype=dtypes.bool, requires_grad=False), arg=tuple(pads))
    return mask.where(ret, value)
  def _resolve_dim(self, dim: int, extra: bool = False) -> int:
    total = self.ndim + int(extra)
    if not -max(1, total) <= dim < max(1, total): raise IndexError(f"dim {dim} is out of range for a tensor of {self.ndim} dims")
    return dim + total if dim < 0 else dim
  def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
    order = list(range(self.ndim))
    a, b = self._resolve_dim(dim0), self._resolve_dim(dim1)
    order[a], order[b] = order[b], order[a]
    return self.permute(order)
  @property
  def T(self) -> Tensor: return self.transpose()
  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    s, e = self._resolve_dim(start_dim), self._resolve_dim(end_dim)
    return self.reshape(self.shape[:s] + (prod(self.shape[s:e + 1]),) + self.shape[e + 1:])
  def squeeze(self, dim: int | None = None) -> Tensor:
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    d = self._resolve_dim(dim)
    return self if self.shape[d] != 1 else self.reshape(self.shape[:d] + self.shape[d + 1:])
  def unsqueeze(self, dim: int) -> Tensor:
    d = self._resolve_dim(dim, extra=True)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])

  def __getitem__(self, indices: Any) -> Tensor:
    """Basic indexing: ints, slices (any step), None and Ellipsis."""
    idx = list(indices) if isinstance(indices, tuple) else [indices]
    if any(isinstance(i, (Tensor, list, np.ndarray)) for i in idx):
      raise NotImplementedError("indexing with tensors is not implemented yet")
    if idx.count(Ellipsis) > 1: raise IndexError("an index can only have a single ellipsis")
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if n_real > self.ndim: raise IndexError(f"too many indices ({n_real}) for a tensor of {self.ndim} dims")
    if Ellipsis in idx:
      e = idx.index(Ellipsis)
      idx[e:e + 1] = [slice(None)] * (self.ndim - n_real)
    idx += [slice(None)] * (self.ndim - sum(1 for i in idx if i is not None))
    x, dim, final_shape = self, 0, []
    shrink, flips, strides = [], [], []
    for i in idx:
      if i is None:
        final_shape.append(1)
        continue
      size = self.shape[dim]
      if isinstance(i, (int, np.integer)) and not isinstance(i, bool):
        j = int(i) + size if i < 0 else int(i)
        if not 0 <= j < size: raise IndexError(f"index {i} is out of bounds for dim {dim} with size {size}")
        shrink.append((j, j + 1)); flips.append(False); strides.append(1)  # noqa: E702
      elif isinstance(i, slice):
        start, stop, step = i.indices(size)
        if step > 0: b, e = start, max(start, stop)
        else: b, e = max(stop + 1, 0), start + 1 if start >= stop + 1 else max(stop + 1, 0)
        shrink.append((b, max(b, e))); flips.append(step < 0); strides.append(abs(step))  # noqa: E702
        final_shape.append(ceildiv(max(e - b, 0), abs(step)))
      else: raise TypeError(f"cannot index with {type(i).__name__}: {i!r}")
      dim += 1
    x = x.shrink(tuple(shrink))
    if any(flips): x = x.flip(tuple(d for d, f in enumerate(flips) if f))
    if any(s != 1 for s in strides):
      # a step is a pad to a multiple of it, a reshape into (n, step), and taking column 0
      x = x.pad(tuple((0, ceildiv(s, st) * st - s) for s, st in zip(x.shape, strides)))
      x = x.reshape(flatten((ceildiv(s, st), st) for s, st in zip(x.shape, strides)))
      x = x.shrink(flatten(((0, s), (0, 1)) for s in x.shape[::2])).reshape(x.shape[::2])
    return x.reshape(tuple(final_shape))

  # *** broadcasting and elementwise ***
  def _broadcasted(self, y: Any, reverse: bool = False) -> tuple[Tensor, Tensor]:
    x = self
    if not isinstance(y, Tensor):
      if isinstance(y, (np.ndarray, list, tuple)): y = Tensor(y, device=x.device)
      else:
        if not isinstance(y, (bool, int, float)): raise TypeError(f"cannot combine a Tensor with {type(y).__name__}")
        # a python scalar takes the tensor's dtype unless it needs a wider kind (a float with an int tensor)
        ydt = x.dtype if (dtypes.is_float(x.dtype) or (dtypes.is_int(x.dtype) and not isinstance(y, float)) or
                          (x.dtype == dtypes.bool and isinstance(y, bool))) else dtypes.from_py(y)
        y = Tensor(dtypes.as_const(y, ydt) if not (isinstance(y, float) and math.isnan(y)) else y, device=x.device, dtype=ydt, requires_grad=False)
    if x.device != y.device: raise ValueError(f"tensors are on different devices: {x.device} and {y.device}")
    if reverse: x, y = y, x
    out_dtype = least_upper_dtype(x.dtype, y.dtype)
    x, y = x.cast(out_dtype), y.cast(out_dtype)
    if x.shape == y.shape: return x, y
    sx, sy = (1,) * (max(x.ndim, y.ndim) - x.ndim) + x.shape, (1,) * (max(x.ndim, y.ndim) - y.ndim) + y.shape
    out = []
    for a, b in zip(sx, sy):
      if a != b and a != 1 and b != 1: raise ValueError(f"shapes {x.shape} and {y.shape} cannot be broadcast together")
      out.append(b if a == 1 else a)
    return x.reshape(sx).expand(tuple(out)), y.reshape(sy).expand(tuple(out))

  def cast(self, dtype: DType | str) -> Tensor:
    dt = to_dtype(dtype)
    return self if self.dtype == dt else F.Cast.apply(self, dtype=dt)
  def bitcast(self, dtype: DType | str) -> Tensor:
    dt = to_dtype(dtype)
    if dt.itemsize != self.dtype.itemsize: raise TypeError(f"bitcast from {self.dtype} to {dt} needs equal item sizes")
    return self if self.dtype == dt else F.Cast.apply(self, dtype=dt, bitcast=True)
  def float(self) -> Tensor: return self.cast(dtypes.float32)
  def half(self) -> Tensor: return self.cast(dtypes.float16)
  def double(self) -> Tensor: return self.cast(dtypes.float64)
  def int(self) -> Tensor: return self.cast(dtypes.int32)
  def long(self) -> Tensor: return self.cast(dtypes.int64)
  def bool(self) -> Tensor: return self.cast(dtypes.bool)
  def const_like(self, b: Any) -> Tensor: return Tensor(dtypes.as_const(b, self.dtype), device=self.device, dtype=self.dtype).expand(self.shape) if self.shape else Tensor(dtypes.as_const(b, self.dtype), device=self.device, dtype=self.dtype)

  def add(self, x: Any, reverse: bool = False) -> Tensor: return F.Add.apply(*self._broadcasted(x, reverse))
  def sub(self, x: Any, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    return a + (-b)
  def mul(self, x: Any, reverse: bool = False) -> Tensor: return F.Mul.apply(*self._broadcasted(x, reverse))
  def div(self, x: Any, reverse: bool = False) -> Tensor:
    """True division: integers are promoted to the default float."""
    a, b = self._broadcasted(x, reverse)
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
    if dtypes.is_float(a.dtype): return (a / b).floor()
    q = F.IDiv.apply(a, b)
    # round toward negative infinity: subtract one where the signs differ and there is a remainder
    fix = ((a.mod_c(b) != 0) & ((a < 0) != (b < 0))).cast(q.dtype)
    return q - fix
  def mod_c(self, b: Tensor) -> Tensor: return F.Mod.apply(self, b)
  def __mod__(self, x: Any) -> Tensor: return self._mod(x)
  def __rmod__(self, x: Any) -> Tensor: return self._mod(x, True)
  def _mod(self, x: Any, reverse: bool = False) -> Tensor:
    """Python modulo: the result takes the divisor's sign."""
    a, b = self._broadcasted(x, reverse)
    if dtypes.is_float(a.dtype): return a - (a / b).floor() * b
    r = F.Mod.apply(a, b)
    return ((r != 0) & ((r < 0) != (b < 0))).where(r + b, r)
  def neg(self) -> Tensor: return self.logical_not() if self.dtype == dtypes.bool else F.Neg.apply(self)
  def reciprocal(self) -> Tensor: return F.Reciprocal.apply(self.cast(least_upper_float(self.dtype)))
  def maximum(self, x: Any) -> Tensor: return F.Maximum.apply(*self._broadcasted(x))
  def minimum(self, x: Any) -> Tensor:
    a, b = self._broadcasted(x)
    return -((-a).maximum(-b)) if a.dtype != dtypes.bool else a & b
  def where(self, x: Any, y: Any) -> Tensor:
    """self ? x : y, broadcasting all three."""
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
      dt = least_upper_dtype(dtypes.from_py(x), dtypes.from_py(y))
      x = Tensor(x, device=self.device, dtype=dt)
    if isinstance(x, Tensor): x, y = x._broadcasted(y)
    else: y, x = y._broadcasted(x)
    cond, x = self.cast(dtypes.bool)._broadcasted(x)
    cond, y = cond._broadcasted(y)
    return F.Where.apply(cond.cast(dtypes.bool), x, y)
  def __lt__(self, x: Any) -> Tensor: return F.Less.apply(*self._broadcasted(x))
  def __gt__(self, x: Any) -> Tensor: return F.Less.apply(*self._broadcasted(x, True))
  def __ge__(self, x: Any) -> Tensor: return (self < x).logical_not()
  def __le__(self, x: Any) -> Tensor: return (self > x).logical_not()
  def __ne__(self, x: Any) -> Tensor: return F.Neq.apply(*self._broadcasted(x))  # type: ignore[override]
  def __eq__(self, x: Any) -> Tensor: return (self != x).logical_not()  # type: ignore[override]
  def logical_not(self) -> Tensor: return F.Neq.apply(*self.cast(dtypes.bool)._broadcasted(True))
  def _bitwise(self, x: Any, op: Ops, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if not (dtypes.is_int(a.dtype) or a.dtype == dtypes.bool): raise TypeError(f"{op.name} needs integer or bool tensors, got {a.dtype}")
    return F.BitwiseOp.apply(a, b, op=op)
  def bitwise_and(self, x: Any) -> Tensor: return self._bitwise(x, Ops.AND)
  def bitwise_or(self, x: Any) -> Tensor: return self._bitwise(x, Ops.OR)
  def bitwise_xor(self, x: Any) -> Tensor: return self._bitwise(x, Ops.XOR)
  def lshift(self, x: int) -> Tensor: return self._bitwise(x, Ops.SHL)
  def rshift(self, x: int) -> Tensor: return self._bitwise(x, Ops.SHR)
  def pow(self, x: Any, reverse: bool = False) -> Tensor:
    base, exponent = self._broadcasted(x, reverse)
    if not dtypes.is_float(base.dtype): base, exponent = base.float(), exponent.float()
    # |b|^e, with the sign restored for negative bases and integer exponents
    mag = (exponent * base.abs().log()).exp()
    is_int_exp = exponent == exponent.trunc()
    neg_odd = (base < 0) & is_int_exp & ((exponent.abs() % 2) == 1)
    out = (base < 0).where(is_int_exp.where(neg_odd.where(-mag, mag), math.nan), mag)
    return ((exponent == 0)).where(1.0, (base == 0).where((exponent < 0).where(math.inf, 0.0), out))

  __add__ = add
  def __radd__(self, x: Any) -> Tensor: return self.add(x, True)
  __sub__ = sub
  def __rsub__(self, x: Any) -> Tensor: return self.sub(x, True)
  __mul__ = mul
  def __rmul__(self, x: Any) -> Tensor: return self.mul(x, True)
  __truediv__ = div
  def __rtruediv__(self, x: Any) -> Tensor: return self.div(x, True)
  __pow__ = pow
  def __rpow__(self, x: Any) -> Tensor: return self.pow(x, True)
  def __neg__(self) -> Tensor: return self.neg()
  def __and__(self, x: Any) -> Tensor: return self.bitwise_and(x)
  def __or__(self, x: Any) -> Tensor: return self.bitwise_or(x)
  def __xor__(self, x: Any) -> Tensor: return self.bitwise_xor(x)
  def __rand__(self, x: Any) -> Tensor: return self._bitwise(x, Ops.AND, True)
  def __ror__(self, x: Any) -> Tensor: return self._bitwise(x, Ops.OR, True)
  def __rxor__(self, x: Any) -> Tensor: return self._bitwise(x, Ops.XOR, True)
  def __lshift__(self, x: int) -> Tensor: return self.lshift(x)
  def __rshift__(self, x: int) -> Tensor: return self.rshift(x)
  def __invert__(self) -> Tensor: return self.logical_not() if self.dtype == dtypes.bool else self ^ -1 if not dtypes.is_unsigned(self.dtype) else self ^ dtypes.max(self.dtype)
  def __matmul__(self, x: Tensor) -> Tensor: return self.matmul(x)
  def __rmatmul__(self, x: Tensor) -> Tensor: return x.matmul(self) if isinstance(x, Tensor) else Tensor(x, device=self.device).matmul(self)
  def __iadd__(self, x: Any) -> Tensor: return self.assign(self + x)
  def __isub__(self, x: Any) -> Tensor: return self.assign(self - x)
  def __imul__(self, x: Any) -> Tensor: return self.assign(self * x)
  def __itruediv__(self, x: Any) -> Tensor: return self.assign(self / x)

  # *** unary math ***
  def _float(self) -> Tensor: return self.cast(least_upper_float(self.dtype))
  def exp(self) -> Tensor: return F.Exp.apply(self._float())
  def exp2(self) -> Tensor: return F.Exp.apply(self._float() * math.log(2))
  def log(self) -> Tensor: return F.Log.apply(self._float())
  def log2(self) -> Tensor: return self.log() / math.log(2)
  def sqrt(self) -> Tensor: return F.Sqrt.apply(self._float())
  def rsqrt(self) -> Tensor: return self.sqrt().reciprocal()
  def sin(self) -> Tensor: return F.Sin.apply(self._float())
  def cos(self) -> Tensor: return ((math.pi / 2) - self._float()).sin()
  def tan(self) -> Tensor: return self.sin() / self.cos()
  def relu(self) -> Tensor: return F.Relu.apply(self)
  def sigmoid(self) -> Tensor: return F.Sigmoid.apply(self._float())
  def tanh(self) -> Tensor: return 2.0 * ((2.0 * self._float()).sigmoid()) - 1.0
  def abs(self) -> Tensor: return self * self.sign() if self.dtype != dtypes.bool else self
  def sign(self) -> Tensor: return F.Sign.apply(self)
  def square(self) -> Tensor: return self * self
  def trunc(self) -> Tensor:
    if not dtypes.is_float(self.dtype): return self
    # a float beyond 2^52 is already an integer; casting through int64 covers the rest
    big = self.abs() >= 2**52
    return big.where(self, self.cast(dtypes.int64).cast(self.dtype))
  def floor(self) -> Tensor:
    t = self.trunc()
    return (self < t).where(t - 1, t) if dtypes.is_float(self.dtype) else self
  def ceil(self) -> Tensor:
    t = self.trunc()
    return (self > t).where(t + 1, t) if dtypes.is_float(self.dtype) else self
  def clip(self, min_: Any = None, max_: Any = None) -> Tensor:
    if min_ is None and max_ is None: raise ValueError("clip needs at least one of min_ and max_")
    x = self.maximum(min_) if min_ is not None else self
    return x.minimum(max_) if max_ is not None else x
  clamp = clip

  # *** reductions ***
  def _reduce(self, fxn: type[F.Function], axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    axes = tuple(range(self.ndim)) if axis is None else tuple(self._resolve_dim(a) for a in (axis if isinstance(axis, (list, tuple)) else [axis]))
    if self.ndim == 0: axes = ()
    ret = fxn.apply(self, axis=axes)
    return ret if keepdim else ret.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))
  def sum(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, acc_dtype: DType | None = None) -> Tensor:
    """Sum over axis (all axes when None). Small ints and bools sum in int32 (uint32 for unsigned); half floats
    accumulate in float32 and return their own dtype."""
    if acc_dtype is None:
      if self.dtype == dtypes.bool or (dtypes.is_int(self.dtype) and self.dtype.itemsize < 4):
        acc_dtype = dtypes.uint32 if dtypes.is_unsigned(self.dtype) else dtypes.int32
      elif self.dtype in (dtypes.float16, dtypes.bfloat16): acc_dtype = dtypes.float32
      else: acc_dtype = self.dtype
    out = self.cast(acc_dtype)._reduce(F.Sum, axis, keepdim)
    return out.cast(self.dtype) if self.dtype in (dtypes.float16, dtypes.bfloat16) else out
  def max(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor: return self._reduce(F.Max, axis, keepdim)
  def min(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    if dtypes.is_unsigned(self.dtype): return dtypes.max(self.dtype) - (dtypes.max(self.dtype) - self).max(axis, keepdim)
    return -((-self).max(axis, keepdim)) if self.dtype != dtypes.bool else self.logical_not().max(axis, keepdim).logical_not()
  def mean(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    out = self._float().sum(axis, keepdim)
    n = prod(self.shape) // max(1, prod(out.shape)) if prod(out.shape) else prod(self.shape)
    return out / n if n else out * math.nan

  # *** linear algebra, convolution, pooling ***
  def dot(self, w: Tensor) -> Tensor:
    """Matrix product with broadcasting over leading dims: (..., n, k) @ (..., k, m)."""
    if not isinstance(w, Tensor): raise TypeError(f"matmul needs a Tensor, got {type(w).__name__}")
    if self.ndim == 0 or w.ndim == 0: raise ValueError(f"matmul needs tensors with at least 1 dim, got {self.shape} and {w.shape}")
    k_self, k_w = self.shape[-1], w.shape[-min(w.ndim, 2)]
    if k_self != k_w: raise ValueError(f"matmul shape mismatch: {self.shape} @ {w.shape} ({k_self} != {k_w})")
    x = self.reshape(*self.shape[:-1], *[1] * min(self.ndim - 1, w.ndim - 1, 1), self.shape[-1])
    w = w.reshape(*w.shape[:-2], *[1] * min(self.ndim - 1, w.ndim - 1, 1), *w.shape[-min(w.ndim, 2):]).transpose(-1, -min(w.ndim, 2))
    return (x * w).sum(-1, acc_dtype=None)
  def matmul(self, x: Tensor, reverse: bool = False) -> Tensor: return x.dot(self) if reverse else self.dot(x)
  def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    x = self.mul(weight) if weight.ndim == 1 else self.dot(weight)
    return x.add(bias) if bias is not None else x

  def _windows(self, kernel: tuple[int, ...], stride: int | tuple[int, ...] = 1, dilation: int | tuple[int, ...] = 1) -> Tensor:
    """Sliding windows over the last len(kernel) dims: (..., *spatial) -> (..., *out, *kernel), all views.

    Along one dim of size i: repeat it k times, flatten, pad to rows of i+d and read row b from column a*s; the
    element there is x[a*s + b*d], exactly the window element (see docs/design.md)."""
    k_ = kernel
    s_, d_ = make_tuple(stride, len(k_)), make_tuple(dilation, len(k_))
    nlead = self.ndim - len(k_)
    x = self
    for j, (k, s, d) in enumerate(zip(k_, s_, d_)):
      ax = nlead + j
      # move the dim to the end, window it, and keep (out, k) at the end
      x = x.permute(*[a for a in range(x.ndim) if a != ax], ax)
      i = x.shape[-1]
      o = (i - d * (k - 1) - 1) // s + 1
      if o <= 0: raise ValueError(f"kernel {k} with dilation {d} does not fit in an input of {i}")
      lead = x.shape[:-1]
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
    # now: (..., o_0.., o_n, k_0?...) - the k's are interleaved at the end in the order the dims were processed
    return x

  def conv2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: int | tuple[int, ...] = 1,
             dilation: int | tuple[int, ...] = 1, padding: int | Sequence[int] = 0) -> Tensor:
    """N-d convolution (cross-correlation, as torch): x (bs, cin, *spatial), weight (cout, cin/groups, *kernel)."""
    (bs, cin_), (cout, cin), hw = self.shape[:2], weight.shape[:2], weight.shape[2:]
    if self.ndim != weight.ndim: raise ValueError(f"conv input {self.shape} and weight {weight.shape} need the same number of dims")
    if groups * cin != cin_: raise ValueError(f"conv input has {cin_} channels, weight {weight.shape} with groups={groups} expects {groups*cin}")
    if cout % groups: raise ValueError(f"conv output channels {cout} are not divisible by groups={groups}")
    if bias is not None and bias.shape != (cout,): raise ValueError(f"conv bias must have shape ({cout},), got {bias.shape}")
    x = self.pad(((0, 0), (0, 0)) + _pad_arg(padding, len(hw)))
    x = x._windows(hw, stride, dilation)  # (bs, cin_, *out, *k)
    oyx = x.shape[2:2 + len(hw)]
    rcout = cout // groups
    x = x.reshape(bs, groups, cin, 1, *oyx, *hw).expand(bs, groups, cin, rcout, *oyx, *hw)
    x = x.permute(0, 1, 3, *[4 + i for i in range(len(oyx))], 2, *[4 + len(oyx) + i for i in range(len(hw))])
    w = weight.reshape(1, groups, rcout, *[1] * len(oyx), cin, *hw)
    ret = (x * w).sum([-1 - i for i in range(1 + len(hw))], keepdim=True).reshape(bs, cout, *oyx)
    return ret if bias is None else ret.add(bias.reshape(1, -1, *[1] * len(hw)))

  def max_pool2d(self, kernel_size: int | tuple[int, ...] = (2, 2), stride: int | tuple[int, ...] | None = None,
                 dilation: int | tuple[int, ...] = 1, padding: int | Sequence[int] = 0) -> Tensor:
    k = make_tuple(kernel_size, 2)
    x = self.pad(((0, 0),) * (self.ndim - 2) + _pad_arg(padding, 2), value=-math.inf) if padding else self
    return x._windows(k, stride if stride is not None else k, dilation).max(axis=tuple(range(-len(k), 0)))
  def avg_pool2d(self, kernel_size: int | tuple[int, ...] = (2, 2), stride: int | tuple[int, ...] | None = None,
                 dilation: int | tuple[int, ...] = 1, padding: int | Sequence[int] = 0) -> Tensor:
    k = make_tuple(kernel_size, 2)
    x = self.pad(((0, 0),) * (self.ndim - 2) + _pad_arg(padding, 2)) if padding else self
    return x._windows(k, stride if stride is not None else k, dilation).mean(axis=tuple(range(-len(k), 0)))

  # *** autograd ***
  def _deepwalk(self) -> list[Tensor]:
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
  def backward(self, gradient: Tensor | None = None) -> Tensor:
    """Accumulate d(self)/d(leaf) into every leaf's .grad that requires grad."""
    if gradient is None:
      if self.numel() != 1: raise RuntimeError(f"backward() without a gradient needs a scalar, this tensor has shape {self.shape}")
      gradient = Tensor(1.0, dtype=self.dtype, device=self.device, requires_grad=False).reshape(self.shape)
    if gradient.shape != self.shape: raise ValueError(f"gradient shape {gradient.shape} does not match tensor shape {self.shape}")
    self.grad = gradient
    for t0 in reversed(self._deepwalk()):
      if t0.grad is None: raise RuntimeError(f"tensor {t0.shape} has no gradient")
      ctx = t0._ctx
      assert ctx is not None
      grads = ctx.backward(t0.grad.lazydata)
      grads = [Tensor(g, device=self.device, requires_grad=False) if g is not None else None
               for g in ([grads] if len(ctx.parents) == 1 else grads)]
      for t, g in zip(ctx.parents, grads):
        if g is not None and t.requires_grad:
          if g.shape != t.shape: raise RuntimeError(f"gradient shape {g.shape} does not match {t.shape}")
          t.grad = g if t.grad is None else (t.grad + g)
      del t0._ctx
    return self
  def requires_grad_(self, requires_grad: bool = True) -> Tensor:
    self.requires_grad = requires_grad
    return self

