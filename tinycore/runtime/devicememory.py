"""Device memory of an emulated GPU, kept in host memory: what a mock driver hands out as device pointers.

Rules it enforces, as a GPU driver does:
  - an allocation gets a fake device address: 256-aligned, never 0, never reused, with a gap after it, so a pointer
    from one allocation is never inside another and an address that is not the driver's is `foreign`;
  - buffer(addr) is the only way from an address to bytes; a freed or foreign address raises DeviceMemoryError;
  - the total live size is capped (`capacity` bytes): past it alloc raises MemoryError, as a GPU that is full;
  - each allocation's host bytes end at a page that is not mapped (a guard page), so a kernel executed on the host that
    runs past the end of a buffer faults (SIGSEGV, which an executor reports as an illegal address) instead of writing
    into a neighbour. Reads before the start of a buffer are not caught.

The interface (alloc, free, buffer, host_address) is what every executor uses: the host-source executor passes
host_address(addr) to compiled kernels, an interpreter reads and writes the numpy array buffer(addr) returns."""
from __future__ import annotations
import bisect, ctypes, mmap
import numpy as np

class DeviceMemoryError(ValueError):
  """An address that is not (or no longer) a live allocation of this device."""

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype, _libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes, _libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t], [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_MAP_FAILED = ctypes.c_void_p(-1).value
PAGE = mmap.PAGESIZE
ALIGN = 256
BASE = 0x7F0000000000  # fake addresses start high, far from 0 and from small integers; device n starts at BASE + n * SPAN
SPAN = 1 << 40

def _round_up(n: int, to: int) -> int: return (n + to - 1) // to * to

class _Allocation:
  """One mapping: `size` host bytes at `host` (16-aligned, ending 0-15 bytes before a guard page)."""
  def __init__(self, size: int):
    self.size, self.span = size, _round_up(max(size, 1), PAGE)
    self.map = _libc.mmap(None, self.span + PAGE, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    if self.map in (None, _MAP_FAILED): raise MemoryError(f"the host could not map {self.span + PAGE} bytes (errno {ctypes.get_errno()})")
    _libc.mprotect(self.map + self.span, PAGE, 0)  # PROT_NONE
    self.host = self.map + self.span - _round_up(max(size, 1), 16)
    self.array = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(self.host)) if size else np.zeros(0, np.uint8)
  def release(self) -> None: _libc.munmap(self.map, self.span + PAGE)

class DeviceMemory:
  """The memory of emulated device number `index` (its addresses never overlap another device's), `capacity` bytes.
  Addresses are ints (a driver wraps them in its pointer type)."""
  def __init__(self, capacity: int, index: int = 0):
    self.capacity, self.used, self.base = capacity, 0, BASE + index * SPAN
    self.next_addr = self.base
    self.live: dict[int, _Allocation] = {}
    self.starts: list[int] = []  # sorted addresses of live allocations, for interior-pointer lookups

  def alloc(self, nbytes: int) -> int:
    """A new allocation of nbytes (0 allowed): its device address. MemoryError when the device is full."""
    if nbytes < 0: raise ValueError(f"negative allocation size {nbytes}")
    if self.used + nbytes > self.capacity:
      raise MemoryError(f"out of device memory: {nbytes} bytes asked, {self.capacity - self.used} of {self.capacity} free")
    a = _Allocation(nbytes)
    addr, self.next_addr = self.next_addr, self.next_addr + _round_up(max(nbytes, 1), ALIGN) + ALIGN
    self.live[addr], self.used = a, self.used + nbytes
    bisect.insort(self.starts, addr)
    return addr

  def free(self, addr: int) -> None:
    """Releases the allocation that starts at addr; DeviceMemoryError for any other address."""
    if (a := self.live.pop(addr, None)) is None: raise DeviceMemoryError(f"free of {addr:#x}: {self._why(addr)}")
    self.starts.remove(addr)
    self.used -= a.size
    a.release()

  def _find(self, addr: int) -> tuple[int, _Allocation]:
    i = bisect.bisect_right(self.starts, addr) - 1
    if i >= 0 and (start := self.starts[i]) <= addr <= start + self.live[start].size: return start, self.live[start]
    raise DeviceMemoryError(f"address {addr:#x}: {self._why(addr)}")

  def _why(self, addr: int) -> str:
    return "freed or never allocated" if self.base <= addr < self.next_addr else "not a device address of this device"

  def buffer(self, addr: int) -> tuple[np.ndarray, int]:
    """(the uint8 array of the allocation holding addr, addr's offset in it); an address one past the end is allowed."""
    start, a = self._find(addr)
    return a.array, addr - start

  def host_address(self, addr: int) -> int:
    """The host address of device address addr (what a kernel compiled for the host dereferences)."""
    start, a = self._find(addr)
    return a.host + addr - start

  def check_range(self, addr: int, nbytes: int) -> None:
    """DeviceMemoryError unless [addr, addr+nbytes) lies in one live allocation."""
    start, a = self._find(addr)
    if addr + nbytes > start + a.size:
      raise DeviceMemoryError(f"{nbytes} bytes at {addr:#x} run {addr + nbytes - start - a.size} bytes past the end of its {a.size}-byte allocation")
