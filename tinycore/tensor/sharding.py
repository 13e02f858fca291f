"""Tensor sharding: a tensor over several devices (tinygrad 0.14's API). `t.shard(devices, axis)` splits t into even blocks
of dim `axis`, one per device (axis None: a whole copy on each); its `.device` is then the tuple of devices and its
lazydata a MultiLazyBuffer (tinycore/multi.py states how each op treats the sharded axis). `.to(device)` joins the
shards on one device, `.to(devices)` replicates; a creation function or constructor given a tuple of devices makes a
replicated tensor (rand and friends draw on the first device and copy, so the numbers are those of one device)."""
from __future__ import annotations
from typing import TYPE_CHECKING
from tinycore.device import Device
from tinycore.lazy import LazyBuffer
from tinycore.multi import MultiLazyBuffer
if TYPE_CHECKING: from tinycore.tensor import Tensor

def to_devices(lb: LazyBuffer | MultiLazyBuffer, device: str | tuple[str, ...]) -> LazyBuffer | MultiLazyBuffer:
  """lb (on one device or several) moved to `device`: one device joins the shards there, a tuple replicates."""
  if isinstance(device, str): return lb.copy_to_device(device)
  if isinstance(lb, MultiLazyBuffer):
    if lb.device == device: return lb
    lb = lb.copy_to_device(device[0])
  return MultiLazyBuffer.shard(lb, device, None)

class ShardMixin:
  __slots__ = ()

  def shard(self, devices: tuple[str, ...] | list[str], axis: int | None = None) -> Tensor:
    """This tensor split over `devices`: block i of dim `axis` (its size must divide by the number of devices) on
    devices[i], or the whole tensor on each of them when axis is None. Like `.to`, a copy that starts a new leaf
    (requires_grad and is_param carried over). One device: the same as `.to(devices[0])`."""
    if isinstance(self.lazydata, MultiLazyBuffer): raise RuntimeError(f"cannot shard a tensor that is already on several devices {self.device}")
    if not isinstance(devices, (tuple, list)) or not devices: raise TypeError(f"shard needs a tuple of device names, got {devices!r}")
    devs = tuple(Device.canonicalize(d) for d in devices)
    if len(devs) == 1: return self.to(devs[0])
    lb = MultiLazyBuffer.shard(self.lazydata, devs, None if axis is None else self._resolve_dim(axis))
    return type(self)(lb, requires_grad=self._rg).is_param_(self.is_param)

  def shard_(self, devices: tuple[str, ...] | list[str], axis: int | None = None) -> Tensor:
    """Shard this tensor in place (see shard): an optimizer built afterwards updates the shards."""
    return self.replace(self.shard(devices, axis))
