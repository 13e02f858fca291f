"""A stand-in for cuda-bindings' `cuda.bindings.driver` module (MOCKGPU=1): the functions our runtime calls, returning
(CUresult, *values) tuples with the real enum names and codes. Device memory is host memory (memory.py); a kernel is an
emulated image (tinycore.runtime.emulatedimage) that a host-source or PTX executor runs on the CPU.

What it enforces, as the real driver does:
  - cuInit before anything (CUDA_ERROR_NOT_INITIALIZED), a current context for memory, modules and launches
    (CUDA_ERROR_INVALID_CONTEXT), device ordinals (CUDA_ERROR_INVALID_DEVICE);
  - allocations past MOCKGPU_MEMORY (CUDA_ERROR_OUT_OF_MEMORY); frees and copies of freed or foreign pointers, and copies
    past the end of an allocation (CUDA_ERROR_INVALID_VALUE);
  - launch sizes: a block of at most 1024 threads and (1024, 1024, 64) per dim, a grid of at most (2^31-1, 65535, 65535),
    none 0 (CUDA_ERROR_INVALID_VALUE); kernel pointer arguments that are not live device memory (CUDA_ERROR_INVALID_VALUE);
  - an image that is not an emulated image (a real cubin: CUDA_ERROR_INVALID_IMAGE), a kernel name not in it
    (CUDA_ERROR_NOT_FOUND), handles used after unload or destroy (CUDA_ERROR_INVALID_HANDLE).
Kernels run when launched (the launch is synchronous); a kernel that faults (an illegal address, a trap) makes the next
synchronizing call (cuCtxSynchronize, cuEventSynchronize, a cuMemcpy) fail with CUDA_ERROR_ILLEGAL_ADDRESS or
CUDA_ERROR_LAUNCH_FAILED, once: unlike a real context, this one stays usable after. cuGetErrorString adds, after the
driver's own words, what the mock found (which argument, which address), so a failure says why."""
from __future__ import annotations
import ctypes, enum, os, re, time
from typing import Any
from tinycore.runtime import emulatedimage
from tinycore.runtime.hostgrid import c_params
from tinycore.backend import CompileError
from tinygrad_cuda.mock import execute, executor_unavailable
from tinygrad_cuda.mock.memory import DeviceMemory, DeviceMemoryError

class CUresult(enum.IntEnum):
  CUDA_SUCCESS = 0
  CUDA_ERROR_INVALID_VALUE = 1
  CUDA_ERROR_OUT_OF_MEMORY = 2
  CUDA_ERROR_NOT_INITIALIZED = 3
  CUDA_ERROR_NO_DEVICE = 100
  CUDA_ERROR_INVALID_DEVICE = 101
  CUDA_ERROR_INVALID_IMAGE = 200
  CUDA_ERROR_INVALID_CONTEXT = 201
  CUDA_ERROR_INVALID_HANDLE = 400
  CUDA_ERROR_NOT_FOUND = 500
  CUDA_ERROR_NOT_READY = 600
  CUDA_ERROR_ILLEGAL_ADDRESS = 700
  CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701
  CUDA_ERROR_MISALIGNED_ADDRESS = 716
  CUDA_ERROR_LAUNCH_FAILED = 719
  CUDA_ERROR_NOT_SUPPORTED = 801

_STRINGS = {0: "no error", 1: "invalid argument", 2: "out of memory", 3: "initialization error",
            100: "no CUDA-capable device is detected", 101: "invalid device ordinal", 200: "device kernel image is invalid",
            201: "invalid device context", 400: "invalid resource handle", 500: "named symbol not found",
            600: "device not ready", 700: "an illegal memory access was encountered",
            701: "too many resources requested for launch", 716: "misaligned address", 719: "unspecified launch failure",
            801: "operation not supported"}

class CUdevice_attribute(enum.IntEnum):
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76

class CUdeviceptr(int):
  """A device address (cuda-bindings' CUdeviceptr converts to int the same way)."""

class CUdevice(int): pass

