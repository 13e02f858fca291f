"""The CUDA driver API through NVIDIA's cuda-bindings (cuda.bindings.driver): one primary context per GPU, device memory,
modules loaded from a cubin or PTX, launches on the default stream, and events for timing.

Nothing here runs at import time of the plugin: the first call of unavailable_reason() or get_device() loads libcuda."""
from __future__ import annotations
import ctypes, functools
from typing import Any, Sequence
import numpy as np
from tinycore.backend import BufferSpec, DeviceError, LRUAllocator, Program, open_once
from tinycore.helpers import prod

NO_DRIVER = "no libcuda.so: the NVIDIA driver is not installed"

def _driver():
  """cuda-bindings' driver module, or under MOCKGPU=1 its stand-in (mock/driver.py): the one seam between GPU and emulation."""
  from tinygrad_cuda import mock
  if mock.enabled():
    from tinygrad_cuda.mock import driver as mock_driver
    return mock_driver
  from cuda.bindings import driver
  return driver

def _errstr(err: Any) -> str:
  d = _driver()
  try: name, desc = d.cuGetErrorName(err)[1], d.cuGetErrorString(err)[1]
  except Exception: return str(err)
  return f"{name.decode() if isinstance(name, bytes) else name}: {desc.decode() if isinstance(desc, bytes) else desc}"

def cu(what: str, ret: tuple) -> Any:
  """Unpack a cuda-bindings result tuple (err, *values); raise DeviceError naming the call when err is not CUDA_SUCCESS."""
  err, vals = ret[0], ret[1:]
  if err != _driver().CUresult.CUDA_SUCCESS:
    if err == _driver().CUresult.CUDA_ERROR_OUT_OF_MEMORY: raise MemoryError(f"{what}: {_errstr(err)}")
    raise DeviceError(f"{what} failed: {_errstr(err)}")
  return vals[0] if len(vals) == 1 else (vals or None)

@functools.cache
def _init() -> str | None:
  """cuInit once. None when the driver is usable, else why not."""
  try: d = _driver()
  except ImportError as e: return f"cuda-bindings is not installed (pip install 'cuda-bindings<13'): {e}"
  try: (err,) = d.cuInit(0)
  except Exception as e:  # cuda-bindings raises cuda.pathfinder's DynamicLibNotFoundError when libcuda.so.1 is absent
    return f"{NO_DRIVER} ({type(e).__name__})"
  if err == d.CUresult.CUDA_ERROR_NO_DEVICE: return "the NVIDIA driver is installed but found no GPU (cuInit: CUDA_ERROR_NO_DEVICE)"
  if err != d.CUresult.CUDA_SUCCESS: return f"the NVIDIA driver failed to initialize: cuInit returned {_errstr(err)}"
  return None

def device_count() -> int:
  if (why := _init()) is not None: raise DeviceError(why)
  return cu("cuDeviceGetCount", _driver().cuDeviceGetCount())

def unavailable_reason(idx: int = 0) -> str | None:
  if (why := _init()) is not None: return why
  try: n = device_count()
  except DeviceError as e: return str(e)
  if n == 0: return "the NVIDIA driver found no GPU"
  return None if idx < n else f"CUDA:{idx} does not exist: this machine has {n} NVIDIA GPU{'s' if n != 1 else ''}"

class CUDADevice:
  """One GPU: its primary context, compute capability (arch) and name."""
  def __init__(self, device: str, idx: int):
    d = _driver()
    self.device, self.idx = device, idx
    self.cudev = cu("cuDeviceGet", d.cuDeviceGet(idx))
    self.ctx = cu("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(self.cudev))
    attr = d.CUdevice_attribute
    major = cu("cuDeviceGetAttribute", d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.cudev))
    minor = cu("cuDeviceGetAttribute", d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.cudev))
    self.arch = f"sm_{major}{minor}"
    self.name = cu("cuDeviceGetName", d.cuDeviceGetName(256, self.cudev)).split(b"\0")[0].decode()
    self.activate()
  def activate(self) -> None: cu("cuCtxSetCurrent", _driver().cuCtxSetCurrent(self.ctx))
  def synchronize(self) -> None:
    self.activate()
    cu("cuCtxSynchronize", _driver().cuCtxSynchronize())
  def __repr__(self) -> str: return f"<CUDADevice {self.device} {self.name!r} {self.arch}>"

get_device = open_once(unavailable_reason, CUDADevice)  # (device, idx) -> the opened GPU, or DeviceError with the reason

def _host_addr(mv: memoryview) -> tuple[int, np.ndarray]:
  """Address of a (possibly read-only) host buffer, and the array keeping it alive."""
  arr = np.frombuffer(mv, dtype=np.uint8)
  return arr.ctypes.data, arr

