"""The PYTHON device: interprets the linear UOp program with GPU semantics, using numpy.

All threads of the whole grid run in lockstep, one numpy lane per thread: a value is an array over threads.
Loops are uniform across threads, so running every thread up to a BARRIER before any continues is exactly what a
barrier promises; local memory is one array per work-group. It is the reference the conformance suite trusts."""
from __future__ import annotations
import base64, pickle, time
from typing import Any, Sequence
import numpy as np
from tinycore.backend import API_VERSION, Allocator, Backend, BufferSpec, CompileError, Compiler, Program, Renderer
from tinycore.dtype import dtypes, to_np_dtype, bf16_to_f32
from tinycore.ops import Ops, GroupOp, exec_alu, np_cast
from tinycore.uop.uop import UOp

TINYCORE_API_VERSION = API_VERSION  # the core's own device is always written against the core's current contract

class PythonRenderer(Renderer):
  def __init__(self) -> None:
    super().__init__(device="PYTHON", has_local=True, has_shared=True, global_max=None, local_max=(1024, 1024, 64),
                     shared_max=65536, dtypes=tuple(dtypes.all))
  def render(self, name: str, uops: list[UOp]) -> str:
    return base64.b64encode(pickle.dumps((name, uops))).decode()
  def describe(self, src: str) -> str:
    """A readable listing of a rendered program (what DEBUG=4 shows for this device)."""
    name, uops = pickle.loads(base64.b64decode(src))
    ix = {u: i for i, u in enumerate(uops)}
    return f"program {name}\n" + "\n".join(f"{i:4d} {u.op.name:14s} {u.dtype!s:22s} {[ix.get(s, '?') for s in u.src]} {u.arg!r}"
                                           for i, u in enumerate(uops))

class PythonAllocator(Allocator):
  def _alloc(self, size: int, options: BufferSpec) -> np.ndarray: return np.zeros(size, dtype=np.uint8)
  def _copyin(self, dest: np.ndarray, src: memoryview) -> None: dest[:] = np.frombuffer(src, dtype=np.uint8)
  def _copyout(self, dest: memoryview, src: np.ndarray) -> None: np.frombuffer(dest, dtype=np.uint8)[:] = src
  def _as_buffer(self, src: np.ndarray) -> memoryview: return memoryview(src)
  def _offset(self, buf: np.ndarray, size: int, offset: int) -> np.ndarray: return buf[offset:offset + size]

