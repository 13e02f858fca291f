"""Devices and buffers: the registry, the base classes a backend implements, and lazily allocated Buffers."""
from __future__ import annotations
import os, re, functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence
import numpy as np
from tinycore.dtype import DType, dtypes, to_np_dtype
from tinycore.helpers import DEBUG, DEV, GlobalCounters, diskcache_get, diskcache_put
from tinycore.renderer import Renderer

class CompileError(RuntimeError):
  """A kernel failed to compile; the message carries the compiler's own output."""

class DeviceError(RuntimeError):
  """A device was asked for that does not exist, failed to load, or cannot open here."""

@dataclass(frozen=True)
class BufferSpec:
  """Allocation options a backend may honour (host-visible memory, uncached, ...)."""
  host: bool = False
  uncached: bool = False
  nolru: bool = False

class Allocator:
  """Device memory. A backend implements _alloc, _free, _copyin, _copyout; the rest is optional.

  Optional: _offset(buf, size, offset) for zero-copy sub-buffers, _as_buffer(buf) -> memoryview for zero-copy host
  access, _transfer(dest, src, nbytes, src_dev, dest_dev) for device-to-device copies, synchronize()."""
  def alloc(self, size: int, options: BufferSpec | None = None) -> Any:
    if size < 0: raise ValueError(f"cannot allocate a buffer of negative size {size}")
    return self._alloc(size, options or BufferSpec())
  def free(self, opaque: Any, size: int, options: BufferSpec | None = None) -> None: self._free(opaque, options or BufferSpec())
  def copyin(self, dest: Any, src: memoryview) -> None: self._copyin(dest, src)
  def copyout(self, dest: memoryview, src: Any) -> None: self._copyout(dest, src)
  def synchronize(self) -> None: pass
  def _alloc(self, size: int, options: BufferSpec) -> Any: raise NotImplementedError
  def _free(self, opaque: Any, options: BufferSpec) -> None: pass
  def _copyin(self, dest: Any, src: memoryview) -> None: raise NotImplementedError
  def _copyout(self, dest: memoryview, src: Any) -> None: raise NotImplementedError

class LRUAllocator(Allocator):
  """Keeps freed buffers by (size, options) and hands them out again: fresh memory costs page faults."""
  def __init__(self) -> None: self.cache: dict[tuple[int, BufferSpec | None], list[Any]] = {}
  def alloc(self, size: int, options: BufferSpec | None = None) -> Any:
    if (c := self.cache.get((size, options))): return c.pop()
    try: return super().alloc(size, options)
    except MemoryError:
      self.free_cache()
      return super().alloc(size, options)
  def free_cache(self) -> None:
    for (_, opt), bufs in self.cache.items():
      for b in bufs: self._free(b, opt or BufferSpec())
    self.cache.clear()
  def free(self, opaque: Any, size: int, options: BufferSpec | None = None) -> None:
    if options is None or not options.nolru: self.cache.setdefault((size, options), []).append(opaque)
    else: super().free(opaque, size, options)

class Compiler:
  """Turns rendered source into a loadable binary. `cachekey` names the toolchain (compiler, version, flags):
  binaries are cached on disk under it, so a changed toolchain never reuses an old binary. None disables caching."""
  cachekey: str | None = None
  def compile(self, src: str) -> bytes: return src.encode()
  def compile_cached(self, src: str) -> bytes:
    if self.cachekey is None: return self.compile(src)
    if (lib := diskcache_get(self.cachekey, src)) is None: lib = diskcache_put(self.cachekey, src, self.compile(src))
    return lib
  def disassemble(self, lib: bytes) -> str: return ""

class Program:
  """A loaded kernel. Called with device buffers, launch sizes and the values of symbolic Variables; with
  wait=True it blocks until done and returns the run time in seconds."""
  def __init__(self, device: str, name: str, lib: bytes): self.device, self.name, self.lib = device, name, lib
  def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] | None = (1, 1, 1),
               vals: Sequence[int] = (), wait: bool = False) -> float | None: raise NotImplementedError
  def launcher(self, bufs: Sequence[Any], global_size: Sequence[int], local_size: Sequence[int] | None,
               vals: Sequence[int] = ()) -> Callable[[], Any]:
    """This kernel bound to fixed device buffers and launch arguments, as a call without arguments (a TinyJit replay
    runs a list of these): a backend may do here, once, the work its __call__ does on every launch."""
    return functools.partial(self, *bufs, global_size=global_size, local_size=local_size, vals=vals)

