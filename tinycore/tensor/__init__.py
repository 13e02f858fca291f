"""Tensor: the user API. Lazy: every op builds a LazyBuffer graph; realize() schedules, compiles and runs it.
Autograd records the Function that made each tensor; backward() walks that graph in reverse.

The API follows tinygrad's Tensor name for name (argument names, defaults, broadcasting and dtype promotion), so
code written for tinygrad runs after changing the import. Everything here is composed of the few primitives in
function.py; there is no gather or scan primitive, so indexing with tensors builds one-hot masks and reduces, and
cumulative ops reduce over triangular masks or run a log-depth scan.

Tensor is one class composed of a mixin per concern, each in a module of this package: creation (and random),
movement, indexing, elementwise (and activations), unary (math), reduce (and cumulative ops), linalg, conv (and
pooling), functional (normalization, losses, attention) and autograd; args holds what they share. This module holds
the constructor, the properties and realizing. The rules of the composition:
- a mixin never imports this module: it reaches the composed class as `type(self)` in a method and as `cls` in a
  classmethod (a creation function is a classmethod for that reason), so every module of the package sits below this one;
- a mixin declares `__slots__ = ()`: a Tensor's state is the slots declared here, and no instance gets a __dict__;
- the methods stay plain methods, so the composition costs nothing per call."""
from __future__ import annotations
import time
from contextlib import ContextDecorator
from typing import Any, ClassVar
import numpy as np
import tinycore.function as F
from tinycore.device import Buffer, Device
from tinycore.dtype import DType, dtypes, to_dtype, to_np_dtype, bf16_to_f32
from tinycore.helpers import prod, all_int, TRAINING
from tinycore.lazy import LazyBuffer, HOLDS_BUFFER, BUFFER
from tinycore.errors import ShapeError, DTypeError
from tinycore.ops import Ops
from tinycore.engine.schedule import ScheduleItem, create_schedule, schedule_to_run
from tinycore.engine.realize import run_schedule
from tinycore.index_errors import raise_index_errors
from tinycore.uop.uop import UOp, sint, sym_infer
from tinycore.uop.symbolic import ssimplify
from tinycore.tensor.args import _check_differentiable, _frompy, _py_int_dtype
from tinycore.tensor.creation import CreationMixin
from tinycore.tensor.movement import MovementMixin
from tinycore.tensor.indexing import IndexingMixin
from tinycore.tensor.elementwise import ElementwiseMixin
from tinycore.tensor.unary import UnaryMixin
from tinycore.tensor.reduce import ReduceMixin
from tinycore.tensor.linalg import LinalgMixin
from tinycore.tensor.conv import ConvMixin
from tinycore.tensor.functional import FunctionalMixin
from tinycore.tensor.autograd import AutogradMixin
from tinycore.tensor.sharding import ShardMixin
from tinycore.multi import MultiLazyBuffer, shards_of, to_devices


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

