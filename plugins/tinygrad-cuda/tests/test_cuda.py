"""tinygrad-cuda: the contract without hardware, compile-only rendering + NVRTC (+ ptxas) on real kernels, and runtime
tests that run on an NVIDIA GPU and skip, saying why, where there is none."""
from __future__ import annotations
import ctypes.util
import pytest
from tinycore.backend import CompileError, DeviceError
from tinycore.dtype import dtypes
from tinycore.ops import Ops
from tinycore_conformance.fixtures import check_declaration, check_gpu_kernels, check_refuses_without_hardware, hardware, run_python
import tinygrad_cuda
from tinygrad_cuda import mock
from tinygrad_cuda.compiler import NVRTCCompiler, PTXASCompiler, find_ptxas, nvrtc_unavailable_reason, nvrtc_version
from tinygrad_cuda.renderer import CUDARenderer

from tinycore_conformance import programs as kernels  # hand-built linear programs every renderer must compile

NVRTC_WHY = nvrtc_unavailable_reason()
needs_nvrtc = pytest.mark.skipif(NVRTC_WHY is not None, reason=f"NVRTC is not usable here: {NVRTC_WHY}")
needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (pip install nvidia-cuda-nvcc-cu12)")
GPU_WHY = tinygrad_cuda.check()
needs_gpu, no_gpu_only = hardware(GPU_WHY, "an NVIDIA GPU")

# *** the contract, no hardware needed ***

def test_declaration():
  check_declaration(tinygrad_cuda, "CUDA")
  if mock.enabled(): assert tinygrad_cuda.tinycore_devices()[0].priority < 0  # emulated: used only when named
  else: assert tinygrad_cuda.tinycore_devices()[0].priority > 10

def test_import_touches_no_driver():
  r = run_python("import sys, tinygrad_cuda; tinygrad_cuda.tinycore_devices(); tinygrad_cuda.make_renderer()\n"
          "print(sorted(m for m in sys.modules if m.startswith('cuda.')))")
  assert r.returncode == 0, r.stderr
  assert r.stdout.strip() == "[]"

def test_reason_without_cuda_bindings():
  r = run_python("import sys; sys.modules['cuda'] = None\nimport tinygrad_cuda; print(tinygrad_cuda.check())")
  assert r.returncode == 0, r.stderr
  assert "cuda-bindings is not installed" in r.stdout

@no_gpu_only
def test_reason_without_driver():
  if ctypes.util.find_library("cuda") is not None: pytest.skip("libcuda is installed here: only the no-GPU reason can be seen")
  assert GPU_WHY.startswith("no libcuda.so: the NVIDIA driver is not installed")

@no_gpu_only
def test_opening_the_device_fails_at_once_with_the_reason():
  check_refuses_without_hardware(tinygrad_cuda, "CUDA", "tinygrad-cuda", GPU_WHY)
  with pytest.raises(DeviceError): tinygrad_cuda.device_index("CUDA:x")

def test_renderer_hook_works_without_gpu(monkeypatch):
  monkeypatch.delenv("CUDA_ARCH", raising=False)
  ren = tinygrad_cuda.tinycore_renderer(device="CUDA")
  assert isinstance(ren, CUDARenderer) and ren.device == "CUDA"
  if GPU_WHY is not None: assert ren.arch == tinygrad_cuda.DEFAULT_ARCH == "sm_80"

def test_cuda_arch_env(monkeypatch):
  for env, arch in (("sm_90", "sm_90"), ("86", "sm_86"), ("8.9", "sm_89")):
    monkeypatch.setenv("CUDA_ARCH", env)
    assert tinygrad_cuda.target_arch("CUDA") == arch and tinygrad_cuda.make_renderer().arch == arch

