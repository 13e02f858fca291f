"""tinygrad-amd: the contract without hardware, compile-only rendering + clang amdgcn code objects for RDNA3 (gfx1100) and
CDNA2/3 (gfx90a, gfx942), the double-precision math of the prelude checked on the host CPU, and runtime tests that run on
an AMD GPU and skip, saying why, where there is none."""
from __future__ import annotations
import ctypes, pathlib, shutil, subprocess, tempfile
import numpy as np
import pytest
from tinycore.backend import CompileError
from tinycore.dtype import dtypes
from tinycore.ops import Ops
from tinycore_conformance.fixtures import check_declaration, check_gpu_kernels, check_refuses_without_hardware, hardware, run_python
import tinygrad_amd
from tinygrad_amd import mock
from tinygrad_amd.compiler import AMDCompiler, clang_version, find_clang, toolchain_unavailable_reason
from tinygrad_amd.renderer import F64_MATH, AMDRenderer, wave_size
from tinygrad_amd import runtime

from tinycore_conformance import programs as kernels  # hand-built linear programs every renderer must compile

CLANG_WHY = toolchain_unavailable_reason()
needs_clang = pytest.mark.skipif(CLANG_WHY is not None, reason=f"no amdgcn toolchain: {CLANG_WHY}")
GPU_WHY = tinygrad_amd.check()
needs_gpu, no_gpu_only = hardware(GPU_WHY, "an AMD GPU")
ARCHS = ["gfx1100", "gfx90a", "gfx942"]

def _tool(name: str) -> str | None:
  major = clang_version(find_clang())[0] if find_clang() else 0
  return shutil.which(f"{name}-{major}") or shutil.which(name)

def _readelf(lib: bytes, *args: str) -> str:
  if (readelf := _tool("llvm-readelf")) is None: pytest.skip("llvm-readelf not found (it comes with llvm-19 beside clang-19)")
  with tempfile.NamedTemporaryFile(suffix=".hsaco") as f:
    f.write(lib); f.flush()
    return subprocess.run([readelf, *args, f.name], capture_output=True, text=True, timeout=60).stdout

# *** contract, no hardware ***

def test_declaration():
  check_declaration(tinygrad_amd, "AMD")

def test_import_loads_no_library():
  r = run_python("import ctypes, tinygrad_amd; tinygrad_amd.tinycore_devices(); tinygrad_amd.make_renderer()\n"
          "from tinygrad_amd import runtime; print(runtime.load_hip.cache_info().currsize)")
  assert r.returncode == 0, r.stderr
  assert r.stdout.strip() == "0"

@no_gpu_only
def test_reason_without_hardware():
  if runtime.load_hip() is None: assert GPU_WHY == "no HIP runtime (libamdhip64) found"
  else: assert GPU_WHY.startswith("the HIP runtime found no")  # e.g. Debian's libamdhip64-5 on a machine without a GPU

def test_reason_without_the_library():
  r = run_python("from tinygrad_amd import runtime\nruntime.LIB_NAMES = ()\nimport tinygrad_amd; print(tinygrad_amd.check())",
          HIP_LIBRARY="/nonexistent/libamdhip64.so", MOCKGPU="0")  # the real library's absence, also in a MOCKGPU run
  assert r.returncode == 0, r.stderr
  assert r.stdout.strip() == "no HIP runtime (libamdhip64) found"

@no_gpu_only
def test_opening_the_device_fails_at_once_with_the_reason():
  check_refuses_without_hardware(tinygrad_amd, "AMD", "tinygrad-amd", GPU_WHY)

def test_arch_selection_and_wave_size(monkeypatch):
  monkeypatch.delenv("AMD_ARCH", raising=False)
  if GPU_WHY is not None: assert tinygrad_amd.tinycore_renderer(device="AMD").arch == "gfx1100"
  monkeypatch.setenv("AMD_ARCH", "gfx942")
  assert tinygrad_amd.tinycore_renderer(device="AMD").arch == "gfx942"
  assert [wave_size(a) for a in ("gfx1100", "gfx1201", "gfx90a", "gfx942", "gfx908")] == [32, 32, 64, 64, 64]
  with pytest.raises(ValueError): AMDRenderer("sm_80")

