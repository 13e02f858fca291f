"""A PTX interpreter: runs an entry of a PTX module over a grid of threads with numpy, for the mock CUDA driver (NV runs
the PTX our renderer emits, CUDA the PTX NVRTC makes of our CUDA C).

  run_ptx(ptx, entry, grid, block, params, mem)    params: each .param's raw integer; mem.buffer(addr) -> (uint8 array, offset)

How it executes (the rules):
- Every thread has its own program counter. The interpreter repeatedly takes the lowest pc among the runnable threads
  and runs the straight-line block there for all threads at that pc at once (numpy over threads). Threads that diverged
  meet again where their pcs meet, so loops, divergence and early exits need no reconvergence stack.
- `bar.sync` parks a thread until every live thread of its block is parked; then the block goes on together. A thread
  that exits no longer counts.
- State spaces, faults (PTXFault: illegal and misaligned addresses) and the shared-memory race check: ptx_memory.py. An
  instruction not implemented raises PTXUnsupported naming it.
- `.func` and `call` work (per-thread return stack); recursion does not (registers are one frame per function).
- Large grids run in chunks of whole blocks (blocks are independent), so memory stays bounded.
Instruction semantics live in ptx_ops.py (arithmetic) and ptx_values.py (typed registers); parsing in ptx_parse.py.
Checked bit for bit against an H100 (tests/test_ptx_interp.py::test_matches_h100)."""
from __future__ import annotations
import functools
from typing import Any, Callable, Sequence
import numpy as np
from tinygrad_cuda.mock.ptx_parse import Addr, Imm, Instr, Module, PTXUnsupported, Reg, Sym, Var, Vec, parse
from tinygrad_cuda.mock.ptx_memory import LOCAL_WINDOW, MODULE_DATA, SHARED_WINDOW, Memory, PTXFault, memory_op
from tinygrad_cuda.mock.ptx_ops import alu
from tinygrad_cuda.mock.ptx_values import storage_dtype

__all__ = ["run_ptx", "PTXFault", "PTXUnsupported"]

CHUNK_THREADS = 8192     # threads run at once, in whole blocks,
REGISTER_BUDGET = 1 << 27  # and fewer where their registers and local memory would take more bytes than this
_WAIT = 1 << 40          # added to the pc of a thread parked at bar.sync
_MAX_DEPTH = 32

_TERMINATORS = ("bra", "ret", "exit", "call", "bar", "barrier")
_IGNORED = ("membar", "fence", "prefetch", "prefetchu", "pmevent", "nanosleep")

