"""A stand-in for libamdhip64 (MOCKGPU=1): an object with the HIP functions our runtime calls through ctypes, taking the
same ctypes arguments (byref out-parameters, addresses, pointer arrays) and returning hipError_t codes.

Device memory is host memory (tinycore.runtime.devicememory); a module is an emulated image (tinycore.runtime.emulatedimage)
whose HIP source runs on the CPU (tinycore.runtime.hostgrid with shim.py). What it enforces, as HIP does: hipInit first
(hipErrorNotInitialized), device ordinals (hipErrorInvalidDevice), MOCKGPU_MEMORY (hipErrorOutOfMemory), freed or foreign
pointers and copies past an allocation (hipErrorInvalidValue), launch sizes (a block of at most 1024 threads, grid and
block dims at least 1: hipErrorInvalidValue), pointer arguments that are not live device memory (hipErrorInvalidValue),
images that are not emulated (hipErrorInvalidImage), unknown kernels (hipErrorNotFound), dead handles
(hipErrorInvalidHandle). A kernel that faults makes the next synchronizing call fail (hipErrorIllegalAddress, or
hipErrorLaunchFailure for a trap), once. hipGetErrorString adds what the mock found after HIP's own words."""
from __future__ import annotations
import ctypes, itertools, os, signal, time
from typing import Any
from tinycore.backend import CompileError
from tinycore.runtime import emulatedimage
from tinycore.runtime.devicememory import DeviceMemory, DeviceMemoryError
from tinycore.runtime.hostgrid import HostKernel, c_params

hipSuccess, hipErrorInvalidValue, hipErrorOutOfMemory, hipErrorNotInitialized = 0, 1, 2, 3
hipErrorInvalidDevice, hipErrorInvalidImage, hipErrorInvalidHandle, hipErrorNotFound = 101, 200, 400, 500
hipErrorIllegalAddress, hipErrorLaunchFailure = 700, 719
STRINGS = {0: "no error", 1: "invalid argument", 2: "out of memory", 3: "initialization error", 101: "invalid device ordinal",
           200: "device kernel image is invalid", 400: "invalid resource handle", 500: "named symbol not found",
           700: "an illegal memory access was encountered", 719: "unspecified launch failure"}
MAX_THREADS = 1024

class _Module:
  def __init__(self, dev: int, source: str): self.dev, self.source, self.loaded = dev, source, True

class _Function:
  def __init__(self, module: _Module, name: str, params: list[tuple[int, bool]], kernel: HostKernel):
    self.module, self.name, self.params, self.kernel = module, name, params, kernel

