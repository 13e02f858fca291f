"""Allocator, compiler and program of the OpenCL plugin, against numpy."""
from __future__ import annotations
import numpy as np
import pytest
from tinycore.backend import BufferSpec, CompileError, DeviceError

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32, np.float64]
SIZES = [0, 1, 7, 1023, (1 << 20) + 3]

def _rand(n: int, dt) -> np.ndarray:
  rng = np.random.default_rng(n)
  if dt == np.bool_: return rng.integers(0, 2, n).astype(np.bool_)
  if np.issubdtype(dt, np.integer): return rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, n, dtype=dt, endpoint=True)
  return (rng.standard_normal(n) * 100).astype(dt)

def _upload(alloc, x: np.ndarray):
  buf = alloc.alloc(x.nbytes)
  alloc.copyin(buf, memoryview(np.ascontiguousarray(x)).cast("B"))
  return buf

def _download(alloc, buf, n: int, dt) -> np.ndarray:
  out = np.empty(n, dtype=dt)
  if dt == np.bool_: out[:] = True  # bools: make sure every byte really comes from the device
  else: out.view(np.uint8)[:] = 0xA5
  alloc.copyout(memoryview(out).cast("B"), buf)
  return out

# *** allocator ***

@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_roundtrip(alloc, dt, size):
  x = _rand(size, dt)
  buf = _upload(alloc, x)
  np.testing.assert_array_equal(_download(alloc, buf, size, dt), x)
  alloc.free(buf, x.nbytes)

def test_roundtrip_bool_bytes_are_exact(alloc):
  # copyin/copyout is byte-exact: the pattern is not one a kernel would produce, and must come back unchanged
  x = np.arange(256, dtype=np.uint8)
  np.testing.assert_array_equal(_download(alloc, _upload(alloc, x), 256, np.uint8), x)

def test_lru_reuses_freed_buffers(alloc):
  a = alloc.alloc(4096)
  alloc.free(a, 4096)
  assert alloc.alloc(4096) is a
  alloc.free(a, 4096, BufferSpec(nolru=True))  # really freed, not cached
  assert alloc.alloc(4096) is not a

def test_impossible_allocation(alloc, cldev):
  with pytest.raises(MemoryError, match="largest allocation"): alloc.alloc(cldev.max_alloc + 1)

def test_overwrite_and_partial_independence(alloc):
  a, b = _upload(alloc, np.arange(100, dtype=np.float32)), _upload(alloc, np.zeros(100, dtype=np.float32))
  alloc.copyin(a, memoryview(np.full(100, 7, np.float32)).cast("B"))
  np.testing.assert_array_equal(_download(alloc, a, 100, np.float32), np.full(100, 7, np.float32))
  np.testing.assert_array_equal(_download(alloc, b, 100, np.float32), np.zeros(100, np.float32))

# *** sub-buffer views ***

def test_view_aligned(alloc, cldev):
  align = cldev.sub_buffer_align
  x = np.arange(4 * align, dtype=np.uint8)
  base = _upload(alloc, x)
  v = alloc._offset(base, 2 * align, align)
  np.testing.assert_array_equal(_download(alloc, v, 2 * align, np.uint8), x[align:3 * align])
  # writes through the view land in the base
  alloc.copyin(v, memoryview(np.full(2 * align, 255, np.uint8)))
  want = x.copy(); want[align:3 * align] = 255
  np.testing.assert_array_equal(_download(alloc, base, 4 * align, np.uint8), want)

def test_view_misaligned_raises(alloc, cldev):
  if cldev.sub_buffer_align == 1: pytest.skip("this device allows sub-buffers at any byte offset")
  base = alloc.alloc(4 * cldev.sub_buffer_align)
  with pytest.raises(DeviceError, match="multiple of"): alloc._offset(base, 4, 4)

def test_view_empty(alloc):
  base = _upload(alloc, np.arange(16, dtype=np.uint8))
  v = alloc._offset(base, 0, 16)
  alloc.copyout(memoryview(bytearray(0)), v)  # nothing to copy, and no error
  np.testing.assert_array_equal(_download(alloc, base, 16, np.uint8), np.arange(16, dtype=np.uint8))

# *** transfers ***

class _FakeCompiled:  # what the core passes as src_dev/dest_dev: something with an .allocator
  def __init__(self, allocator): self.allocator = allocator

def test_transfer_same_device(alloc):
  x = _rand(1001, np.float32)
  src, dst = _upload(alloc, x), alloc.alloc(x.nbytes)
  alloc._transfer(dst, src, x.nbytes, src_dev=_FakeCompiled(alloc), dest_dev=_FakeCompiled(alloc))
  np.testing.assert_array_equal(_download(alloc, dst, 1001, np.float32), x)

def test_transfer_between_contexts(alloc, cldev):
  # a second CLDevice on the same hardware has its own context: buffers cannot be shared, the copy goes through the host
  from tinygrad_opencl.runtime import CLAllocator, CLDevice
  other = CLAllocator(CLDevice("OPENCL:other", cldev.platform, cldev.dev))
  x = _rand(333, np.int64)
  src, dst = _upload(alloc, x), other.alloc(x.nbytes)
  other._transfer(dst, src, x.nbytes, src_dev=_FakeCompiled(alloc), dest_dev=_FakeCompiled(other))
  np.testing.assert_array_equal(_download(other, dst, 333, np.int64), x)
  back = alloc.alloc(x.nbytes)
  alloc._transfer(back, dst, x.nbytes, src_dev=_FakeCompiled(other), dest_dev=_FakeCompiled(alloc))
  np.testing.assert_array_equal(_download(alloc, back, 333, np.int64), x)