class Program:
  """A module linked for one entry: every reachable function's instructions in one list, with blocks and addresses."""
  def __init__(self, mod: Module, entry: str):
    if entry not in mod.functions or not mod.functions[entry].entry:
      raise PTXUnsupported(f"PTX: no .entry {entry} in this module (entries: {[f.name for f in mod.functions.values() if f.entry]})")
    self.mod, self.entry = mod, mod.functions[entry]
    self.funcs = [self.entry] + [f for f in mod.functions.values() if f is not self.entry and f.body]
    self.regs: dict[str, str] = {}
    self.start: dict[str, int] = {}
    code: list[tuple[Any, Instr]] = []
    for f in self.funcs:
      self.regs.update(f.regs)
      self.start[f.name] = len(code)
      code += [(f, i) for i in f.body]
    self.code = code
    self._uses: dict[str, dict[str, int]] = {}
    self.reg_dtypes = {name: np.dtype(storage_dtype(t)) for name, t in self.regs.items()}
    self.register_bytes = sum(d.itemsize for d in self.reg_dtypes.values())
    self.layout()
    self.fns = [self.compile(f, i, pc) for pc, (f, i) in enumerate(code)]
    self.blocks = self.make_blocks()

  def layout(self) -> None:
    """Byte offsets of shared, local and per-thread param variables; addresses of module data."""
    self.sym: dict[str, tuple[str, int]] = {}
    sizes = {"shared": 0, "local": 0, "param": 0}
    def place(name: str, space: str, size: int, align: int) -> None:
      off = -(-sizes[space] // max(align, 1)) * max(align, 1)
      self.sym[name] = (space, off)
      sizes[space] = off + size
    for f in self.funcs:
      for v in f.vars: place(v.name, v.space, v.size, v.align)
      if f is not self.entry:
        for v in f.params + f.rets: place(f"{f.name}/{v.name}", "param", v.size, v.align)
    self.shared_size, self.local_size, self.param_size = sizes["shared"], sizes["local"], sizes["param"]
    self.entry_params: list[tuple[str, Var, int]] = []
    off = 0
    for v in self.entry.params:
      off = -(-off // max(v.align, 1)) * max(v.align, 1)
      self.entry_params.append((f"{self.entry.name}/{v.name}", v, off))
      self.sym[f"{self.entry.name}/{v.name}"] = ("kparam", off)
      off += v.size
    self.kparam_size = off
    self.data: list[tuple[int, np.ndarray, str]] = []
    addr = MODULE_DATA
    for g in self.mod.globals:
      addr = -(-addr // max(g.align, 16)) * max(g.align, 16)
      buf = np.zeros(max(g.size, 1), np.uint8)
      buf[:len(g.init)] = np.frombuffer(g.init, np.uint8)[:g.size]
      self.data.append((addr, buf, g.space))
      self.sym[g.name] = (g.space, addr)
      addr += max(g.size, 1)

  def contracted(self, ins: Instr, site: tuple[Any, int]) -> tuple[tuple, int] | None:
    """For an add/sub without a rounding modifier at body index i of function f (site): ((a, b), k) when its operand 1 or
    2 (k is the other one) is the only use of `mul d, a, b` without a rounding modifier earlier in the same straight-line
    code, with a and b unchanged since."""
    parts = ins.op.split(".")
    if any(p in ("rn", "rz", "rm", "rp") for p in parts) or len(ins.args) != 3: return None
    f, i = site
    uses = self.uses(f.name)
    stops = set(f.labels.values())
    for k in (1, 2):
      src = ins.args[k]
      if not isinstance(src, Reg) or uses.get(src.name, 0) != 1: continue
      for j in range(i - 1, -1, -1):
        prev = f.body[j]
        if j + 1 in stops or prev.op.split(".")[0] in _TERMINATORS: break
        if prev.args and prev.args[0] == src:
          pp = prev.op.split(".")
          ok = pp[0] == "mul" and pp[-1] == parts[-1] and not any(p in ("rn", "rz", "rm", "rp") for p in pp) and prev.guard is None
          between = {a for x in f.body[j + 1:i] for a in x.args[:1] if isinstance(a, Reg)}
          if ok and not (set(a for a in prev.args[1:] if isinstance(a, Reg)) & between): return (prev.args[1], prev.args[2]), 3 - k
          break
    return None

  def uses(self, fname: str) -> dict[str, int]:
    """How often each register is read in a function."""
    if fname in self._uses: return self._uses[fname]
    n = self._uses[fname] = {}
    def walk(a):
      if isinstance(a, Reg): n[a.name] = n.get(a.name, 0) + 1
      elif isinstance(a, Vec): [walk(x) for x in a.items]
      elif isinstance(a, Addr) and a.base is not None: walk(a.base)
    for ins in self.mod.functions[fname].body:
      for a in ins.args[1:] if ins.op.split(".")[0] not in ("st",) else ins.args: walk(a)
      if ins.guard: n[ins.guard[0]] = n.get(ins.guard[0], 0) + 1
    return n

  def symbol_address(self, name: str) -> int:
    if name not in self.sym: raise PTXUnsupported(f"PTX: unknown symbol {name.split('/')[-1]}")
    return self.sym[name][1]
  def window(self, space: str) -> int: return {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space, 0)

  def compile(self, f, ins: Instr, pc: int) -> Callable | None:
    base = ins.op.split(".")[0]
    if base in _TERMINATORS or base in _IGNORED: return None
    if base in ("ld", "st", "ldu"): fn = memory_op(ins, self)
    elif base == "atom": raise PTXUnsupported(f"PTX instruction {ins.op}")
    else: fn = alu(ins, self, (f, pc - self.start[f.name]))
    if ins.guard is None: return fn
    pred, neg = ins.guard
    def guarded(m, sel):
      p = m.r[pred][sel]
      sub = subset(sel, ~p if neg else p)
      if len(sub): fn(m, sub)
    return guarded

  def make_blocks(self) -> dict[int, tuple[list[Callable], int]]:
    """pc of a block's first instruction -> (its non-terminator functions, pc of its last instruction)."""
    leaders = {0} | set(self.start.values())
    for pc, (f, ins) in enumerate(self.code):
      b = ins.op.split(".")[0]
      if b in _TERMINATORS: leaders.add(pc + 1)
      if b == "bra": leaders.add(self.label(f, ins))
    blocks, n = {}, len(self.code)
    for s in sorted(x for x in leaders if x < n):
      fns, pc = [], s
      while True:
        b = self.code[pc][1].op.split(".")[0]
        if b in _TERMINATORS or pc + 1 >= n or pc + 1 in leaders: break
        if self.fns[pc] is not None: fns.append(self.fns[pc])
        pc += 1
      if self.code[pc][1].op.split(".")[0] not in _TERMINATORS and self.fns[pc] is not None: fns.append(self.fns[pc])
      blocks[s] = (fns, pc)
    return blocks

  def label(self, f, ins: Instr) -> int:
    tgt = ins.args[0]
    name = tgt.name if isinstance(tgt, Sym) else str(tgt)
    if name not in f.labels: raise PTXUnsupported(f"PTX: branch to unknown label {name} in {f.name}")
    return self.start[f.name] + f.labels[name]

def subset(sel, mask: np.ndarray) -> np.ndarray:
  return np.flatnonzero(mask) if isinstance(sel, slice) else sel[mask]

class Machine(Memory):
  """The state of one chunk of blocks: registers, pcs, carry flags, shared/local/param memory, and the scheduler."""
  def __init__(self, prog: Program, grid: tuple[int, int, int], block: tuple[int, int, int], first_block: int, nblocks: int,
               kparams: np.ndarray, mem: Any):
    self.prog, self.mem, self.grid, self.block = prog, mem, grid, block
    T = block[0] * block[1] * block[2]
    self.T, self.nblk, self.n = T, nblocks, T * nblocks
    n = self.n
    self.r = {name: np.zeros(n, dt) for name, dt in prog.reg_dtypes.items()}
    self.carry = np.zeros(n, np.uint8)
    t = np.arange(n, dtype=np.int64)
    self.bidx = t // T
    lid, gid = t % T, self.bidx + first_block
    self.sp = {"%tid.x": lid % block[0], "%tid.y": lid // block[0] % block[1], "%tid.z": lid // (block[0] * block[1]),
               "%ctaid.x": gid % grid[0], "%ctaid.y": gid // grid[0] % grid[1], "%ctaid.z": gid // (grid[0] * grid[1]),
               "%laneid": lid % 32, "%warpid": lid // 32}
    self.sp = {k: v.astype(np.uint32) for k, v in self.sp.items()}
    self.const_sp = {"%ntid.x": block[0], "%ntid.y": block[1], "%ntid.z": block[2], "%nctaid.x": grid[0], "%nctaid.y": grid[1],
                     "%nctaid.z": grid[2], "%warpsize": 32, "%nwarpid": -(-T // 32)}
    self.first_block = first_block
    self.init_memory(prog, nblocks, n, kparams, mem)
    self.pc = np.zeros(n, np.int64)
    self.stack = np.zeros((n, _MAX_DEPTH), np.int64)
    self.depth = np.zeros(n, np.int64)

  def count(self, sel) -> int: return self.n if isinstance(sel, slice) else len(sel)
  def threads(self, sel) -> np.ndarray: return np.arange(self.n) if isinstance(sel, slice) else sel

  def special(self, name: str, sel) -> np.ndarray:
    if name in self.sp: return self.sp[name][sel]
    if name in self.const_sp: return np.full(self.count(sel), self.const_sp[name], np.uint32)
    raise PTXUnsupported(f"PTX special register {name}")

  def where(self, sel, k: int) -> str:
    """Which thread the k-th of sel is, in CUDA's words."""
    t = int(self.threads(sel)[k])
    b, l = self.first_block + t // self.T, t % self.T
    bx, by = self.block[0], self.block[1]
    gx, gy = self.grid[0], self.grid[1]
    return f"block ({b % gx}, {b // gx % gy}, {b // (gx * gy)}) thread ({l % bx}, {l // bx % by}, {l // (bx * by)})"

  # *** control ***
  def run(self) -> None:
    prog, EXIT = self.prog, len(self.prog.code)
    pc, single, ALL = self.pc, self.n == 1, slice(None)
    while True:
      p = int(pc[0]) if single else int(pc.min())
      if p >= EXIT:
        if p >= _WAIT: raise PTXFault("CUDA_ERROR_LAUNCH_FAILED", "deadlock: threads wait at bar.sync that others can never reach")
        return
      if single: sel: Any = ALL
      else:
        eq = pc == p
        sel = ALL if eq.all() else np.flatnonzero(eq)
      fns, last = prog.blocks[p]
      for fn in fns: fn(self, sel)
      f, ins = prog.code[last]
      self.terminate(f, ins, last, sel)

  def terminate(self, f, ins: Instr, pc: int, sel) -> None:
    base = ins.op.split(".")[0]
    if base not in _TERMINATORS:
      self.pc[sel] = pc + 1
      return
    go = sel
    if ins.guard is not None:
      p = self.r[ins.guard[0]][sel]
      p = ~p if ins.guard[1] else p
      self.pc[subset(sel, ~p)] = pc + 1
      go = subset(sel, p)
      if len(go) == 0: return
    if base == "bra": self.pc[go] = self.prog.label(f, ins)
    elif base in ("bar", "barrier"): self.barrier(go, pc, ins)
    elif base in ("ret", "exit"): self.ret(go, base == "exit")
    else: self.call(go, pc, ins)

  def barrier(self, sel, pc: int, ins: Instr) -> None:
    if any(a is not None and not (isinstance(a, Imm) and a.text == "0") for a in ins.args[:1]) or len(ins.args) > 1:
      raise PTXUnsupported(f"PTX '{ins.text}': only bar.sync 0 with the whole block is implemented")
    self.pc[sel] = pc + _WAIT
    EXIT = len(self.prog.code)
    busy = np.zeros(self.nblk, bool)
    busy[self.bidx[self.pc < EXIT]] = True
    waiting = self.pc >= _WAIT
    release = waiting & ~busy[self.bidx]
    if release.any():
      self.pc[release] -= _WAIT - 1
      done = np.zeros(self.nblk, bool)
      done[self.bidx[release]] = True
      self.epoch[done] += 1

  def ret(self, sel, exit_: bool) -> None:
    d = self.depth[sel]
    if exit_ or not d.any():
      self.pc[sel] = len(self.prog.code)
      return
    th = self.threads(sel)
    done, back = th[d == 0], th[d > 0]
    self.pc[done] = len(self.prog.code)
    self.depth[back] -= 1
    ret_pc = self.stack[back, self.depth[back]]
    for r in np.unique(ret_pc):
      who = back[ret_pc == r]
      cf, call = self.prog.code[int(r) - 1]
      callee = self.prog.mod.functions[call.args[1].name]
      for dst, src in zip(call.args[0].items, callee.rets): self.copy_param(who, self.prog.sym[src and f"{callee.name}/{src.name}"][1],
                                                                            self.prog.sym[dst.name][1], src.size)
      self.pc[who] = int(r)

  def call(self, sel, pc: int, ins: Instr) -> None:
    name = ins.args[1].name
    callee = self.prog.mod.functions.get(name)
    if callee is None or not callee.body: raise PTXUnsupported(f"PTX: call of {name}, which has no body in this module")
    th = self.threads(sel)
    if (self.depth[th] >= _MAX_DEPTH).any(): raise PTXFault("CUDA_ERROR_LAUNCH_FAILED", f"call stack deeper than {_MAX_DEPTH} at '{ins.text}'")
    for src, dst in zip(ins.args[2].items, callee.params):
      self.copy_param(th, self.prog.sym[src.name][1], self.prog.sym[f"{callee.name}/{dst.name}"][1], dst.size)
    self.stack[th, self.depth[th]] = pc + 1
    self.depth[th] += 1
    self.pc[th] = self.prog.start[name]

  def copy_param(self, th: np.ndarray, src: int, dst: int, size: int) -> None:
    self.params[th, dst:dst + size] = self.params[th, src:src + size]

@functools.lru_cache(maxsize=256)
def _program(text: str, entry: str) -> Program: return Program(parse(text), entry)

def run_ptx(ptx: str, entry: str, grid: Sequence[int], block: Sequence[int], params: Sequence[int], mem: Any,
            chunk_threads: int = CHUNK_THREADS) -> None:
  """Runs `entry` of the PTX module over grid x block threads. params: each .param's raw integer value in order (pointers
  as device addresses, floats as their bits); mem.buffer(addr) -> (uint8 array of the allocation holding addr, offset).
  Raises PTXFault for what a GPU faults on, PTXUnsupported for PTX this interpreter does not implement."""
  prog = _program(ptx, entry)
  grid3 = tuple(int(x) for x in tuple(grid) + (1,) * (3 - len(grid)))
  block3 = tuple(int(x) for x in tuple(block) + (1,) * (3 - len(block)))
  if len(params) != len(prog.entry_params):
    raise PTXUnsupported(f"PTX entry {entry} takes {len(prog.entry_params)} parameters, the launch gave {len(params)}")
  kparams = np.zeros(max(prog.kparam_size, 1), np.uint8)
  for (_, v, off), val in zip(prog.entry_params, params):
    kparams[off:off + v.size] = np.frombuffer((int(val) & ((1 << (8 * v.size)) - 1)).to_bytes(v.size, "little"), np.uint8)
  T = block3[0] * block3[1] * block3[2]
  nb = grid3[0] * grid3[1] * grid3[2]
  per_thread = prog.register_bytes + prog.local_size + prog.param_size + 64
  per = max(1, min(chunk_threads, REGISTER_BUDGET // per_thread) // max(T, 1))
  with np.errstate(all="ignore"):
    for first in range(0, nb, per):
      Machine(prog, grid3, block3, first, min(per, nb - first), kparams, mem).run()
