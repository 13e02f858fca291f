"""tinygrad-clang on its own: allocator, compiler, renderer and program, checked against numpy."""
import ctypes
import numpy as np
import pytest
from tinycore import CompileError
from tinycore.backend import BufferSpec
from tinycore.dtype import dtypes
from tinycore.ops import Ops
from tinycore.uop.uop import UOp
from tinygrad_clang import ClangAllocator, ClangCompiler, ClangProgram, ClangRenderer

@pytest.mark.parametrize("size", [0, 1, 7, 1 << 20])
def test_allocator_round_trip(size):
  a = ClangAllocator()
  buf = a.alloc(size, BufferSpec())
  data = np.random.default_rng(size).integers(0, 255, size, dtype=np.uint8)
  a.copyin(buf, memoryview(data))
  out = np.empty(size, np.uint8)
  a.copyout(memoryview(out), buf)
  np.testing.assert_array_equal(out, data)
  assert size == 0 or buf.ctypes.data % 64 == 0, "buffers are 64-byte aligned for vector loads"
  view = a._offset(buf, max(0, size - 1), min(1, size))
  np.testing.assert_array_equal(np.asarray(view), data[1:] if size else data)

def test_compile_error_has_the_compiler_message():
  with pytest.raises(CompileError, match="undeclared|error"): ClangCompiler().compile("void f(void) { return x; }")

def test_cache_key_names_the_toolchain():
  c = ClangCompiler()
  assert c.cc in c.cachekey and "-O2" in c.cachekey

def test_render_compile_run_a_loop():
  # out[i] = a[i] * 2 + 1, as the code generator would emit it
  i32, f32 = dtypes.int32, dtypes.float32
  out, a = UOp(Ops.DEFINE_GLOBAL, f32.ptr(), arg=0), UOp(Ops.DEFINE_GLOBAL, f32.ptr(), arg=1)
  n = UOp.variable("n", 1, 100)
  r = UOp(Ops.RANGE, i32, (UOp.const(i32, 0), n), arg=0)
  ld = UOp(Ops.LOAD, f32, (a, r))
  st = UOp(Ops.STORE, dtypes.void, (out, r, ld * 2.0 + 1.0))
  uops = [out, a, n, UOp.const(i32, 0), r, ld, UOp.const(f32, 2.0), ld * 2.0, UOp.const(f32, 1.0), ld * 2.0 + 1.0, st,
          UOp(Ops.ENDRANGE, dtypes.void, (r,))]
  src = ClangRenderer().render("test_loop", uops)
  assert "for (int ridx0 = 0; ridx0 < n; ridx0++)" in src
  prg = ClangProgram("CLANG", "test_loop", ClangCompiler().compile(src))
  x = np.random.default_rng(0).standard_normal(10).astype(np.float32)
  y = np.zeros(10, np.float32)
  t = prg(y, x, vals=(10,), wait=True)
  np.testing.assert_allclose(y, x * 2 + 1, rtol=1e-6)
  assert t is not None and t > 0

def test_caller_takes_host_buffers_and_refuses_other_arrays():
  # Program.caller (the eager path's launch) is the C function itself: a HostBuffer passes as its address (its
  # _as_parameter_); any other array is refused by ctypes, never passed as a truncated int
  src = "void add1(float* restrict out, const float* restrict a) { for (int i = 0; i < 8; i++) out[i] = a[i] + 1.0f; }"
  call = ClangProgram("CLANG", "add1", ClangCompiler().compile(src)).caller((1, 1, 1), None)
  al = ClangAllocator()
  out, a = al.alloc(32, BufferSpec()), al.alloc(32, BufferSpec())
  x = np.random.default_rng(0).standard_normal(8).astype(np.float32)
  al.copyin(a, memoryview(x))
  call(out, a)
  np.testing.assert_array_equal(np.frombuffer(out, np.float32), x + 1)
  with pytest.raises(ctypes.ArgumentError): call(np.zeros(8, np.float32), a)

