"""MOCKGPU: the mock CUDA driver (tinygrad_cuda.mock.driver) and the host-source executor, against numpy.

The driver tests call the mock module directly (no environment needed, a fresh driver state each). The runtime tests go
through the plugin's real runtime (Device["CUDA"], TinyJit) and need MOCKGPU=1 in the environment of the whole test
process (the runtime decides once which driver it opens): `MOCKGPU=1 pytest plugins/tinygrad-cuda/tests`."""
from __future__ import annotations
import ctypes, os
import numpy as np
import pytest
from tinycore.backend import DeviceError
from tinycore.dtype import dtypes
from tinycore.runtime import emulatedimage
from tinycore_conformance import programs
from tinygrad_cuda.compiler import nvrtc_unavailable_reason
from tinygrad_cuda.mock import driver as D
from tinygrad_cuda.renderer import CUDARenderer

needs_nvrtc = pytest.mark.skipif(nvrtc_unavailable_reason() is not None, reason=f"NVRTC is not usable here: {nvrtc_unavailable_reason()}")
needs_mockgpu = pytest.mark.skipif(os.getenv("MOCKGPU", "0") in ("", "0"), reason="runs the plugin's runtime on the mock: set MOCKGPU=1")
OK, R = D.CUresult.CUDA_SUCCESS, D.CUresult

@pytest.fixture
def drv(monkeypatch):
  """A fresh mock driver, initialized, with the primary context of device 0 current and 1 MiB of memory."""
  monkeypatch.setenv("MOCKGPU_MEMORY", str(1 << 20))
  monkeypatch.setattr(D, "_state", {"init": False, "ctxs": {}, "current": None, "detail": {}})
  assert D.cuInit(0) == (OK,)
  err, ctx = D.cuDevicePrimaryCtxRetain(D.cuDeviceGet(0)[1])
  assert err == OK and D.cuCtxSetCurrent(ctx) == (OK,)
  return ctx

def upload(x: np.ndarray) -> int:
  err, p = D.cuMemAlloc(max(x.nbytes, 1))
  assert err == OK and D.cuMemcpyHtoD(p, x.ctypes.data, x.nbytes) == (OK,)
  return p

def download(p: int, like: np.ndarray) -> np.ndarray:
  out = np.empty_like(like)
  assert D.cuMemcpyDtoH(out.ctypes.data, p, out.nbytes) == (OK,), D.cuGetErrorString(R.CUDA_ERROR_INVALID_VALUE)
  return out

def function(uops: list, name: str, renderer: CUDARenderer | None = None):
  """Render with the CUDA renderer, compile with NVRTC (the compile-only proof) into an emulated image, load it."""
  from tinygrad_cuda import make_compiler
  from tinycore.runtime.emulatedimage import EmulatedCompiler
  from tinygrad_cuda.mock import executor_unavailable
  if (why := executor_unavailable("host")) is not None: pytest.skip(f"the host-source executor cannot run here: {why}")
  src = (renderer or CUDARenderer("sm_80")).render(name, uops)
  err, mod = D.cuModuleLoadData(EmulatedCompiler(make_compiler("sm_80"), "host").compile(src))
  assert err == OK, D.cuGetErrorString(err)
  err, f = D.cuModuleGetFunction(mod, name.encode())
  assert err == OK, D.cuGetErrorString(err)
  return f

def launch(f, ptrs: list[int], grid=(1, 1, 1), block=(1, 1, 1), vals: tuple[int, ...] = ()) -> tuple:
  args = [ctypes.c_uint64(p) for p in ptrs] + [ctypes.c_int32(v) for v in vals]
  params = (ctypes.c_void_p * max(len(args), 1))(*[ctypes.addressof(a) for a in args])
  return D.cuLaunchKernel(f, *grid, *block, 0, 0, ctypes.addressof(params), 0)

def error_text(err) -> str: return b" ".join(D.cuGetErrorName(err)[1:] + D.cuGetErrorString(err)[1:]).decode()

# *** the driver ***

def test_error_names_and_strings_are_the_real_ones():
  assert D.cuGetErrorName(R.CUDA_ERROR_OUT_OF_MEMORY) == (OK, b"CUDA_ERROR_OUT_OF_MEMORY")
  assert D.cuGetErrorString(R.CUDA_ERROR_ILLEGAL_ADDRESS) == (OK, b"an illegal memory access was encountered")
  assert (int(R.CUDA_ERROR_INVALID_VALUE), int(R.CUDA_ERROR_NO_DEVICE), int(R.CUDA_ERROR_LAUNCH_FAILED)) == (1, 100, 719)

