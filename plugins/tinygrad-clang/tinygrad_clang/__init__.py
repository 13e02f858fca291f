"""tinygrad-clang: the CPU backend. Renders C, compiles it with clang (or the system C compiler) into a shared
object, loads it with ctypes and runs kernels on host memory."""
from __future__ import annotations
import ctypes, functools, mmap, os, pathlib, shutil, subprocess, tempfile, threading, time
from typing import Any, Sequence
import numpy as np
from tinycore.device import BufferSpec, CompileError, Compiler, LRUAllocator, Program
from tinycore.dtype import DType, PtrDType, dtypes
from tinycore.helpers import getenv, diskcache_get, diskcache_put
from tinycore.ops import Ops, GroupOp
from tinycore.plugin import DeviceSpec, hookimpl
from tinycore.renderer.cstyle import CStyleLanguage
from tinycore.uop.uop import UOp

TINYCORE_API_VERSION = "1.0.0"
# IEEE semantics are kept (no -ffast-math): NaN and inf behave as in numpy; only a*b+c may become one fma
CFLAGS = ["-O2", "-march=native", "-fPIC", "-shared", "-fno-strict-aliasing", "-fno-math-errno", "-ffp-contract=fast"]
# THREADS=n: how many cores a kernel may use (default: all of them); kernels smaller than PARALLEL_MIN_WORK run on one
THREADS = max(1, getenv("THREADS", len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)))
PARALLEL_MIN_WORK = getenv("PARALLEL_MIN_WORK", 1 << 16)

def _loop_work(uops: list[UOp]) -> tuple[float, UOp | None]:
  """Roughly how many operations the kernel executes (loop trips times the ops inside), and its outermost loop."""
  mult, stack, work, outer = 1.0, [], 0.0, None
  for u in uops:
    if u.op is Ops.RANGE:
      if outer is None and not stack: outer = u
      stack.append(mult)
      lo, hi = u.src
      mult *= max(1, hi.vmax - lo.vmin)  # a symbolic bound counts as its largest value
    elif u.op is Ops.ENDRANGE: mult = stack.pop()
    elif u.op not in (Ops.CONST, Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR): work += mult
  return work, outer

def split_outer_loop(uops: list[UOp], threads: int) -> tuple[list[UOp], int]:
  """Spread the outermost loop over `threads` cores: its bounds become this core's share, computed from two extra
  kernel arguments `core_id` and `core_count`. Only a loop over output positions (not a reduce, which would need the
  cores to combine partial results) that encloses every store is split; small kernels stay on one core."""
  if threads <= 1: return uops, 1
  work, outer = _loop_work(uops)
  if outer is None or work < PARALLEL_MIN_WORK: return uops, 1
  if any(u.op is Ops.DEFINE_ACC and outer in u.src[1:] for u in uops): return uops, 1
  start, end = uops.index(outer), max(i for i, u in enumerate(uops) if u.op is Ops.ENDRANGE and u.src[0] is outer)
  if any(u.op in (Ops.STORE, Ops.RANGE) for u in uops[:start] + uops[end + 1:]): return uops, 1
  lo, hi = outer.src
  if lo.op is Ops.CONST and hi.op is Ops.CONST:
    threads = min(threads, hi.arg - lo.arg)
    if threads <= 1: return uops, 1
  i32 = dtypes.int32
  cid, cnt = UOp(Ops.DEFINE_VAR, i32, arg=("core_id", 0, threads - 1)), UOp(Ops.DEFINE_VAR, i32, arg=("core_count", 1, threads))
  # this core's share of [lo, hi): [lo + n*id/count, lo + n*(id+1)/count)
  n = UOp(Ops.ADD, i32, (hi, UOp(Ops.MUL, i32, (lo, UOp.const(i32, -1))))) if not (lo.op is Ops.CONST and lo.arg == 0) else hi
  def share(c: UOp) -> UOp:
    off = UOp(Ops.IDIV, i32, (UOp(Ops.MUL, i32, (n, c)), cnt))
    return off if lo.op is Ops.CONST and lo.arg == 0 else UOp(Ops.ADD, i32, (lo, off))
  new_lo, new_hi = share(cid), share(UOp(Ops.ADD, i32, (cid, UOp.const(i32, 1))))
  extra = [x for x in UOp(Ops.SINK, dtypes.void, (new_lo, new_hi)).toposort() if x.op is not Ops.SINK and x not in uops]
  mapping: dict[UOp, UOp] = {outer: UOp(Ops.RANGE, outer.dtype, (new_lo, new_hi), outer.arg)}
  out = uops[:start] + extra
  for u in uops[start:]:
    nu = mapping.get(u)
    if nu is None: nu = u.replace(src=tuple(mapping.get(s, s) for s in u.src)) if any(s in mapping for s in u.src) else u
    if nu is not u: mapping[u] = nu
    out.append(nu)
  # the two core arguments go last, after every buffer and variable
  defs = [u for u in out if u.op in (Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR) and u not in (cid, cnt)]
  rest = [u for u in out if u.op not in (Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR)]
  return defs + [cid, cnt] + rest, threads