class Compiled:
  """Everything the core needs from one device: its allocator, renderer, compiler and program class."""
  def __init__(self, device: str, allocator: Allocator, renderer: Renderer, compiler: Compiler, program: type[Program],
               plugin: str = ""):
    self.device, self.allocator, self.renderer, self.compiler, self.program, self.plugin = \
      device, allocator, renderer, compiler, program, plugin
  def synchronize(self) -> None: self.allocator.synchronize()
  def __repr__(self) -> str: return f"<Compiled {self.device} from {self.plugin}>"

class _Device:
  """The device registry: `Device["CLANG"]` opens a device once; `Device.DEFAULT` is where new tensors live."""
  def __init__(self) -> None:
    self._opened: dict[str, Compiled] = {}
    self._default: str | None = None
  @staticmethod
  def canonicalize(device: str | None) -> str:
    if device is None: return Device.DEFAULT
    if not isinstance(device, str): raise TypeError(f"device must be a string like 'CLANG' or 'OPENCL:1', got {device!r}")
    name, _, idx = device.partition(":")
    name = name.upper()
    if idx and not idx.isdigit(): raise DeviceError(f"bad device index in {device!r}: expected NAME or NAME:n")
    return name if not idx or idx == "0" else f"{name}:{idx}"
  def __getitem__(self, device: str) -> Compiled:
    if (d := self._opened.get(device)) is not None: return d  # a canonical name already open (every buffer allocation)
    device = self.canonicalize(device)
    if (d := self._opened.get(device)) is None: self._opened[device] = d = self._open(device)
    return d
  def _open(self, device: str) -> Compiled:
    from tinycore.plugin import registry
    d = registry.open(device)
    if DEBUG >= 1: print(f"opened device {device} from pid:{os.getpid()}")
    return d
  @property
  def DEFAULT(self) -> str:
    """The device new tensors go to: the DEV context variable (environment, `Context(DEV=...)` or assigning DEFAULT)
    when set, else the best available one."""
    if DEV.value: return self._dev_cache[1] if self._dev_cache[0] == DEV.value else self._canonical_dev()
    if self._default is None: self._default = self._pick_default()
    return self._default
  @DEFAULT.setter
  def DEFAULT(self, device: str) -> None: DEV.value = self.canonicalize(device)
  _dev_cache: tuple[str, str] = ("", "")
  def _canonical_dev(self) -> str:
    self._dev_cache = (DEV.value, self.canonicalize(DEV.value))
    return self._dev_cache[1]
  def _pick_default(self) -> str:
    from tinycore.plugin import registry
    from tinycore.plugin import DEVICE_ALIASES
    for name in [*registry.device_names(), *DEVICE_ALIASES]:
      if os.getenv(name, "") not in ("", "0") and re.fullmatch(r"\d+", os.environ[name]): return name
    for name in registry.available_devices(): return name
    raise DeviceError("no device is available: " + "; ".join(f"{n}: {r}" for n, r in registry.reasons().items()))
  @property
  def default(self) -> Compiled:
    """The opened default device (`Device[Device.DEFAULT]`)."""
    return self[self.DEFAULT]
  def get_class(self, ix: str) -> type:
    """The class of device `ix` (opening it)."""
    return type(self[ix])
  def can_open(self, device: str) -> bool:
    """Whether an installed device opens here; a name no plugin provides raises DeviceError at once."""
    from tinycore.plugin import registry
    if registry.resolve(self.canonicalize(device).split(":")[0]) not in registry.device_names(): self[device]
    try: self[device]
    except DeviceError: return False
    return True
  def get_available_devices(self) -> list[str]:
    from tinycore.plugin import registry
    return registry.available_devices()

Device = _Device()

# *** Buffer ***

