"""MultiLazyBuffer: one tensor over several devices, a LazyBuffer per device (its shard) and the axis it is split along.
It answers every method of LazyBuffer that function.py and the Tensor API call, so every Function (and so autograd,
nn layers and optimizers) works on sharded tensors unchanged: each op is the same op on every shard, plus the copies
between devices the rules below call for. The copies are lazy COPY ops: the scheduler orders them like kernels, and
run_schedule runs each device's items on that device's queue (tinycore/engine/queues.py).

The rules (tinygrad 0.14's, compared side by side in test/compat/test_multi_compat.py):
- axis None: every device holds the whole tensor (replicated). axis k: device i holds block i of dim k, which must
  divide evenly by the number of devices (as tinygrad: "uneven" is an error).
- elementwise: the sources must be on the same devices. A replicated source meets a sharded one by keeping its own
  block on each device (a view, no copy); sources sharded on different axes are resharded to the axis of the last
  sharded source (an all-gather, then a view). The result has that axis.
- reduce over dims that exclude the sharded one: per shard, the axis stays. Over the sharded dim: each device reduces
  its shard, then an all-reduce gives every device the total, and the result is replicated.
- the all-reduce is the naive one: every device copies in the other n-1 partial results (S bytes each) and combines
  them in device order: (n-1)*S bytes into each device in one step, against 2(n-1)/n*S in 2(n-1) steps for a ring.
  Equal bytes at n = 2; on the 2-4 devices of one host, whose copies go through host memory, the step count (copies
  and kernel launches) is what costs. The fixed order makes the replicas of one backend bitwise equal, so replicated
  weights never drift apart.
- movement ops that leave the sharded dim whole (permute; reshape that keeps the dim's block boundaries; expand, pad,
  shrink and flip of the other dims) run per shard with the axis moved along. Any other (pad, shrink or flip of the
  sharded dim, a reshape that would move elements between shards) gathers the whole tensor on every device first and
  applies the op there; the result keeps the axis where its size still divides (pad, shrink, flip), else is replicated.
  (tinygrad 0.14 refuses these; tinycore computes them, at the cost of the all-gather.)
- indexed ops (gather, scatter) run per shard when they index another dim than the sharded one, else on the whole.
- copy_to_device(one device) joins the shards there: the tensor on one device again."""
from __future__ import annotations
from typing import Any, Callable
from tinycore.dtype import DType, dtypes
from tinycore.errors import ShapeError
from tinycore.helpers import prod
from tinycore.lazy import LazyBuffer
from tinycore.ops import Ops
from tinycore.uop.uop import UOp, sint

_BITS = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}

def _join(parts: list[LazyBuffer], axis: int) -> LazyBuffer:
  """Blocks of dim `axis` (on one device) side by side: each padded with zeros to the whole, then or-ed together. Floats
  are or-ed as their bits, so every value arrives exactly (an addition would turn -0.0 into 0.0)."""
  n, k, dt = len(parts), parts[0].shape[axis], parts[0].dtype
  bits = _BITS[dt.itemsize] if dtypes.is_float(dt) else None
  def placed(i: int, p: LazyBuffer) -> LazyBuffer:  # block i in its place in the whole, zeros elsewhere
    p = p.cast(bits, bitcast=True) if bits is not None else p
    return p.pad(tuple((i * k, (n - i - 1) * k) if d == axis else (0, 0) for d in range(len(p.shape))))
  out = placed(0, parts[0])
  for i, p in enumerate(parts[1:], 1): out = out.alu(Ops.OR, placed(i, p))
  return out.cast(dt, bitcast=True) if bits is not None else out

def _block(lb: LazyBuffer, axis: int, i: int, n: int) -> LazyBuffer:
  """Block i of n of dim `axis` of lb (a view)."""
  k = lb.shape[axis] // n
  return lb.shrink(tuple((i * k, (i + 1) * k) if d == axis else (0, s) for d, s in enumerate(lb.shape)))

