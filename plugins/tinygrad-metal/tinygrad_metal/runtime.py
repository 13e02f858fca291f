"""The Metal runtime through PyObjC (pyobjc-framework-Metal), macOS only.

Buffers are shared-storage MTLBuffers (unified memory: the host reads and writes them in place once the GPU is done with
them); a buffer handle is (MTLBuffer, byte offset) so views cost nothing. Each launch is one command buffer on the device's
queue; copies and synchronize() wait for the command buffers still in flight."""
from __future__ import annotations
import functools, os, struct, sys, tempfile
from typing import Any, Sequence
from tinycore.backend import BufferSpec, CompileError, DeviceError, LRUAllocator, Program, open_once
from tinycore.helpers import prod
from tinygrad_metal.renderer import METAL_STD

def _metal():
  """PyObjC's Metal module, or under MOCKGPU=1 its stand-in (mock/metal.py): the one seam between GPU and emulation."""
  from tinygrad_metal import mock
  if mock.enabled():
    from tinygrad_metal.mock import metal as mock_metal
    return mock_metal
  import Metal
  return Metal

@functools.cache
def _devices() -> tuple[list[Any], str | None]:
  from tinygrad_metal import mock
  if sys.platform != "darwin" and not mock.enabled(): return [], "Metal needs macOS"
  try: Metal = _metal()
  except ImportError as e: return [], f"pyobjc-framework-Metal is not installed (pip install pyobjc-framework-Metal): {e}"
  devs = list(Metal.MTLCopyAllDevices() or []) or [d for d in [Metal.MTLCreateSystemDefaultDevice()] if d is not None]
  return devs, None if devs else "macOS reports no Metal GPU"

def unavailable_reason(idx: int = 0) -> str | None:
  devs, why = _devices()
  if why is not None: return why
  return None if idx < len(devs) else f"METAL:{idx} does not exist: this Mac has {len(devs)} Metal GPU{'s' if len(devs) != 1 else ''}"

class MetalDevice:
  def __init__(self, device: str, idx: int):
    self.device, self.idx = device, idx
    self.dev = _devices()[0][idx]
    self.queue = self.dev.newCommandQueue()
    self.in_flight: list[Any] = []
  def synchronize(self) -> None:
    for cb in self.in_flight: cb.waitUntilCompleted()
    self.in_flight.clear()
  def __repr__(self) -> str: return f"<MetalDevice {self.device} {self.dev.name()}>"

get_device = open_once(unavailable_reason, MetalDevice)

def library_from_source(dev: MetalDevice, src: str) -> Any:
  Metal = _metal()
  opts = Metal.MTLCompileOptions.new()
  opts.setFastMathEnabled_(False)
  opts.setLanguageVersion_(Metal.MTLLanguageVersion3_1)
  lib, err = dev.dev.newLibraryWithSource_options_error_(src, opts, None)
  if lib is None: raise CompileError(f"Metal failed to compile ({METAL_STD}):\n{err.localizedDescription() if err else 'no message'}")
  return lib

class MetalAllocator(LRUAllocator):
  def __init__(self, dev: MetalDevice):
    self.dev = dev
    super().__init__()
  def _alloc(self, size: int, options: BufferSpec) -> tuple[Any, int]:
    buf = self.dev.dev.newBufferWithLength_options_(max(size, 1), _metal().MTLResourceStorageModeShared)
    if buf is None: raise MemoryError(f"{self.dev.device}: cannot allocate {size} bytes")
    return buf, 0
  def _free(self, opaque: tuple[Any, int], options: BufferSpec) -> None: pass  # PyObjC releases the MTLBuffer with its last reference
  def _as_buffer(self, opaque: tuple[Any, int]) -> memoryview:
    self.dev.synchronize()
    buf, off = opaque
    return buf.contents().as_buffer(buf.length())[off:]
  def _copyin(self, dest: tuple[Any, int], src: memoryview) -> None:
    if src.nbytes: self._as_buffer(dest)[:src.nbytes] = src
  def _copyout(self, dest: memoryview, src: tuple[Any, int]) -> None:
    if dest.nbytes: dest[:] = self._as_buffer(src)[:dest.nbytes]
  def _offset(self, buf: tuple[Any, int], size: int, offset: int) -> tuple[Any, int]: return buf[0], buf[1] + offset
  def synchronize(self) -> None: self.dev.synchronize()

class MetalProgram(Program):
  def __init__(self, device: str, name: str, lib: bytes):
    super().__init__(device, name, lib)
    self.dev = get_device(device, self.index)
    if lib[:4] == b"MTLB":  # a .metallib from the offline compiler
      with tempfile.NamedTemporaryFile(suffix=".metallib", delete=False) as f: f.write(lib)
      try:
        import Foundation
        library, err = self.dev.dev.newLibraryWithURL_error_(Foundation.NSURL.fileURLWithPath_(f.name), None)
      finally: os.unlink(f.name)
      if library is None: raise DeviceError(f"{name}: Metal could not load the metallib: {err}")
    else: library = library_from_source(self.dev, lib.decode())
    fn = library.newFunctionWithName_(name)
    if fn is None: raise DeviceError(f"kernel {name} is not in its Metal library")
    self.pipeline, err = self.dev.dev.newComputePipelineStateWithFunction_error_(fn, None)
    if self.pipeline is None: raise DeviceError(f"{name}: no compute pipeline: {err}")
    self.max_threads = int(self.pipeline.maxTotalThreadsPerThreadgroup())

  def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] | None = (1, 1, 1),
               vals: Sequence[int] = (), wait: bool = False) -> float | None:
    Metal = _metal()
    gs, ls = (tuple(global_size) + (1, 1, 1))[:3], (tuple(local_size or (1, 1, 1)) + (1, 1, 1))[:3]
    if prod(ls) > self.max_threads: raise DeviceError(f"{self.name}: {prod(ls)} threads per threadgroup exceed this pipeline's {self.max_threads}")
    cb = self.dev.queue.commandBuffer()
    enc = cb.computeCommandEncoder()
    enc.setComputePipelineState_(self.pipeline)
    for i, (buf, off) in enumerate(bufs): enc.setBuffer_offset_atIndex_(buf, off, i)
    for j, v in enumerate(vals): enc.setBytes_length_atIndex_(struct.pack("<i", int(v)), 4, len(bufs) + j)
    enc.dispatchThreadgroups_threadsPerThreadgroup_(Metal.MTLSizeMake(*gs), Metal.MTLSizeMake(*ls))
    enc.endEncoding()
    cb.commit()
    if not wait:
      self.dev.in_flight.append(cb)
      return None
    cb.waitUntilCompleted()
    if cb.error() is not None: raise DeviceError(f"{self.name} failed on the GPU: {cb.error()}")
    return float(cb.GPUEndTime() - cb.GPUStartTime())

# the parts the plugin's hooks build; both open the GPU first, so one that cannot open fails here with its reason
def allocator(device: str, idx: int) -> MetalAllocator: return MetalAllocator(get_device(device, idx))
def program(device: str, idx: int) -> type[MetalProgram]:
  get_device(device, idx)
  return MetalProgram