MAX_BLOCK, MAX_GRID, MAX_THREADS = (1024, 1024, 64), (2**31 - 1, 65535, 65535), 1024
CAPABILITY = (8, 0)

class CUcontext:
  def __init__(self, dev: int):
    self.dev, self.mem = dev, DeviceMemory(int(os.getenv("MOCKGPU_MEMORY", str(8 << 30))), dev)
    self.pending: CUresult | None = None  # a kernel's fault, reported by the next synchronizing call
    self.launches = 0
  def __repr__(self) -> str: return f"<mock CUcontext of device {self.dev}>"

class CUmodule:
  def __init__(self, ctx: CUcontext, executor: str, sections: dict[str, bytes]):
    self.ctx, self.executor, self.sections, self.loaded = ctx, executor, sections, True

class CUfunction:
  """A kernel of a module: its parameters (size in bytes, is a pointer) and how it executes."""
  def __init__(self, module: CUmodule, name: str, params: list[tuple[int, bool]]):
    self.module, self.name, self.params = module, name, params
    self.kernel = execute.load(module.executor, module.sections, name)
    self.max_threads = _max_threads(module.sections, name)

def _max_threads(sections: dict[str, bytes], name: str) -> int:
  """The block size the kernel was compiled for (CUDA C __launch_bounds__, PTX .maxntid), else the device's limit: the
  driver refuses a larger block with CUDA_ERROR_INVALID_VALUE (seen on an H100; the mock once ran such a launch)."""
  for text in (sections.get("source", b""), sections.get("ptx", b"")):
    src = text.decode(errors="replace")
    m = re.search(rf"__launch_bounds__\((\d+)\)\s*{re.escape(name)}\(", src) or \
        re.search(rf"\.entry\s+{re.escape(name)}\s*\([^)]*\)\s*\.maxntid\s+(\d+),\s*(\d+),\s*(\d+)", src)
    if m: return int(m.group(1)) * (int(m.group(2)) * int(m.group(3)) if m.lastindex == 3 else 1)
  return MAX_THREADS

class CUevent:
  def __init__(self): self.time, self.alive = None, True

_state: dict[str, Any] = {"init": False, "ctxs": {}, "current": None, "detail": {}}

def _fail(err: CUresult, detail: str) -> tuple:
  _state["detail"][err] = detail
  return (err,)

def _ok(*vals: Any) -> tuple: return (CUresult.CUDA_SUCCESS, *vals)

def _ctx() -> CUcontext | None: return _state["current"] if _state["init"] else None

def _device_count() -> int: return int(os.getenv("MOCKGPU_DEVICES", "1"))

# *** errors, init, devices, contexts ***

def cuGetErrorName(err: Any) -> tuple:
  try: return _ok(CUresult(err).name.encode())
  except ValueError: return (CUresult.CUDA_ERROR_INVALID_VALUE, None)

def cuGetErrorString(err: Any) -> tuple:
  if int(err) not in _STRINGS: return (CUresult.CUDA_ERROR_INVALID_VALUE, None)
  detail = _state["detail"].pop(CUresult(err), None)
  return _ok((_STRINGS[int(err)] + (f" (mock driver: {detail})" if detail else "")).encode())

def cuInit(flags: int) -> tuple:
  if _device_count() == 0: return (CUresult.CUDA_ERROR_NO_DEVICE,)
  _state["init"] = True
  return _ok()

def _need_init() -> tuple | None: return None if _state["init"] else _fail(CUresult.CUDA_ERROR_NOT_INITIALIZED, "cuInit was not called")

def cuDeviceGetCount() -> tuple: return _need_init() or _ok(_device_count())

def cuDeviceGet(ordinal: int) -> tuple:
  if (e := _need_init()): return e
  if not 0 <= ordinal < _device_count(): return _fail(CUresult.CUDA_ERROR_INVALID_DEVICE, f"device {ordinal} of {_device_count()}")
  return _ok(CUdevice(ordinal))

