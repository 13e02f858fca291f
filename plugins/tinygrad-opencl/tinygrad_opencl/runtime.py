"""The OpenCL runtime: device enumeration, allocator, compiler and program, on pyopencl.

One context and one in-order, profiling-enabled command queue per device index, created on first use."""
from __future__ import annotations
import functools, re, warnings
from typing import Any, Sequence
import numpy as np
import pyopencl as cl
from tinycore.backend import BufferSpec, CompileError, Compiler, DeviceError, LRUAllocator, Program, device_index
from tinygrad_opencl.renderer import OpenCLRenderer

NO_PLATFORM = "no OpenCL platform found (install an ICD such as pocl-opencl-icd)"

def enumerate_devices() -> list[tuple[cl.Platform, cl.Device]]:
  """Every device of every platform, in platform order then device order. Raises DeviceError when there is none."""
  try: platforms = cl.get_platforms()
  except cl.Error as e: raise DeviceError(f"{NO_PLATFORM}: {e}") from e
  if not platforms: raise DeviceError(NO_PLATFORM)
  devs: list[tuple[cl.Platform, cl.Device]] = []
  errors = []
  for p in platforms:
    try: devs.extend((p, d) for d in p.get_devices())
    except cl.Error as e: errors.append(f"platform {p.name!r}: {e}")  # a platform with no devices raises DEVICE_NOT_FOUND
  if not devs: raise DeviceError(f"OpenCL platforms found ({', '.join(p.name for p in platforms)}) but no device on any of them"
                                 + (f" ({'; '.join(errors)})" if errors else ""))
  return devs

def unavailable_reason() -> str | None:
  try: enumerate_devices()
  except DeviceError as e: return str(e)
  return None