def test_calls_before_init_and_without_context(monkeypatch):
  monkeypatch.setattr(D, "_state", {"init": False, "ctxs": {}, "current": None, "detail": {}})
  assert D.cuDeviceGetCount()[0] == R.CUDA_ERROR_NOT_INITIALIZED
  assert D.cuInit(0) == (OK,)
  assert D.cuMemAlloc(16)[0] == R.CUDA_ERROR_INVALID_CONTEXT
  assert D.cuDeviceGet(1)[0] == R.CUDA_ERROR_INVALID_DEVICE

def test_alloc_free_and_bad_pointers(drv):
  err, p = D.cuMemAlloc(100)
  assert err == OK and int(p) % 256 == 0 and int(p) != 0
  err2, q = D.cuMemAlloc(100)
  assert err2 == OK and abs(int(q) - int(p)) >= 256
  assert D.cuMemFree(p) == (OK,)
  assert D.cuMemFree(p)[0] == R.CUDA_ERROR_INVALID_VALUE  # freed twice
  assert "freed" in error_text(R.CUDA_ERROR_INVALID_VALUE)
  assert D.cuMemFree(D.CUdeviceptr(12345))[0] == R.CUDA_ERROR_INVALID_VALUE  # never the driver's
  assert "not a device address" in error_text(R.CUDA_ERROR_INVALID_VALUE)
  x = np.zeros(4, np.float32)
  assert D.cuMemcpyHtoD(p, x.ctypes.data, 16)[0] == R.CUDA_ERROR_INVALID_VALUE  # copy into freed memory

def test_out_of_memory_at_the_configured_size(drv):
  err, p = D.cuMemAlloc(1 << 19)
  assert err == OK
  assert D.cuMemAlloc((1 << 19) + 1)[0] == R.CUDA_ERROR_OUT_OF_MEMORY
  assert D.cuMemFree(p) == (OK,) and D.cuMemAlloc((1 << 19) + 1)[0] == OK

def test_copies_both_ways_views_and_bounds(drv):
  x = np.arange(64, dtype=np.uint8)
  p = upload(x)
  np.testing.assert_equal(download(p, x), x)
  q = D.cuMemAlloc(64)[1]
  assert D.cuMemcpyDtoD(D.CUdeviceptr(int(q) + 16), D.CUdeviceptr(int(p) + 32), 32) == (OK,)  # interior pointers
  np.testing.assert_equal(download(q, x)[16:48], x[32:64])
  out = np.zeros(65, np.uint8)
  assert D.cuMemcpyDtoH(out.ctypes.data, p, 65)[0] == R.CUDA_ERROR_INVALID_VALUE  # one byte past the end
  assert "past the end" in error_text(R.CUDA_ERROR_INVALID_VALUE)

@needs_nvrtc
def test_kernel_runs_and_matches_numpy(drv):
  a, b = np.random.rand(1024).astype(np.float32), np.random.rand(1024).astype(np.float32)
  pa, pb, out = upload(a), upload(b), D.cuMemAlloc(4096)[1]
  f = function(programs.elementwise(), "ew")
  assert launch(f, [out, pa, pb], (16, 1, 1), (64, 1, 1)) == (OK,) and D.cuCtxSynchronize() == (OK,)
  np.testing.assert_allclose(download(out, a), a + b)

@needs_nvrtc
def test_launch_limits(drv):
  x = np.zeros(1024, np.float32)
  px, out = upload(x), D.cuMemAlloc(4096)[1]
  f = function(programs.elementwise(local=1024, groups=1), "ew")  # i = blockIdx.x*1024 + threadIdx.x: below 1024 here
  for grid, block in (((1, 1, 1), (1025, 1, 1)), ((1, 1, 1), (1, 1, 65)), ((1, 1, 1), (64, 32, 1)), ((1, 65536, 1), (1, 1, 1)),
                      ((0, 1, 1), (1, 1, 1))):
    assert launch(f, [out, px, px], grid, block)[0] == R.CUDA_ERROR_INVALID_VALUE, (grid, block)
    assert "block" in (t := error_text(R.CUDA_ERROR_INVALID_VALUE)) or "grid" in t, t
  for grid, block in (((1, 1, 1), (1024, 1, 1)), ((1, 1, 1), (1, 16, 64)), ((1, 65535, 1), (1, 1, 1))):  # at the limits
    assert launch(f, [out, px, px], grid, block) == (OK,), (grid, block)
  assert D.cuCtxSynchronize() == (OK,)