class Tensor(CreationMixin, MovementMixin, IndexingMixin, ElementwiseMixin, UnaryMixin, ReduceMixin, LinalgMixin, ConvMixin,
             FunctionalMixin, AutogradMixin, ShardMixin, metaclass=_TensorType):
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
    # a graph node wrapped as it is (most tensors made inside ops)
    if (data.__class__ is LazyBuffer or data.__class__ is MultiLazyBuffer) and device is None and dtype is None:
      self.grad, self._rg, self._ctx, self.is_param, self.lazydata = None, requires_grad, None, True, data
      if requires_grad: _check_differentiable(self)
      return
    device = Device.canonicalize(device)
    if isinstance(device, tuple):  # several devices: made on the first, then replicated (tinygrad 0.14's rule)
      if isinstance(data, Tensor): self.__init__(data.lazydata if dtype is None else data.lazydata.cast(to_dtype(dtype)), requires_grad=requires_grad)  # type: ignore[misc]
      else: self.__init__(data, device[0], dtype, requires_grad)  # type: ignore[misc]
      self.lazydata = to_devices(self.lazydata, device)
      return
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
  def device(self) -> str | tuple[str, ...]:
    """The device name, e.g. "CLANG"; a tuple of names for a tensor sharded over several devices."""
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
    return create_schedule([lb for t in (self,) + lst for lb in shards_of(t.lazydata)])
  def realize(self, *lst: Tensor) -> Tensor:
    """Compute this tensor (and the others given) now. Each one computed here (not realized before) becomes a leaf of
    the autograd graph, as in tinygrad: gradients no longer flow through it, and the graph it came from is let go."""
    if not lst and (lb := self.lazydata).__class__ is LazyBuffer:  # (one tensor on one device: an eager loop's realize, in fewer steps)
      cut_self = self._ctx is not None and (lb._base or lb).op is not BUFFER
      run_schedule(*schedule_to_run([lb]))
      if cut_self: self._ctx = None
      return self
    cut = [t for t in (self, *lst) if t._ctx is not None and not t.lazydata.is_realized()]
    run_schedule(*schedule_to_run([lb for t in (self, *lst) for lb in shards_of(t.lazydata)]))
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
    if isinstance(self.lazydata, MultiLazyBuffer):
      arr = self.to(self.device[0]).numpy()
      for d in self.device[1:]: raise_index_errors(d)  # (the first device's: checked by numpy() above)
      return arr
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
  def to(self, device: str | tuple[str, ...] | None) -> Tensor:
    """A copy on another device (self when it is already there); from several devices to one joins the shards, to a
    tuple of devices replicates (see Tensor.shard)."""
    device = Device.canonicalize(device)
    if device == self.device: return self
    ret = Tensor(to_devices(self.lazydata, device), requires_grad=self._rg)
    if self.grad is not None: ret.grad = self.grad.to(device)
    ret.is_param = self.is_param
    return ret
  def to_(self, device: str | None) -> Tensor:
    """Move this tensor (and its grad) to another device in place."""
    self.lazydata = to_devices(self.lazydata, Device.canonicalize(device))
    if self.grad is not None: self.grad.to_(device)
    return self
  def detach(self) -> Tensor:
    """The same data, cut from the autograd graph (no gradient flows back through it; tinygrad's backward() still gives
    self a zero .grad, see F.Link)."""
    return Tensor(self.lazydata, requires_grad=False)._link(self)
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
    not to what self held before (as tinygrad); a tensor marked requires_grad=True (a parameter) stays a leaf, as an
    update under no_grad would (PyTorch refuses an in-place op on such a leaf). Once the write is made, the graph that
    computed it is let go (see _history)."""
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
    old.lazydata, old._rg, old.grad, old._ctx, old.is_param = self.lazydata, self._rg, self.grad, self._history(), self.is_param
    for t in x._deepwalk():
      if any(p is self for p in t._ctx.parents): t._ctx.parents = tuple(old if p is self else p for p in t._ctx.parents)  # type: ignore[union-attr]
    lb = self.lazydata
    # x a view of the very buffer written, at other elements (c[1:].assign(c[:-1])): a copy first, as numpy, or a
    # kernel writing in place would read values it has already overwritten
    if x.lazydata.base is lb.base and x.lazydata.st != lb.st: x = F.Clone.apply(x)
    # a view of a buffer other tensors may hold writes through into that buffer (as tinygrad); a view of a lazy
    # computation, or a constant, just takes x's value
    through = lb.base.op in HOLDS_BUFFER if lb._base is not None else lb.base.op is not Ops.CONST  # (base: a sharded tensor's first shard)
    if through and self._rg is True:  # a parameter (PyTorch mode) takes new data and stays a leaf, as under no_grad
      with Tensor.test(): self.lazydata = F.Assign.apply(x, old, target=lb).lazydata
      return self
    r = F.Assign.apply(x, old.detach(), target=lb if through else None)
    self.lazydata = r.lazydata
    self._ctx = r._ctx
    if self._rg is None and r._rg: self._rg = True
    return self
