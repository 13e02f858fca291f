"""Tensor sharding: a tensor over several devices (tinygrad 0.14's API). `t.shard(devices, axis)` splits t into even blocks
of dim `axis`, one per device (axis None: a whole copy on each); its `.device` is then the tuple of devices and its
lazydata a MultiLazyBuffer (tinycore/multi.py states how each op treats the sharded axis). `.to(device)` joins the
shards on one device, `.to(devices)` replicates; a creation function or constructor given a tuple of devices makes a
replicated tensor (rand and friends draw on the first device and copy, so the numbers are those of one device)."""
from __future__ import annotations
from typing import TYPE_CHECKING
import tinycore.function as F
from tinycore.device import Device
from tinycore.multi import MultiLazyBuffer
if TYPE_CHECKING: from tinycore.tensor import Tensor

class ShardMixin:
  __slots__ = ()

  def shard(self, devices: tuple[str, ...] | list[str], axis: int | None = None) -> Tensor:
    """This tensor split over `devices`: block i of dim `axis` (its size must divide by the number of devices) on
    devices[i], or the whole tensor on each of them when axis is None. Gradients flow back to this tensor (on its
    device); `shard_` makes the sharded tensor a leaf of its own (as a model's parameters want). One device: the same as
    `.to(devices[0])`."""
    if isinstance(self.lazydata, MultiLazyBuffer): raise RuntimeError(f"cannot shard a tensor that is already on several devices {self.device}")
    if not isinstance(devices, (tuple, list)) or not devices: raise TypeError(f"shard needs a tuple of device names, got {devices!r}")
    devs = tuple(Device.canonicalize(d) for d in devices)
    if len(devs) == 1: return self.to(devs[0])
    return F.Copy.apply(self, device=devs, axis=None if axis is None else self._resolve_dim(axis)).is_param_(self.is_param)

  def shard_(self, devices: tuple[str, ...] | list[str], axis: int | None = None) -> Tensor:
    """Shard this tensor in place (see shard): an optimizer built afterwards updates the shards."""
    return self.replace(self.shard(devices, axis))

  def shard_like(self, y: Tensor) -> Tensor:
    """This tensor on y's devices, sharded as y is (on y's one device when y is not sharded)."""
    if isinstance(y.device, str): return self.to(y.device)
    axis = y.lazydata.axis  # type: ignore[union-attr]
    if self.device == y.device and self.lazydata.axis == axis: return self  # type: ignore[union-attr]
    return F.Copy.apply(self, device=y.device, axis=axis).is_param_(self.is_param)