def cuDeviceGetAttribute(attr: CUdevice_attribute, dev: CUdevice) -> tuple:
  if (e := _need_init()): return e
  values = {CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: MAX_THREADS,
            CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: CAPABILITY[0],
            CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: CAPABILITY[1]}
  return _ok(values[attr]) if attr in values else _fail(CUresult.CUDA_ERROR_INVALID_VALUE, f"attribute {attr} is not emulated")

def cuDeviceGetName(length: int, dev: CUdevice) -> tuple:
  if (e := _need_init()): return e
  return _ok(f"tinycore mock GPU {int(dev)} (sm_{CAPABILITY[0]}{CAPABILITY[1]})".encode()[:length - 1].ljust(length, b"\0"))

def cuDevicePrimaryCtxRetain(dev: CUdevice) -> tuple:
  if (e := _need_init()): return e
  if not 0 <= int(dev) < _device_count(): return _fail(CUresult.CUDA_ERROR_INVALID_DEVICE, f"device {int(dev)}")
  return _ok(_state["ctxs"].setdefault(int(dev), CUcontext(int(dev))))

def cuCtxSetCurrent(ctx: CUcontext) -> tuple:
  if (e := _need_init()): return e
  if not isinstance(ctx, CUcontext): return _fail(CUresult.CUDA_ERROR_INVALID_CONTEXT, f"{ctx!r} is not a context")
  _state["current"] = ctx
  return _ok()

def _sync(ctx: CUcontext) -> tuple:
  """What a synchronizing call returns: a pending kernel fault once, else success."""
  err, ctx.pending = ctx.pending, None
  return (err,) if err is not None else _ok()

def cuCtxSynchronize() -> tuple:
  if (ctx := _ctx()) is None: return _fail(CUresult.CUDA_ERROR_INVALID_CONTEXT, "no current context")
  return _sync(ctx)

# *** memory ***

def cuMemAlloc(nbytes: int) -> tuple:
  if (ctx := _ctx()) is None: return _fail(CUresult.CUDA_ERROR_INVALID_CONTEXT, "no current context")
  if nbytes == 0: return _fail(CUresult.CUDA_ERROR_INVALID_VALUE, "cuMemAlloc of 0 bytes")
  try: return _ok(CUdeviceptr(ctx.mem.alloc(nbytes)))
  except MemoryError as e: return _fail(CUresult.CUDA_ERROR_OUT_OF_MEMORY, str(e))

def cuMemFree(ptr: Any) -> tuple:
  if (ctx := _ctx()) is None: return _fail(CUresult.CUDA_ERROR_INVALID_CONTEXT, "no current context")
  try: ctx.mem.free(int(ptr))
  except DeviceMemoryError as e: return _fail(CUresult.CUDA_ERROR_INVALID_VALUE, str(e))
  return _ok()

def _owner(ptr: int) -> CUcontext | None:
  return next((c for c in _state["ctxs"].values() if c.mem.base <= ptr < c.mem.next_addr), None)

def _span(ptr: Any, nbytes: int, what: str) -> tuple[CUcontext, ctypes.Array] | tuple:
  """The context owning [ptr, ptr+nbytes) and those bytes as a ctypes array, or a failure tuple."""
  ctx = _owner(int(ptr)) or _ctx()
  if ctx is None: return _fail(CUresult.CUDA_ERROR_INVALID_CONTEXT, "no current context")
  try:
    ctx.mem.check_range(int(ptr), nbytes)
    return ctx, (ctypes.c_uint8 * nbytes).from_address(ctx.mem.host_address(int(ptr)))
  except DeviceMemoryError as e: return _fail(CUresult.CUDA_ERROR_INVALID_VALUE, f"{what}: {e}")