class CUDAAllocator(LRUAllocator):
  """Device memory from cuMemAlloc; copies are synchronous on the legacy default stream, so they order with launches."""
  def __init__(self, dev: CUDADevice):
    self.dev = dev
    super().__init__()
  def _alloc(self, size: int, options: BufferSpec) -> Any:
    self.dev.activate()
    return cu(f"cuMemAlloc({size}) on {self.dev.device}", _driver().cuMemAlloc(max(size, 1)))  # CUDA has no empty allocations
  def _free(self, opaque: Any, options: BufferSpec) -> None:
    self.dev.activate()
    cu("cuMemFree", _driver().cuMemFree(opaque))
  def _copyin(self, dest: Any, src: memoryview) -> None:
    if not src.nbytes: return
    self.dev.activate()
    addr, _keep = _host_addr(src)
    cu("cuMemcpyHtoD", _driver().cuMemcpyHtoD(dest, addr, src.nbytes))
  def _copyout(self, dest: memoryview, src: Any) -> None:
    if not dest.nbytes: return
    self.dev.activate()
    addr, _keep = _host_addr(dest)
    cu("cuMemcpyDtoH", _driver().cuMemcpyDtoH(addr, src, dest.nbytes))
  def _offset(self, buf: Any, size: int, offset: int) -> Any: return _driver().CUdeviceptr(int(buf) + offset)
  def _transfer(self, dest: Any, src: Any, nbytes: int, src_dev: Any = None, dest_dev: Any = None) -> None:
    if not nbytes: return
    s = getattr(getattr(src_dev, "allocator", None), "dev", self.dev)
    self.dev.activate()
    if s is self.dev: cu("cuMemcpyDtoD", _driver().cuMemcpyDtoD(dest, src, nbytes))
    else: cu("cuMemcpyPeer", _driver().cuMemcpyPeer(dest, self.dev.ctx, src, s.ctx, nbytes))
  def synchronize(self) -> None: self.dev.synchronize()

class CUDAProgram(Program):
  """A kernel loaded with cuModuleLoadData from a cubin (or NUL-terminated PTX, which the driver JIT-compiles)."""
  def __init__(self, device: str, name: str, lib: bytes):
    super().__init__(device, name, lib)
    self.dev = get_device(device, self.index)  # also serves the NV plugin's "NV:n"
    d = _driver()
    self.dev.activate()
    self.module = cu(f"cuModuleLoadData({name})", d.cuModuleLoadData(lib))
    self.func = cu(f"cuModuleGetFunction({name})", d.cuModuleGetFunction(self.module, name.encode()))

  def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] | None = (1, 1, 1),
               vals: Sequence[int] = (), wait: bool = False) -> float | None:
    d = _driver()
    gs, ls = (tuple(global_size) + (1, 1, 1))[:3], (tuple(local_size or (1, 1, 1)) + (1, 1, 1))[:3]
    if prod(ls) > 1024: raise DeviceError(f"{self.name}: a block of {ls} = {prod(ls)} threads exceeds CUDA's 1024")
    # kernelParams is an array of pointers, one to each argument's value: 64-bit device pointers, then int32 variables
    args = [ctypes.c_uint64(int(b)) for b in bufs] + [ctypes.c_int32(int(v)) for v in vals]
    params = (ctypes.c_void_p * max(len(args), 1))(*[ctypes.addressof(a) for a in args])
    self.dev.activate()
    if wait:
      start, end = cu("cuEventCreate", d.cuEventCreate(0)), cu("cuEventCreate", d.cuEventCreate(0))
      cu("cuEventRecord", d.cuEventRecord(start, 0))
    cu(f"cuLaunchKernel({self.name}, grid={gs}, block={ls})", d.cuLaunchKernel(self.func, *gs, *ls, 0, 0, ctypes.addressof(params), 0))
    if not wait: return None
    cu("cuEventRecord", d.cuEventRecord(end, 0))
    cu("cuEventSynchronize", d.cuEventSynchronize(end))
    ms = cu("cuEventElapsedTime", d.cuEventElapsedTime(start, end))
    for e in (start, end): d.cuEventDestroy(e)
    return float(ms) * 1e-3

  def __del__(self) -> None:
    try: _driver().cuModuleUnload(self.module)
    except Exception: pass

# the parts the plugin's hooks build; both open the GPU first, so one that cannot open fails here with its reason
def allocator(device: str, idx: int) -> CUDAAllocator: return CUDAAllocator(get_device(device, idx))
def program(device: str, idx: int) -> type[CUDAProgram]:
  get_device(device, idx)
  return CUDAProgram