def test_capabilities():
  r80, r75 = CUDARenderer("sm_80"), CUDARenderer("sm_75")
  assert dtypes.bfloat16 in r80.supported_dtypes() and dtypes.float16 in r80.supported_dtypes()
  assert dtypes.bfloat16 not in r75.supported_dtypes() and dtypes.float16 in r75.supported_dtypes()
  assert set(dtypes.all) == set(r80.supported_dtypes())
  assert r80.has_local and r80.has_shared and r80.local_max == (1024, 1024, 64) and r80.shared_max == 48 * 1024
  assert r80.global_max[0] == 2**31 - 1 and r80.vector_widths == (1,)
  with pytest.raises(ValueError): CUDARenderer("gfx1100")

# *** rendering: what the source must contain ***

def test_render_ids_shared_barrier_launch_bounds():
  src = CUDARenderer().render("rev", kernels.shared_reverse())
  for s in ('extern "C" __global__ void __launch_bounds__(64) rev(', "blockIdx.x", "threadIdx.x", "__shared__ float temp0[64];",
            "__syncthreads();", "const float* data1"):
    assert s in src, (s, src)

def test_render_loop_var_gates():
  src = CUDARenderer().render("red", kernels.reduce_sum())
  assert "const int n)" in src and "for (int ridx0 = 0; ridx0 < n; ridx0++) {" in src and "acc0 = (acc0+val0);" in src
  src = CUDARenderer().render("g", kernels.gated())
  assert "(blockIdx.x*blockDim.x+threadIdx.x)" in src and "__launch_bounds__" not in src and "if (" in src

def test_render_half_bfloat16():
  h = CUDARenderer().render("h", kernels.all_ops(dtypes.float16))
  assert h.startswith("#include <cuda_fp16.h>\n") and "cuda_bf16.h" not in h and "half* data0" in h and "exp2f((float)(val0))" in h
  b = CUDARenderer().render("b", kernels.all_ops(dtypes.bfloat16))
  assert "#include <cuda_bf16.h>" in b and "__nv_bfloat16* data0" in b
  f = CUDARenderer().render("f", kernels.all_ops(dtypes.float32))
  assert "#include" not in f and "exp2f(val0)" in f and "__int_as_float(0x7f800000)" in f
  d = CUDARenderer().render("d", kernels.all_ops(dtypes.float64))
  assert "exp2(val0)" in d and "double* data0" in d

# *** compile-only: every kernel, NVRTC to cubin and to PTX ***

SUITE = kernels.suite(CUDARenderer("sm_80").supported_dtypes())

@needs_nvrtc
@pytest.mark.parametrize("name", list(SUITE))
def test_compile_cubin_and_ptx(name):
  src = CUDARenderer("sm_80").render(name, SUITE[name])
  cubin = NVRTCCompiler("sm_80", "cubin").compile(src)
  assert cubin[:4] == b"\x7fELF" and name.encode() in cubin
  ptx = NVRTCCompiler("sm_80", "ptx").compile(src)
  assert ptx.endswith(b"\0") and b".target sm_80" in ptx and f".entry {name}(".encode() in ptx

@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_75", "sm_86", "sm_89", "sm_90"])
def test_compile_other_archs(arch):
  ren = CUDARenderer(arch)
  for name, uops in kernels.suite(ren.supported_dtypes()).items():
    assert NVRTCCompiler(arch).compile(ren.render(name, uops))[:4] == b"\x7fELF"

@needs_nvrtc
@needs_ptxas
def test_nvrtc_ptx_assembles_with_ptxas():
  ren, nv, asm = CUDARenderer("sm_80"), NVRTCCompiler("sm_80", "ptx"), PTXASCompiler("sm_80")
  for name in ("shared_reverse", "reduce_sum", "all_ops_half", "casts_bfloat16"):
    cubin = asm.compile(nv.compile(ren.render(name, SUITE[name])).rstrip(b"\0").decode())
    assert cubin[:4] == b"\x7fELF"