class ClangRenderer(CStyleLanguage):
  """C99 for the host: global dims become loops, no local memory."""
  buffer_suffix = " restrict"
  type_map = {**CStyleLanguage.type_map, dtypes.bool: "_Bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char",
              dtypes.uint16: "unsigned short", dtypes.uint32: "unsigned int", dtypes.int64: "long long",
              dtypes.uint64: "unsigned long long", dtypes.float16: "_Float16"}
  infinity, nan = "__builtin_inff()", "__builtin_nanf(\"\")"
  def __init__(self, half_type: str | None = None) -> None:
    # half is declared only when the compiler has a type for it (_Float16, or clang's storage-only __fp16)
    super().__init__(device="CLANG", has_local=False, has_shared=False, global_max=None, local_max=None,
                     dtypes=tuple(d for d in dtypes.all if d != dtypes.bfloat16 and (d != dtypes.float16 or half_type)))
    if half_type: self.type_map = {**self.type_map, dtypes.float16: half_type}
  def render_math(self, op: Ops, x: str, dt: DType) -> str:
    if op is Ops.RECIP: return super().render_math(op, x, dt)
    fn = self.math_fns[op]
    if dt == dtypes.float64: return f"__builtin_{fn}({x})"
    if dt == dtypes.float32: return f"__builtin_{fn}f({x})"
    return f"(({self.render_dtype(dt)})__builtin_{fn}f((float)({x})))"
  def render(self, name: str, uops: list[UOp]) -> str:
    uops, threads = split_outer_loop(uops, THREADS)
    src = super().render(name, uops)
    if threads <= 1: return src
    # a multi-core kernel exports how many cores it wants and an entry point the thread pool calls on each of them
    args = [u for u in uops if u.op in (Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR)][:-2]
    call, nb, nv = [], 0, 0
    for u in args:
      if isinstance(u.dtype, PtrDType): call.append(f"({self.render_dtype(u.dtype)})a[{nb}]"); nb += 1  # noqa: E702
      else: call.append(f"v[{nv}]"); nv += 1  # noqa: E702
    return (src + f"\nconst int {name}_threads = {threads};\n"
            f"void {name}_entry(void **a, const int *v, int core_id, int core_count) {{ {name}({', '.join(call + ['core_id', 'core_count'])}); }}\n")
  def render_const(self, x: Any, dt: DType) -> str:
    if dt == dtypes.float64 and isinstance(x, float) and x != x: return "__builtin_nan(\"\")"
    if dt == dtypes.float64 and isinstance(x, float) and abs(x) == float("inf"): return ("-" if x < 0 else "") + "__builtin_inf()"
    return super().render_const(x, dt)

def _find_cc() -> str | None:
  return next((c for c in (os.getenv("CC"), "clang", "cc", "gcc") if c and shutil.which(c)), None)

@functools.cache
def _cc_version(cc: str) -> str:
  try: return subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
  except (OSError, subprocess.CalledProcessError, IndexError): return "unknown"

@functools.cache
def half_type(cc: str | None) -> str | None:
  """The C type this compiler offers for float16 values, or None."""
  for t in ("_Float16", "__fp16"):
    src = f"void k({t}* restrict o, const {t}* restrict a) {{ {t} v = a[0]; o[0] = ({t})(v * ({t})2.0f); }}"
    if cc and subprocess.run([cc, "-x", "c", "-O2", "-c", "-", "-o", os.devnull], input=src.encode(), capture_output=True).returncode == 0: return t
  return None

class ClangCompiler(Compiler):
  def __init__(self, cc: str | None = None):
    self.cc = cc or _find_cc()
    if self.cc is None: raise CompileError("no C compiler found: install clang (apt-get install clang) or gcc, or set CC")
    self.cachekey = f"clang:{self.cc}:{_cc_version(self.cc)}:{' '.join(CFLAGS)}"
  def compile(self, src: str) -> bytes:
    with tempfile.TemporaryDirectory() as d:
      out = os.path.join(d, "kernel.so")
      proc = subprocess.run([self.cc, *CFLAGS, "-x", "c", "-", "-o", out, "-lm"], input=src.encode(), capture_output=True)
      if proc.returncode != 0: raise CompileError(f"{self.cc} failed (exit {proc.returncode}):\n{proc.stderr.decode(errors='replace')}")
      with open(out, "rb") as f: return f.read()