class PythonProgram(Program):
  def __init__(self, device: str, name: str, lib: bytes):
    super().__init__(device, name, lib)
    try: self.uops: list[UOp] = pickle.loads(base64.b64decode(lib))[1]
    except Exception as e: raise CompileError(f"PYTHON cannot load program {name}: {type(e).__name__}: {e}") from None
    # values of symbolic variables arrive sorted by variable, as every backend takes them
    self.var_index = {v: i for i, v in enumerate(sorted((u for u in self.uops if u.op is Ops.DEFINE_VAR), key=lambda v: v.arg))}

  def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] | None = (1, 1, 1),
               vals: Sequence[int] = (), wait: bool = False) -> float | None:
    st = time.perf_counter()
    ls = list(local_size or (1, 1, 1))
    nl, ng = int(np.prod(ls)), int(np.prod(global_size))
    tid = np.arange(ng * nl, dtype=np.int64)
    group, lid = tid // nl, tid % nl
    ids = {"g": _unravel(group, global_size), "l": _unravel(lid, ls)}
    uops, v = self.uops, {}
    globals_ = [b for b in bufs]
    var_vals = list(vals)
    pc, loop_stack = 0, []
    while pc < len(uops):
      u = uops[pc]
      op, dt, src = u.op, u.dtype, u.src
      if op is Ops.DEFINE_GLOBAL: v[u] = globals_[u.arg].view(to_np_dtype(dt.base)) if dt.base != dtypes.bfloat16 else globals_[u.arg].view(np.uint16)
      elif op is Ops.DEFINE_VAR: v[u] = np.int32(var_vals[self.var_index[u]])
      elif op is Ops.DEFINE_LOCAL: v[u] = ("local", np.zeros((ng, u.arg[1]), dtype=to_np_dtype(dt.base)))
      elif op is Ops.SPECIAL: v[u] = ids[u.arg[0][0]][int(u.arg[0][-1])]
      elif op is Ops.CONST:
        v[u] = np.array(u.arg, dtype=to_np_dtype(dt)) if dt != dtypes.bfloat16 else np_cast(np.array(u.arg, np.float32), dtypes.float32, dt)
      elif op is Ops.RANGE:
        v[u] = np.int32(int(v[src[0]]))
        if v[u] >= int(v[src[1]]):  # empty loop: jump past its end
          pc = _end_of(uops, pc, u) + 1
          continue
        loop_stack.append(pc)
      elif op is Ops.ENDRANGE:
        r = src[0]
        v[r] = np.int32(v[r] + 1)
        if v[r] < int(v[r.src[1]]):
          pc = loop_stack[-1] + 1
          continue
        loop_stack.pop()
      elif op is Ops.DEFINE_ACC: v[u] = np.broadcast_to(v[src[0]], (ng * nl,)).copy()
      elif op is Ops.ASSIGN:
        v[src[0]] = v[u] = np.broadcast_to(v[src[1]], (ng * nl,)).copy()
      elif op is Ops.LOAD:
        s = [x for x in src if x.op is not Ops.BARRIER]
        mem, idx = v[s[0]], np.broadcast_to(v[s[1]], (ng * nl,)).astype(np.int64)
        gate = np.broadcast_to(v[s[2]], idx.shape) if len(s) > 2 else None
        if gate is not None: idx = np.where(gate, idx, 0)
        val = mem[1][group, idx] if isinstance(mem, tuple) else _checked(mem, idx, u)
        v[u] = np.where(gate, val, v[s[3]]) if gate is not None else val
      elif op is Ops.STORE:
        mem, idx, val = v[src[0]], np.broadcast_to(v[src[1]], (ng * nl,)).astype(np.int64), np.broadcast_to(v[src[2]], (ng * nl,))
        sel = np.broadcast_to(v[src[3]], idx.shape) if len(src) > 3 else slice(None)
        if isinstance(mem, tuple): mem[1][group[sel], idx[sel]] = val[sel]
        else:
          _checked(mem, idx[sel], u)
          mem[idx[sel]] = val[sel]
      elif op is Ops.BARRIER: pass  # lockstep execution: every thread already reached it
      elif op is Ops.CAST: v[u] = np_cast(np.asarray(v[src[0]]), src[0].dtype, dt)
      elif op is Ops.BITCAST: v[u] = np.asarray(v[src[0]]).view(to_np_dtype(dt)) if dt != dtypes.bfloat16 else np.asarray(v[src[0]]).view(np.uint16)
      elif op in GroupOp.ALU:
        # a comparison of bfloat16 values compares the numbers, not the uint16 bit patterns they are stored as
        cmp_bf16 = dt.scalar() != dtypes.bfloat16 and op is not Ops.WHERE
        v[u] = exec_alu(op, dt, [bf16_to_f32(np.asarray(v[s])) if cmp_bf16 and s.dtype.scalar() == dtypes.bfloat16 else np.asarray(v[s])
                                 for s in src])
      else: raise NotImplementedError(f"PYTHON device cannot run {op}")
      pc += 1
    return time.perf_counter() - st if wait else None

def _checked(mem: np.ndarray, idx: np.ndarray, u: UOp) -> np.ndarray:
  if idx.size and (idx.min() < 0 or idx.max() >= mem.shape[0]):
    raise IndexError(f"out of bounds access in {u.op}: index range [{idx.min()}, {idx.max()}] of a buffer of {mem.shape[0]}")
  return mem[idx]

def _end_of(uops: list[UOp], pc: int, rng: UOp) -> int:
  return next(i for i in range(pc, len(uops)) if uops[i].op is Ops.ENDRANGE and uops[i].src[0] is rng)

def _unravel(x: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
  out = []
  for s in sizes:
    out.append((x % s).astype(np.int32))
    x = x // s
  return out

class PythonCompiler(Compiler):
  cachekey = None  # nothing to compile: the "binary" is the serialized program, checked here
  def compile(self, src: str) -> bytes:
    try:
      name, uops = pickle.loads(base64.b64decode(src, validate=True))
      if not isinstance(name, str) or not all(isinstance(u, UOp) for u in uops): raise TypeError("not a (name, [UOp]) program")
    except Exception as e: raise CompileError(f"PYTHON cannot load this program: {type(e).__name__}: {e}") from None
    return src.encode()

# priority 0: the default only where no compiled device is available (it is slow, and always there)
BACKEND = Backend("PYTHON", priority=0, api_version=TINYCORE_API_VERSION, description="UOp interpreter in numpy, the reference device",
                  allocator=lambda device, idx: PythonAllocator(), renderer=lambda device, idx: PythonRenderer(),
                  compiler=lambda device, idx: PythonCompiler(), program=lambda device, idx: PythonProgram)
tinycore_devices, tinycore_allocator, tinycore_renderer, tinycore_compiler, tinycore_program = BACKEND.hookimpls()