@needs_nvrtc
def test_core_codegen_kernels_compile():
  """Kernels of the core's own pipeline (locals, grouped reduces, upcasts) render and compile for sm_80 and sm_90."""
  for arch in ("sm_80", "sm_90"):
    progs = kernels.codegen_programs(CUDARenderer(arch))
    assert any("__syncthreads();" in src for src in progs.values())  # a grouped reduce through shared memory
    for name, src in progs.items(): assert NVRTCCompiler(arch).compile(src)[:4] == b"\x7fELF", name

@needs_nvrtc
def test_compile_error_carries_nvrtc_log():
  with pytest.raises(CompileError, match="no_such_function"):
    NVRTCCompiler("sm_80").compile('extern "C" __global__ void k(float* a) { a[0] = no_such_function(); }')

@needs_ptxas
def test_ptxas_error_carries_its_log():
  with pytest.raises(CompileError, match="ptxas"): PTXASCompiler("sm_80").compile(".version 8.0\n.target sm_80\nnot ptx at all\n")

@needs_nvrtc
def test_cachekey_names_toolchain_arch_and_output():
  a, b, c = NVRTCCompiler("sm_80"), NVRTCCompiler("sm_80"), NVRTCCompiler("sm_90", "ptx")
  assert a.cachekey == b.cachekey and a.cachekey != c.cachekey
  major, minor = nvrtc_version()  # the installed toolkit's, whichever it is (12.x here, 13.0 on the H100 machine)
  assert f"nvrtc {major}.{minor}" in a.cachekey and "sm_80" in a.cachekey and "cubin" in a.cachekey and "compute_90" in c.cachekey

@needs_nvrtc
def test_compiler_hook_works_without_gpu(monkeypatch):
  monkeypatch.setenv("CUDA_ARCH", "sm_90")
  c = tinygrad_cuda.tinycore_compiler(device="CUDA")
  if mock.enabled(): c = c.real  # MOCKGPU: NVRTC still compiles, then the emulated image wraps the source
  assert isinstance(c, NVRTCCompiler) and c.arch == "sm_90" and c.output == "cubin"

# *** on the hardware ***

@pytest.fixture(scope="module")
def dev():
  from tinycore.device import Device
  return Device["CUDA"]

@needs_gpu
def test_gpu_kernels_match_numpy():
  check_gpu_kernels("CUDA")

@needs_gpu
def test_gpu_offset_and_transfer(dev):
  al = dev.allocator
  src, dst = al.alloc(64), al.alloc(64)
  al.copyin(src, memoryview(bytes(range(64))))
  al._transfer(dst, src, 64, src_dev=dev, dest_dev=dev)
  out = bytearray(16)
  al.copyout(memoryview(out), al._offset(dst, 16, 32))
  assert bytes(out) == bytes(range(32, 48))

def _negation(dt) -> list:
  p = kernels.Prog()
  g, zero = p.glob(0, dt), p.const(dtypes.int32, 0)
  p.store(g, zero, p.alu(Ops.NEG, dt, p.load(g, zero)))
  return p.uops

@pytest.mark.parametrize("dt, expr", [(dtypes.int8, "((int)((unsigned)(-val0) << 24) >> 24)"),
                                      (dtypes.int16, "((int)((unsigned)(-val0) << 16) >> 16)"),
                                      (dtypes.int32, "((int)((-((unsigned int)(val0)))))")])  # the core's wrapping form
def test_narrow_negation_wraps_without_a_narrow_cast(dt, expr):
  """NVRTC 13.0 on an H100 computed ((short)(-x)) < y with a 32-bit negation and no wrap (-(-32768) < 32766 false;
  conformance level 4, fused -a<b int16): int8/int16 negation is spelled as an unsigned shift pair instead."""
  assert expr in CUDARenderer("sm_90").render("neg", _negation(dt))

@needs_gpu
def test_runtime_edges():
  """Limits, failures, timing and TinyJit through the runtime (on an emulated device, a kernel off its buffer faults too)."""
  from tinycore_conformance.fixtures import check_runtime_edges
  check_runtime_edges("CUDA", out_of_bounds_faults=mock.enabled())