class Buffer:
  """`size` elements of `dtype` on `device`, allocated on first use. A view shares its base's memory."""
  # weak references to the unrealized lazy ops that read this buffer (kept by tinycore.lazy): an assign that overwrites
  # it computes them first, so they see the value they were written against
  readers: list | None = None
  fill: bytes | None = None  # written into the buffer when it is allocated (a lifted constant's value)
  def __init__(self, device: str, size: int, dtype: DType, opaque: Any = None, options: BufferSpec | None = None,
               initial_value: bytes | None = None, base: Buffer | None = None, offset: int = 0):
    if isinstance(dtype, type) or not hasattr(dtype, "itemsize"): raise TypeError(f"dtype must be a DType, got {dtype!r}")
    self.device, self.size, self.dtype, self.options, self.offset = device, size, dtype, options, offset
    self._base = base
    if base is not None and base._base is not None: raise ValueError("a buffer view's base must not be a view")
    if opaque is not None: self.allocate(opaque)
    if initial_value is not None:
      self.allocate()
      self.copyin(memoryview(initial_value))
  @property
  def base(self) -> Buffer: return self._base if self._base is not None else self
  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize
  def is_allocated(self) -> bool: return hasattr(self, "_buf")
  def ensure_allocated(self) -> Buffer: return self if self.is_allocated() else self.allocate()
  def allocate(self, opaque: Any = None) -> Buffer:
    if hasattr(self, "_buf"): raise RuntimeError("buffer is already allocated")
    self.allocator = allocator = Device[self.device].allocator
    nbytes = self.size * self.dtype.itemsize
    if self._base is not None:
      self._base.ensure_allocated()
      if not hasattr(allocator, "_offset"): raise DeviceError(f"device {self.device} does not support buffer views")
      self._buf = allocator._offset(self._base._buf, nbytes, self.offset)
    elif opaque is not None: self._buf = opaque
    else:
      self._buf = allocator.alloc(nbytes, self.options)
      GlobalCounters.mem_used += nbytes
      GlobalCounters.mem_used_per_device[self.device] += nbytes
      if self.fill is not None: self.copyin(memoryview(self.fill))
    return self
  def deallocate(self) -> None:
    if not hasattr(self, "_buf"): return
    if self._base is None and hasattr(self, "allocator"):
      nbytes = self.size * self.dtype.itemsize
      GlobalCounters.mem_used -= nbytes
      GlobalCounters.mem_used_per_device[self.device] -= nbytes
      self.allocator.free(self._buf, nbytes, self.options)
    del self._buf
  def __del__(self) -> None:
    try: self.deallocate()
    except Exception: pass  # interpreter shutdown
  def __repr__(self) -> str: return f"<buf real:{self.is_allocated()} device:{self.device} size:{self.size} dtype:{self.dtype}>"
  def as_buffer(self) -> memoryview:
    """Host bytes of the buffer: zero-copy where the allocator allows, else a copy."""
    if hasattr(self.allocator, "_as_buffer"): return self.allocator._as_buffer(self._buf)
    return self.copyout(memoryview(bytearray(self.nbytes)))
  def copyin(self, mv: memoryview) -> Buffer:
    mv = mv.cast("B") if mv.nbytes else mv
    if mv.nbytes != self.nbytes: raise ValueError(f"copyin of {mv.nbytes} bytes into a buffer of {self.nbytes} bytes")
    self.ensure_allocated().allocator.copyin(self._buf, mv)
    return self
  def copyout(self, mv: memoryview) -> memoryview:
    mv = mv.cast("B") if mv.nbytes else mv
    if mv.nbytes != self.nbytes: raise ValueError(f"copyout of a buffer of {self.nbytes} bytes into {mv.nbytes} bytes")
    self.ensure_allocated()
    if self.nbytes: self.allocator.copyout(mv, self._buf)
    return mv
  def numpy(self) -> np.ndarray:
    arr = np.frombuffer(bytearray(self.copyout(memoryview(bytearray(self.nbytes)))), dtype=to_np_dtype(self.dtype))
    return arr
  def view(self, size: int, dtype: DType, offset: int) -> Buffer:
    if offset + size * dtype.itemsize > self.nbytes: raise ValueError(f"view of {size} x {dtype} at byte {offset} exceeds {self.nbytes} bytes")
    return Buffer(self.device, size, dtype, base=self.base, offset=self.offset + offset)
  def copy_from(self, src: Buffer) -> None:
    """Copy another buffer's contents here, across devices through the host where no direct path exists."""
    if src.nbytes != self.nbytes: raise ValueError(f"copy between buffers of {src.nbytes} and {self.nbytes} bytes")
    self.ensure_allocated()
    if hasattr(self.allocator, "_transfer") and src.device.split(":")[0] == self.device.split(":")[0]:
      self.allocator._transfer(self._buf, src.ensure_allocated()._buf, self.nbytes, src_dev=Device[src.device], dest_dev=Device[self.device])
    elif hasattr(src.ensure_allocated().allocator, "_as_buffer"): self.copyin(src.allocator._as_buffer(src._buf))
    else: self.copyin(src.copyout(memoryview(bytearray(src.nbytes))))

@functools.cache
def is_dtype_supported(dtype: DType, device: str | None = None) -> bool:
  """Whether kernels on `device` may use `dtype`, as the device's renderer declares."""
  return dtype.scalar() in Device[device or Device.DEFAULT].renderer.supported_dtypes() or dtype == dtypes.void
