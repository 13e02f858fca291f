"""tinygrad-llvm on its own: declaration, compiler, renderer (loops, accumulators, the split over cores, vector exp2) and
program, checked against numpy float64."""
import numpy as np
import pytest
import tinygrad_llvm
from tinycore import CompileError
from tinycore.dtype import dtypes
from tinycore.ops import Ops
from tinycore.uop.uop import UOp
from tinycore_conformance.fixtures import check_declaration, run_python
from tinygrad_llvm.renderer import LLVMRenderer
from tinygrad_llvm.runtime import LLVMAllocator, LLVMCompiler, LLVMProgram, host

i32, f32 = dtypes.int32, dtypes.float32

def test_declaration():
  check_declaration(tinygrad_llvm, "LLVM")

def test_import_loads_no_llvm():
  # `python -m tinycore devices` imports every plugin: llvmlite is loaded only when the device opens
  out = run_python("import sys, tinygrad_llvm; from tinycore import Device; Device.DEFAULT; print('llvmlite' in sys.modules)").stdout
  assert out.strip().endswith("False"), out

def test_compile_error_has_llvm_message():
  with pytest.raises(CompileError, match="error"): LLVMCompiler().compile("define void @f( {")

def test_cache_key_names_llvm_and_target():
  import llvmlite.binding as llvm
  key, (triple, cpu, _) = LLVMCompiler().cachekey, host()
  assert ".".join(map(str, llvm.llvm_version_info)) in key and triple in key and cpu in key

def test_renderer_declares_registers_and_cache():
  # the heuristic sizes register tiles and cache panels by these, as on CLANG: read from LLVM's view of the host CPU
  from tinycore.runtime.hostcpu import cpu_model
  from tinygrad_llvm.runtime import renderer
  r, (triple, _, feats) = renderer("LLVM", 0), host()
  assert r.vector_registers == (32 if "+avx512f" in feats.split(",") or triple.startswith(("aarch64", "arm64")) else 16)
  assert r.cache_bytes >= 64 << 10 and cpu_model() in r.cachekey

def run(uops: list[UOp], inputs: list[np.ndarray], out: np.ndarray, renderer: LLVMRenderer | None = None, vals: tuple = ()) -> tuple[np.ndarray, str]:
  src = (renderer or LLVMRenderer()).render("test_kernel", uops)
  prg, alloc = LLVMProgram("LLVM", "test_kernel", LLVMCompiler().compile(src)), LLVMAllocator()
  bufs = [alloc.alloc(out.nbytes)] + [alloc.alloc(x.nbytes) for x in inputs]
  for b, x in zip(bufs[1:], inputs): alloc.copyin(b, memoryview(x).cast("B"))
  assert prg(*bufs, vals=vals, wait=True) > 0
  alloc.copyout(memoryview(out).cast("B"), bufs[0])
  return out, src

def row_sums(n: UOp) -> list[UOp]:
  # out[r] = sum(a[r*n + i] for i < n), r < 3, laid out as the linearizer does: the accumulator (which names the reduce
  # loop) is defined inside the row loop, before the reduce loop it is carried by
  out, a = UOp(Ops.DEFINE_GLOBAL, f32.ptr(), arg=0), UOp(Ops.DEFINE_GLOBAL, f32.ptr(), arg=1)
  zero, three, fzero = UOp.const(i32, 0), UOp.const(i32, 3), UOp.const(f32, 0.0)
  rows = UOp(Ops.RANGE, i32, (zero, three), arg=0)
  red = UOp(Ops.RANGE, i32, (zero, n), arg=1)
  acc = UOp(Ops.DEFINE_ACC, f32, (fzero, red), arg=0)
  base = rows * n
  idx = base + red
  ld = UOp(Ops.LOAD, f32, (a, idx))
  asg = UOp(Ops.ASSIGN, f32, (acc, acc + ld))
  return [out, a, n, zero, three, fzero, rows, acc, base, red, idx, ld, acc + ld, asg, UOp(Ops.ENDRANGE, dtypes.void, (red,)),
          UOp(Ops.STORE, dtypes.void, (out, rows, asg)), UOp(Ops.ENDRANGE, dtypes.void, (rows,))]

@pytest.mark.parametrize("n", [0, 1, 37])
def test_accumulator_across_a_loop(n):
  # the accumulator is a phi in the reduce loop's header: right also when that loop runs 0 times (n=0: sums are 0)
  a = np.random.default_rng(n).standard_normal(3 * max(n, 1)).astype(np.float32)
  out, src = run(row_sums(UOp.variable("n", 0, 64)), [a], np.full(3, np.nan, np.float32), vals=(n,))
  np.testing.assert_allclose(out, a[:3 * n].astype(np.float64).reshape(3, n).sum(1), rtol=1e-5, atol=1e-6)
  assert "phi float" in src and "alloca" not in src

