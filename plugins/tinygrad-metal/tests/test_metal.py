"""tinygrad-metal: the contract, the MSL the renderer emits, and metal-syntax-check (every kernel compiled as C++ against
our stand-in <metal_stdlib>: a syntax and type check, nothing runs). On macOS with a GPU the runtime tests run instead of
skipping."""
from __future__ import annotations
import sys
import numpy as np
import pytest
from tinycore.backend import CompileError
from tinycore.dtype import dtypes
from tinycore_conformance.fixtures import check_declaration, check_refuses_without_hardware, hardware, run_python
import tinygrad_metal
from tinygrad_metal import mock
from tinygrad_metal.compiler import MetalSyntaxCheckCompiler, syntax_check_unavailable_reason
from tinygrad_metal.renderer import MetalRenderer

from tinycore_conformance import programs as kernels  # hand-built linear programs every renderer must compile

CXX_WHY = syntax_check_unavailable_reason()
needs_cxx = pytest.mark.skipif(CXX_WHY is not None, reason=f"metal-syntax-check unavailable: {CXX_WHY}")
GPU_WHY = tinygrad_metal.check()
needs_gpu, no_gpu_only = hardware(GPU_WHY, "a Mac with a Metal GPU")

# *** contract ***

def test_declaration():
  check_declaration(tinygrad_metal, "METAL")

def test_import_touches_no_pyobjc():
  r = run_python("import sys, tinygrad_metal; tinygrad_metal.tinycore_devices(); tinygrad_metal.make_renderer(); tinygrad_metal.check()\n"
          "print('Metal' in sys.modules or 'objc' in sys.modules)")
  assert r.returncode == 0, r.stderr
  assert r.stdout.strip() == ("True" if sys.platform == "darwin" else "False")

@pytest.mark.skipif(sys.platform == "darwin", reason="on macOS the reason is about PyObjC or the GPU")
@pytest.mark.skipif(mock.enabled(), reason="MOCKGPU: the emulated Metal opens on any OS")
def test_reason_off_macos():
  assert GPU_WHY == "Metal needs macOS"

@no_gpu_only
def test_opening_the_device_fails_at_once_with_the_reason():
  check_refuses_without_hardware(tinygrad_metal, "METAL", "tinygrad-metal", GPU_WHY)

def test_capabilities():
  r = tinygrad_metal.tinycore_renderer(device="METAL")
  assert isinstance(r, MetalRenderer) and dtypes.float64 not in r.supported_dtypes() and dtypes.bfloat16 in r.supported_dtypes()
  assert r.local_max[0] == 1024 and r.shared_max == 32 * 1024 and r.has_shared

@needs_cxx
@pytest.mark.skipif(sys.platform == "darwin", reason="on macOS the compiler hook gives Apple's compiler")
def test_compiler_hook_is_syntax_check_off_macos():
  assert isinstance(tinygrad_metal.tinycore_compiler(device="METAL"), MetalSyntaxCheckCompiler)

# *** rendering ***

def test_render_kernel_signature_threadgroup_memory_barrier():
  src = MetalRenderer().render("rev", kernels.shared_reverse())
  for s in ("#include <metal_stdlib>\nusing namespace metal;\n", "kernel void rev(device float* data0 [[buffer(0)]], "
            "device const float* data1 [[buffer(1)]], uint3 gid [[threadgroup_position_in_grid]], uint3 lid [[thread_position_in_threadgroup]]",
            "int gidx0 = gid.x;", "int lidx0 = lid.x;", "threadgroup float temp0[64];", "threadgroup_barrier(mem_flags::mem_threadgroup);"):
    assert s in src, (s, src)
  red = MetalRenderer().render("red", kernels.reduce_sum())
  assert "constant int& n [[buffer(2)]]" in red and "for (int ridx0 = 0; ridx0 < n; ridx0++)" in red
  assert "int idx0 = tid.x;" in MetalRenderer().render("g", kernels.gated())

def test_render_half_bfloat_bitcast():
  h = MetalRenderer().render("h", kernels.all_ops(dtypes.float16))
  assert "device half* data0" in h and "((half)exp2((float)(val0)))" in h and "INFINITY" in h
  assert "device bfloat* data0" in MetalRenderer().render("b", kernels.all_ops(dtypes.bfloat16))
  c = MetalRenderer().render("c", kernels.casts(dtypes.float32, (dtypes.float32, dtypes.int32, dtypes.uint32)))
  assert "as_type<int>(cast0)" in c and "as_type<uint>(cast1)" in c

# *** metal-syntax-check ***

SUITE = kernels.suite(MetalRenderer().supported_dtypes())

@needs_cxx
@pytest.mark.parametrize("name", list(SUITE))
def test_every_kernel_passes_metal_syntax_check(name):
  src = MetalRenderer().render(name, SUITE[name])
  assert MetalSyntaxCheckCompiler().compile(src) == src.encode()

@needs_cxx
def test_core_codegen_kernels_pass_metal_syntax_check():
  progs = kernels.codegen_programs(MetalRenderer())
  assert any("threadgroup_barrier(mem_flags::mem_threadgroup);" in src for src in progs.values())
  for src in progs.values(): MetalSyntaxCheckCompiler().compile(src)

@needs_cxx
def test_syntax_check_rejects_what_metal_would():
  good = MetalRenderer().render("rev", kernels.shared_reverse())
  comp = MetalSyntaxCheckCompiler()
  for bad, why in ((good.replace("mem_flags::mem_threadgroup", "mem_threadgroup"), "mem_threadgroup"),
                   (good.replace("float val1", "flaot val1"), "flaot"),
                   (good.replace("temp0[lidx0] = val0;", "temp0[lidx0] = as_type<half>(val0);"), "as_type"),
                   (good.replace("uint3 gid", "uint2 gid"), "uint2")):
    with pytest.raises(CompileError, match=why): comp.compile(bad)

@needs_cxx
def test_cachekey_names_the_check():
  k = MetalSyntaxCheckCompiler().cachekey
  assert k.startswith("metal-syntax-check ") and k == MetalSyntaxCheckCompiler().cachekey

# *** on a Mac ***

@needs_gpu
def test_gpu_elementwise_and_shared():
  from tinycore.device import Device
  dev = Device["METAL"]
  prg = dev.program(dev.device, "rev", dev.compiler.compile(dev.renderer.render("rev", kernels.shared_reverse())))
  x = np.arange(512, dtype=np.float32)
  out, inp = dev.allocator.alloc(2048), dev.allocator.alloc(2048)
  dev.allocator.copyin(inp, memoryview(x).cast("B"))
  assert prg(out, inp, global_size=(8, 1, 1), local_size=(64, 1, 1), wait=True) > 0
  res = bytearray(2048)
  dev.allocator.copyout(memoryview(res), out)
  np.testing.assert_equal(np.frombuffer(res, np.float32), x.reshape(8, 64)[:, ::-1].reshape(-1))

@needs_gpu
def test_runtime_edges():
  """Limits, failures, timing and TinyJit through the runtime (on an emulated device, a kernel off its buffer faults too)."""
  from tinycore_conformance.fixtures import check_runtime_edges
  check_runtime_edges("METAL", out_of_bounds_faults=mock.enabled())