# the kernel of `conv2d(x, w).sum()`'s input gradient (x (1, 1, 5, 7), w (6, 1, 2, 1)): the padded constant gradient times
# the flipped weight, as the CLANG renderer writes it
MASKED_REDUCE = (
  'void r_5_6_2_7(float* restrict data0, const float* restrict data1) {\n'
  '  for (int ridx0 = 0; ridx0 < 5; ridx0++) {\n'
  '    int alu0 = (ridx0*7);\n'
  '    float acc0 = 0.0f;\n'
  '    float acc1 = 0.0f;\n'
  '    float acc2 = 0.0f;\n'
  '    float acc3 = 0.0f;\n'
  '    float acc4 = 0.0f;\n'
  '    float acc5 = 0.0f;\n'
  '    float acc6 = 0.0f;\n'
  '    for (int ridx1 = 0; ridx1 < 6; ridx1++) {\n'
  '      int alu1 = (ridx1*2);\n'
  '      float val0 = data1[(alu1+1)];\n'
  '      float alu2 = ((((ridx0<1)!=1)?1.0f:0.0f)*val0);\n'
  '      float val1 = data1[alu1];\n'
  '      float alu3 = (((ridx0<4)?1.0f:0.0f)*val1);\n'
  '      acc0 = ((acc0+alu2)+alu3);\n'
  '      acc1 = ((acc1+alu2)+alu3);\n'
  '      acc2 = ((acc2+alu2)+alu3);\n'
  '      acc3 = ((acc3+alu2)+alu3);\n'
  '      acc4 = ((acc4+alu2)+alu3);\n'
  '      acc5 = ((acc5+alu2)+alu3);\n'
  '      acc6 = ((acc6+alu2)+alu3);\n'
  '    }\n'
  '    data0[alu0] = acc0;\n'
  '    data0[(alu0+1)] = acc1;\n'
  '    data0[(alu0+2)] = acc2;\n'
  '    data0[(alu0+3)] = acc3;\n'
  '    data0[(alu0+4)] = acc4;\n'
  '    data0[(alu0+5)] = acc5;\n'
  '    data0[(alu0+6)] = acc6;\n'
  '  }\n'
  '}\n'
)

def test_masked_reduce_is_not_miscompiled():
  # GCC 12 -O2 -fno-trapping-math with its loop vectorizer summed this reduce wrong (0.44 for 0.21 in the first row);
  # the compiler's flags keep that pass off for GCC (_workarounds)
  w = np.random.default_rng(0).standard_normal(12).astype(np.float32)
  out = np.zeros(35, np.float32)
  ClangProgram("CLANG", "r_5_6_2_7", ClangCompiler().compile(MASKED_REDUCE))(out, w)
  rows = np.arange(5)[:, None]
  want = ((rows >= 1) * w[1::2].astype(np.float64).sum() + (rows < 4) * w[0::2].astype(np.float64).sum()) * np.ones((5, 7))
  np.testing.assert_allclose(out.reshape(5, 7), want, rtol=1e-5, atol=1e-6)

def test_outer_loop_split_over_cores(monkeypatch):
  # a large kernel's outer loop runs over each core's share of it, the bounds given to the renderer (the loop's users
  # are not rebuilt): the loop reads its share from core_id/core_count, and every element is written once (numpy)
  import tinygrad_clang
  from tinycore import Tensor, Device
  from tinycore.codegen import get_program
  from tinycore.engine.realize import get_kernel
  monkeypatch.setattr(tinygrad_clang, "THREADS", 2)
  a = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
  out = Tensor(a, device="CLANG") * 2 + 1
  (si,) = [s for s in out.schedule() if s.ast.op is Ops.SINK]
  src = get_program(get_kernel(si.ast, Device["CLANG"].renderer), "CLANG").src
  assert "core_id)/core_count); ridx0 < (" in src and "(core_id+1))/core_count)" in src
  np.testing.assert_array_equal(out.numpy(), a * 2 + 1)

def test_long_kernel_cut_into_short_chunks(monkeypatch):
  # a few chunks per core at least; a long kernel one per CHUNK_WORK operations up to its outer loop's trips (a 2048
  # matmul: 8 chunks of 4 row blocks were 32 of one, so that a core the OS takes away leaves one short chunk behind)
  import re
  import tinygrad_clang
  from tinycore import Tensor, Device
  from tinycore.codegen import get_program
  from tinycore.engine.realize import get_kernel
  monkeypatch.setattr(tinygrad_clang, "THREADS", 2)
  def chunks(t: Tensor) -> tuple[int, str]:
    si = [s for s in t.schedule() if s.ast.op is Ops.SINK][-1]
    p = get_program(get_kernel(si.ast, Device["CLANG"].renderer), "CLANG")
    return int(re.search(r"_threads = (\d+);", p.src).group(1)), p.src
  assert chunks(Tensor.empty(1024, 1024, device="CLANG") * 2 + 1)[0] == 2 * tinygrad_clang.CHUNKS_PER_CORE
  n, src = chunks(Tensor.empty(2048, 2048, device="CLANG") @ Tensor.empty(2048, 2048, device="CLANG"))
  trips = int(re.search(r"ridx0 = \(\((\d+)\*core_id\)", src).group(1))
  assert n == trips > 2 * tinygrad_clang.CHUNKS_PER_CORE, src