@needs_nvrtc
def test_pointer_arguments_must_be_live_device_memory(drv):
  f = function(programs.elementwise(), "ew")
  p = D.cuMemAlloc(64)[1]
  D.cuMemFree(p)
  assert launch(f, [p, p, p], (1, 1, 1), (1, 1, 1))[0] == R.CUDA_ERROR_INVALID_VALUE
  assert launch(f, [0x1234, 0x1234, 0x1234], (1, 1, 1), (1, 1, 1))[0] == R.CUDA_ERROR_INVALID_VALUE

@needs_nvrtc
def test_faulting_kernel_fails_the_next_synchronizing_call(drv):
  x = np.zeros(64, np.float32)
  px, py, out = upload(x), upload(x), D.cuMemAlloc(256)[1]
  f = function(programs.elementwise(), "ew")
  assert launch(f, [out, px, py], (16, 1, 1), (64, 1, 1)) == (OK,)  # 1024 work-items write a 64-element buffer
  assert D.cuCtxSynchronize()[0] == R.CUDA_ERROR_ILLEGAL_ADDRESS
  assert "SIGSEGV" in error_text(R.CUDA_ERROR_ILLEGAL_ADDRESS)
  assert D.cuCtxSynchronize() == (OK,)  # reported once

def test_image_that_is_not_emulated_is_refused(drv):
  assert D.cuModuleLoadData(b"\x7fELF a real cubin")[0] == R.CUDA_ERROR_INVALID_IMAGE
  assert "not an emulated image" in error_text(R.CUDA_ERROR_INVALID_IMAGE)
  err, mod = D.cuModuleLoadData(emulatedimage.pack("host", {"source": b'extern "C" __global__ void k(float* data0) {}'}))
  assert err == OK and D.cuModuleGetFunction(mod, b"nope")[0] == R.CUDA_ERROR_NOT_FOUND

def test_events_time_what_runs_between_them(drv):
  s, t = D.cuEventCreate(0)[1], D.cuEventCreate(0)[1]
  assert D.cuEventElapsedTime(s, t)[0] == R.CUDA_ERROR_INVALID_HANDLE  # never recorded
  D.cuEventRecord(s, 0), D.cuEventRecord(t, 0), D.cuEventSynchronize(t)
  err, ms = D.cuEventElapsedTime(s, t)
  assert err == OK and ms >= 0
  assert D.cuEventDestroy(s) == (OK,) and D.cuEventDestroy(s)[0] == R.CUDA_ERROR_INVALID_HANDLE

# *** renderer bugs that compile but compute the wrong thing: only execution catches them ***

@needs_nvrtc
def test_injected_bug_barrier_removed(drv, monkeypatch):
  x = np.arange(512, dtype=np.float32)
  want = x.reshape(8, 64)[:, ::-1].reshape(-1)
  px, out = upload(x), D.cuMemAlloc(2048)[1]
  assert launch(function(programs.shared_reverse(), "rev"), [out, px], (8, 1, 1), (64, 1, 1)) == (OK,)
  np.testing.assert_equal(download(out, x), want)
  monkeypatch.setattr(CUDARenderer, "barrier", "")  # compiles with NVRTC just as well
  assert launch(function(programs.shared_reverse(), "rev_nobarrier"), [out, px], (8, 1, 1), (64, 1, 1)) == (OK,)
  assert not np.array_equal(download(out, x), want), "a missing barrier went unnoticed: the work-items ran in lockstep order"

