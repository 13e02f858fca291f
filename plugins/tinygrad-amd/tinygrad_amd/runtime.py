"""The HIP runtime (libamdhip64) through ctypes: device memory, code objects, launches, events.

Only the stable C entry points every ROCm release keeps are used (hipInit, hipMalloc, hipMemcpy, hipModuleLoadData,
hipModuleLaunchKernel, hipEvent*), never hipDeviceProp_t, whose layout changes between ROCm releases. The GPU's gfx
target comes from the kernel driver's topology in sysfs (or $AMD_ARCH)."""
from __future__ import annotations
import ctypes, functools, os, pathlib
from typing import Any, Sequence
import numpy as np
from tinycore.backend import BufferSpec, DeviceError, LRUAllocator, Program, open_once
from tinycore.helpers import prod

NO_HIP = "no HIP runtime (libamdhip64) found"
LIB_NAMES = ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5", "/opt/rocm/lib/libamdhip64.so")
hipMemcpyHostToDevice, hipMemcpyDeviceToHost, hipMemcpyDeviceToDevice = 1, 2, 3
hipErrorOutOfMemory = 2

@functools.cache
def load_hip() -> ctypes.CDLL | None:
  """libamdhip64 with the prototypes used here, or None when it is not installed; under MOCKGPU=1 its stand-in
  (mock/hip.py): the one seam between GPU and emulation."""
  from tinygrad_amd import mock
  if mock.enabled():
    from tinygrad_amd.mock.hip import MockHIP
    return MockHIP()  # type: ignore[return-value]
  for name in ([os.environ["HIP_LIBRARY"]] if os.getenv("HIP_LIBRARY") else []) + list(LIB_NAMES):
    try: lib = ctypes.CDLL(name)
    except OSError: continue
    P, I, U, Z, F = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_size_t, ctypes.c_float
    for fn, args in {"hipInit": [U], "hipGetDeviceCount": [ctypes.POINTER(I)], "hipSetDevice": [I], "hipDeviceSynchronize": [],
                     "hipMalloc": [ctypes.POINTER(P), Z], "hipFree": [P], "hipMemcpy": [P, P, Z, I], "hipMemcpyPeer": [P, I, P, I, Z],
                     "hipModuleLoadData": [ctypes.POINTER(P), P], "hipModuleUnload": [P],
                     "hipModuleGetFunction": [ctypes.POINTER(P), P, ctypes.c_char_p],
                     "hipModuleLaunchKernel": [P, U, U, U, U, U, U, U, P, ctypes.POINTER(P), ctypes.POINTER(P)],
                     "hipEventCreate": [ctypes.POINTER(P)], "hipEventRecord": [P, P], "hipEventSynchronize": [P],
                     "hipEventElapsedTime": [ctypes.POINTER(F), P, P], "hipEventDestroy": [P]}.items():
      f = getattr(lib, fn)
      f.argtypes, f.restype = args, I
    lib.hipGetErrorString.argtypes, lib.hipGetErrorString.restype = [I], ctypes.c_char_p
    return lib
  return None

def hip() -> ctypes.CDLL:
  if (lib := load_hip()) is None: raise DeviceError(NO_HIP)
  return lib

def check(what: str, err: int) -> None:
  if err == 0: return
  msg = f"{what} failed: hipError {err}: {(hip().hipGetErrorString(err) or b'').decode(errors='replace')}"
  raise MemoryError(msg) if err == hipErrorOutOfMemory else DeviceError(msg)

@functools.cache
def _init() -> str | None:
  if (lib := load_hip()) is None: return NO_HIP
  if (err := lib.hipInit(0)) != 0:
    return f"the HIP runtime found no usable AMD GPU (hipInit: {(lib.hipGetErrorString(err) or b'').decode(errors='replace')})"
  return None

def device_count() -> int:
  if (why := _init()) is not None: raise DeviceError(why)
  n = ctypes.c_int(0)
  check("hipGetDeviceCount", hip().hipGetDeviceCount(ctypes.byref(n)))
  return n.value

def unavailable_reason(idx: int = 0) -> str | None:
  if (why := _init()) is not None: return why
  try: n = device_count()
  except DeviceError as e: return str(e)
  if n == 0: return "the HIP runtime found no AMD GPU"
  return None if idx < n else f"AMD:{idx} does not exist: this machine has {n} AMD GPU{'s' if n != 1 else ''}"

def gfx_name(version: int) -> str:
  """KFD's gfx_target_version (major*10000 + minor*100 + stepping) -> 'gfxNNN', e.g. 90010 -> gfx90a, 110000 -> gfx1100."""
  major, minor, step = version // 10000, version // 100 % 100, version % 100
  return f"gfx{major}{minor:x}{step:x}"

def sysfs_archs(root: str = "/sys/class/kfd/kfd/topology/nodes") -> list[str]:
  """gfx targets of the GPUs the amdgpu kernel driver reports, in node order (CPU nodes report 0 and are skipped)."""
  archs = []
  for node in sorted(pathlib.Path(root).glob("*"), key=lambda p: int(p.name) if p.name.isdigit() else 1 << 30):
    try: props = dict(line.split()[:2] for line in (node / "properties").read_text().splitlines() if len(line.split()) >= 2)
    except OSError: continue
    if int(props.get("gfx_target_version", "0")): archs.append(gfx_name(int(props["gfx_target_version"])))
  return archs

