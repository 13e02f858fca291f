"""Tensor creation: from data and memory, constants, ranges, and random numbers (counter-based, so every device
draws the same numbers for a seed)."""
from __future__ import annotations
import ctypes, math
from typing import TYPE_CHECKING, Any
import numpy as np
from tinycore.device import Device
from tinycore.dtype import DType, dtypes, to_dtype, to_np_dtype, bf16_to_f32
from tinycore.helpers import argfix, prod, all_int, ceildiv, TRAINING
from tinycore.lazy import LazyBuffer
from tinycore.errors import ShapeError, ArgumentError
from tinycore.ops import Ops
from tinycore.uop.uop import sint
from tinycore.tensor.args import _bound_vals, _frompy, _is_sym, _py_int_dtype, _sym
if TYPE_CHECKING: from tinycore.tensor import Tensor

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

class CreationMixin:
  __slots__ = ()

  # *** creation ***
  @classmethod
  def from_blob(cls, ptr: int, shape: tuple[int, ...], **kwargs: Any) -> Tensor:
    """A tensor of `shape` (and `dtype`, default float) read from host memory at address ptr (as from numpy's
    `arr.ctypes.data`). The memory is copied now, so it needs to stay valid only for this call (tinygrad 0.14 aliases it
    on its CPU device: later writes through ptr are not seen here)."""
    dt = to_dtype(kwargs.pop("dtype")) if kwargs.get("dtype") is not None else dtypes.default_float
    kwargs.pop("dtype", None)
    if not isinstance(ptr, int) or ptr <= 0: raise ArgumentError(f"from_blob needs a host address (an int > 0), got {ptr!r}")
    shp = _shape_arg(shape)
    if not all_int(shp): raise ShapeError(f"from_blob needs a concrete shape, got {shape}")
    raw = np.frombuffer(ctypes.string_at(ptr, prod(shp) * dt.itemsize), dtype=to_np_dtype(dt)).reshape(shp)
    return cls(bf16_to_f32(raw) if dt == dtypes.bfloat16 else raw, dtype=dt, **kwargs)
  @classmethod
  def empty(cls, *shape: Any, device: str | None = None, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    """An uninitialized tensor."""
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if isinstance(device := Device.canonicalize(device), tuple):  # several devices: replicated, as every creation function
      return cls(cls.empty(*shape, device=device[0], dtype=dt).lazydata, device=device, **kwargs)
    return cls(LazyBuffer.metaop(Ops.EMPTY, _shape_arg(*shape), dt, Device.canonicalize(device), var_vals=_bound_vals(shape)), **kwargs)
  @classmethod
  def full(cls, shape: tuple[sint, ...] | int, fill_value: Any, dtype: DType | str | None = None, device: str | None = None, buffer: bool = True,
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
    ret = cls(fill_value, dtype=dtype, **kwargs).reshape((1,) * len(shape)).expand(bound)
    return ret._leaf(rg)
  @classmethod
  def zeros(cls, *shape: Any, **kwargs: Any) -> Tensor:
    """A tensor of zeros (default float dtype)."""
    return cls.full(argfix(*shape), 0.0, **{"dtype": dtypes.default_float, **kwargs})
  @classmethod
  def ones(cls, *shape: Any, **kwargs: Any) -> Tensor:
    """A tensor of ones (default float dtype)."""
    return cls.full(argfix(*shape), 1.0, **{"dtype": dtypes.default_float, **kwargs})
  @classmethod
  def arange(cls, start: Any, stop: Any = None, step: Any = 1, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
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
    return cls(vals.astype(to_np_dtype(dtype) if dtype != dtypes.bfloat16 else np.float32), dtype=dtype, **kwargs)
  @classmethod
  def linspace(cls, start: float, stop: float, steps: int, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    """`steps` evenly spaced values from start to stop, both included (any dtype but bool; ints truncate)."""
    if dtype is not None: kwargs["dtype"] = dtype
    if not isinstance(steps, int) or steps < 0: raise ValueError(f"linspace steps must be a non-negative int, got {steps}")
    dtype = to_dtype(kwargs.pop("dtype")) if kwargs.get("dtype") is not None else dtypes.default_float
    kwargs.pop("dtype", None)
    if dtype == dtypes.bool: raise ArgumentError("linspace to bool is not supported (as torch and tinygrad): cast the result instead")
    vals = np.linspace(start, stop, steps, dtype=np.float64)
    if not dtypes.is_float(dtype): vals = np.trunc(vals)
    return cls(vals.astype(to_np_dtype(dtype) if dtype != dtypes.bfloat16 else np.float32), dtype=dtype, **kwargs)
  @classmethod
  def eye(cls, n: int, m: int | None = None, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    """The n x m identity matrix (ones on the main diagonal)."""
    if dtype is not None: kwargs["dtype"] = dtype
    m = n if m is None else m
    _check_shape((n, m), "eye size")
    if n == 0 or m == 0: return cls.zeros(n, m, **kwargs)
    k = min(n, m)
    # a column of ones padded by k to rows of k+1, flattened and cut to k*k, is the k x k identity: pure views
    rg = kwargs.pop("requires_grad", None)
    x = cls.ones(k, 1, **kwargs).pad(((0, 0), (0, k))).flatten().shrink(((0, k * k),)).reshape(k, k)
    ret = x.pad(((0, n - k), (0, m - k)))
    return ret._leaf(rg)
  def full_like(self, fill_value: Any, dtype: DType | str | None = None, device: str | None = None, buffer: bool = True, **kwargs: Any) -> Tensor:
    """A tensor of self's shape (and dtype and device unless given) filled with fill_value."""
    return self.full(self.shape, fill_value, dtype if dtype is not None else self.dtype, device if device is not None else self.device, **kwargs)
  def zeros_like(self, **kwargs: Any) -> Tensor:
    """Zeros of self's shape, dtype and device."""
    return self.full_like(0, **kwargs)
  def ones_like(self, **kwargs: Any) -> Tensor:
    """Ones of self's shape, dtype and device."""
    return self.full_like(1, **kwargs)
  def empty_like(self, dtype: DType | str | None = None, device: str | None = None, **kwargs: Any) -> Tensor:
    """An uninitialized tensor of self's shape (and dtype and device unless given)."""
    return self.empty(self.shape, dtype=dtype if dtype is not None else self.dtype, device=device if device is not None else self.device, **kwargs)
  def rand_like(self, **kwargs: Any) -> Tensor:
    """Uniform [0, 1) of self's shape (and float dtype and device unless given)."""
    dt = kwargs.pop("dtype", self.dtype if dtypes.is_float(self.dtype) else dtypes.default_float)
    return self.rand(*self.shape, device=kwargs.pop("device", self.device), dtype=dt, **kwargs)
  def randn_like(self, dtype: DType | str | None = None, **kwargs: Any) -> Tensor:
    """Standard normal of self's shape (and float dtype and device unless given)."""
    dt = dtype if dtype is not None else self.dtype if dtypes.is_float(self.dtype) else dtypes.default_float
    return self.randn(*self.shape, device=kwargs.pop("device", self.device), dtype=dt, **kwargs)
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

  @classmethod
  def _iota(cls, n: int, device: str, dtype: DType = dtypes.int32) -> Tensor:
    """0..n-1 as a realized buffer, cached per (n, device, dtype); internal: never handed out as a buffer to write."""
    key = (n, device, dtype)
    if (lb := _iota_cache.get(key)) is None:
      if len(_iota_cache) > 256: _iota_cache.clear()
      lb = _iota_cache[key] = _frompy(np.arange(n).astype(to_np_dtype(dtype)), dtype, device)
    return cls(lb, requires_grad=False)

  # *** random: counter-based (threefry2x32), so every device draws the same numbers for a seed ***
  @classmethod
  def manual_seed(cls, seed: int = 0) -> None:
    """Reset the random generator: the same seed gives the same numbers on every device."""
    cls._seed, cls._rng_counter, cls._rng_key = seed, {}, {}
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
  @classmethod
  def _random_bits(cls, num: int, device: str | tuple[str, ...]) -> Tensor:
    # several devices draw on the first and copy: the numbers one device would draw (dropout on a sharded batch masks
    # each shard as the whole batch on one device would be masked)
    if isinstance(device, tuple): return cls._random_bits(num, device[0]).to(device)
    if num == 0: return cls.empty(0, device=device, dtype=dtypes.uint32)
    if device not in cls._rng_counter: cls._rng_counter[device] = cls([0], device=device, dtype=dtypes.uint32).contiguous().realize()
    # draws come in a few padded sizes (powers of two, then multiples of 2^16), so the large threefry kernel is
    # compiled once per size class rather than once per shape
    n = 1 << max(4, (num - 1).bit_length()) if num <= 65536 else ceildiv(num, 65536) * 65536
    # the counter moves on by n; this draw uses the counts just below its new value
    counter = cls._rng_counter[device]
    counter.assign(counter + n % 2**32)
    counts = cls._iota(n, device, dtypes.uint32) + (counter.expand(n) - n % 2**32)
    if device not in cls._rng_key:
      k0, k1 = cls._seed & 0xFFFFFFFF, (cls._seed >> 32) & 0xFFFFFFFF
      cls._rng_key[device] = cls(np.array([k0, k1, k0 ^ k1 ^ 0x1BD11BDA], np.uint32), device=device)
    # a draw is its own kernel: fused into a consumer it could read the counter before and after an increment
    bits = cls._threefry(counts, cls._rng_key[device]).contiguous()
    return bits if n == num else bits.shrink(((0, num),))
  @classmethod
  def rand(cls, *shape: Any, device: str | None = None, dtype: DType | str | None = None, contiguous: bool = True, **kwargs: Any) -> Tensor:
    """Uniform in [0, 1). Deterministic under manual_seed, and the same numbers on every device."""
    bound, shape, device = argfix(*shape), _shape_arg(*shape), Device.canonicalize(device)
    if not all_int(shape):
      # a symbolic size draws for its largest value (so the generator moves on by the same amount every call), then
      # keeps the part the bound values select
      top = tuple(s if isinstance(s, int) else int(s.vmax) for s in shape)
      return cls.rand(*top, device=device, dtype=dtype, contiguous=contiguous, **kwargs).shrink(tuple((0, s) for s in bound))
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if not dtypes.is_float(dt): raise TypeError(f"rand needs a float dtype, got {dt}")
    bits = cls._random_bits(prod(shape), device)
    if dt == dtypes.float64: out = bits.cast(dtypes.float64) * (1 / 2**32)
    else:
      # m random bits on a 2^-m grid: every value is exact in the target dtype and below 1
      m = {dtypes.float16: 11, dtypes.bfloat16: 8}.get(dt, 24)
      out = (bits >> (32 - m)).cast(dtypes.float32) * (1 / 2**m)
    return cls(out.cast(dt).reshape(shape).lazydata, **kwargs)
  @classmethod
  def randn(cls, *shape: Any, dtype: DType | str | None = None, requires_grad: bool | None = None, **kwargs: Any) -> Tensor:
    """Standard normal (Box-Muller over two uniform draws), drawn in float32 and cast to dtype (any dtype, as tinygrad:
    an int dtype truncates, bool is x != 0)."""
    shape = _shape_arg(*shape)
    u = cls.rand(2, *shape, dtype=dtypes.float32, **kwargs)
    out = (1 - u[0]).log().mul(-2).sqrt() * (u[1] * (2 * math.pi)).cos()
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    return cls(out.cast(dt).lazydata, requires_grad=requires_grad)
  @classmethod
  def randint(cls, *shape: Any, low: int = 0, high: int = 10, dtype: DType | str = dtypes.int32, **kwargs: Any) -> Tensor:
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
    bits = cls._random_bits(prod(shape), device)
    # floor(u * range) for u = bits / 2^32, exactly: the high word of bits * range, in uint32 arithmetic (64-bit ints are
    # optional: WebGPU lacks them); int64 only for values that int32 cannot hold
    hi = bits if high - low == 2**32 else cls._mul_high32(bits, high - low)
    r = hi.cast(dtypes.int32 if -2**31 <= low and high <= 2**31 else dtypes.int64) + low
    return cls(r.cast(dt).reshape(shape).lazydata, requires_grad=rg)
  @staticmethod
  def _mul_high32(x: Tensor, c: int) -> Tensor:
    """The high 32 bits of the 64-bit product of uint32 x and the constant c < 2^32, from 16-bit halves in uint32."""
    xl, xh, cl, ch = x & 0xFFFF, x >> 16, c & 0xFFFF, c >> 16
    lh, hl = xl * ch, xh * cl
    mid = ((xl * cl) >> 16) + (lh & 0xFFFF) + (hl & 0xFFFF)
    return xh * ch + (lh >> 16) + (hl >> 16) + (mid >> 16)
  @classmethod
  def normal(cls, *shape: Any, mean: float = 0.0, std: float = 1.0, requires_grad: bool | None = None, **kwargs: Any) -> Tensor:
    """Normal with the given mean and std."""
    return cls(((std * cls.randn(*shape, **kwargs)) + mean).lazydata, requires_grad=requires_grad)
  @classmethod
  def uniform(cls, *shape: Any, low: float = 0.0, high: float = 1.0, dtype: DType | str | None = None, requires_grad: bool | None = None,
              **kwargs: Any) -> Tensor:
    """Uniform in [low, high)."""
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if dtypes.is_int(dt): return cls.randint(*shape, low=int(low), high=int(high), dtype=dt, requires_grad=requires_grad, **kwargs)
    return cls(((high - low) * cls.rand(*shape, dtype=dt, **kwargs) + low).cast(dt).lazydata, requires_grad=requires_grad)
  @classmethod
  def scaled_uniform(cls, *shape: Any, **kwargs: Any) -> Tensor:
    """Uniform in [-1, 1) scaled by 1/sqrt(numel)."""
    return cls.uniform(*shape, low=-1.0, high=1.0, **kwargs).mul(prod(_shape_arg(*shape)) ** -0.5)._leaf(kwargs.get("requires_grad"))
  @classmethod
  def glorot_uniform(cls, *shape: Any, **kwargs: Any) -> Tensor:
    """Glorot/Xavier uniform: bound sqrt(6 / (shape[0] + prod(shape[1:])))."""
    s = _shape_arg(*shape)
    if not s: raise ValueError("glorot_uniform needs at least one dim")
    return cls.uniform(*s, low=-1.0, high=1.0, **kwargs).mul((6 / (s[0] + prod(s[1:]))) ** 0.5)._leaf(kwargs.get("requires_grad"))
  @classmethod
  def kaiming_uniform(cls, *shape: Any, a: float = 0.01, **kwargs: Any) -> Tensor:
    """Kaiming/He uniform with leaky-relu slope a: bound sqrt(3) * sqrt(2 / (1 + a^2)) / sqrt(prod(shape[1:]))."""
    s = _shape_arg(*shape)
    if not s: raise ValueError("kaiming_uniform needs at least one dim")
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(max(1, prod(s[1:])))
    return cls.uniform(*s, low=-bound, high=bound, **kwargs)
  @classmethod
  def kaiming_normal(cls, *shape: Any, a: float = 0.01, **kwargs: Any) -> Tensor:
    """Kaiming/He normal with leaky-relu slope a: std sqrt(2 / (1 + a^2)) / sqrt(prod(shape[1:]))."""
    s = _shape_arg(*shape)
    if not s: raise ValueError("kaiming_normal needs at least one dim")
    std = math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(max(1, prod(s[1:])))
    return cls.normal(*s, mean=0.0, std=std, **kwargs)
  @classmethod
  def randperm(cls, n: int, device: str | None = None, dtype: DType | str = dtypes.int32, **kwargs: Any) -> Tensor:
    """A random permutation of 0..n-1 (sorts n random keys: O(n^2) work)."""
    if not isinstance(n, int) or n < 0: raise ValueError(f"randperm needs a non-negative int, got {n!r}")
    return cls(cls.rand(n, device=device).argsort().cast(to_dtype(dtype)).lazydata, **kwargs)
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
      u = self.rand(w.shape[0], num_samples, 1, device=self.device)
      idx = (u >= cdf.unsqueeze(1)).sum(2).minimum(w.shape[1] - 1).cast(dtypes.int32)
    else:
      # weighted sampling without replacement: the largest log(u)/w keys (Efraimidis-Spirakis)
      keys = self.rand(*w.shape, device=self.device).log() / w
      idx = keys.topk(num_samples, dim=1)[1].cast(dtypes.int32)
    return idx.reshape(-1) if self.ndim == 1 else idx
  def dropout(self, p: float = 0.5) -> Tensor:
    """In training (TRAINING, Tensor.training), zero each element with probability p and scale the rest by 1/(1-p)."""
    if not 0 <= p <= 1: raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not TRAINING or p == 0: return self
    if p == 1: return self * 0
    mask = self.rand(*self.shape, device=self.device, requires_grad=False) >= p
    return mask.where(self, 0) * (1 / (1 - p))
