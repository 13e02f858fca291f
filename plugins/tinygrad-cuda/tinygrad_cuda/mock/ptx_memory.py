"""The state spaces of one launch of the PTX interpreter (Memory, mixed into ptx.Machine) and ld/st.

Rules: .param of the entry is read-only and the same for all threads; a .func's and a call's .param, .local, are per
thread; .shared is per block; .global is mem.buffer(addr) plus the module's own .global/.const data at MODULE_DATA.
Generic addresses map shared and local memory at SHARED_WINDOW and LOCAL_WINDOW (cvta), everything else is global.
A global access outside every allocation raises PTXFault('CUDA_ERROR_ILLEGAL_ADDRESS'), a misaligned access
'CUDA_ERROR_MISALIGNED_ADDRESS'; nothing is read or written outside the numpy arrays. Shared memory is race-checked: a
thread that reads bytes another thread of its block wrote since the block's last barrier, or writes bytes another read
since then, fails the launch with CUDA_ERROR_LAUNCH_FAILED naming both threads."""
from __future__ import annotations
from typing import Any, Callable
import numpy as np
from tinygrad_cuda.mock.ptx_parse import Addr, Imm, Instr, PTXUnsupported, Reg, Sym, Vec, type_bytes
from tinygrad_cuda.mock.ptx_ops import mods_of, types_of
from tinygrad_cuda.mock.ptx_values import reader, storage_dtype, value_dtype, writer

SHARED_WINDOW = 1 << 56  # generic address of shared byte 0 (cvta.shared)
LOCAL_WINDOW = 2 << 56   # generic address of local byte 0 (cvta.local)
MODULE_DATA = 3 << 56    # where the module's own .global/.const variables live
WINDOW_SIZE = 1 << 32

class PTXFault(RuntimeError):
  """The kernel did what a GPU stops a kernel for; cuda_error names the CUDA error the driver reports."""
  def __init__(self, cuda_error: str, what: str):
    super().__init__(what)
    self.cuda_error = cuda_error


def _addr_reader(a: Addr, prog: Any) -> tuple[Callable, str | None]:
  """fn(m, sel) -> uint64 addresses, and the param variable it names (for .param accesses)."""
  off = np.uint64(a.offset & 0xFFFFFFFFFFFFFFFF)
  if isinstance(a.base, Sym):
    space, base = prog.sym.get(a.base.name, (None, None))
    if space is None: raise PTXUnsupported(f"PTX: unknown symbol {a.base.name.split('/')[-1]}")
    v = np.uint64((base + a.offset) & 0xFFFFFFFFFFFFFFFF)
    return (lambda m, sel: v), space
  if isinstance(a.base, Reg):
    rd = reader(a.base, "u64" if np.dtype(storage_dtype(prog.regs[a.base.name])).itemsize == 8 else "u32", prog)
    return (lambda m, sel: np.asarray(rd(m, sel)).astype(np.uint64) + off), None
  if a.base is None or isinstance(a.base, Imm):
    v = np.uint64((int(a.base.text, 0) if a.base is not None else 0) + a.offset)
    return (lambda m, sel: v), None
  raise PTXUnsupported(f"PTX address {a}")

def memory_op(ins: Instr, prog: Any) -> Callable:
  parts = ins.op.split(".")
  t = types_of(ins.op)[-1]
  mods = mods_of(ins.op)
  space = next((p for p in parts[1:] if p in ("global", "shared", "local", "param", "const")), "generic")
  vec = 4 if "v4" in mods else 2 if "v2" in mods else 1
  w = type_bytes(t)
  load = parts[0] in ("ld", "ldu")
  addr_op, val_op = (ins.args[1], ins.args[0]) if load else (ins.args[0], ins.args[1])
  if not isinstance(addr_op, Addr): raise PTXUnsupported(f"PTX {ins.op} without an address operand")
  addr, sym_space = _addr_reader(addr_op, prog)
  items = val_op.items if isinstance(val_op, Vec) else (val_op,)
  if len(items) != vec: raise PTXUnsupported(f"PTX {ins.op} with {len(items)} values")
  if space == "param" and sym_space == "kparam": space = "kparam"
  vd = value_dtype(t) if t != "bf16" else np.uint16
  et = t if t != "bf16" else "b16"
  if load:
    ws = [writer(x, et, prog) for x in items]
    def ld(m, sel):
      v = m.load(space, addr(m, sel), w, vec, sel, ins).view(vd).reshape(-1, vec)
      for k, wr in enumerate(ws): wr(m, sel, v[:, k])
    return ld
  rs = [reader(x, et, prog) for x in items]
  def st(m, sel):
    n = m.count(sel)
    vals = []
    for r in rs:
      v = np.asarray(r(m, sel)).astype(vd, copy=False)
      vals.append(v if v.ndim and v.shape[0] == n else np.full(n, v, vd))
    v = vals[0] if vec == 1 else np.stack(vals, axis=1)
    m.store(space, addr(m, sel), w, vec, sel, np.ascontiguousarray(v).view(np.uint8).reshape(n, w * vec), ins)
  return st

