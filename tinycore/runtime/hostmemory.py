"""Host memory for backends that run on the CPU (CLANG, LLVM, ...): aligned numpy byte arrays."""
from __future__ import annotations
import mmap
import numpy as np

HUGE = 2 << 20

def aligned_host_bytes(size: int, device: str) -> np.ndarray:
  """`size` bytes, 64-byte aligned. Buffers of 2 MiB and more are their own anonymous mappings, 2 MiB aligned and advised
  to use huge pages: first touching fresh memory costs a page fault per page, 512 times fewer with huge pages. A failed
  allocation is a MemoryError naming the device and the size."""
  try:
    if size >= HUGE and hasattr(mmap, "MADV_HUGEPAGE"):
      m = mmap.mmap(-1, size + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
      raw = np.frombuffer(m, dtype=np.uint8)
      start = (-raw.ctypes.data) % HUGE
      try: m.madvise(mmap.MADV_HUGEPAGE, start, size - size % HUGE)
      except OSError: pass
    else:
      raw = np.empty(size + 64, dtype=np.uint8)
      start = (-raw.ctypes.data) % 64
  except (OSError, MemoryError, ValueError) as e: raise MemoryError(f"{device} cannot allocate {size} bytes of host memory: {e}") from e
  return raw[start:start + size]
