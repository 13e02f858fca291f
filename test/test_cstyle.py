"""The base C renderer (tinycore.renderer.cstyle): bare, it writes C99 that a host C compiler accepts and claims no more
than a bare Renderer; what a subclass must supply is named when it is missing; vector constants render."""
import ctypes, pathlib, shutil, subprocess
import numpy as np
import pytest
from tinycore.backend import MINIMAL_DTYPES
from tinycore.dtype import dtypes
from tinycore.ops import Ops
from tinycore.renderer.cstyle import CStyleLanguage
from tinycore.uop.uop import UOp

CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
i32, f32, b = dtypes.int32, dtypes.float32, dtypes.bool

def _kernel() -> list[UOp]:
  """out[i] = a[i] < 1 ? exp2(a[i]) : inf, for i < n: bool, int32, float32, a math function and a float constant."""
  out, a = UOp(Ops.DEFINE_GLOBAL, f32.ptr(), arg=0), UOp(Ops.DEFINE_GLOBAL, f32.ptr(), arg=1)
  n = UOp.variable("n", 1, 100)
  zero, one, inf = UOp.const(i32, 0), UOp.const(f32, 1.0), UOp.const(f32, float("inf"))
  r = UOp(Ops.RANGE, i32, (zero, n), arg=0)
  ld = UOp(Ops.LOAD, f32, (a, r))
  lt, ex = UOp(Ops.CMPLT, b, (ld, one)), UOp(Ops.EXP2, f32, (ld,))
  val = UOp(Ops.WHERE, f32, (lt, ex, inf))
  st = UOp(Ops.STORE, dtypes.void, (out, r, val))
  return [out, a, n, zero, one, inf, r, ld, lt, ex, val, st, UOp(Ops.ENDRANGE, dtypes.void, (r,))]

def test_bare_renderer_declares_the_least():
  r = CStyleLanguage()
  assert not r.has_local and not r.has_shared and r.supported_dtypes() == MINIMAL_DTYPES and r.vector_widths == (1,)

@pytest.mark.skipif(CC is None, reason="no host C compiler")
def test_bare_renderer_writes_compilable_c(tmp_path: pathlib.Path):
  src = CStyleLanguage().render("k", _kernel())
  so = tmp_path / "k.so"
  proc = subprocess.run([CC, "-std=c99", "-shared", "-fPIC", "-x", "c", "-", "-o", str(so), "-lm"], input=src.encode(), capture_output=True)
  assert proc.returncode == 0, proc.stderr.decode() + "\n" + src
  fn = ctypes.CDLL(str(so)).k
  x = np.array([-3.0, 0.5, 0.99, 1.0, 7.0], np.float32)
  y = np.zeros_like(x)
  fn(ctypes.c_void_p(y.ctypes.data), ctypes.c_void_p(x.ctypes.data), ctypes.c_int(len(x)))
  np.testing.assert_allclose(y, np.where(x < 1, np.exp2(x.astype(np.float64)), np.inf), rtol=1e-6)

def test_missing_thread_id_spelling_is_named():
  g = UOp(Ops.SPECIAL, i32, arg=("gidx0", 4))
  out = UOp(Ops.DEFINE_GLOBAL, i32.ptr(), arg=0)
  with pytest.raises(NotImplementedError, match=r"sets no code_for_workitem\['g'\]"):
    CStyleLanguage().render("k", [out, g, UOp(Ops.STORE, dtypes.void, (out, g, g))])

@pytest.mark.parametrize("dt, value", [(dtypes.uint32, 0x9E3779B9), (dtypes.float32, 1.5), (dtypes.int32, -7)])
def test_vector_constant_renders_as_its_lanes(dt, value):
  """The code generator makes vector CONSTs (level 6's random numbers on a renderer declaring uint32 vectors): they render."""
  lane = CStyleLanguage().render_const(value, dt)
  assert CStyleLanguage().render_const(value, dt.vec(4)) == f"(({CStyleLanguage().render_dtype(dt.vec(4))}){{{','.join([lane] * 4)}}})"

def test_prelude_declares_only_the_types_a_kernel_uses():
  r = CStyleLanguage()
  u8 = UOp(Ops.DEFINE_GLOBAL, dtypes.uint8.ptr(), arg=0)
  assert "typedef unsigned char uchar;" in r.render_prefix([u8]) and "uchar" not in r.render_prefix(_kernel())
  if CC is None: return
  # the prelude compiles with every typedef it can write
  src = r.render_prefix([UOp(Ops.DEFINE_GLOBAL, d.ptr(), arg=0) for d in (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)])
  assert subprocess.run([CC, "-std=c99", "-fsyntax-only", "-x", "c", "-"], input=src.encode(), capture_output=True).returncode == 0, src
