"""Level 2, allocator: device memory round trips for every declared dtype and for sizes 0, 1, odd and large, through the
allocator itself and through the core's Buffer; views (when the allocator has _offset), host access (_as_buffer),
freeing and reuse, copies between this device and the PYTHON reference device, and a clear error for allocations that
cannot succeed. Nothing here runs in --compile-only mode."""
from __future__ import annotations
import numpy as np
import pytest
from tinycore.device import Buffer
from tinycore.dtype import dtypes
from tinycore_conformance.values import ALL_DTYPES, dtname, randoms, to_storage, edges

LAYER = 2
SIZES = [0, 1, 37, 4099]

def data(dt, n, seed=0):
  rng = np.random.default_rng(seed)
  vals = (edges(dt) + randoms(dt, n, rng))[:n] if n else []
  return to_storage(vals, dt) if n else np.zeros(0, dtype=to_storage([0], dt).dtype)

def raw(a: np.ndarray) -> memoryview: return memoryview(np.ascontiguousarray(a).reshape(-1).view(np.uint8))

@pytest.fixture
def alloc(target):
  target.require_runtime()
  return target.allocator

@pytest.mark.cap("round trip (allocator)")
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtname)
def test_round_trip(target, alloc, dtype, size):
  target.require_dtype(dtype)
  a = data(dtype, size, seed=size)
  h = alloc.alloc(a.nbytes)
  try:
    if a.nbytes: alloc.copyin(h, raw(a))
    out = np.zeros_like(a)
    if a.nbytes: alloc.copyout(raw(out), h)
    assert out.tobytes() == a.tobytes(), f"{dtname(dtype)} x {size}: copyout after copyin returned different bytes"
  finally: alloc.free(h, a.nbytes)

@pytest.mark.cap("round trip (Buffer)")
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtname)
def test_buffer_round_trip(target, dtype, size):
  target.require_runtime()
  target.require_dtype(dtype)
  a = data(dtype, size, seed=100 + size)
  b = Buffer(target.device, size, dtype).allocate()
  if size: b.copyin(raw(a))
  out = b.numpy()
  assert out.tobytes() == a.tobytes(), f"Buffer({target.device}, {size}, {dtname(dtype)}): numpy() after copyin returned different bytes"

@pytest.mark.cap("large round trip")
def test_large(target, alloc):
  n = 24 << 20
  a = np.random.default_rng(7).integers(0, 256, n, dtype=np.uint8)
  h = alloc.alloc(n)
  try:
    alloc.copyin(h, memoryview(a))
    out = np.zeros_like(a)
    alloc.copyout(memoryview(out), h)
    bad = np.nonzero(out != a)[0]
    assert not bad.size, f"{n} byte round trip: {bad.size} bytes differ, first at byte {bad[0]}"
  finally: alloc.free(h, n)

@pytest.mark.cap("buffers are independent")
def test_independent(target, alloc):
  hs = [alloc.alloc(4096) for _ in range(8)]
  try:
    for i, h in enumerate(hs): alloc.copyin(h, memoryview(np.full(4096, i, np.uint8)))
    for i, h in enumerate(hs):
      out = np.zeros(4096, np.uint8)
      alloc.copyout(memoryview(out), h)
      assert (out == i).all(), f"buffer {i} of 8 was changed by writes to another buffer (values {np.unique(out)})"
  finally:
    for h in hs: alloc.free(h, 4096)

@pytest.mark.cap("free and reuse")
def test_free_reuse(target, alloc):
  for i in range(64):
    h = alloc.alloc(1 << 20)
    alloc.copyin(h, memoryview(np.full(1 << 20, i % 251, np.uint8)))
    out = np.zeros(1 << 20, np.uint8)
    alloc.copyout(memoryview(out), h)
    assert (out == i % 251).all(), f"allocation {i}: a buffer reused after free did not hold what was written"
    alloc.free(h, 1 << 20)
  alloc.free(alloc.alloc(0), 0)

