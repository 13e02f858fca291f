"""The emulation pieces of the core that mock drivers share: DeviceMemory (fake addresses over guarded host memory), the
emulated image, and the host-source executor (grid, ids, barriers as fiber switches, shuffled order, faults), with a
minimal vendor-neutral shim of the test's own."""
from __future__ import annotations
import signal
import numpy as np
import pytest
from tinycore.backend import CompileError, Compiler
from tinycore.runtime import emulatedimage, hostgrid
from tinycore.runtime.devicememory import ALIGN, DeviceMemory, DeviceMemoryError

needs_cxx = pytest.mark.skipif(hostgrid.find_cxx() is None, reason=f"{hostgrid.unavailable_reason()}")
SHIM = "#define GROUP hg_group_id\n#define LOCAL hg_local_id\n#define SIZE hg_group_size\n#define SYNC() hg_barrier()\n"

# *** device memory ***

def test_addresses_are_aligned_distinct_and_per_device():
  m0, m1 = DeviceMemory(1 << 20), DeviceMemory(1 << 20, index=1)
  a, b, c = m0.alloc(100), m0.alloc(0), m1.alloc(100)
  assert all(x % ALIGN == 0 and x != 0 for x in (a, b, c)) and len({a, b, c}) == 3
  arr, off = m0.buffer(a + 10)
  assert arr.dtype == np.uint8 and arr.size == 100 and off == 10
  with pytest.raises(DeviceMemoryError, match="not a device address"): m0.buffer(c)  # another device's
  with pytest.raises(DeviceMemoryError): m0.buffer(a + 100 + ALIGN)  # between allocations

def test_free_and_capacity():
  m = DeviceMemory(1000)
  a = m.alloc(600)
  with pytest.raises(MemoryError, match="out of device memory"): m.alloc(401)
  m.free(a)
  with pytest.raises(DeviceMemoryError, match="freed"): m.free(a)
  with pytest.raises(DeviceMemoryError, match="freed"): m.buffer(a)
  m.alloc(1000)

def test_bytes_round_trip_and_range_check():
  m = DeviceMemory(1 << 20)
  a = m.alloc(64)
  m.buffer(a)[0][:] = np.arange(64, dtype=np.uint8)
  assert bytes(m.buffer(a)[0][16:20]) == bytes([16, 17, 18, 19])
  m.check_range(a + 32, 32)
  with pytest.raises(DeviceMemoryError, match="past the end"): m.check_range(a + 32, 33)

# *** the emulated image ***

class _Upper(Compiler):
  cachekey = "upper 1"
  def compile(self, src: str) -> bytes: return src.upper().encode()

def test_emulated_image_round_trip():
  c = emulatedimage.EmulatedCompiler(_Upper(), "host", {"extra": lambda s: s[::-1].encode()})
  ex, sec = emulatedimage.unpack(c.compile("abc"))
  assert ex == "host" and sec["source"] == b"abc" and sec["extra"] == b"cba"
  import hashlib
  assert sec["binary-sha256"] == hashlib.sha256(b"ABC").hexdigest().encode()  # the real compiler ran
  assert "emulated-image host" in c.cachekey and emulatedimage.unpack(b"\x7fELF") is None

# *** the host-source executor ***

def _run(src: str, entry: str, grid, group, arrays: list[np.ndarray], vals=(), barrier="SYNC", seed=0) -> tuple[int, list[np.ndarray]]:
  m = DeviceMemory(1 << 24)
  addrs = [m.alloc(a.nbytes) for a in arrays]
  for addr, a in zip(addrs, arrays): m.buffer(addr)[0][:] = a.view(np.uint8).reshape(-1)
  k = hostgrid.HostKernel(SHIM, src, entry, barrier)
  params = hostgrid.c_params(src, entry)
  sig = k.run(grid, group, params, addrs + list(vals), m, seed)
  return sig, [m.buffer(addr)[0].view(a.dtype).copy() for addr, a in zip(addrs, arrays)]

@needs_cxx
def test_ids_cover_the_grid_once():
  src = 'extern "C" void ids(int* out, const int n) { int g = GROUP.x + GROUP.y * 3, l = LOCAL.x + LOCAL.y * SIZE.x;' \
        ' out[g * 8 + l] += 1 + (g * 8 + l < n ? 0 : 100); }'
  assert hostgrid.c_params(src, "ids") == [(8, True), (4, False)]
  sig, (out,) = _run(src, "ids", (3, 2, 1), (4, 2, 1), [np.zeros(48, np.int32)], vals=(48,))
  assert sig == 0 and (out == 1).all()

@needs_cxx
def test_barrier_orders_shared_memory_and_its_absence_shows():
  body = ' static float t[64]; t[LOCAL.x] = in[GROUP.x * 64 + LOCAL.x]; {sync} out[GROUP.x * 64 + LOCAL.x] = t[63 - LOCAL.x]; }'
  x = np.arange(256, dtype=np.float32)
  want = x.reshape(4, 64)[:, ::-1].reshape(-1)
  src = 'extern "C" void rev(float* out, const float* in) {' + body.replace("{sync}", "SYNC();")
  sig, (out, _) = _run(src, "rev", (4, 1, 1), (64, 1, 1), [np.zeros(256, np.float32), x])
  assert sig == 0 and np.array_equal(out, want)
  src = 'extern "C" void rev2(float* out, const float* in) {' + body.replace("{sync}", "")
  _, (out, _) = _run(src, "rev2", (4, 1, 1), (64, 1, 1), [np.zeros(256, np.float32), x])
  assert not np.array_equal(out, want), "without the barrier the shuffled work-items must read unwritten shared memory"

@needs_cxx
def test_running_off_a_buffer_faults_instead_of_corrupting():
  src = 'extern "C" void oob(float* out) { out[GROUP.x * 64 + LOCAL.x] = 1.0f; }'
  sig, _ = _run(src, "oob", (2, 1, 1), (64, 1, 1), [np.zeros(1024, np.float32)])  # 4 KiB: one page, the next is the guard
  assert sig == 0
  sig, _ = _run(src, "oob", (17, 1, 1), (64, 1, 1), [np.zeros(1024, np.float32)])
  assert sig == signal.SIGSEGV

@needs_cxx
def test_trap_is_reported_and_the_next_launch_runs():
  src = 'extern "C" void trap(int* out) { if (LOCAL.x == 3) __builtin_trap(); SYNC(); out[LOCAL.x] = 1; }'
  sig, _ = _run(src, "trap", (1, 1, 1), (8, 1, 1), [np.zeros(8, np.int32)])
  assert sig == signal.SIGILL
  sig, (out,) = _run('extern "C" void fine(int* out) { SYNC(); out[LOCAL.x] = 2; }', "fine", (1, 1, 1), (8, 1, 1), [np.zeros(8, np.int32)])
  assert sig == 0 and (out == 2).all()

@needs_cxx
def test_compile_error_carries_the_compiler_output():
  with pytest.raises(CompileError, match="could not compile"): hostgrid.HostKernel(SHIM, 'extern "C" void bad(int* x) { nope; }', "bad", "SYNC")