def test_gfx_names_from_kfd_topology(tmp_path):
  assert [runtime.gfx_name(v) for v in (110000, 90010, 90402, 100300)] == ["gfx1100", "gfx90a", "gfx942", "gfx1030"]
  for i, v in enumerate((0, 90010, 110000)):  # node 0 is the CPU
    (tmp_path / str(i)).mkdir()
    (tmp_path / str(i) / "properties").write_text(f"cpu_cores_count 8\ngfx_target_version {v}\n")
  assert runtime.sysfs_archs(str(tmp_path)) == ["gfx90a", "gfx1100"]

def test_capabilities():
  r = AMDRenderer("gfx942")
  assert set(r.supported_dtypes()) == set(dtypes.all) and r.shared_max == 65536 and r.local_max[0] == 1024 and r.wave_size == 64

# *** rendering ***

def test_render_prelude_ids_lds_barrier():
  src = AMDRenderer().render("rev", kernels.shared_reverse())
  for s in ("#define __shared__ __attribute__((shared))", "typedef __bf16 bfloat16;", "__builtin_amdgcn_workgroup_id_x()",
            "__builtin_amdgcn_workitem_id_x()", "__shared__ float temp0[64];", "__builtin_amdgcn_s_barrier();",
            "amdgpu_flat_work_group_size(1, 64)"):
    assert s in src, (s, src)
  assert "__builtin_amdgcn_workgroup_size_x()" in AMDRenderer().render("g", kernels.gated())

def test_render_math_per_dtype():
  assert "tc_sin_f64(" in AMDRenderer().render("d", kernels.all_ops(dtypes.float64))
  f = AMDRenderer().render("f", kernels.all_ops(dtypes.float32))
  assert "__builtin_exp2f(val0)" in f and "tc_" not in f
  assert "((half)__builtin_log2f((float)(val0)))" in AMDRenderer().render("h", kernels.all_ops(dtypes.float16))

# *** compile-only ***

@needs_clang
@pytest.mark.parametrize("arch", ARCHS)
def test_every_kernel_compiles_to_a_code_object(arch):
  ren, comp = AMDRenderer(arch), AMDCompiler(arch)
  for name, uops in kernels.suite(ren.supported_dtypes()).items():
    lib = comp.compile(ren.render(name, uops))
    assert lib[:4] == b"\x7fELF" and int.from_bytes(lib[18:20], "little") == 0xE0, name  # EM_AMDGPU

@needs_clang
@pytest.mark.parametrize("arch", ARCHS)
def test_code_object_metadata_and_isa(arch):
  comp = AMDCompiler(arch)
  # 256 threads: with one wave per work-group (64 on CDNA) the backend rightly drops the barrier
  lib = comp.compile(AMDRenderer(arch).render("rev", kernels.shared_reverse(n=256)))
  notes = _readelf(lib, "--notes")
  assert f"amdgcn-amd-amdhsa--{arch}" in notes and f".wavefront_size: {wave_size(arch)}" in notes and ".name:           rev" in notes
  syms = _readelf(lib, "-s")
  undefined = [ln.split()[-1] for ln in syms.splitlines() if " UND " in ln and not ln.rstrip().endswith("UND")]
  assert "rev" in syms and not undefined, undefined  # nothing left to resolve at load time
  if (asm := comp.disassemble(lib)):
    assert "s_barrier" in asm and "ds_" in asm  # LDS traffic and the work-group barrier
  var = _readelf(comp.compile(AMDRenderer(arch).render("red", kernels.reduce_sum())), "--notes")
  assert ".value_kind:     by_value" in var  # the symbolic size is passed by value after the buffers

