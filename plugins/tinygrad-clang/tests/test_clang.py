"""tinygrad-clang on its own: allocator, compiler, renderer and program, checked against numpy."""
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
