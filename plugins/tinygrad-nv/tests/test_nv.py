"""tinygrad-nv: the contract without hardware, our PTX renderer on the shared hand-built kernels assembled by ptxas for
several architectures, the f64 math sequences evaluated on the host instruction by instruction, and runtime tests that
run on an NVIDIA GPU and skip, saying why, where there is none."""
from __future__ import annotations
import ctypes.util, re
import numpy as np
import pytest
from tinycore.backend import CompileError
from tinycore.dtype import dtypes
from tinycore.ops import Ops
from tinycore_conformance.fixtures import check_declaration, check_gpu_kernels, check_refuses_without_hardware, hardware, run_kernel, run_python
import tinygrad_nv
from tinygrad_cuda import mock
from tinygrad_cuda.compiler import PTXASCompiler, find_ptxas, ptxas_version
from tinygrad_nv import f64math
from tinygrad_nv.ptx import PTXRenderer, ptx_version

from tinycore_conformance import programs as kernels  # hand-built linear programs every renderer must compile

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (pip install nvidia-cuda-nvcc-cu12)")
GPU_WHY = tinygrad_nv.check()
needs_gpu, no_gpu_only = hardware(GPU_WHY, "an NVIDIA GPU")

# *** contract ***

def test_declaration_and_dependency_not_copy():
  check_declaration(tinygrad_nv, "NV")
  if find_ptxas(): assert type(tinygrad_nv.make_compiler("sm_80")) is PTXASCompiler  # tinygrad-cuda's, by dependency

def test_import_touches_no_driver():
  r = run_python("import sys, tinygrad_nv; tinygrad_nv.tinycore_devices(); tinygrad_nv.make_renderer('sm_80')\n"
          "print(sorted(m for m in sys.modules if m.startswith('cuda.')))")
  assert r.returncode == 0, r.stderr
  assert r.stdout.strip() == "[]"

@no_gpu_only
def test_reason_and_opening_without_hardware():
  if ctypes.util.find_library("cuda") is None: assert GPU_WHY.startswith("no libcuda.so: the NVIDIA driver is not installed")
  check_refuses_without_hardware(tinygrad_nv, "NV", "tinygrad-nv", GPU_WHY)

def test_renderer_without_gpu_and_capabilities(monkeypatch):
  monkeypatch.delenv("CUDA_ARCH", raising=False)
  r = tinygrad_nv.tinycore_renderer(device="NV")
  assert isinstance(r, PTXRenderer) and r.device == "NV"
  if GPU_WHY is not None: assert r.arch == "sm_80"
  assert dtypes.bfloat16 in PTXRenderer("sm_80").supported_dtypes() and dtypes.bfloat16 not in PTXRenderer("sm_75").supported_dtypes()
  assert set(PTXRenderer("sm_90").supported_dtypes()) == set(dtypes.all)
  monkeypatch.setenv("CUDA_ARCH", "90")
  assert tinygrad_nv.tinycore_renderer(device="NV:0").arch == "sm_90"
  assert [ptx_version(a) for a in ("sm_75", "sm_90", "sm_100", "sm_120")] == ["7.8", "7.8", "8.6", "8.7"]

# *** the PTX text ***

def test_render_structure():
  src = PTXRenderer("sm_80").render("rev", kernels.shared_reverse())
  for s in (".version 7.8\n.target sm_80\n.address_size 64", ".visible .entry rev(", ".param .u64 data0", ".param .u64 data1",
            ".maxntid 64, 1, 1", "mov.u32 %r", "%ctaid.x", "%tid.x", ".shared .align 16 .b8 temp0[256];", "mov.u64 %rd", "temp0;",
            "st.shared.f32", "bar.sync 0;", "ld.shared.f32", "cvta.to.global.u64", "ld.global.f32", "st.global.f32", "ret;"):
    assert s in src, (s, src)

def test_render_loop_var_gate_and_hoisted_constants():
  src = PTXRenderer().render("red", kernels.reduce_sum())
  assert ".param .s32 var_n" in src and "ld.param.s32" in src and "LOOP_0:" in src and "bra END_0;" in src and "END_0:" in src
  assert src.index("mov.f32 %f0, 0f00000000") < src.index("LOOP_0:")  # a zero-trip loop leaves no constant undefined
  g = PTXRenderer().render("g", kernels.gated())
  assert re.search(r"@%p\d+ ld\.global\.f32", g) and re.search(r"@%p\d+ st\.global\.f32", g) and "mad.lo.s32" in g and ".maxntid" not in g

def test_params_in_launch_order():
  """The runner passes buffers by number, then variables by name, whatever order the linearizer listed them in. The NV
  renderer once declared them in list order: on an H100 `a - b` came out as `b - a` (found by conformance level 4)."""
  i32 = dtypes.int32
  p = kernels.Prog()
  g2, g0, g1 = p.glob(2, i32), p.glob(0, i32), p.glob(1, i32)
  n, m = p(Ops.DEFINE_VAR, i32, arg=("n", 1, 9)), p(Ops.DEFINE_VAR, i32, arg=("m", 1, 9))
  zero = p.const(i32, 0)
  p.store(g0, zero, p.alu(Ops.ADD, i32, p.alu(Ops.ADD, i32, p.load(g1, zero), p.load(g2, zero)), p.alu(Ops.ADD, i32, n, m)))
  src = PTXRenderer("sm_80").render("order", p.uops)
  params = re.findall(r"\.param \.\w+ (\w+)", src)
  assert params == ["data0", "data1", "data2", "var_m", "var_n"], params
  if find_ptxas(): assert PTXASCompiler("sm_80").compile(src)[:4] == b"\x7fELF"