@pytest.mark.cap("views (_offset)")
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.uint8, dtypes.int64], ids=dtname)
def test_views(target, alloc, dtype):
  target.require(hasattr(alloc, "_offset"), "buffer views (Allocator._offset)")
  target.require_dtype(dtype)
  n = 16384 // dtype.itemsize
  base = Buffer(target.device, n, dtype).allocate()
  a = data(dtype, n, 1)
  base.copyin(raw(a))
  off = 4096  # a multiple of every alignment we know of
  v = base.view(1024 // dtype.itemsize, dtype, off)
  got = v.numpy()
  want = a[off // dtype.itemsize: off // dtype.itemsize + 1024 // dtype.itemsize]
  assert got.tobytes() == want.tobytes(), f"a view at byte {off} does not read the base's bytes there"
  new = data(dtype, v.size, 2)
  v.copyin(raw(new))
  full = base.numpy()
  want_full = a.copy()
  want_full[off // dtype.itemsize: off // dtype.itemsize + v.size] = new
  assert full.tobytes() == want_full.tobytes(), "writing through a view must change the base there and nowhere else"
  assert Buffer(target.device, 0, dtype, base=base, offset=0).allocate().numpy().size == 0

@pytest.mark.cap("unaligned views (_offset)")
def test_unaligned_view(target, alloc):
  """A view at an odd offset either works or fails at once with a clear error: never wrong data."""
  target.require(hasattr(alloc, "_offset"), "buffer views (Allocator._offset)")
  base = Buffer(target.device, 256, dtypes.uint8).allocate()
  a = np.arange(256, dtype=np.uint8)
  base.copyin(memoryview(a))
  try: got = base.view(8, dtypes.uint8, 3).ensure_allocated().numpy()
  except Exception as e:
    assert str(e).strip(), f"an unsupported view must raise an error with a message, got a bare {type(e).__name__}"
    return
  assert got.tolist() == list(range(3, 11)), f"a view at byte 3 read {got.tolist()}"

@pytest.mark.cap("host access (_as_buffer)")
def test_as_buffer(target, alloc):
  target.require(hasattr(alloc, "_as_buffer"), "zero-copy host access (Allocator._as_buffer)")
  a = np.arange(1000, dtype=np.int32)
  h = alloc.alloc(a.nbytes)
  try:
    alloc.copyin(h, raw(a))
    mv = alloc._as_buffer(h)
    assert mv.nbytes == a.nbytes, f"_as_buffer returned {mv.nbytes} bytes for a buffer of {a.nbytes}"
    assert bytes(mv) == a.tobytes(), "_as_buffer does not show the buffer's contents"
  finally: alloc.free(h, a.nbytes)

@pytest.mark.cap("copy between devices")
@pytest.mark.parametrize("direction", ["to PYTHON", "from PYTHON"])
def test_copy_between_devices(target, alloc, direction):
  a = data(dtypes.int32, 1001, 3)
  src_dev, dst_dev = (target.device, "PYTHON") if direction == "to PYTHON" else ("PYTHON", target.device)
  src = Buffer(src_dev, a.size, dtypes.int32).allocate().copyin(raw(a))
  dst = Buffer(dst_dev, a.size, dtypes.int32).allocate()
  dst.copy_from(src)
  assert dst.numpy().tobytes() == a.tobytes(), f"copy {src_dev} -> {dst_dev} changed the data"

@pytest.mark.cap("copy on the device (_transfer)")
def test_transfer(target, alloc):
  target.require(hasattr(alloc, "_transfer"), "device-to-device copies (Allocator._transfer)")
  a = data(dtypes.float32, 777, 4)
  src = Buffer(target.device, a.size, dtypes.float32).allocate().copyin(raw(a))
  dst = Buffer(target.device, a.size, dtypes.float32).allocate()
  dst.copy_from(src)
  target.allocator.synchronize()
  assert dst.numpy().tobytes() == a.tobytes(), "a copy between two buffers of the device changed the data"

@pytest.mark.cap("impossible allocation")
def test_impossible_allocation(target, alloc):
  """Asking for 4 EiB must raise a clear exception (the process survives, and the device still works after)."""
  try: h = alloc.alloc(1 << 62)
  except (MemoryError, RuntimeError, ValueError, OverflowError) as e:
    assert str(e).strip(), f"the error for an impossible allocation must say what went wrong, got a bare {type(e).__name__}"
  except Exception as e:
    raise AssertionError(f"allocating 4 EiB raised {type(e).__name__}: {e}; raise MemoryError (the core's LRUAllocator frees its "
                         "cache and retries on MemoryError only) or a DeviceError") from e
  else:
    alloc.free(h, 1 << 62)
    raise AssertionError("allocating 4 EiB succeeded: the allocator must raise MemoryError (or a RuntimeError such as DeviceError)")
  h = alloc.alloc(64)
  alloc.copyin(h, memoryview(np.arange(64, dtype=np.uint8)))
  out = np.zeros(64, np.uint8)
  alloc.copyout(memoryview(out), h)
  alloc.free(h, 64)
  assert (out == np.arange(64)).all(), "the device does not work after a failed allocation"

@pytest.mark.cap("negative size")
def test_negative_size(target, alloc):
  with pytest.raises(ValueError): alloc.alloc(-1)

@pytest.mark.cap("synchronize")
def test_synchronize(target, alloc):
  alloc.synchronize()
