"""The kernels of tinycore_conformance.programs with fixed random inputs, as run on a real GPU once and recorded in
data/h100_programs.npz, so the PTX interpreter is checked bit for bit against the hardware where no GPU is lent.

  python plugins/tinygrad-cuda/tests/gpu_programs.py OUT.npz     (on a machine with an NVIDIA GPU; needs only libcuda)

renders every kernel with our NV renderer and with our CUDA renderer + NVRTC (PTX for sm_80), runs it through the driver
API with inputs made of random bits (NaN payloads, infinities, x/0 and all), and stores each kernel's PTX and, per 256
elements of every buffer afterwards, a SHA-1 digest of the bytes."""
from __future__ import annotations
import ctypes, hashlib, sys
import numpy as np

SLOT = 256

def launch(name: str) -> tuple[tuple[int, int, int], tuple[int, int, int], list[int]]:
  """(grid, block, DEFINE_VAR values) of a programs.suite kernel."""
  if name == "reduce_sum": return (32, 1, 1), (1, 1, 1), [17]
  if name == "gated": return (64, 1, 1), (64, 1, 1), [1000]
  if name.startswith("shared_reverse"): return (8, 1, 1), (64, 1, 1), []
  return ((16, 1, 1), (64, 1, 1), []) if name == "elementwise" else ((4, 1, 1), (64, 1, 1), [])

def inputs(name: str, itemsizes: list[int]) -> list[bytes]:
  """Each buffer's initial bytes: random bits from a seed of the kernel's name and the buffer's number."""
  n = [5120 if name.startswith("all_ops") and i == 0 else 4096 if name in ("gated", "elementwise") else 1024 for i in range(len(itemsizes))]
  return [np.random.default_rng(i + 7 * len(name)).bytes(k * s) for i, (k, s) in enumerate(zip(n, itemsizes))]

def digests(buf: bytes, itemsize: int) -> np.ndarray:
  step = SLOT * itemsize
  return np.array([hashlib.sha1(buf[k:k + step]).hexdigest() for k in range(0, len(buf), step)])

def kernels() -> dict[str, dict[str, tuple[str, list[int]]]]:
  """backend -> kernel name -> (PTX, itemsize of each buffer)."""
  from tinycore_conformance import programs
  from tinygrad_cuda.compiler import NVRTCCompiler
  from tinygrad_cuda.renderer import CUDARenderer
  from tinygrad_nv.ptx import PTXRenderer
  out: dict[str, dict[str, tuple[str, list[int]]]] = {}
  for be, ren in (("NV", PTXRenderer("sm_80")), ("CUDA", CUDARenderer("sm_80"))):
    out[be] = {}
    for name, uops in programs.suite(tuple(ren.supported_dtypes())).items():
      src = ren.render(name, uops)
      if be == "CUDA": src = NVRTCCompiler("sm_80", "ptx").compile(src).rstrip(b"\0").decode()
      out[be][name] = (src, [u.dtype.base.itemsize for u in uops if u.op.name == "DEFINE_GLOBAL"])
  return out

def run_on_gpu(ptx: str, name: str, itemsizes: list[int]) -> list[bytes]:
  cu = ctypes.CDLL("libcuda.so.1")
  def ck(r: int, what: str) -> None:
    if r: raise RuntimeError(f"{what} failed: CUresult {r}")
  ck(cu.cuInit(0), "cuInit")
  dev, ctx, mod, fn = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
  ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
  ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
  ck(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
  ck(cu.cuModuleLoadData(ctypes.byref(mod), ptx.encode() + b"\0"), "cuModuleLoadData")
  ck(cu.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()), "cuModuleGetFunction")
  grid, block, vals = launch(name)
  ptrs = []
  for b in inputs(name, itemsizes):
    p = ctypes.c_uint64()
    ck(cu.cuMemAlloc_v2(ctypes.byref(p), len(b)), "cuMemAlloc")
    ck(cu.cuMemcpyHtoD_v2(p, b, len(b)), "cuMemcpyHtoD")
    ptrs.append((p, len(b)))
  args = [p for p, _ in ptrs] + [ctypes.c_int32(v) for v in vals]
  argv = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
  ck(cu.cuLaunchKernel(fn, *grid, *block, 0, None, argv, None), "cuLaunchKernel")
  ck(cu.cuCtxSynchronize(), "cuCtxSynchronize")
  outs = []
  for p, n in ptrs:
    got = ctypes.create_string_buffer(n)
    ck(cu.cuMemcpyDtoH_v2(got, p, n), "cuMemcpyDtoH")
    outs.append(got.raw)
    cu.cuMemFree_v2(p)
  cu.cuModuleUnload(mod)
  return outs

if __name__ == "__main__":
  rec: dict[str, np.ndarray] = {}
  for be, ks in kernels().items():
    for name, (ptx, sizes) in ks.items():
      rec[f"{be}/{name}/ptx"] = np.array(ptx)
      for i, (b, s) in enumerate(zip(run_on_gpu(ptx, name, sizes), sizes)): rec[f"{be}/{name}/{i}"] = digests(b, s)
  np.savez_compressed(sys.argv[1], **rec)