class MockHIP:
  """The library object: one per process, like the loaded libamdhip64."""
  def __init__(self):
    self.init, self.current, self.detail, self.launches = False, 0, "", 0
    self.mem = [DeviceMemory(int(os.getenv("MOCKGPU_MEMORY", str(8 << 30))), i) for i in range(int(os.getenv("MOCKGPU_DEVICES", "1")))]
    self.pending: list[int | None] = [None] * len(self.mem)
    self.handles: dict[int, Any] = {}
    self.next_handle = itertools.count(0x1000, 16)

  # *** helpers ***
  def _fail(self, err: int, detail: str) -> int:
    self.detail = detail
    return err
  def _new(self, obj: Any) -> int:
    self.handles[h := next(self.next_handle)] = obj
    return h
  def _get(self, handle: Any, kind: type) -> Any:
    obj = self.handles.get(int(getattr(handle, "value", handle) or 0))
    return obj if isinstance(obj, kind) else None
  def _sync(self) -> int:
    err, self.pending[self.current] = self.pending[self.current], None
    return err or hipSuccess
  def _dev_bytes(self, ptr: int, n: int) -> ctypes.Array:
    mem = next((m for m in self.mem if m.base <= ptr < m.next_addr), self.mem[self.current])
    mem.check_range(ptr, n)
    return (ctypes.c_uint8 * n).from_address(mem.host_address(ptr))

  # *** the HIP API ***
  def hipGetErrorString(self, err: int) -> bytes:
    detail, self.detail = self.detail, ""
    return (STRINGS.get(err, f"unknown error {err}") + (f" (mock HIP: {detail})" if detail and err else "")).encode()
  def hipInit(self, flags: int) -> int:
    self.init = True
    return hipSuccess
  def hipGetDeviceCount(self, out: Any) -> int:
    if not self.init: return self._fail(hipErrorNotInitialized, "hipInit was not called")
    out._obj.value = len(self.mem)
    return hipSuccess
  def hipSetDevice(self, idx: int) -> int:
    if not 0 <= idx < len(self.mem): return self._fail(hipErrorInvalidDevice, f"device {idx} of {len(self.mem)}")
    self.current = idx
    return hipSuccess
  def hipDeviceSynchronize(self) -> int: return self._sync()

  def hipMalloc(self, out: Any, n: int) -> int:
    try: out._obj.value = self.mem[self.current].alloc(n)
    except MemoryError as e: return self._fail(hipErrorOutOfMemory, str(e))
    return hipSuccess
  def hipFree(self, ptr: int) -> int:
    try: self.mem[self.current].free(int(ptr))
    except DeviceMemoryError as e: return self._fail(hipErrorInvalidValue, str(e))
    return hipSuccess
  def hipMemcpy(self, dst: int, src: int, n: int, kind: int) -> int:
    if (err := self._sync()): return err
    if not n: return hipSuccess
    try:
      d = self._dev_bytes(dst, n) if kind in (1, 3) else (ctypes.c_uint8 * n).from_address(dst)
      s = self._dev_bytes(src, n) if kind in (2, 3) else (ctypes.c_uint8 * n).from_address(src)
    except DeviceMemoryError as e: return self._fail(hipErrorInvalidValue, f"hipMemcpy kind {kind}: {e}")
    ctypes.memmove(d, s, n)
    return hipSuccess
  def hipMemcpyPeer(self, dst: int, dst_dev: int, src: int, src_dev: int, n: int) -> int:
    for ptr, d in ((dst, dst_dev), (src, src_dev)):
      if not self.mem[d].base <= ptr < self.mem[d].next_addr: return self._fail(hipErrorInvalidValue, f"{ptr:#x} is not memory of device {d}")
    return self.hipMemcpy(dst, src, n, 3)

  def hipModuleLoadData(self, out: Any, image: Any) -> int:
    if (img := emulatedimage.unpack(bytes(image.raw))) is None:
      return self._fail(hipErrorInvalidImage, "not an emulated image: under MOCKGPU the plugin's compiler makes one (gfx code cannot run here)")
    from tinygrad_amd.mock.shim import host_source
    try: out._obj.value = self._new(_Module(self.current, host_source(img[1]["source"].decode())))
    except ValueError as e: return self._fail(hipErrorInvalidImage, str(e))
    return hipSuccess
  def hipModuleUnload(self, module: Any) -> int:
    if self._get(module, _Module) is None: return self._fail(hipErrorInvalidHandle, "not a loaded module")
    self.handles.pop(int(module.value)).loaded = False
    return hipSuccess
  def hipModuleGetFunction(self, out: Any, module: Any, name: bytes) -> int:
    if (mod := self._get(module, _Module)) is None: return self._fail(hipErrorInvalidHandle, "not a loaded module")
    if (params := c_params(mod.source, name.decode())) is None: return self._fail(hipErrorNotFound, f"no kernel {name.decode()!r} in the module")
    from tinygrad_amd.mock.shim import BARRIER, SHIM
    try: out._obj.value = self._new(_Function(mod, name.decode(), params, HostKernel(SHIM, mod.source, name.decode(), BARRIER)))
    except CompileError as e: return self._fail(hipErrorInvalidImage, str(e))
    return hipSuccess
  def hipModuleLaunchKernel(self, func: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared: int, stream: Any,
                            params: Any, extra: Any) -> int:
    if (f := self._get(func, _Function)) is None or not f.module.loaded:
      return self._fail(hipErrorInvalidHandle, "not a function of a loaded module")
    grid, block = (gx, gy, gz), (bx, by, bz)
    if min(grid + block) < 1 or bx * by * bz > MAX_THREADS: return self._fail(hipErrorInvalidValue, f"{f.name}: grid {grid}, block {block}")
    raw = [int.from_bytes(ctypes.string_at(params[i], size), "little") for i, (size, _) in enumerate(f.params)]
    self.launches += 1
    try: sig = f.kernel.run(grid, block, f.params, raw, self.mem[self.current], int(os.getenv("MOCKGPU_SEED", "0")) + self.launches)
    except DeviceMemoryError as e: return self._fail(hipErrorInvalidValue, f"{f.name}: a pointer argument: {e}")
    if sig:
      self.pending[self.current] = hipErrorIllegalAddress if sig in (signal.SIGSEGV, signal.SIGBUS) else hipErrorLaunchFailure
      self.detail = f"kernel {f.name} raised {signal.Signals(sig).name} on the host (grid {grid}, block {block})"
    return hipSuccess

  def hipEventCreate(self, out: Any) -> int:
    out._obj.value = self._new([None])
    return hipSuccess
  def hipEventRecord(self, ev: Any, stream: Any) -> int:
    if (e := self._get(ev, list)) is None: return self._fail(hipErrorInvalidHandle, "not a live event")
    e[0] = time.perf_counter()
    return hipSuccess
  def hipEventSynchronize(self, ev: Any) -> int:
    return self._sync() if self._get(ev, list) is not None else self._fail(hipErrorInvalidHandle, "not a live event")
  def hipEventElapsedTime(self, out: Any, start: Any, end: Any) -> int:
    s, e = self._get(start, list), self._get(end, list)
    if s is None or e is None or s[0] is None or e[0] is None: return self._fail(hipErrorInvalidHandle, "an event never recorded or destroyed")
    out._obj.value = (e[0] - s[0]) * 1e3
    return hipSuccess
  def hipEventDestroy(self, ev: Any) -> int:
    if self._get(ev, list) is None: return self._fail(hipErrorInvalidHandle, "not a live event")
    del self.handles[int(ev.value)]
    return hipSuccess