def _copy(dst: Any, src: Any, nbytes: int, what: str, dst_dev: bool, src_dev: bool) -> tuple:
  if (ctx := _ctx()) is None: return _fail(CUresult.CUDA_ERROR_INVALID_CONTEXT, "no current context")
  if (err := _sync(ctx))[0] != CUresult.CUDA_SUCCESS: return err
  if nbytes == 0: return _ok()
  spans = []
  for ptr, on_dev in ((dst, dst_dev), (src, src_dev)):
    if not on_dev: spans.append((ctypes.c_uint8 * nbytes).from_address(int(ptr)))
    elif len(r := _span(ptr, nbytes, what)) == 1: return r
    else: spans.append(r[1])
  ctypes.memmove(spans[0], spans[1], nbytes)
  return _ok()

def cuMemcpyHtoD(dst: Any, src: int, nbytes: int) -> tuple: return _copy(dst, src, nbytes, "cuMemcpyHtoD destination", True, False)
def cuMemcpyDtoH(dst: int, src: Any, nbytes: int) -> tuple: return _copy(dst, src, nbytes, "cuMemcpyDtoH source", False, True)
def cuMemcpyDtoD(dst: Any, src: Any, nbytes: int) -> tuple: return _copy(dst, src, nbytes, "cuMemcpyDtoD", True, True)
def cuMemcpyPeer(dst: Any, dst_ctx: CUcontext, src: Any, src_ctx: CUcontext, nbytes: int) -> tuple:
  for ptr, c in ((dst, dst_ctx), (src, src_ctx)):
    if _owner(int(ptr)) is not c: return _fail(CUresult.CUDA_ERROR_INVALID_VALUE, f"cuMemcpyPeer: {int(ptr):#x} is not memory of {c!r}")
  return _copy(dst, src, nbytes, "cuMemcpyPeer", True, True)

# *** modules and launches ***