class CLDevice:
  """One OpenCL device: its platform, capabilities, and (made on first use) its context and queue."""
  def __init__(self, device: str, platform: cl.Platform, dev: cl.Device):
    self.device, self.platform, self.dev = device, platform, dev
    self.extensions = set(dev.extensions.split())
    self.has_fp16, self.has_fp64 = "cl_khr_fp16" in self.extensions, "cl_khr_fp64" in self.extensions
    self.sub_buffer_align = max(1, dev.mem_base_addr_align // 8)  # the device reports it in bits
    self.max_alloc = dev.max_mem_alloc_size
  @functools.cached_property
  def ctx(self) -> cl.Context: return cl.Context([self.dev])
  @functools.cached_property
  def queue(self) -> cl.CommandQueue: return cl.CommandQueue(self.ctx, self.dev, properties=cl.command_queue_properties.PROFILING_ENABLE)
  def started(self) -> bool: return "queue" in self.__dict__
  def describe(self) -> str: return f"{self.dev.name!r} on {self.platform.name!r}"
  def __repr__(self) -> str: return f"<CLDevice {self.device} {self.describe()}>"

_DEVICES: dict[int, CLDevice] = {}

def get_device(device: str, idx: int) -> CLDevice:
  """The CLDevice for OPENCL:idx; a clear DeviceError if it does not exist."""
  if idx in _DEVICES: return _DEVICES[idx]
  devs = enumerate_devices()
  if not 0 <= idx < len(devs):
    have = ", ".join(f"{'OPENCL' if i == 0 else f'OPENCL:{i}'} = {d.name!r} on {p.name!r}" for i, (p, d) in enumerate(devs))
    raise DeviceError(f"device {device} does not exist: this machine has {len(devs)} OpenCL device{'s' if len(devs) != 1 else ''} ({have})")
  _DEVICES[idx] = d = CLDevice(device, *devs[idx])
  return d

# *** allocator ***

class CLAllocator(LRUAllocator):
  def __init__(self, dev: CLDevice):
    self.dev = dev
    self.offset_align = dev.sub_buffer_align  # (what _offset requires: the memory planner's arena offsets follow it)
    super().__init__()
  def _alloc(self, size: int, options: BufferSpec) -> cl.Buffer:
    if size > self.dev.max_alloc:
      raise MemoryError(f"{self.dev.device}: cannot allocate {size} bytes, the device's largest allocation is {self.dev.max_alloc} bytes")
    flags = cl.mem_flags.READ_WRITE | (cl.mem_flags.ALLOC_HOST_PTR if options.host else 0)
    try: return cl.Buffer(self.dev.ctx, flags, max(size, 1))  # OpenCL has no zero-sized buffers
    except cl.MemoryError as e: raise MemoryError(f"{self.dev.device}: out of memory allocating {size} bytes: {e}") from e
  def _free(self, opaque: cl.Buffer, options: BufferSpec) -> None: opaque.release()
  def _copyin(self, dest: cl.Buffer, src: memoryview) -> None:
    if src.nbytes: cl.enqueue_copy(self.dev.queue, dest, src, is_blocking=True)
  def _copyout(self, dest: memoryview, src: cl.Buffer) -> None:
    if dest.nbytes: cl.enqueue_copy(self.dev.queue, dest, src, is_blocking=True)
  def _offset(self, buf: cl.Buffer, size: int, offset: int) -> cl.Buffer:
    """A zero-copy view as an OpenCL sub-buffer. OpenCL requires its origin to be a multiple of the device's base address
    alignment (mem_base_addr_align); other offsets raise DeviceError."""
    if size == 0: return cl.Buffer(self.dev.ctx, cl.mem_flags.READ_WRITE, 1)  # nothing to share; OpenCL has no empty regions
    if offset % self.dev.sub_buffer_align:
      raise DeviceError(f"{self.dev.device}: cannot view a buffer at byte offset {offset}: OpenCL sub-buffers must start at a multiple "
                        f"of {self.dev.sub_buffer_align} bytes on {self.dev.describe()}")
    return buf.get_sub_region(offset, size)
  def _transfer(self, dest: cl.Buffer, src: cl.Buffer, nbytes: int, src_dev: Any = None, dest_dev: Any = None) -> None:
    if nbytes == 0: return
    src_alloc = getattr(src_dev, "allocator", None)
    src_cl: CLDevice = src_alloc.dev if isinstance(src_alloc, CLAllocator) else self.dev
    if src_cl is self.dev: cl.enqueue_copy(self.dev.queue, dest, src, byte_count=nbytes)
    else:  # different contexts share no memory: through the host
      tmp = np.empty(nbytes, dtype=np.uint8)
      cl.enqueue_copy(src_cl.queue, tmp, src, is_blocking=True)
      cl.enqueue_copy(self.dev.queue, dest, tmp, is_blocking=True)
  def synchronize(self) -> None:
    if self.dev.started(): self.dev.queue.finish()

# *** compiler ***

def _safe(s: str) -> str: return re.sub(r"[^A-Za-z0-9._+-]+", "_", s).strip("_")

class CLCompiler(Compiler):
  """OpenCL C -> device binary (clGetProgramInfo BINARIES). The cache key names platform, device, driver and flags."""
  def __init__(self, dev: CLDevice, flags: Sequence[str] = ()):
    self.dev, self.flags = dev, list(flags)
    d = dev.dev
    self.cachekey = "_".join(_safe(s) for s in ("compile_opencl", dev.platform.name, d.name, d.version, d.driver_version,
                                                 " ".join(self.flags) or "noflags"))
  def compile(self, src: str) -> bytes:
    try:
      with warnings.catch_warnings():  # pyopencl warns with the log of a build that succeeded; we only want failures
        warnings.simplefilter("ignore")
        prg = cl.Program(self.dev.ctx, src).build(options=self.flags, devices=[self.dev.dev])
    except cl.Error as e:
      raise CompileError(f"OpenCL build failed on {self.dev.device} ({self.dev.describe()}):\n{e}") from e
    return bytes(prg.binaries[0])

# *** program ***

def _pad3(x: Sequence[int]) -> tuple[int, ...]:
  if len(x) > 3: raise ValueError(f"OpenCL launches have at most 3 dimensions, got {tuple(x)}")
  return tuple(x) + (1,) * (3 - len(x))

class CLProgram(Program):
  """A kernel loaded from a device binary. global_size counts work-groups per axis (like a CUDA grid); the NDRange
  enqueued is global_size*local_size. With local_size=None, global_size is the total and OpenCL picks the groups."""
  def __init__(self, device: str, name: str, lib: bytes):
    super().__init__(device, name, lib)
    idx = device_index(device, "OPENCL")
    if idx is None: raise DeviceError(f"CLProgram given non-OpenCL device {device!r}")
    self.dev = get_device(device, idx)
    try:
      self.prg = cl.Program(self.dev.ctx, [self.dev.dev], [lib]).build()
      self.kernel = cl.Kernel(self.prg, name)
    except cl.Error as e:
      raise CompileError(f"{device}: cannot load kernel {name!r} from a {len(lib)}-byte binary on {self.dev.describe()}: {e}") from e
  def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] | None = (1, 1, 1),
               vals: Sequence[int] = (), wait: bool = False) -> float | None:
    gs = _pad3(global_size)
    if local_size is None: ls, total = None, gs
    else:
      ls = _pad3(local_size)
      total = tuple(g * l for g, l in zip(gs, ls))
    if 0 in total: return 0.0 if wait else None  # an empty launch: OpenCL 1.x rejects zero work sizes, and there is no work
    self.kernel.set_args(*bufs, *(np.int32(v) for v in vals))
    try: ev = cl.enqueue_nd_range_kernel(self.dev.queue, self.kernel, total, ls)
    except cl.Error as e:
      raise RuntimeError(f"{self.device}: launching {self.name} with global {total} local {ls} failed: {e}") from e
    if not wait: return None
    ev.wait()
    return (ev.profile.end - ev.profile.start) * 1e-9

# *** the parts the plugin's hooks build, each for the opened device ***

def allocator(device: str, idx: int) -> CLAllocator: return CLAllocator(get_device(device, idx))
def compiler(device: str, idx: int) -> CLCompiler: return CLCompiler(get_device(device, idx))
def renderer(device: str, idx: int) -> OpenCLRenderer: return OpenCLRenderer.for_device(get_device(device, idx))
def program(device: str, idx: int) -> type[CLProgram]:
  get_device(device, idx)
  return CLProgram