def test_render_dtypes():
  ren = PTXRenderer("sm_80")
  h = ren.render("h", kernels.all_ops(dtypes.float16))
  assert "ld.global.b16" in h and "cvt.f32.f16" in h and "cvt.rn.f16.f32" in h and "ex2.approx.f32" in h
  b = ren.render("b", kernels.all_ops(dtypes.bfloat16))
  assert "cvt.rn.bf16.f32" in b and "shl.b32" in b
  d = ren.render("d", kernels.all_ops(dtypes.float64))
  assert "fma.rn.f64" in d and "cvt.rni.f64.f64" in d and "sqrt.rn.f64" in d and "call" not in d
  i8 = ren.render("i8", kernels.all_ops(dtypes.int8))
  assert "ld.global.s8" in i8 and "cvt.s32.s8" in i8 and "div.s32" in i8 and "rem.s32" in i8
  u64 = ren.render("u64", kernels.all_ops(dtypes.uint64))
  assert "div.u64" in u64 and "shr.u64" in u64 and "cvt.u32.u64" in u64
  bl = ren.render("bl", kernels.all_ops(dtypes.bool))
  assert "ld.global.u8" in bl and "xor.pred" in bl and "selp.b32" in bl

# *** compile-only: ptxas ***

SUITE = kernels.suite(PTXRenderer("sm_80").supported_dtypes())

@needs_ptxas
@pytest.mark.parametrize("name", list(SUITE))
def test_every_kernel_assembles(name):
  cubin = PTXASCompiler("sm_80").compile(PTXRenderer("sm_80").render(name, SUITE[name]))
  assert cubin[:4] == b"\x7fELF" and name.encode() in cubin

@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_75", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"])
def test_other_archs_assemble(arch):
  ren, asm = PTXRenderer(arch), PTXASCompiler(arch)
  for name, uops in kernels.suite(ren.supported_dtypes()).items(): assert asm.compile(ren.render(name, uops))[:4] == b"\x7fELF", name

@needs_ptxas
def test_core_codegen_kernels_assemble():
  """Kernels of the core's own pipeline (locals, grouped reduces with barrier-ordered loads, upcasts) assemble."""
  for arch in ("sm_80", "sm_90"):
    progs = kernels.codegen_programs(PTXRenderer(arch))
    assert any("bar.sync 0;" in src for src in progs.values())
    for name, src in progs.items(): assert PTXASCompiler(arch).compile(src)[:4] == b"\x7fELF", name

@needs_ptxas
def test_compiler_hook_and_errors(monkeypatch):
  monkeypatch.setenv("CUDA_ARCH", "sm_90")
  c = tinygrad_nv.tinycore_compiler(device="NV")
  if mock.enabled(): c = c.real  # MOCKGPU: ptxas still assembles, then the emulated image wraps the PTX
  assert isinstance(c, PTXASCompiler) and c.arch == "sm_90" and f"ptxas {ptxas_version(find_ptxas())} " in c.cachekey
  bad = PTXRenderer("sm_90").render("k", kernels.elementwise()).replace("add.rn.f32", "add.rn.f33")
  with pytest.raises(CompileError, match="ptxas"): c.compile(bad)

# *** f64 exp2/log2/sin: the very instruction sequence, run on the host ***

@pytest.mark.parametrize("fn,ref,xs", [
  (f64math.exp2, np.exp2, np.concatenate([np.random.default_rng(1).uniform(-1080, 1030, 1500), np.linspace(-2, 2, 500),
                                          [0, -0.0, -1074, -1075, 1023.5, 1024, -np.inf, np.inf, np.nan]])),
  (f64math.log2, np.log2, np.concatenate([np.exp(np.random.default_rng(2).uniform(-740, 709, 1500)), np.linspace(0.5, 2, 500),
                                          [0, -0.0, 1, -1, np.inf, -np.inf, np.nan, 5e-324, 2.2e-308, 1.7976931348623157e308]])),
  (f64math.sin, np.sin, np.concatenate([np.random.default_rng(3).uniform(-100, 100, 1000), np.random.default_rng(4).uniform(-1e5, 1e5, 1000),
                                        np.linspace(-1e-3, 1e-3, 101), [0, -0.0, np.pi, np.inf, -np.inf, np.nan, 1e-300]]))])
def test_f64_math_sequences_on_host(fn, ref, xs):
  with np.errstate(all="ignore"):
    got, want = fn(f64math.NumpyOps64(), xs), ref(xs)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    ulps = np.where(same, 0, np.abs(got - want) / np.spacing(np.abs(want)))
    if fn is f64math.sin: ulps = np.where(np.abs(got - want) <= 2.3e-16, 0, ulps)  # near a zero of sin the error is absolute
  assert not np.isnan(ulps).any() and np.max(ulps) <= 4, (xs[np.nanargmax(ulps)], np.nanmax(ulps))

# *** on the hardware ***

@needs_gpu
def test_gpu_kernels_match_numpy():
  check_gpu_kernels("NV")
  z = np.linspace(-50, 50, 256)
  d = kernels.Prog()
  o, i = d.glob(0, dtypes.float64), d.glob(1, dtypes.float64)
  idx = d.special("gidx0", 256)
  v = d.load(i, idx)
  d.store(o, idx, d.alu(Ops.SIN, dtypes.float64, v))
  out, _ = run_kernel("NV", "sin64", d.uops, [z], 2048, (256, 1, 1), (1, 1, 1))
  np.testing.assert_allclose(np.frombuffer(out, np.float64), np.sin(z), rtol=0, atol=1e-15)