@needs_clang
@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_core_codegen_kernels_compile(arch):
  """Kernels of the core's own pipeline (locals, grouped reduces, upcasts) render and compile to code objects."""
  progs = kernels.codegen_programs(AMDRenderer(arch))
  assert any("__builtin_amdgcn_s_barrier();" in src for src in progs.values())
  for name, src in progs.items(): assert AMDCompiler(arch).compile(src)[:4] == b"\x7fELF", name

@needs_clang
def test_compile_error_carries_clang_output():
  with pytest.raises(CompileError, match="no_such_function"):
    AMDCompiler("gfx1100").compile('extern "C" __attribute__((global)) void k(float* a) { a[0] = no_such_function(); }')

@needs_clang
def test_cachekey():
  a, b = AMDCompiler("gfx1100"), AMDCompiler("gfx942")
  assert a.cachekey == AMDCompiler("gfx1100").cachekey and a.cachekey != b.cachekey and "clang version" in a.cachekey

@needs_clang
def test_compiler_hook_works_without_gpu(monkeypatch):
  monkeypatch.setenv("AMD_ARCH", "gfx90a")
  c = tinygrad_amd.tinycore_compiler(device="AMD")
  if mock.enabled(): c = c.real  # MOCKGPU: clang amdgcn still compiles, then the emulated image wraps the source
  assert isinstance(c, AMDCompiler) and c.arch == "gfx90a"

def test_f64_math_on_the_host():
  """The prelude's double exp2/log2/sin are plain C: compiled for this CPU they must match numpy within 4 ulp."""
  cxx = find_clang() or shutil.which("g++") or shutil.which("clang++")
  if cxx is None: pytest.skip("no C++ compiler here")
  with tempfile.TemporaryDirectory() as d:
    src, so = pathlib.Path(d) / "m.cpp", pathlib.Path(d) / "m.so"
    src.write_text('#define TC_INLINE extern "C"\n' + "".join(F64_MATH.values()))
    r = subprocess.run([cxx, "-x", "c++", "-O2", "-shared", "-fPIC", "-o", str(so), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lib = ctypes.CDLL(str(so))
    rng = np.random.default_rng(0)
    cases = {Ops.EXP2: (np.exp2, np.concatenate([rng.uniform(-1080, 1030, 5000), rng.uniform(-2, 2, 5000), [0, -1074, 1024, -np.inf, np.nan]])),
             Ops.LOG2: (np.log2, np.concatenate([np.exp(rng.uniform(-700, 700, 5000)), rng.uniform(0.5, 2, 5000), [0, 1, -1, np.inf, 5e-324]])),
             Ops.SIN: (np.sin, np.concatenate([rng.uniform(-100, 100, 5000), rng.uniform(-1e5, 1e5, 5000), [0, np.pi, np.inf, np.nan]]))}
    for op, (ref, xs) in cases.items():
      f = getattr(lib, f"tc_{op.name.lower()}_f64")
      f.restype, f.argtypes = ctypes.c_double, [ctypes.c_double]
      got = np.array([f(float(x)) for x in xs])
      with np.errstate(all="ignore"):
        want = ref(xs)
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        ulps = np.where(same, 0, np.abs(got - want) / np.spacing(np.abs(want)))
        if op is Ops.SIN: ulps = np.where(np.abs(got - want) < 2e-16, 0, ulps)  # near a zero of sin the error is absolute
      assert np.nanmax(ulps) <= 4, (op, xs[np.nanargmax(ulps)])
      assert not np.isnan(ulps).any(), op

# *** on the hardware ***

@needs_gpu
def test_gpu_kernels_match_numpy():
  check_gpu_kernels("AMD")

@needs_gpu
def test_runtime_edges():
  """Limits, failures, timing and TinyJit through the runtime (on an emulated device, a kernel off its buffer faults too)."""
  from tinycore_conformance.fixtures import check_runtime_edges
  check_runtime_edges("AMD", out_of_bounds_faults=mock.enabled())