# *** compiler ***

SCALE = """__kernel void scale(__global float* out, __global const float* a, const int n, const int k) {
  int i = get_global_id(0) + get_global_id(1) * get_global_size(0);
  if (i < n) out[i] = a[i] * k;
}"""

def test_compile_returns_binary(compiler):
  lib = compiler.compile(SCALE)
  assert isinstance(lib, bytes) and len(lib) > 0 and b"__kernel" not in lib[:8]

def test_compile_error_carries_log(compiler):
  with pytest.raises(CompileError) as e: compiler.compile("__kernel void f(__global float* a) { a[0] = undeclared_thing_xyz; }")
  msg = str(e.value)
  assert "undeclared_thing_xyz" in msg and "error" in msg.lower() and "OPENCL" in msg

def test_cachekey(cldev, compiler):
  from tinygrad_opencl.runtime import CLCompiler
  key = compiler.cachekey
  assert key == CLCompiler(cldev).cachekey, "stable across instances"
  from tinygrad_opencl.runtime import _safe
  for part in (cldev.platform.name, cldev.dev.name, cldev.dev.driver_version): assert _safe(part) in key
  assert CLCompiler(cldev, ["-cl-fast-relaxed-math"]).cachekey != key, "build flags are part of the key"
  assert "/" not in key and " " not in key

# *** program ***

def test_program_global_local_vals_wait(alloc, compiler):
  from tinygrad_opencl.runtime import CLProgram
  prg = CLProgram("OPENCL", "scale", compiler.compile(SCALE))
  n = 1000
  x = _rand(n, np.float32)
  a, out = _upload(alloc, x), _upload(alloc, np.zeros(n, np.float32))
  # 4 x 2 groups of 16 x 8 items: 64 x 16 = 1024 items >= n
  t = prg(out, a, global_size=(4, 2, 1), local_size=(16, 8, 1), vals=(n, 3), wait=True)
  assert isinstance(t, float) and t > 0
  np.testing.assert_array_equal(_download(alloc, out, n, np.float32), x * 3)
  # too few groups: only the first 4*16 x 1*8 items = 512 run (row length is the global x size, 64)
  alloc.copyin(out, memoryview(np.zeros(n, np.float32)).cast("B"))
  assert prg(out, a, global_size=(4, 1, 1), local_size=(16, 8, 1), vals=(n, -2)) is None
  alloc.synchronize()
  want = np.zeros(n, np.float32); want[:512] = x[:512] * -2
  np.testing.assert_array_equal(_download(alloc, out, n, np.float32), want)

def test_program_local_size_none(alloc, compiler):
  from tinygrad_opencl.runtime import CLProgram
  prg = CLProgram("OPENCL", "scale", compiler.compile(SCALE))
  x = _rand(777, np.float32)
  a, out = _upload(alloc, x), _upload(alloc, np.zeros(777, np.float32))
  t = prg(out, a, global_size=(777, 1, 1), local_size=None, vals=(777, 5), wait=True)  # global_size is the total here
  assert t > 0
  np.testing.assert_array_equal(_download(alloc, out, 777, np.float32), x * 5)

def test_program_many_buffers_and_local_memory(alloc, compiler):
  from tinygrad_opencl.runtime import CLProgram
  nb = 12
  args = ", ".join(f"__global const float* in{i}" for i in range(nb))
  body = " + ".join(f"in{i}[g]" for i in range(nb))
  src = f"""__kernel void many(__global float* out, {args}) {{
  __local float tmp[64];
  int l = get_local_id(0), g = get_global_id(0);
  tmp[l] = {body};
  barrier(CLK_LOCAL_MEM_FENCE);
  out[g] = tmp[63 - l];  /* reversed inside each group of 64 */
}}"""
  prg = CLProgram("OPENCL", "many", compiler.compile(src))
  xs = [_rand(256, np.float32) for _ in range(nb)]
  out = alloc.alloc(256 * 4)
  prg(out, *[_upload(alloc, x) for x in xs], global_size=(4, 1, 1), local_size=(64, 1, 1), wait=True)
  s = np.zeros(256, np.float32)
  for x in xs: s += x
  np.testing.assert_allclose(_download(alloc, out, 256, np.float32), s.reshape(4, 64)[:, ::-1].reshape(-1), rtol=1e-6)

def test_program_empty_launch(alloc, compiler):
  from tinygrad_opencl.runtime import CLProgram
  prg = CLProgram("OPENCL", "scale", compiler.compile(SCALE))
  out = _upload(alloc, np.full(4, 9, np.float32))
  assert prg(out, out, global_size=(0, 1, 1), local_size=(4, 1, 1), vals=(4, 2), wait=True) == 0.0
  np.testing.assert_array_equal(_download(alloc, out, 4, np.float32), np.full(4, 9, np.float32))  # nothing ran

def test_program_bad_binary(cldev):
  from tinygrad_opencl.runtime import CLProgram
  with pytest.raises(CompileError, match="cannot load kernel"): CLProgram("OPENCL", "k", b"not a binary")

def test_program_bad_local_size(alloc, compiler, cldev):
  from tinygrad_opencl.runtime import CLProgram
  prg = CLProgram("OPENCL", "scale", compiler.compile(SCALE))
  too_big = cldev.dev.max_work_group_size + 1
  with pytest.raises(RuntimeError, match="launching scale"):
    prg(alloc.alloc(4), alloc.alloc(4), global_size=(1, 1, 1), local_size=(too_big, 1, 1), vals=(1, 1), wait=True)