class Memory:
  """Shared, local, param and global memory of a chunk of blocks; mixed into ptx.Machine (it has n, bidx, threads(), where())."""
  def init_memory(self, prog: Any, nblocks: int, n: int, kparams: np.ndarray, mem: Any) -> None:
    self.mem = mem
    self.shared = np.zeros(max(prog.shared_size, 1) * nblocks, np.uint8)
    self.sh_writer = np.full(self.shared.size, -1, np.int64)
    self.sh_reader = np.full(self.shared.size, -1, np.int64)
    self.sh_wepoch = np.full(self.shared.size, -1, np.int64)
    self.sh_repoch = np.full(self.shared.size, -1, np.int64)
    self.epoch = np.zeros(nblocks, np.int64)
    self.local = np.zeros(max(prog.local_size, 1) * n, np.uint8)
    self.params = np.zeros((n, max(prog.param_size, 1)), np.uint8)
    self.kparams = kparams
    self.ranges: list[tuple[int, int, np.ndarray]] = []
    self.spans: dict[int, np.ndarray] = {}

  def _bytes(self, space: str, addr: np.ndarray, nbytes: int, sel, ins: Instr):
    """(flat byte array, indices (n, nbytes) into it, resolved space) for the accesses, or for global memory spread over
    several allocations a list of (array, indices, rows) (_global); raises on a bad address."""
    a, n = np.asarray(addr), self.count(sel)
    if a.ndim == 0 or a.shape[0] != n: a = np.full(n, a, np.uint64)
    elif a.dtype != np.uint64: a = a.astype(np.uint64)
    unit = min(nbytes, 16) if nbytes in (1, 2, 4, 8, 16, 32) else 1
    if n == 1 and space == "global":  # one thread (a loop in a single thread): plain integers
      x = int(a[0])
      if x % unit == 0:
        for start, end, buf in self.ranges:
          if start <= x and x + nbytes <= end: return buf, self.span(nbytes)[None, :] + (x - start), "global"
    if unit > 1 and n and (mis := a & np.uint64(unit - 1)).any():
      k = int(np.flatnonzero(mis)[0])
      raise PTXFault("CUDA_ERROR_MISALIGNED_ADDRESS", f"'{ins.text.split(chr(10))[0]}': {self.where(sel, k)} accesses {nbytes} bytes at "
                     f"misaligned address {int(a[k]):#x}")
    if n == 0: return np.zeros(1, np.uint8), np.zeros((0, nbytes), np.int64), space
    span = self.span(nbytes)
    if space == "generic":
      lo, hi = int(a.min()), int(a.max())
      for sp, base in (("shared", SHARED_WINDOW), ("local", LOCAL_WINDOW)):
        if base <= lo and hi < base + WINDOW_SIZE: return self._bytes(sp, a - np.uint64(base), nbytes, sel, ins)
      if not (hi < SHARED_WINDOW or lo >= LOCAL_WINDOW + WINDOW_SIZE):
        win = a >> np.uint64(32)
        if ((win == np.uint64(SHARED_WINDOW >> 32)) | (win == np.uint64(LOCAL_WINDOW >> 32))).any():
          raise PTXUnsupported(f"PTX: one generic access '{ins.text}' spans several state spaces")
      space = "global"
    if space in ("shared", "local"):
      size = self.prog.shared_size if space == "shared" else self.prog.local_size
      ai = a.view(np.int64)
      if (bad := (ai < 0) | (ai + nbytes > size)).any():
        k = int(np.flatnonzero(bad)[0])
        raise PTXFault("CUDA_ERROR_ILLEGAL_ADDRESS", f"'{ins.text}': {self.where(sel, k)} accesses {nbytes} bytes at {space} address "
                       f"{int(a[k]):#x}, past the {size} bytes of {space} memory")
      row = self.bidx[sel] if space == "shared" else self.threads(sel)
      return (self.shared if space == "shared" else self.local), (row * size + ai)[:, None] + span, space
    if space == "kparam":
      if int(a.max()) + nbytes > self.prog.kparam_size: raise PTXUnsupported(f"PTX: '{ins.text}' reads past the kernel parameters")
      return self.kparams, a.view(np.int64)[:, None] + span, space
    if space == "param":
      return self.params.reshape(-1), (self.threads(sel) * self.params.shape[1] + a.view(np.int64))[:, None] + span, space
    lo, hi = (int(a[0]), int(a[0])) if n == 1 else (int(a.min()), int(a.max()))
    for start, end, buf in self.ranges:  # the allocations this launch has touched
      if start <= lo and hi + nbytes <= end: return buf, (a.view(np.int64) - start)[:, None] + span, "global"
    return self._global(a, nbytes, sel, ins, span)

  def span(self, nbytes: int) -> np.ndarray:
    if nbytes not in self.spans: self.spans[nbytes] = np.arange(nbytes, dtype=np.int64)
    return self.spans[nbytes]

  def _global(self, a: np.ndarray, nbytes: int, sel, ins: Instr, span: np.ndarray):
    """The accesses grouped by allocation: [(buffer, byte indices, rows of a)]."""
    groups, todo = [], np.arange(len(a))
    while len(todo):
      first = int(a[todo[0]])
      if (o := self._owner(first)) is None: self._illegal(sel, int(todo[0]), first, nbytes, ins)
      buf, base = o
      self.ranges.append((base, base + len(buf), buf))
      rel = a[todo].astype(np.int64) - base if first < (1 << 63) else np.full(len(todo), -1)
      inside = (a[todo] >= np.uint64(base)) & (rel >= 0) & (rel < len(buf))
      rows = todo[inside]
      if (past := np.flatnonzero(rel[inside] + nbytes > len(buf))).size: self._illegal(sel, int(rows[past[0]]), int(a[rows[past[0]]]), nbytes, ins)
      groups.append((buf, rel[inside][:, None] + span, rows))
      todo = todo[~inside]
    return groups

  def _illegal(self, sel, k: int, addr: int, nbytes: int, ins: Instr):
    raise PTXFault("CUDA_ERROR_ILLEGAL_ADDRESS", f"'{ins.text}': {self.where(sel, k)} accesses {nbytes} bytes at {addr:#x}, "
                   "outside every allocation")

  def _owner(self, addr: int):
    for start, buf, _ in self.prog.data:
      if start <= addr < start + len(buf): return buf, start
    try: buf, off = self.mem.buffer(addr)
    except Exception: return None
    return buf, addr - off

  def load(self, space: str, addr, w: int, vec: int, sel, ins: Instr) -> np.ndarray:
    got = self._bytes(space, addr, w * vec, sel, ins)
    if isinstance(got, list):
      out = np.empty((self.count(sel), w * vec), np.uint8)
      for buf, idx, rows in got: out[rows] = buf[idx]
      return out
    buf, idx, sp = got
    if sp == "shared": self._race(idx, sel, ins, write=False)
    return buf[idx]

  def store(self, space: str, addr, w: int, vec: int, sel, data: np.ndarray, ins: Instr) -> None:
    got = self._bytes(space, addr, w * vec, sel, ins)
    if isinstance(got, list):
      for buf, idx, rows in got: buf[idx] = data[rows]
      return
    buf, idx, sp = got
    if sp == "kparam": raise PTXUnsupported(f"PTX: '{ins.text}' writes a kernel parameter")
    if sp == "shared": self._race(idx, sel, ins, write=True)
    buf[idx] = data

  def _race(self, idx: np.ndarray, sel, ins: Instr, write: bool) -> None:
    """Shared-memory race check (see the module's rules), then record this access."""
    tid = np.broadcast_to(self.threads(sel)[:, None], idx.shape)
    ep = np.broadcast_to(self.epoch[self.bidx[sel]][:, None], idx.shape)
    other_w = (self.sh_wepoch[idx] == ep) & (self.sh_writer[idx] != tid) & (self.sh_writer[idx] >= 0)
    other_r = (self.sh_repoch[idx] == ep) & (self.sh_reader[idx] != tid) & (self.sh_reader[idx] >= 0) if write else None
    for bad, who, what in ((other_w, self.sh_writer, "wrote"), (other_r, self.sh_reader, "read")):
      if bad is not None and bad.any():
        k, j = (int(x[0]) for x in np.nonzero(bad))
        o = int(who[idx[k, j]])
        raise PTXFault("CUDA_ERROR_LAUNCH_FAILED", f"shared memory race at '{ins.text}': {self.where(sel, k)} "
                       f"{'writes' if write else 'reads'} shared byte {int(idx[k, j]) % max(self.prog.shared_size, 1)} that "
                       f"{self.where(np.array([o]), 0)} {what} with no bar.sync between")
    if write:
      self.sh_writer[idx], self.sh_wepoch[idx] = tid, ep
    else: self.sh_reader[idx], self.sh_repoch[idx] = tid, ep