class AMDDevice:
  def __init__(self, device: str, idx: int):
    self.device, self.idx = device, idx
    from tinygrad_amd import mock
    archs = ["gfx1100"] * device_count() if mock.enabled() else sysfs_archs()  # a mock GPU is a gfx1100 (or what AMD_ARCH says)
    self.arch = os.getenv("AMD_ARCH") or (archs[idx] if idx < len(archs) else None)
    if self.arch is None: raise DeviceError(f"{device}: cannot tell the GPU's gfx target from sysfs; set AMD_ARCH (e.g. gfx1100)")
    self.activate()
  def activate(self) -> None: check("hipSetDevice", hip().hipSetDevice(self.idx))
  def synchronize(self) -> None:
    self.activate()
    check("hipDeviceSynchronize", hip().hipDeviceSynchronize())
  def __repr__(self) -> str: return f"<AMDDevice {self.device} {self.arch}>"

get_device = open_once(unavailable_reason, AMDDevice)

class AMDAllocator(LRUAllocator):
  """hipMalloc'd memory as integer addresses; hipMemcpy is synchronous, so copies order with launches on the null stream."""
  def __init__(self, dev: AMDDevice):
    self.dev = dev
    super().__init__()
  def _alloc(self, size: int, options: BufferSpec) -> int:
    self.dev.activate()
    p = ctypes.c_void_p()
    check(f"hipMalloc({size}) on {self.dev.device}", hip().hipMalloc(ctypes.byref(p), max(size, 1)))
    return p.value
  def _free(self, opaque: int, options: BufferSpec) -> None:
    self.dev.activate()
    check("hipFree", hip().hipFree(opaque))
  def _copyin(self, dest: int, src: memoryview) -> None:
    if not src.nbytes: return
    self.dev.activate()
    arr = np.frombuffer(src, dtype=np.uint8)
    check("hipMemcpy(host->device)", hip().hipMemcpy(dest, arr.ctypes.data, src.nbytes, hipMemcpyHostToDevice))
  def _copyout(self, dest: memoryview, src: int) -> None:
    if not dest.nbytes: return
    self.dev.activate()
    arr = np.frombuffer(dest, dtype=np.uint8)
    check("hipMemcpy(device->host)", hip().hipMemcpy(arr.ctypes.data, src, dest.nbytes, hipMemcpyDeviceToHost))
  def _offset(self, buf: int, size: int, offset: int) -> int: return buf + offset
  def _transfer(self, dest: int, src: int, nbytes: int, src_dev: Any = None, dest_dev: Any = None) -> None:
    if not nbytes: return
    s = getattr(getattr(src_dev, "allocator", None), "dev", self.dev)
    self.dev.activate()
    if s is self.dev: check("hipMemcpy(device->device)", hip().hipMemcpy(dest, src, nbytes, hipMemcpyDeviceToDevice))
    else: check("hipMemcpyPeer", hip().hipMemcpyPeer(dest, self.dev.idx, src, s.idx, nbytes))
  def synchronize(self) -> None: self.dev.synchronize()

class AMDProgram(Program):
  def __init__(self, device: str, name: str, lib: bytes):
    super().__init__(device, name, lib)
    self.dev = get_device(device, self.index)
    self.dev.activate()
    self._image = ctypes.create_string_buffer(lib, len(lib))
    self.module, self.func = ctypes.c_void_p(), ctypes.c_void_p()
    check(f"hipModuleLoadData({name})", hip().hipModuleLoadData(ctypes.byref(self.module), self._image))
    check(f"hipModuleGetFunction({name})", hip().hipModuleGetFunction(ctypes.byref(self.func), self.module, name.encode()))

  def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] | None = (1, 1, 1),
               vals: Sequence[int] = (), wait: bool = False) -> float | None:
    lib = hip()
    gs, ls = (tuple(global_size) + (1, 1, 1))[:3], (tuple(local_size or (1, 1, 1)) + (1, 1, 1))[:3]
    if prod(ls) > 1024: raise DeviceError(f"{self.name}: a work-group of {ls} = {prod(ls)} threads exceeds 1024")
    args = [ctypes.c_uint64(int(b)) for b in bufs] + [ctypes.c_int32(int(v)) for v in vals]
    params = (ctypes.c_void_p * max(len(args), 1))(*[ctypes.addressof(a) for a in args])
    self.dev.activate()
    if wait:
      start, end = ctypes.c_void_p(), ctypes.c_void_p()
      check("hipEventCreate", lib.hipEventCreate(ctypes.byref(start)))
      check("hipEventCreate", lib.hipEventCreate(ctypes.byref(end)))
      check("hipEventRecord", lib.hipEventRecord(start, None))
    check(f"hipModuleLaunchKernel({self.name}, grid={gs}, block={ls})", lib.hipModuleLaunchKernel(self.func, *gs, *ls, 0, None, params, None))
    if not wait: return None
    check("hipEventRecord", lib.hipEventRecord(end, None))
    check("hipEventSynchronize", lib.hipEventSynchronize(end))
    ms = ctypes.c_float()
    check("hipEventElapsedTime", lib.hipEventElapsedTime(ctypes.byref(ms), start, end))
    for e in (start, end): lib.hipEventDestroy(e)
    return ms.value * 1e-3

  def __del__(self) -> None:
    try: hip().hipModuleUnload(self.module)
    except Exception: pass

# the parts the plugin's hooks build; both open the GPU first, so one that cannot open fails here with its reason
def allocator(device: str, idx: int) -> AMDAllocator: return AMDAllocator(get_device(device, idx))
def program(device: str, idx: int) -> type[AMDProgram]:
  get_device(device, idx)
  return AMDProgram