def elementwise(n: int) -> list[UOp]:
  out, a = UOp(Ops.DEFINE_GLOBAL, f32.ptr(), arg=0), UOp(Ops.DEFINE_GLOBAL, f32.ptr(), arg=1)
  r = UOp(Ops.RANGE, i32, (UOp.const(i32, 0), UOp.const(i32, n)), arg=0)
  ld = UOp(Ops.LOAD, f32, (a, r))
  val = ld * 2.0 + 1.0
  return [out, a, UOp.const(i32, 0), UOp.const(i32, n), r, ld, UOp.const(f32, 2.0), ld * 2.0, UOp.const(f32, 1.0), val,
          UOp(Ops.STORE, dtypes.void, (out, r, val)), UOp(Ops.ENDRANGE, dtypes.void, (r,))]

@pytest.mark.parametrize("n", [5, 1000])
def test_outer_loop_split_over_cores(n):
  # cut into min(threads*chunks, n) pieces, each computed by one call with its core id; every element once
  a = np.random.default_rng(n).standard_normal(n).astype(np.float32)
  out, src = run(elementwise(n), [a], np.full(n, np.nan, np.float32), LLVMRenderer(threads=2, chunks_per_core=4, min_work=1))
  np.testing.assert_allclose(out, a.astype(np.float64) * 2 + 1, rtol=1e-6)
  assert "%core_id" in src and f"_chunks = constant i32 {min(8, n)}" in src

def test_small_kernel_not_split():
  _, src = run(elementwise(10), [np.ones(10, np.float32)], np.zeros(10, np.float32), LLVMRenderer(threads=2, min_work=1 << 20))
  assert "%core_id" not in src and "_chunks = constant i32 1" in src

def test_vector_exp2_within_4_ulp():
  # EXP2 on an 8-wide float vector is the polynomial (libm is scalar): against numpy float64, over the whole range
  x = np.concatenate([np.linspace(-151, 129, 8 * 500), [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-30, 127.99, -149.5]]).astype(np.float32)
  v8 = f32.vec(8)
  out_b, a_b = UOp(Ops.DEFINE_GLOBAL, f32.ptr(), arg=0), UOp(Ops.DEFINE_GLOBAL, f32.ptr(), arg=1)
  r = UOp(Ops.RANGE, i32, (UOp.const(i32, 0), UOp.const(i32, len(x) // 8)), arg=0)
  idx = r * 8
  ld = UOp(Ops.LOAD, v8, (a_b, idx))
  e = UOp(Ops.EXP2, v8, (ld,))
  uops = [out_b, a_b, UOp.const(i32, 0), UOp.const(i32, len(x) // 8), r, UOp.const(i32, 8), idx, ld, e,
          UOp(Ops.STORE, dtypes.void, (out_b, idx, e)), UOp(Ops.ENDRANGE, dtypes.void, (r,))]
  out, src = run(uops, [x], np.zeros_like(x), LLVMRenderer(vector_widths=(8, 4)))
  assert "@tc.exp2.v8" in src
  ref = np.exp2(x.astype(np.float64))
  with np.errstate(over="ignore"): ref32 = ref.astype(np.float32)
  finite = np.isfinite(ref32) & (np.abs(ref32) >= np.finfo(np.float32).tiny)
  ulp = np.abs(out[finite].astype(np.float64) - ref[finite]) / np.spacing(ref32[finite]).astype(np.float64)
  assert ulp.max() <= 4, f"max {ulp.max()} ulp at x={x[finite][ulp.argmax()]}"
  np.testing.assert_array_equal(np.isnan(out), np.isnan(x))
  assert out[np.isposinf(x)][0] == np.inf and out[np.isneginf(x)][0] == 0.0

def test_debug_prints_ir_and_assembly():
  code = "from tinycore import Tensor; (Tensor([1.0, 2.0, 3.0]) * 3 + 1).numpy()"
  d4 = run_python(code, DEV="LLVM", DEBUG="4").stdout
  d5 = run_python(code, DEV="LLVM", DEBUG="5").stdout
  assert "define void @" in d4 and "\tret" not in d4
  assert "define void @" in d5 and "\tret" in d5  # the assembly, also for a kernel the disk cache held

def test_tensor_matches_numpy_on_llvm():
  from tinycore import Tensor
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((33, 65)).astype(np.float32), rng.standard_normal((65, 17)).astype(np.float32)
  got = (Tensor(a, device="LLVM") @ Tensor(b, device="LLVM")).relu().exp().sum(axis=1).numpy()
  ref = np.exp(np.maximum(a.astype(np.float64) @ b, 0)).sum(1)
  np.testing.assert_allclose(got, ref, rtol=1e-4)

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.float32])
def test_constant_beyond_range_is_infinity(dt):
  # a float64 constant folded into a half or float kernel may exceed the dtype's range: it is that dtype's inf, as numpy
  from tinygrad_llvm.renderer import literal
  np_dt = np.float16 if dt == dtypes.float16 else np.float32
  for x in (1e300, -1e300):
    with np.errstate(over="ignore"): want = np_dt(x)
    bits = literal(x, dt)
    if dt == dtypes.float16: got = np.array(int(bits[3:], 16), np.uint16).view(np.float16)
    else: got = np.float32(np.frombuffer(bytes.fromhex(bits[2:]), ">f8")[0])
    assert got == want, (bits, got, want)
