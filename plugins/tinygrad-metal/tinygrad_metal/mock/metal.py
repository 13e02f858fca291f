"""A stand-in for PyObjC's `Metal` module (MOCKGPU=1): the objects and selectors our runtime uses, with Metal's names.

Buffers live in host memory (tinycore.runtime.devicememory: guard pages after each, a cap of MOCKGPU_MEMORY bytes past
which newBufferWithLength_options_ returns None, as Metal does when it cannot allocate). A library compiles its MSL source
for the host (tinycore.runtime.hostgrid with shim.py's <metal_stdlib>); a compile failure returns (None, an NSError-like
object). A command buffer runs its dispatches when committed (synchronously). What it enforces, as Metal's validation does:
every argument slot of the kernel bound, buffers of this device, threadgroups of at most maxTotalThreadsPerThreadgroup
(1024) threads, no dimension 0; a kernel that faults (an illegal address: the guard page) sets the command buffer's error."""
from __future__ import annotations
import ctypes, os, re, signal, time
from typing import Any
from tinycore.backend import CompileError
from tinycore.runtime.devicememory import DeviceMemory
from tinycore.runtime.hostgrid import HostKernel

MTLResourceStorageModeShared = 0
MTLLanguageVersion3_1 = (3 << 16) + 1
MAX_THREADS = 1024

class NSError:
  def __init__(self, text: str): self.text = text
  def localizedDescription(self) -> str: return self.text
  def __str__(self) -> str: return self.text

class MTLSize:
  def __init__(self, w: int, h: int, d: int): self.width, self.height, self.depth = w, h, d
  def tuple(self) -> tuple[int, int, int]: return (self.width, self.height, self.depth)

def MTLSizeMake(w: int, h: int, d: int) -> MTLSize: return MTLSize(w, h, d)

class MTLCompileOptions:
  @classmethod
  def new(cls) -> MTLCompileOptions: return cls()
  def setFastMathEnabled_(self, on: bool) -> None: self.fast_math = on
  def setLanguageVersion_(self, v: int) -> None: self.version = v

class _Contents:
  def __init__(self, buf: MTLBuffer): self.buf = buf
  def as_buffer(self, n: int) -> memoryview: return memoryview(self.buf.dev.mem.buffer(self.buf.addr)[0])[:n]

class MTLBuffer:
  def __init__(self, dev: MTLDevice, n: int): self.dev, self.n, self.addr = dev, n, dev.mem.alloc(n)
  def length(self) -> int: return self.n
  def contents(self) -> _Contents: return _Contents(self)
  def __del__(self) -> None:
    try: self.dev.mem.free(self.addr)
    except Exception: pass  # interpreter shutdown

class MTLFunction:
  def __init__(self, kernel: HostKernel, name: str): self.kernel, self.name = kernel, name

class MTLLibrary:
  def __init__(self, kernels: dict[str, HostKernel]): self.kernels = kernels
  def newFunctionWithName_(self, name: str) -> MTLFunction | None:
    return MTLFunction(self.kernels[name], name) if name in self.kernels else None

class MTLComputePipelineState:
  def __init__(self, fn: MTLFunction): self.fn = fn
  def maxTotalThreadsPerThreadgroup(self) -> int: return MAX_THREADS

class MTLComputeCommandEncoder:
  def __init__(self, cb: MTLCommandBuffer): self.cb, self.pipeline, self.slots = cb, None, {}
  def setComputePipelineState_(self, p: MTLComputePipelineState) -> None: self.pipeline = p
  def setBuffer_offset_atIndex_(self, buf: MTLBuffer, off: int, i: int) -> None: self.slots[i] = (buf, off)
  def setBytes_length_atIndex_(self, data: bytes, n: int, i: int) -> None: self.slots[i] = ctypes.create_string_buffer(bytes(data[:n]), max(n, 8))
  def dispatchThreadgroups_threadsPerThreadgroup_(self, groups: MTLSize, threads: MTLSize) -> None:
    self.cb.work.append((self.pipeline, dict(self.slots), groups.tuple(), threads.tuple()))
  def endEncoding(self) -> None: pass