@needs_nvrtc
def test_injected_bug_index_off_by_one(drv, monkeypatch):
  a, b = np.random.rand(1024).astype(np.float32), np.random.rand(1024).astype(np.float32)
  pa, pb, out = upload(a), upload(b), D.cuMemAlloc(4096)[1]
  off_by_one = {**CUDARenderer.code_for_workitem, "l": lambda d: f"(threadIdx.{'xyz'[d]}+1)"}
  monkeypatch.setattr(CUDARenderer, "code_for_workitem", off_by_one)
  assert launch(function(programs.elementwise(), "ew_off"), [out, pa, pb], (16, 1, 1), (64, 1, 1)) == (OK,)
  err = D.cuCtxSynchronize()[0]
  assert err == R.CUDA_ERROR_ILLEGAL_ADDRESS or not np.allclose(download(out, a), a + b)  # past the end: the guard page

# *** the plugin's runtime above the mock (MOCKGPU=1) ***

@needs_mockgpu
def test_runtime_kernels_match_numpy():
  from tinycore_conformance.fixtures import check_gpu_kernels
  check_gpu_kernels("CUDA")

@needs_mockgpu
def test_runtime_launch_limits_and_failures_are_device_errors():
  from tinycore.device import Device
  dev = Device["CUDA"]
  src = dev.renderer.render("ew", programs.elementwise())
  prg = dev.program(dev.device, "ew", dev.compiler.compile(src))
  bufs = [dev.allocator.alloc(4096) for _ in range(3)]
  assert isinstance(prg(*bufs, global_size=(16, 1, 1), local_size=(64, 1, 1), wait=True), float)
  with pytest.raises(DeviceError, match="exceeds CUDA's 1024"): prg(*bufs, global_size=(1, 1, 1), local_size=(1025, 1, 1))
  with pytest.raises(DeviceError, match="CUDA_ERROR_INVALID_VALUE.*block"): prg(*bufs, global_size=(1, 1, 1), local_size=(1, 1, 65))
  small = dev.allocator.alloc(16)
  with pytest.raises(DeviceError, match="CUDA_ERROR_ILLEGAL_ADDRESS"):
    prg(small, bufs[1], bufs[2], global_size=(16, 1, 1), local_size=(64, 1, 1), wait=True)

@needs_mockgpu
def test_runtime_tinyjit_replays_launchers():
  from tinycore import Tensor
  from tinycore.engine.jit import TinyJit
  @TinyJit
  def step(x: Tensor, w: Tensor) -> Tensor: return ((x @ w).relu() * 2).sum(1).realize()
  rng = np.random.default_rng(0)
  w = rng.standard_normal((16, 8)).astype(np.float32)
  tw = Tensor(w, device="CUDA")
  for _ in range(4):
    x = rng.standard_normal((4, 16)).astype(np.float32)
    np.testing.assert_allclose(step(Tensor(x, device="CUDA"), tw).numpy(), (np.maximum(x.astype(np.float64) @ w, 0) * 2).sum(1), rtol=1e-4)

@needs_mockgpu
def test_devices_lists_the_mock_as_emulated():
  from tinycore_conformance.fixtures import run_python
  r = run_python("from tinycore.__main__ import devices; devices()")
  line = next(ln for ln in r.stdout.splitlines() if ln.startswith("CUDA "))
  assert " ok " in line and "emulated: mock CUDA driver" in line, r.stdout

@needs_nvrtc
def test_half_rounds_like_the_gpu(drv):
  """A half sum computed in the executor rounds at each step (no excess precision): 2048 + 1 stays 2048 in half."""
  x = np.array([2048, 1, 1, 1], np.float16)
  px, out = upload(x), D.cuMemAlloc(8)[1]
  f = function(programs.reduce_sum(dtypes.float16), "rs_half")
  assert launch(f, [out, px], (1, 1, 1), (1, 1, 1), vals=(4,)) == (OK,)
  want = np.float16(0)
  for v in x: want = np.float16(want + v)
  assert download(out, x)[0] == want

@needs_nvrtc
def test_launch_past_the_kernels_launch_bounds_is_refused(drv):
  """A kernel rendered for 64 threads a block (__launch_bounds__(64)) launched with 1024: the H100 returned
  CUDA_ERROR_INVALID_VALUE; the mock ran it until it read the bound."""
  f = function(programs.elementwise(), "lb")
  ptrs = [upload(np.zeros(1024, np.float32)) for _ in range(3)]
  assert launch(f, ptrs, block=(64, 1, 1))[0] == OK
  err = launch(f, ptrs, block=(1024, 1, 1))[0]
  assert err == R.CUDA_ERROR_INVALID_VALUE and "compiled for at most 64" in error_text(err)