HUGE = 2 << 20
class ClangAllocator(LRUAllocator):
  """Host memory as numpy byte arrays, 64-byte aligned; views and host access are zero-copy. Buffers of 2 MiB and
  more are their own anonymous mappings, 2 MiB aligned and advised to use huge pages: first touching fresh memory
  costs a page fault per page, 512 times fewer with huge pages."""
  def _alloc(self, size: int, options: BufferSpec) -> np.ndarray:
    if size >= HUGE and hasattr(mmap, "MADV_HUGEPAGE"):
      m = mmap.mmap(-1, size + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
      raw = np.frombuffer(m, dtype=np.uint8)
      start = (-raw.ctypes.data) % HUGE
      try: m.madvise(mmap.MADV_HUGEPAGE, start, size - size % HUGE)
      except OSError: pass
      return raw[start:start + size]
    raw = np.empty(size + 64, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start:start + size]
  def _copyin(self, dest: np.ndarray, src: memoryview) -> None: dest[:] = np.frombuffer(src, dtype=np.uint8)
  def _copyout(self, dest: memoryview, src: np.ndarray) -> None: np.frombuffer(dest, dtype=np.uint8)[:] = src
  def _as_buffer(self, src: np.ndarray) -> memoryview: return memoryview(src)
  def _offset(self, buf: np.ndarray, size: int, offset: int) -> np.ndarray: return buf[offset:offset + size]

class ClangProgram(Program):
  def __init__(self, device: str, name: str, lib: bytes):
    super().__init__(device, name, lib)
    # dlopen needs a file; it can be unlinked once loaded
    with tempfile.NamedTemporaryFile(suffix=".so", delete=False) as f:
      f.write(lib)
    try: self.dll = ctypes.CDLL(f.name)
    finally: os.unlink(f.name)
    self.fxn = getattr(self.dll, name)
    try: self.threads = ctypes.c_int.in_dll(self.dll, f"{name}_threads").value
    except ValueError: self.threads = 1
    if self.threads > 1:
      self.pool = thread_pool()
      self.entry = ctypes.cast(getattr(self.dll, f"{name}_entry"), ctypes.c_void_p)
  def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] | None = None,
               vals: Sequence[int] = (), wait: bool = False) -> float | None:
    st = time.perf_counter() if wait else 0.0
    if self.threads > 1:
      self.pool.pool_run(self.entry, (ctypes.c_void_p * max(1, len(bufs)))(*[b.ctypes.data for b in bufs]),
                         (ctypes.c_int * max(1, len(vals)))(*vals), self.threads)
    else: self.fxn(*[ctypes.c_void_p(b.ctypes.data) for b in bufs], *[ctypes.c_int(v) for v in vals])
    return time.perf_counter() - st if wait else None

_pool: Any = None
_pool_lock = threading.Lock()
def thread_pool() -> Any:
  """The process's thread pool (pool.c), compiled once per toolchain (cached on disk) and started on first use."""
  global _pool
  with _pool_lock:
    if _pool is None:
      comp = ClangCompiler()
      src = (pathlib.Path(__file__).parent / "pool.c").read_text()
      key = comp.cachekey + ":pool"
      if (lib := diskcache_get(key, src)) is None:
        with tempfile.TemporaryDirectory() as d:
          out = os.path.join(d, "pool.so")
          proc = subprocess.run([comp.cc, "-O2", "-fPIC", "-shared", "-x", "c", "-", "-o", out, "-lpthread"], input=src.encode(), capture_output=True)
          if proc.returncode != 0: raise CompileError(f"thread pool failed to compile:\n{proc.stderr.decode(errors='replace')}")
          lib = diskcache_put(key, src, pathlib.Path(out).read_bytes())
      with tempfile.NamedTemporaryFile(suffix=".so", delete=False) as f: f.write(lib)
      try: dll = ctypes.CDLL(f.name)
      finally: os.unlink(f.name)
      dll.pool_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
      dll.pool_run.restype = None
      dll.pool_init(THREADS, getenv("POOL_SPIN", 4000))
      _pool = dll
    return _pool

def _check() -> str | None:
  return None if _find_cc() else "no C compiler found (install clang or gcc, or set CC)"

def _mine(device: str) -> bool: return device.split(":")[0] == "CLANG"

@hookimpl
def tinycore_devices() -> list[DeviceSpec]:
  return [DeviceSpec("CLANG", priority=10, check=_check, description="C on the host CPU, compiled with clang or gcc")]
@hookimpl
def tinycore_allocator(device: str) -> ClangAllocator | None: return ClangAllocator() if _mine(device) else None
@hookimpl
def tinycore_renderer(device: str) -> ClangRenderer | None: return ClangRenderer(half_type(_find_cc())) if _mine(device) else None
@hookimpl
def tinycore_compiler(device: str) -> ClangCompiler | None: return ClangCompiler() if _mine(device) else None
@hookimpl
def tinycore_program(device: str) -> type[ClangProgram] | None: return ClangProgram if _mine(device) else None

__all__ = ["ClangRenderer", "ClangCompiler", "ClangAllocator", "ClangProgram", "UOp"]