class MTLCommandBuffer:
  def __init__(self, queue: MTLCommandQueue): self.queue, self.work, self._error, self.start, self.end = queue, [], None, 0.0, 0.0
  def computeCommandEncoder(self) -> MTLComputeCommandEncoder: return MTLComputeCommandEncoder(self)
  def commit(self) -> None:
    self.start = time.perf_counter()
    for pipeline, slots, groups, threads in self.work:
      if (err := self.queue.dev.dispatch(pipeline, slots, groups, threads)) is not None:
        self._error = NSError(err)
        break
    self.end = time.perf_counter()
  def waitUntilCompleted(self) -> None: pass
  def error(self) -> NSError | None: return self._error
  def GPUStartTime(self) -> float: return self.start
  def GPUEndTime(self) -> float: return self.end

class MTLCommandQueue:
  def __init__(self, dev: MTLDevice): self.dev = dev
  def commandBuffer(self) -> MTLCommandBuffer: return MTLCommandBuffer(self)

class MTLDevice:
  def __init__(self, idx: int):
    self.idx, self.mem, self.launches = idx, DeviceMemory(int(os.getenv("MOCKGPU_MEMORY", str(8 << 30))), idx), 0
  def name(self) -> str: return f"tinycore mock Metal GPU {self.idx}"
  def newCommandQueue(self) -> MTLCommandQueue: return MTLCommandQueue(self)
  def newBufferWithLength_options_(self, n: int, options: int) -> MTLBuffer | None:
    try: return MTLBuffer(self, n)
    except MemoryError: return None

  def newLibraryWithSource_options_error_(self, src: str, options: MTLCompileOptions, error: Any) -> tuple[MTLLibrary | None, NSError | None]:
    from tinygrad_metal.mock.shim import BARRIER, HEADERS, SHIM
    try: return MTLLibrary({n: HostKernel(SHIM, src, n, BARRIER, HEADERS) for n in re.findall(r"\bkernel\s+void\s+(\w+)\s*\(", src)}), None
    except CompileError as e: return None, NSError(str(e))

  def newComputePipelineStateWithFunction_error_(self, fn: MTLFunction, error: Any) -> tuple[MTLComputePipelineState, None]:
    return MTLComputePipelineState(fn), None

  def dispatch(self, pipeline: MTLComputePipelineState, slots: dict[int, Any], groups: tuple, threads: tuple) -> str | None:
    """Runs one dispatch; None, or what went wrong (as the command buffer's error)."""
    name = pipeline.fn.name
    if 0 in groups or 0 in threads: return f"{name}: a dispatch with a zero dimension: {groups} x {threads}"
    if threads[0] * threads[1] * threads[2] > MAX_THREADS: return f"{name}: {threads} is more than {MAX_THREADS} threads per threadgroup"
    if (missing := [i for i in range(len(slots)) if i not in slots]): return f"{name}: argument slots {missing} not bound"
    values: list[Any] = []
    for i in range(len(slots)):
      if isinstance(s := slots[i], tuple):
        if s[0].dev is not self: return f"{name}: the buffer at index {i} belongs to another device"
        values.append(ctypes.c_uint64(self.mem.host_address(s[0].addr) + s[1]))
      else: values.append(s)
    ptrs = [ctypes.addressof(v) for v in values] + list(pipeline.fn.kernel.id_addresses())
    args = (ctypes.c_void_p * len(ptrs))(*ptrs)
    self.launches += 1
    if (sig := pipeline.fn.kernel(groups, threads, ctypes.addressof(args), int(os.getenv("MOCKGPU_SEED", "0")) + self.launches)):
      return f"{name}: the kernel raised {signal.Signals(sig).name} on the host (an illegal address, or a trap)"
    return None

_devices: list[MTLDevice] = []

def MTLCopyAllDevices() -> list[MTLDevice]:
  if not _devices: _devices.extend(MTLDevice(i) for i in range(int(os.getenv("MOCKGPU_DEVICES", "1"))))
  return list(_devices)

def MTLCreateSystemDefaultDevice() -> MTLDevice | None: return (MTLCopyAllDevices() or [None])[0]