def _entry_params(executor: str, sections: dict[str, bytes], name: str) -> list[tuple[int, bool]] | None:
  """(size, is a pointer) of each parameter of kernel `name`, from the CUDA C signature or the PTX entry; None: no such kernel."""
  if executor == "host" or "ptx" not in sections:
    return c_params(sections["source"].decode(), name)
  ptx = sections["ptx"].decode()
  if (m := re.search(rf"\.entry\s+{re.escape(name)}\s*\(([^)]*)\)", ptx)) is None: return None
  return [(int(bits) // 8, False) for bits in re.findall(r"\.param\s+\.[a-z]+?(\d+)", m.group(1))]

def cuModuleLoadData(image: bytes) -> tuple:
  if (ctx := _ctx()) is None: return _fail(CUresult.CUDA_ERROR_INVALID_CONTEXT, "no current context")
  if (img := emulatedimage.unpack(bytes(image))) is None:
    return _fail(CUresult.CUDA_ERROR_INVALID_IMAGE, "not an emulated image: under MOCKGPU the plugin's compiler makes one (a cubin cannot run here)")
  executor, sections = img
  if executor == "ptx" and "ptx" not in sections: sections = {**sections, "ptx": sections["source"]}  # NV: the source is PTX
  if (why := executor_unavailable(executor)) is not None: return _fail(CUresult.CUDA_ERROR_NOT_SUPPORTED, why)
  return _ok(CUmodule(ctx, executor, sections))

def cuModuleUnload(module: CUmodule) -> tuple:
  if not isinstance(module, CUmodule) or not module.loaded: return _fail(CUresult.CUDA_ERROR_INVALID_HANDLE, "module unloaded twice")
  module.loaded = False
  return _ok()

def cuModuleGetFunction(module: CUmodule, name: bytes) -> tuple:
  if not isinstance(module, CUmodule) or not module.loaded: return _fail(CUresult.CUDA_ERROR_INVALID_HANDLE, "not a loaded module")
  if (params := _entry_params(module.executor, module.sections, name.decode())) is None:
    return _fail(CUresult.CUDA_ERROR_NOT_FOUND, f"no kernel {name.decode()!r} in the module")
  try: return _ok(CUfunction(module, name.decode(), params))
  except CompileError as e: return _fail(CUresult.CUDA_ERROR_INVALID_IMAGE, str(e))

def _check_launch(grid: tuple[int, ...], block: tuple[int, ...]) -> str | None:
  if any(g < 1 or g > m for g, m in zip(grid, MAX_GRID)): return f"grid {grid} outside 1..{MAX_GRID}"
  if any(b < 1 or b > m for b, m in zip(block, MAX_BLOCK)): return f"block {block} outside 1..{MAX_BLOCK}"
  if block[0] * block[1] * block[2] > MAX_THREADS: return f"block {block} has {block[0] * block[1] * block[2]} threads, more than {MAX_THREADS}"
  return None

def cuLaunchKernel(f: CUfunction, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared: int, stream: Any,
                   kernel_params: int, extra: Any) -> tuple:
  if (ctx := _ctx()) is None: return _fail(CUresult.CUDA_ERROR_INVALID_CONTEXT, "no current context")
  if not isinstance(f, CUfunction) or not f.module.loaded: return _fail(CUresult.CUDA_ERROR_INVALID_HANDLE, "not a function of a loaded module")
  if f.module.ctx is not ctx: return _fail(CUresult.CUDA_ERROR_INVALID_CONTEXT, "the function's module belongs to another context")
  grid, block = (gx, gy, gz), (bx, by, bz)
  if (why := _check_launch(grid, block)): return _fail(CUresult.CUDA_ERROR_INVALID_VALUE, f"{f.name}: {why}")
  if bx * by * bz > f.max_threads:
    why = f"block {block} has {bx * by * bz} threads, the kernel was compiled for at most {f.max_threads}"
    return _fail(CUresult.CUDA_ERROR_INVALID_VALUE, f"{f.name}: {why}")
  if f.params and not kernel_params:
    return _fail(CUresult.CUDA_ERROR_INVALID_VALUE, f"{f.name} takes {len(f.params)} arguments, kernelParams is NULL")
  ptrs = (ctypes.c_void_p * max(len(f.params), 1)).from_address(int(kernel_params)) if f.params else []
  raw = [int.from_bytes(ctypes.string_at(ptrs[i], size), "little") for i, (size, _) in enumerate(f.params)]
  ctx.launches += 1
  seed = int(os.getenv("MOCKGPU_SEED", "0")) + ctx.launches
  try: fault = execute.run(f.kernel, f.name, f.params, ctx.mem, grid, block, raw, seed)
  except DeviceMemoryError as e: return _fail(CUresult.CUDA_ERROR_INVALID_VALUE, f"{f.name}: a pointer argument: {e}")
  if fault is not None:
    ctx.pending = CUresult[fault[0]]
    _state["detail"][ctx.pending] = fault[1]
  return _ok()

# *** events ***

def cuEventCreate(flags: int) -> tuple:
  return _ok(CUevent()) if _ctx() is not None else _fail(CUresult.CUDA_ERROR_INVALID_CONTEXT, "no current context")

def cuEventRecord(ev: CUevent, stream: Any) -> tuple:
  if not isinstance(ev, CUevent) or not ev.alive: return _fail(CUresult.CUDA_ERROR_INVALID_HANDLE, "not a live event")
  ev.time = time.perf_counter()
  return _ok()

def cuEventSynchronize(ev: CUevent) -> tuple:
  if not isinstance(ev, CUevent) or not ev.alive: return _fail(CUresult.CUDA_ERROR_INVALID_HANDLE, "not a live event")
  return _sync(_ctx()) if _ctx() is not None else _ok()

def cuEventElapsedTime(start: CUevent, end: CUevent) -> tuple:
  if any(not isinstance(e, CUevent) or not e.alive for e in (start, end)):
    return _fail(CUresult.CUDA_ERROR_INVALID_HANDLE, "not a live event")
  if start.time is None or end.time is None: return _fail(CUresult.CUDA_ERROR_INVALID_HANDLE, "an event that was never recorded")
  return _ok((end.time - start.time) * 1e3)

def cuEventDestroy(ev: CUevent) -> tuple:
  if not isinstance(ev, CUevent) or not ev.alive: return _fail(CUresult.CUDA_ERROR_INVALID_HANDLE, "event destroyed twice")
  ev.alive = False
  return _ok()