class MultiLazyBuffer:
  """A tensor on the devices `device` (a tuple): `lbs[i]` lives on `device[i]`; `axis` is the dim split evenly among
  them, None when each holds the whole (replicated). See the module docstring for how ops treat the axis."""
  def __init__(self, lbs: list[LazyBuffer] | tuple[LazyBuffer, ...], axis: int | None):
    self.lbs, self.axis = tuple(lbs), axis
    first = self.lbs[0]
    if any(lb.shape != first.shape or lb.dtype != first.dtype for lb in self.lbs):
      raise ShapeError(f"shards must share shape and dtype, got {[(lb.shape, lb.dtype) for lb in self.lbs]}")
    self.dtype: DType = first.dtype
    self.device: tuple[str, ...] = tuple(lb.device for lb in self.lbs)
    self.shape: tuple[sint, ...] = first.shape if axis is None else tuple(s * len(self.lbs) if d == axis else s for d, s in enumerate(first.shape))
    self.size = prod(self.shape)

  @staticmethod
  def shard(lb: LazyBuffer, devices: tuple[str, ...], axis: int | None) -> MultiLazyBuffer:
    """lb split into even blocks of dim `axis` (or whole, for axis None), block i copied to devices[i]."""
    if axis is not None:
      if not isinstance(size := lb.shape[axis], int) or size % len(devices):
        raise ShapeError(f"cannot shard dim {axis} of shape {lb.shape} over {len(devices)} devices: its size must divide evenly")
      return MultiLazyBuffer([_block(lb, axis, i, len(devices)).copy_to_device(d) for i, d in enumerate(devices)], axis)
    return MultiLazyBuffer([lb.copy_to_device(d) for d in devices], None)

  def __repr__(self) -> str: return f"<MLB {self.device} axis={self.axis} {self.shape} {self.dtype} shards={list(self.lbs)}>"
  def _map(self, fn: Callable[[LazyBuffer], LazyBuffer], axis: int | None = -1) -> MultiLazyBuffer:
    return MultiLazyBuffer([fn(lb) for lb in self.lbs], self.axis if axis == -1 else axis)

  # *** what the Tensor API reads ***
  @property
  def var_vals(self) -> dict[UOp, int]: return self.lbs[0].var_vals
  @property
  def st(self) -> Any:
    """The first shard's ShapeTracker: every shard has the same layout (for contiguity checks and JIT signatures)."""
    return self.lbs[0].st
  @property
  def _base(self) -> LazyBuffer | None:
    """None when every shard is a base (a buffer of its own), as LazyBuffer._base."""
    return next((lb._base for lb in self.lbs if lb._base is not None), None)
  @property
  def base(self) -> LazyBuffer:
    """The first shard's base (for checks of what kind of node the shards are: each shard is made by the same ops)."""
    return self.lbs[0].base
  def is_realized(self) -> bool: return all(lb.is_realized() for lb in self.lbs)
  def is_unrealized_const(self) -> bool: return all(lb.is_unrealized_const() for lb in self.lbs)
  def const_value(self) -> Any: return self.lbs[0].const_value()
  def bind(self, var_vals: dict[UOp, int]) -> MultiLazyBuffer: return self._map(lambda lb: lb.bind(var_vals))
  def rebind(self, var_vals: dict[UOp, int]) -> None:
    for lb in self.lbs: lb.rebind(var_vals)

  # *** moving between axes and devices ***
  def gathered(self) -> MultiLazyBuffer:
    """The whole tensor on every device (an all-gather): replicated."""
    if self.axis is None: return self
    return MultiLazyBuffer([_join([lb.copy_to_device(d) for lb in self.lbs], self.axis) for d in self.device], None)
  def on_axis(self, axis: int | None) -> MultiLazyBuffer:
    """The same tensor sharded on `axis` (None: replicated): a view of each device's own block where it holds the
    whole, else an all-gather first."""
    if axis == self.axis: return self
    whole = self.gathered()
    if axis is None: return whole
    if not isinstance(size := self.shape[axis], int) or size % len(self.lbs):
      raise ShapeError(f"cannot shard dim {axis} of shape {self.shape} over {len(self.lbs)} devices: its size must divide evenly")
    return MultiLazyBuffer([_block(lb, axis, i, len(self.lbs)) for i, lb in enumerate(whole.lbs)], axis)
  def copy_to_device(self, device: str) -> LazyBuffer:
    """The whole tensor on one device (the shards copied there and joined)."""
    parts = [lb.copy_to_device(device) for lb in self.lbs]
    return parts[0] if self.axis is None else _join(parts, self.axis)
  def _whole(self, fn: Callable[[LazyBuffer], LazyBuffer], keep_axis: bool) -> MultiLazyBuffer:
    """fn on the whole tensor on every device; resharded on the old axis where keep_axis and its size still divides."""
    out = self.gathered()._map(fn, None)
    if keep_axis and self.axis is not None and isinstance(s := out.shape[self.axis], int) and s % len(self.lbs) == 0: return out.on_axis(self.axis)
    return out

  # *** creation and compute ***
  def const(self, val: Any, shape: tuple[sint, ...] | None = None) -> MultiLazyBuffer:
    if shape is None or shape == self.shape: return self._map(lambda lb: lb.const(val))
    return MultiLazyBuffer([lb.const(val, shape) for lb in self.lbs], None)
  def contiguous(self) -> MultiLazyBuffer: return self._map(lambda lb: lb.contiguous())
  def cast(self, dtype: DType, bitcast: bool = False) -> MultiLazyBuffer: return self._map(lambda lb: lb.cast(dtype, bitcast))
  def _sources(self, srcs: tuple[Any, ...], what: Any) -> tuple[int | None, list[MultiLazyBuffer]]:
    for s in srcs:
      if not isinstance(s, MultiLazyBuffer) or s.device != self.device:
        raise ValueError(f"{what} device mismatch: {self.device} vs {s.device}: move one with .to() or .shard() first")
    axes = [s.axis for s in (self, *srcs) if s.axis is not None]
    axis = axes[-1] if axes else None
    return axis, [s.on_axis(axis) for s in (self, *srcs)]
  def alu(self, op: Ops, *srcs: MultiLazyBuffer) -> MultiLazyBuffer:
    axis, ms = self._sources(srcs, op)
    return MultiLazyBuffer([x.alu(op, *rest) for x, *rest in zip(*[m.lbs for m in ms])], axis)
  def assign(self, x: MultiLazyBuffer) -> MultiLazyBuffer:
    if not isinstance(x, MultiLazyBuffer) or x.device != self.device: raise ValueError(f"assign device mismatch: {self.device} vs {x.device}")
    x = x.on_axis(self.axis)
    return MultiLazyBuffer([t.assign(s) for t, s in zip(self.lbs, x.lbs)], self.axis)
  def reduce(self, op: Ops, axis: tuple[int, ...]) -> MultiLazyBuffer:
    local = [lb.reduce(op, axis) for lb in self.lbs]
    if self.axis is None or self.axis not in axis: return MultiLazyBuffer(local, self.axis)
    return MultiLazyBuffer(allreduce(op, local), None)

  # *** movement ***
  def reshape(self, shape: tuple[sint, ...]) -> MultiLazyBuffer:
    if self.axis is None or shape == self.shape: return self._map(lambda lb: lb.reshape(shape))
    # the new dim that starts where the sharded one starts and splits into the same blocks (the elements before it
    # and its size divisible by the device count): block i of it holds exactly shard i's elements
    n, before = len(self.lbs), prod(self.shape[:self.axis])
    for k in range(len(shape)):
      if prod(shape[:k]) == before and isinstance(shape[k], int) and shape[k] % n == 0 and shape[k] > 1:
        local = tuple(s // n if d == k else s for d, s in enumerate(shape))
        return MultiLazyBuffer([lb.reshape(local) for lb in self.lbs], k)
    return self._whole(lambda lb: lb.reshape(shape), keep_axis=False)
  def permute(self, order: tuple[int, ...]) -> MultiLazyBuffer:
    return self._map(lambda lb: lb.permute(order), None if self.axis is None else order.index(self.axis))
  def expand(self, shape: tuple[sint, ...]) -> MultiLazyBuffer:
    local = shape if self.axis is None else tuple(self.lbs[0].shape[d] if d == self.axis else s for d, s in enumerate(shape))
    return self._map(lambda lb: lb.expand(local))
  def pad(self, arg: tuple[tuple[sint, sint], ...]) -> MultiLazyBuffer:
    if self.axis is None or arg[self.axis] == (0, 0): return self._map(lambda lb: lb.pad(arg))
    return self._whole(lambda lb: lb.pad(arg), keep_axis=True)
  def shrink(self, arg: tuple[tuple[sint, sint], ...]) -> MultiLazyBuffer:
    if self.axis is None: return self._map(lambda lb: lb.shrink(arg))
    if arg[self.axis] == (0, self.shape[self.axis]):
      local = tuple((0, self.lbs[0].shape[d]) if d == self.axis else a for d, a in enumerate(arg))
      return self._map(lambda lb: lb.shrink(local))
    return self._whole(lambda lb: lb.shrink(arg), keep_axis=True)
  def flip(self, arg: tuple[bool, ...]) -> MultiLazyBuffer:
    if self.axis is None or not arg[self.axis]: return self._map(lambda lb: lb.flip(arg))
    return self._whole(lambda lb: lb.flip(arg), keep_axis=True)

  # *** indexed ***
  def _index_check(self, size: int) -> MultiLazyBuffer: return self._map(lambda lb: lb._index_check(size))
  def _indexed(self, axis: int, *others: MultiLazyBuffer) -> tuple[int | None, list[MultiLazyBuffer]]:
    ax, ms = self._sources(others, "indexed op")
    # indexing along the sharded dim reads (or writes) across shards: done on the whole tensor
    if ax == axis: ax, ms = None, [m.gathered() for m in ms]
    return ax, ms
  def gather(self, idx: MultiLazyBuffer, axis: int, checks: tuple[MultiLazyBuffer, ...] = ()) -> MultiLazyBuffer:
    ax, (x, i) = self._indexed(axis, idx)
    return MultiLazyBuffer([xl.gather(il, axis, tuple(c.lbs[d] for c in checks)) for d, (xl, il) in enumerate(zip(x.lbs, i.lbs))], ax)
  def scatter(self, idx: MultiLazyBuffer, src: MultiLazyBuffer, axis: int, op: Ops | None = Ops.ADD,
              checks: tuple[MultiLazyBuffer, ...] = ()) -> MultiLazyBuffer:
    ax, (x, i, s) = self._indexed(axis, idx, src)
    return MultiLazyBuffer([xl.scatter(il, sl, axis, op, tuple(c.lbs[d] for c in checks))
                            for d, (xl, il, sl) in enumerate(zip(x.lbs, i.lbs, s.lbs))], ax)

def to_devices(lb: LazyBuffer | MultiLazyBuffer, device: str | tuple[str, ...], axis: int | None = None) -> LazyBuffer | MultiLazyBuffer:
  """lb (on one device or several) on `device`: one device joins the shards there; a tuple of devices gets lb split on
  `axis` over them (None: a whole copy on each)."""
  if isinstance(device, str): return lb.copy_to_device(device)
  if isinstance(lb, MultiLazyBuffer):
    if lb.device == device: return lb.on_axis(axis)
    lb = lb.copy_to_device(device[0])
  return MultiLazyBuffer.shard(lb, device, axis)

def shards_of(lb: LazyBuffer | MultiLazyBuffer) -> tuple[LazyBuffer, ...]:
  """The LazyBuffers behind a tensor's lazydata: the shards of a MultiLazyBuffer, else lb itself."""
  return lb.lbs if lb.__class__ is MultiLazyBuffer else (lb,)  # type: ignore[union-attr,return-value]

def allreduce(op: Ops, parts: list[LazyBuffer]) -> list[LazyBuffer]:
  """Every device's total of the partial results `parts` (parts[i] on device i), by op (ADD or MAX): the naive
  all-reduce (see the module docstring for why not a ring), combined in the same order on every device."""
  out = []
  for dev in (p.device for p in parts):
    acc = parts[0].copy_to_device(dev)
    for p in parts[1:]: acc = acc.alu(op, p.copy_to_device(dev))
    out.append(acc)
  return out
