"""Index range checks on the device. A gather or scatter never reads or writes outside its buffer: an index outside
[-n, n) is clamped to entry 0 (a scatter skips it). Each one also runs a small check kernel (Ops.INDEX_CHECK) that writes
the bad index into its device's error buffer: two int32s, [n + 1, index], zero while every index was in range. The
host reads that buffer at the next sync (`Tensor.numpy`, `.item`, `.tolist`, `.data`), clears it and raises IndexError
naming the index and n. Nothing reads indices back to the host in the middle of a lazy graph, with TinyJit or without
(a replayed check kernel writes the same buffer). An int64 index is reported as its low 32 bits."""
from __future__ import annotations
from tinycore.device import Buffer
from tinycore.dtype import dtypes

_buffers: dict[str, Buffer] = {}

def error_buffer(device: str) -> Buffer:
  """The error buffer of a device (made on first use, zero-filled when it is allocated)."""
  if (b := _buffers.get(device)) is None:
    b = _buffers[device] = Buffer(device, 2, dtypes.int32)
    b.fill = bytes(8)
  return b

def raise_index_errors(device: str) -> None:
  """Raise IndexError if a kernel on `device` met an index out of range since the last check (and clear the record)."""
  if (b := _buffers.get(device)) is None or not b.is_allocated(): return
  flag, bad = (int(x) for x in b.numpy())
  if flag == 0: return
  b.copyin(memoryview(bytes(8)))
  raise IndexError(f"index {bad} is out of bounds for size {flag - 1} (found on {device} by the kernel that used it)")
