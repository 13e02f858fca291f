"""Devices and buffers: `Device`, the opened devices by name and the default one, and lazily allocated Buffers.

What a backend implements lives in tinycore.backend; how backends are found, in tinycore.plugin. The base classes are
re-exported here for plugins published against API 1.0/1.1 (`from tinycore.device import Allocator`); new code imports
them from tinycore.backend."""
from __future__ import annotations
import os, re, functools
from typing import Any
import numpy as np
from tinycore.backend import Allocator, BufferSpec, Compiled, CompileError, Compiler, DeviceError, LRUAllocator, Program  # noqa: F401
from tinycore.dtype import DType, dtypes, to_np_dtype
from tinycore.helpers import DEBUG, DEV, PROFILE, GlobalCounters
from tinycore import profile
from tinycore.plugin import DEVICE_ALIASES, registry

class _Device:
  """The device registry: `Device["CLANG"]` opens a device once; `Device.DEFAULT` is where new tensors live."""
  def __init__(self) -> None:
    self._opened: dict[str, Compiled] = {}
    self._default: str | None = None
  @staticmethod
  def canonicalize(device: str | tuple[str, ...] | list[str] | None) -> Any:
    """The canonical name ("clang:0" -> "CLANG"); a tuple (or list) of names gives a tuple of canonical names."""
    if device is None: return Device.DEFAULT
    if isinstance(device, (tuple, list)): return tuple(Device.canonicalize(d) for d in device)
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
    if registry.resolve(self.canonicalize(device).split(":")[0]) not in registry.device_names(): self[device]
    try: self[device]
    except DeviceError: return False
    return True
  def get_available_devices(self) -> list[str]:
    return registry.available_devices()

Device = _Device()

# *** Buffer ***

class Buffer:
  """`size` elements of `dtype` on `device`, allocated on first use. A view shares its base's memory."""
  # weak references to the unrealized lazy ops that read this buffer (kept by tinycore.lazy): an assign that overwrites
  # it computes them first, so they see the value they were written against
  readers: list | None = None
  fill: bytes | None = None  # written into the buffer when it is allocated (a lifted constant's value)
  # the defaults as class attributes: every lazy op makes a Buffer, most of them plain
  options: BufferSpec | None = None
  offset: int = 0
  _base: Buffer | None = None
  # the device handle once allocated (a handle is never None). A class default, not a missing attribute: hasattr's miss
  # raises and catches an AttributeError, and reading `__dict__` makes the instance a dict of its own (slower to read)
  _buf: Any = None
  def __init__(self, device: str, size: int, dtype: DType, opaque: Any = None, options: BufferSpec | None = None,
               initial_value: bytes | None = None, base: Buffer | None = None, offset: int = 0):
    if dtype.__class__ is not DType and (isinstance(dtype, type) or not hasattr(dtype, "itemsize")):
      raise TypeError(f"dtype must be a DType, got {dtype!r}")
    self.device, self.size, self.dtype = device, size, dtype
    if options is not None: self.options = options
    if offset: self.offset = offset
    if base is not None:
      if base._base is not None: raise ValueError("a buffer view's base must not be a view")
      self._base = base
    if opaque is not None: self.allocate(opaque)
    if initial_value is not None:
      self.allocate()
      self.copyin(memoryview(initial_value))
  @property
  def base(self) -> Buffer: return self._base if self._base is not None else self
  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize
  def is_allocated(self) -> bool: return self._buf is not None
  def ensure_allocated(self) -> Buffer: return self if self._buf is not None else self.allocate()
  def allocate(self, opaque: Any = None) -> Buffer:
    if self._buf is not None: raise RuntimeError("buffer is already allocated")
    self.allocator = allocator = Device[self.device].allocator
    nbytes = self.size * self.dtype.itemsize
    if self._base is not None:
      self._base.ensure_allocated()
      if not hasattr(allocator, "_offset"): raise DeviceError(f"device {self.device} does not support buffer views")
      self._buf = allocator._offset(self._base._buf, nbytes, self.offset)
    elif opaque is not None: self._buf = opaque
    else:
      self._buf = allocator.alloc(nbytes, self.options)
      GlobalCounters.mem_used_per_device[self.device] += nbytes
      if self.fill is not None: self.copyin(memoryview(self.fill))
    return self
  def deallocate(self) -> None:
    if self._buf is None: return
    if self._base is None:
      nbytes = self.size * self.dtype.itemsize
      GlobalCounters.mem_used_per_device[self.device] -= nbytes
      self.allocator.free(self._buf, nbytes, self.options)
    del self._buf
  def __del__(self) -> None:
    if self._buf is None: return  # never allocated (most lazy ops' buffers: their op fused into a kernel)
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
    with profile.span(self.device, "copies", "copy in from the host", bytes=mv.nbytes) if PROFILE.value else profile.OFF:
      self.ensure_allocated().allocator.copyin(self._buf, mv)
    return self
  def copyout(self, mv: memoryview) -> memoryview:
    mv = mv.cast("B") if mv.nbytes else mv
    if mv.nbytes != self.nbytes: raise ValueError(f"copyout of a buffer of {self.nbytes} bytes into {mv.nbytes} bytes")
    self.ensure_allocated()
    if self.nbytes:
      with profile.span(self.device, "copies", "copy out to the host", bytes=mv.nbytes) if PROFILE.value else profile.OFF:
        self.allocator.copyout(mv, self._buf)
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

def renderer_of(device: str | tuple[str, ...]) -> Any:
  """The renderer kernels on `device` are written by, for the Tensor-level choices made from its capabilities; None for
  a tuple of devices (a sharded tensor) or a device without one."""
  return getattr(Device[device], "renderer", None) if isinstance(device, str) else None

@functools.cache
def is_dtype_supported(dtype: DType, device: str | tuple[str, ...] | None = None) -> bool:
  """Whether kernels on `device` (each of them, for a tuple) may use `dtype`, as the device's renderer declares."""
  if isinstance(device, tuple): return all(is_dtype_supported(dtype, d) for d in device)
  return dtype.scalar() in Device[device or Device.DEFAULT].renderer.supported_dtypes() or dtype == dtypes.void
