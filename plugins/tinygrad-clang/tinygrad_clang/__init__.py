"""tinygrad-clang: the CPU backend. Renders C, compiles it with clang (or the system C compiler) into a shared
object, loads it with ctypes and runs kernels on host memory."""
from __future__ import annotations
import ctypes, functools, hashlib, os, pathlib, shutil, subprocess, tempfile, threading, time, weakref
from typing import Any, Callable, Sequence
import numpy as np
from tinycore.backend import Backend, BufferSpec, CompileError, Compiler, LRUAllocator, Program
from tinycore.dtype import DType, PtrDType, dtypes
from tinycore.helpers import getenv, diskcache_get, diskcache_put
from tinycore.runtime.hostmemory import aligned_host_bytes
from tinycore.ops import Ops
from tinycore.renderer.cstyle import CStyleLanguage
from tinycore.uop.uop import UOp
from tinygrad_clang.target import CpuTarget, cpu_target, march

TINYCORE_API_VERSION = "1.3.0"
# IEEE semantics are kept (no -ffast-math): NaN and inf behave as in numpy; only a*b+c may become one fma.
# -fno-trapping-math only says FP exceptions never trap (results are the same): without it GCC branches around
# `(float)mask * x` (a relu or max gradient) rather than risk an exception, and mispredicts on real data (5x slower).
# -march is CLANG_MARCH (see target.py) and -O is CLANG_OPT, added where the compiler runs
CFLAGS = ["-fPIC", "-shared", "-fno-strict-aliasing", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=fast"]
# THREADS=n: how many cores a kernel may use (default: all of them); kernels smaller than PARALLEL_MIN_WORK run on one.
# A kernel's outer loop is cut into CHUNKS_PER_CORE chunks per core at least, and into one per CHUNK_WORK operations
# (about a millisecond) where it has more (see split_outer_loop)
THREADS = max(1, getenv("THREADS", len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)))
PARALLEL_MIN_WORK, CHUNKS_PER_CORE, CHUNK_WORK = getenv("PARALLEL_MIN_WORK", 1 << 16), getenv("CHUNKS_PER_CORE", 4), getenv("CHUNK_WORK", 1 << 22)

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

def split_outer_loop(uops: list[UOp], threads: int) -> tuple[list[UOp], int, dict[UOp, tuple[UOp, UOp]]]:
  """Spread the outermost loop over `threads` cores: its bounds become this core's share, computed from two extra
  kernel arguments `core_id` and `core_count`. Only a loop over output positions (not a reduce, which would need the
  cores to combine partial results) that encloses every store is split; small kernels stay on one core. Returns the
  program with the share's nodes and the arguments added, the chunk count, and the loop's new bounds (the renderer
  writes the loop with them: the loop and its users stay the nodes they are)."""
  if threads <= 1: return uops, 1, {}
  work, outer = _loop_work(uops)
  if outer is None or work < PARALLEL_MIN_WORK: return uops, 1, {}
  if any(u.op is Ops.DEFINE_ACC and outer in u.src[1:] for u in uops): return uops, 1, {}
  start, end = uops.index(outer), max(i for i, u in enumerate(uops) if u.op is Ops.ENDRANGE and u.src[0] is outer)
  if any(u.op in (Ops.STORE, Ops.RANGE) for u in uops[:start] + uops[end + 1:]): return uops, 1, {}
  lo, hi = outer.src
  # the loop is cut into chunks that the cores take in turn: a few per core, so a busy core delays nothing, and in a long
  # kernel one per CHUNK_WORK operations (its whole loop where it has fewer trips), so that a core the OS takes away for a
  # while leaves at most a short chunk to the end (taking one is an atomic add). 2048 matmul, both cores under load 9-11
  # (other jobs), alternating in one process: 8 chunks of 4 row blocks -> 32 of one, 1.08-1.12x -> 1.22-1.27x numpy's
  # BLAS on AVX-512, 1.00-1.07x -> 1.15-1.22x on AVX2
  threads = threads * CHUNKS_PER_CORE
  if lo.op is Ops.CONST and hi.op is Ops.CONST:
    threads = min(max(threads, int(work) // CHUNK_WORK), hi.arg - lo.arg)
    if threads <= 1: return uops, 1, {}
  i32 = dtypes.int32
  cid, cnt = UOp(Ops.DEFINE_VAR, i32, arg=("core_id", 0, threads - 1)), UOp(Ops.DEFINE_VAR, i32, arg=("core_count", 1, threads))
  # this core's share of [lo, hi): [lo + n*id/count, lo + n*(id+1)/count)
  n = UOp(Ops.ADD, i32, (hi, UOp(Ops.MUL, i32, (lo, UOp.const(i32, -1))))) if not (lo.op is Ops.CONST and lo.arg == 0) else hi
  def share(c: UOp) -> UOp:
    off = UOp(Ops.IDIV, i32, (UOp(Ops.MUL, i32, (n, c)), cnt))
    return off if lo.op is Ops.CONST and lo.arg == 0 else UOp(Ops.ADD, i32, (lo, off))
  new_lo, new_hi = share(cid), share(UOp(Ops.ADD, i32, (cid, UOp.const(i32, 1))))
  have = set(uops)
  extra = [x for x in UOp(Ops.SINK, dtypes.void, (new_lo, new_hi)).toposort() if x.op is not Ops.SINK and x not in have]
  out = uops[:start] + extra + uops[start:]
  # the two chunk arguments (named core_id and core_count) go last, after every buffer and variable
  defs = [u for u in out if u.op in (Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR) and u not in (cid, cnt)]
  rest = [u for u in out if u.op not in (Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR)]
  return defs + [cid, cnt] + rest, threads, {outer: (new_lo, new_hi)}

def _max(a: str, b: str, dt: DType) -> str:
  if dt.count > 1: return f"tc_{'u' if dt.scalar() == dtypes.uint32 else ''}max_{dt.count}({a},{b})"
  if not dtypes.is_float(dt): return CStyleLanguage.code_for_op[Ops.MAX](a, b, dt)
  # NaN-propagating with one comparison per select: GCC turns `a!=a || a>b` into branches, mispredicted on real data
  # (a pooling max 2x slower); this form becomes a compare and a blend. A NaN operand makes the sum NaN.
  return f"(__builtin_isunordered({a},{b})?(({a})+({b})):((({a})>({b}))?({a}):({b})))"

BF16_PRELUDE = """static inline float tc_bf16_f32(unsigned short b) {
  union { unsigned int i; float f; } u = {.i = (unsigned int)b << 16};
  return u.f;
}
static inline unsigned short tc_f32_bf16(float f) {
  union { float f; unsigned int i; } u = {.f = f};
  if ((u.i & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  /* NaN */
  return (unsigned short)((u.i + 0x7fffu + ((u.i >> 16) & 1u)) >> 16);  /* round to nearest even */
}
static inline float tc_bf16r(float f) { return tc_bf16_f32(tc_f32_bf16(f)); }"""

def bf16_as_bits(uops: list[UOp]) -> list[UOp]:
  """bfloat16, emulated: C has no portable bf16 type, so a bf16 value is a float rounded to bf16 after every op (see
  ClangRenderer.render_cast) and a bf16 buffer holds the raw 16-bit patterns. Here a load of bf16 becomes a uint16 load
  widened by a BITCAST, and a stored bf16 value is narrowed by a BITCAST to uint16 (a gated load's fallback too)."""
  bf16, u16 = dtypes.bfloat16, dtypes.uint16
  if not any(u.dtype == bf16 for u in uops): return uops
  mapping: dict[UOp, UOp] = {}
  out: list[UOp] = []
  for u in uops:
    src = tuple(mapping.get(s, s) for s in u.src)
    if u.op is Ops.LOAD and u.dtype == bf16:
      src_l = list(src)
      if len(src_l) > 3 and src_l[3].op is not Ops.BARRIER:
        out.append(alt := UOp(Ops.BITCAST, u16, (src_l[3],)))
        src_l[3] = alt
      out.append(ld := UOp(Ops.LOAD, u16, tuple(src_l), u.arg))
      out.append(nu := UOp(Ops.BITCAST, bf16, (ld,)))
      mapping[u] = nu
      continue
    if u.op is Ops.STORE and src[2].dtype == bf16:
      out.append(bits := UOp(Ops.BITCAST, u16, (src[2],)))
      src = (src[0], src[1], bits, *src[3:])
    nu = u.replace(src=src) if src != u.src else u
    if nu is not u: mapping[u] = nu
    out.append(nu)
  return out

class ClangRenderer(CStyleLanguage):
  """C99 for the host: global dims become loops (the outermost spread over the cores), no local memory. Vectors are
  GCC/clang vector extensions (`vector_size`), loaded and stored unaligned. bfloat16 is emulated in float (see
  `bf16_as_bits`)."""
  buffer_suffix = " restrict"
  # x86 compilers keep _Float16 intermediates in float precision: a cast after each op rounds it to half; bf16 values
  # are floats rounded the same way
  round_results = CStyleLanguage.round_results + (dtypes.float16, dtypes.bfloat16)
  # uint32 vectors: the random generator's hash rounds (add, xor, shifts), 32 lanes of it were 32 scalar copies (70 KB of C
  # per weight-init kernel, that GCC's SLP pass put back together at a compile cost of 0.2-0.4 s each)
  vector_alu = frozenset({Ops.ADD, Ops.MUL, Ops.NEG, Ops.MAX, Ops.MULACC, Ops.RECIP, Ops.EXP2, Ops.XOR, Ops.OR, Ops.AND, Ops.SHL, Ops.SHR})
  vector_dtypes = (dtypes.float32, dtypes.uint32)
  code_for_op = {**CStyleLanguage.code_for_op, Ops.MAX: lambda a, b, dt: _max(a, b, dt)}
  type_map = {**CStyleLanguage.type_map, dtypes.bool: "_Bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char",
              dtypes.uint16: "unsigned short", dtypes.uint32: "unsigned int", dtypes.int64: "long long",
              dtypes.uint64: "unsigned long long", dtypes.float16: "_Float16", dtypes.bfloat16: "float"}
  infinity, nan = "__builtin_inff()", "__builtin_nanf(\"\")"
  def __init__(self, half_type: str | None = None, target: CpuTarget | None = None) -> None:
    # half is declared only when the compiler has a type for it (_Float16, or clang's storage-only __fp16)
    self.target = target or cpu_target(_find_cc())
    super().__init__(device="CLANG", has_local=False, has_shared=False, global_max=None, local_max=None, vector_widths=self.target.vector_widths,
                     vector_registers=self.target.vector_registers, cache_bytes=self.target.l2_bytes, prefetch=True, lane_loops=True,
                     dtypes=tuple(d for d in dtypes.all if d != dtypes.float16 or half_type))
    if half_type: self.type_map = {**self.type_map, dtypes.float16: half_type}
  def render_dtype(self, dt: DType) -> str:
    if isinstance(dt, PtrDType) and dt.base == dtypes.bfloat16: return "unsigned short*"  # bf16 buffers hold bit patterns
    if dt.count > 1 and dt.scalar() == dtypes.uint32: return f"tc_u32x{dt.count}"  # ("unsigned int16" is no name)
    return super().render_dtype(dt)
  def render_bitcast(self, x: str, dt: DType, from_dt: DType) -> str:
    # x is an lvalue; a bf16 value is a float holding a bf16 number, its bits are tc_f32_bf16 of it
    if dt == dtypes.bfloat16: return f"tc_bf16_f32(*((unsigned short*)&({x})))"
    if from_dt == dtypes.bfloat16: return f"(*(({self.render_dtype(dt)}*)&(unsigned short){{tc_f32_bf16({x})}}))"
    return super().render_bitcast(x, dt, from_dt)
  def render_math(self, op: Ops, x: str, dt: DType) -> str:
    if op is Ops.RECIP: return super().render_math(op, x, dt)
    if dt.count > 1: return f"tc_{self.math_fns[op]}_{dt.count}({x})"
    fn = self.math_fns[op]
    if dt == dtypes.float64: return f"__builtin_{fn}({x})"
    if dt == dtypes.float32: return f"__builtin_{fn}f({x})"
    return f"(({self.render_dtype(dt)})__builtin_{fn}f((float)({x})))"
  def render_cast(self, x: str, dt: DType, from_dt: DType) -> str:
    # a mask as 1.0f/0.0f by its bits: GCC compiles (float)(a==b) to a branch, mispredicted when the mask is data
    # (which element of a pooling window was the max: the max gradient 4x slower)
    if from_dt == dtypes.bool and dt == dtypes.float32: return f"tc_mask_f32({x})"
    if dt == dtypes.bfloat16: return f"tc_bf16r((float)({x}))"
    return super().render_cast(x, dt, from_dt)
  @property
  def cachekey(self) -> str:
    """What besides its fields changes what this renderer writes (rendered programs are cached on disk by it)."""
    return (f"threads={THREADS}:chunks={CHUNKS_PER_CORE}:chunkwork={CHUNK_WORK}:minwork={PARALLEL_MIN_WORK}:march={self.target.march}"
            f":cpu={self.target.cpu_model}")
  def render_vector_load(self, buf: str, idx: str, dt: DType) -> str: return f"(*((const {self.render_dtype(dt)}_u*)({buf}+{idx})))"
  def render_vector_store(self, buf: str, idx: str, val: str, dt: DType) -> str: return f"*(({self.render_dtype(dt)}_u*)({buf}+{idx})) = {val};"
  def render_prefix(self, uops: list[UOp]) -> str:
    lines = []
    if any(u.dtype == dtypes.bfloat16 or (isinstance(u.dtype, PtrDType) and u.dtype.base == dtypes.bfloat16) for u in uops):
      lines.append(BF16_PRELUDE)
    if any(u.op is Ops.CAST and u.dtype == dtypes.float32 and u.src[0].dtype == dtypes.bool for u in uops):
      lines.append("static inline float tc_mask_f32(int b) { union { int i; float f; } u = {.i = -b & 0x3f800000}; return u.f; }")
    for dt in sorted({u.dtype for u in uops if u.dtype.count > 1 and not isinstance(u.dtype, PtrDType)}, key=lambda d: (d.name, d.count)):
      t, n, sz = self.render_dtype(dt), dt.count, dt.itemsize
      lines += [f"typedef {self.type_map[dt.scalar()]} {t} __attribute__((vector_size({sz})));",
                f"typedef {self.type_map[dt.scalar()]} {t}_u __attribute__((vector_size({sz}), aligned({dt.scalar().itemsize})));"]
      if dt.scalar() == dtypes.uint32:  # (a comparison of two is a mask of their own width: -1 where true)
        if any(u.op is Ops.MAX and u.dtype == dt for u in uops):
          lines.append(f"static inline {t} tc_umax_{n}({t} a, {t} b) {{ {t} k = ({t})(a > b); return (k & a) | (~k & b); }}")
        continue
      m = f"tc_mask{sz}_{dt.scalar().itemsize}"
      lines += [f"typedef {'int' if dt.scalar().itemsize == 4 else 'long long'} {m} __attribute__((vector_size({sz})));",
                f"static inline {t} tc_sel_{n}({m} k, {t} a, {t} b) {{ return ({t})((k & ({m})a) | (~k & ({m})b)); }}"]
      if any(u.op is Ops.MAX and u.dtype == dt for u in uops):
        # NaN-propagating max, lane by lane: a NaN `a` is kept, a NaN `b` wins the comparison (as the scalar form)
        lines.append(f"static inline {t} tc_max_{n}({t} a, {t} b) {{ return tc_sel_{n}((a != a) | (a > b), a, b); }}")
      if any(u.op is Ops.EXP2 and u.dtype == dt for u in uops) and dt.scalar() == dtypes.float32: lines.append(_vexp2(t, m, n))
    return "\n".join(lines) + ("\n" if lines else "")
  def render(self, name: str, uops: list[UOp], bounds: dict[UOp, tuple[UOp, UOp]] | None = None) -> str:
    uops, self._threads, split = split_outer_loop(bf16_as_bits(uops), THREADS)
    return super().render(name, uops, {**(bounds or {}), **split})
  def render_kernel(self, name: str, body: list[str], bufs: list[tuple[str, DType, bool]], uops: list[UOp], prefix: str = "") -> str:
    src = super().render_kernel(name, body, bufs, uops, prefix)
    if not any(n == "core_id" for n, _, _ in bufs): return src
    # a multi-core kernel exports how many cores it wants and an entry point the thread pool calls on each of them:
    # entry(buffers, values of the variables, core id, core count), the arguments in the kernel's own order
    call, nb, nv = [], 0, 0
    for n, dt, _ in bufs:
      if n in ("core_id", "core_count"): call.append(n)
      elif isinstance(dt, PtrDType): call.append(f"({self.render_dtype(dt)})a[{nb}]"); nb += 1  # noqa: E702
      else: call.append(f"v[{nv}]"); nv += 1  # noqa: E702
    return (src + f"\nconst int {name}_threads = {self._threads};\n"
            f"void {name}_entry(void **a, const int *v, int core_id, int core_count) {{ {name}({', '.join(call)}); }}\n")
  def render_const(self, x: Any, dt: DType) -> str:
    if dt == dtypes.float64 and isinstance(x, float) and x != x: return "__builtin_nan(\"\")"
    if dt == dtypes.float64 and isinstance(x, float) and abs(x) == float("inf"): return ("-" if x < 0 else "") + "__builtin_inf()"
    return super().render_const(x, dt)

@functools.cache
def _vexp2(t: str, m: str, n: int) -> str:
  """exp2 on a float vector: 2^x = 2^round(x) * 2^f with |f| <= 1/2, 2^f by its Taylor polynomial of degree 7 (relative
  error under 1e-8 before rounding), the power of two applied as two halves so that results from the smallest
  subnormal to overflow come out right. NaN stays NaN, +inf gives inf, -inf gives 0."""
  c = [1.0, 0.6931471805599453, 0.2402265069591007, 0.05550410866482158, 0.009618129107628477, 0.0013333558146428443,
       0.00015403530393381608, 1.525273380405984e-05]
  poly = f"{c[7]!r}f"
  for ci in reversed(c[:7]): poly = f"({poly}*f+{ci!r}f)"
  return (f"static inline {t} tc_exp2_{n}({t} x) {{\n"
          f"  {t} y = tc_sel_{n}(x < -160.0f, ({t}){{0}} - 160.0f, tc_sel_{n}(x > 160.0f, ({t}){{0}} + 160.0f, x));\n"
          f"  {t} r = (y + 12582912.0f) - 12582912.0f;  /* round to nearest */\n"
          f"  {t} f = y - r;\n"
          f"  {m} i = __builtin_convertvector(r, {m}), i1 = i >> 1, i2 = i - i1;\n"
          f"  {t} p = {poly};\n"
          f"  p = p * ({t})((i1 + 127) << 23) * ({t})((i2 + 127) << 23);\n"
          f"  return tc_sel_{n}(x != x, x, p);\n}}")

def _find_cc() -> str | None:
  """$CC if set; else clang, cc or gcc, preferring one with a real _Float16 (clang before 15 has only the storage-only
  __fp16, whose arithmetic does not round to half after each op)."""
  if (cc := os.getenv("CC")): return cc if shutil.which(cc) else None
  found = [c for c in ("clang", "cc", "gcc") if shutil.which(c)]
  return next((c for c in found if half_type(c) == "_Float16"), found[0] if found else None)

def _workarounds(cc: str) -> list[str]:
  """Flags that keep a compiler's known wrong code away. GCC 12's loop vectorizer (on at -O2) with -fno-trapping-math
  miscompiles a reduce whose addends are masked loads, `acc = (acc + (m0 ? 1 : 0) * a[2i+1]) + (m1 ? 1 : 0) * a[2i]`
  (a convolution of a padded constant with a flipped weight: the input gradient of `conv(x, w).sum()`): wrong sums,
  where -O1, clang and GCC without that pass agree with numpy. The renderer writes the vectors it wants itself."""
  return [] if "clang" in _cc_version(cc).lower() else ["-fno-tree-loop-vectorize"]

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
    # -march=native means this CPU: its model is part of the key (a binary from another CPU may not run here)
    self.target = cpu_target(self.cc)
    self.flags = [*CFLAGS, f"-O{getenv('CLANG_OPT', 2)}", f"-march={self.target.march}", *_workarounds(self.cc)]
    self.cachekey = f"clang:{self.cc}:{_cc_version(self.cc)}:{' '.join(self.flags)}:cpu={self.target.cpu_model}"
  def compile(self, src: str) -> bytes:
    with tempfile.TemporaryDirectory() as d:
      out = os.path.join(d, "kernel.so")
      proc = subprocess.run([self.cc, *self.flags, "-x", "c", "-", "-o", out, "-lm"], input=src.encode(), capture_output=True)
      if proc.returncode != 0: raise CompileError(f"{self.cc} failed (exit {proc.returncode}):\n{proc.stderr.decode(errors='replace')}")
      return pathlib.Path(out).read_bytes()
  def compile_batch(self, srcs: list[str]) -> list[bytes]:
    # one translation unit for all, one shared object: the compiler's start (driver, cc1, assembler, linker: ~50 ms of
    # CPU with GCC) is paid once; each kernel's binary is that object (ClangProgram loads it once per process)
    return [self.compile(one_unit(srcs))] * len(srcs)

def _top_level(src: str) -> list[str]:
  """A source's top-level declarations (typedefs, helper functions, the kernel), each as its text."""
  out, cur, depth = [], [], 0
  for line in src.splitlines():
    cur.append(line)
    depth += line.count("{") - line.count("}")
    if depth == 0 and line.rstrip().endswith((";", "}")):
      out.append("\n".join(cur))
      cur = []
  return out + (["\n".join(cur)] if cur else [])

def one_unit(srcs: list[str]) -> str:
  """Several kernels' sources as one C file: the helpers and typedefs they share (the same text) once. (Two helpers of
  one name and different text would not compile: the caller then compiles each source alone.)"""
  seen: set[str] = set()
  out = []
  for src in srcs:
    for decl in _top_level(src):
      if decl.startswith(("typedef ", "static ")):
        if decl in seen: continue
        seen.add(decl)
      out.append(decl)
  return "\n".join(out) + "\n"

class HostBuffer(np.ndarray):
  """Host memory as a numpy byte array that also knows its address (`addr`): reading `.ctypes.data` on every kernel
  launch costs more than the launch itself. `_as_parameter_`, the address as a c_void_p, is what ctypes passes for it:
  a kernel takes HostBuffers as they are, without argtypes (Program.caller)."""
  addr: int
  _as_parameter_: ctypes.c_void_p
def _host(arr: np.ndarray) -> HostBuffer:
  h = arr.view(HostBuffer)
  h.addr = arr.ctypes.data
  h._as_parameter_ = ctypes.c_void_p(h.addr)
  return h
def _addr(b: Any) -> int: return b.addr if type(b) is HostBuffer else b.ctypes.data

class ClangAllocator(LRUAllocator):
  """Host memory as numpy byte arrays, 64-byte aligned; views and host access are zero-copy. Buffers of 2 MiB and
  more are their own anonymous mappings, 2 MiB aligned and advised to use huge pages: first touching fresh memory
  costs a page fault per page, 512 times fewer with huge pages."""
  def _alloc(self, size: int, options: BufferSpec) -> np.ndarray: return _host(aligned_host_bytes(size, "CLANG"))
  def _copyin(self, dest: np.ndarray, src: memoryview) -> None: dest[:] = np.frombuffer(src, dtype=np.uint8)
  def _copyout(self, dest: memoryview, src: np.ndarray) -> None: np.frombuffer(dest, dtype=np.uint8)[:] = src
  def _as_buffer(self, src: np.ndarray) -> memoryview: return memoryview(src)
  def _offset(self, buf: np.ndarray, size: int, offset: int) -> np.ndarray: return _host(buf[offset:offset + size])

_loaded: weakref.WeakValueDictionary[bytes, ctypes.CDLL] = weakref.WeakValueDictionary()  # (held by their programs)
def _load(lib: bytes) -> ctypes.CDLL:
  """The shared object, loaded once per process (a batch of kernels compiled together is one object, see compile_batch)."""
  key = hashlib.sha256(lib).digest()
  if (dll := _loaded.get(key)) is None:
    # dlopen needs a file; it can be unlinked once loaded
    with tempfile.NamedTemporaryFile(suffix=".so", delete=False) as f: f.write(lib)
    try: _loaded[key] = dll = ctypes.CDLL(f.name)
    finally: os.unlink(f.name)
  return dll

class ClangProgram(Program):
  def __init__(self, device: str, name: str, lib: bytes):
    super().__init__(device, name, lib)
    self.dll = _load(lib)
    # its own function object (dll[name], not the attribute ctypes keeps): two kernels whose binaries are the same
    # bytes (parameters they never read do not change the code) share one library, but not the argtypes set at a call
    self.fxn = self.dll[name]
    try: self.threads = ctypes.c_int.in_dll(self.dll, f"{name}_threads").value
    except ValueError: self.threads = 1
    if self.threads > 1:
      self.pool = thread_pool()
      self.entry = ctypes.cast(getattr(self.dll, f"{name}_entry"), ctypes.c_void_p)
  def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] | None = None,
               vals: Sequence[int] = (), wait: bool = False) -> float | None:
    st = time.perf_counter() if wait else 0.0
    if self.threads > 1: self._pool_call(*self._pool_args(bufs, vals))
    else:
      if self.fxn.argtypes is None: self._set_argtypes(len(bufs), len(vals))
      self.fxn(*[b.addr if type(b) is HostBuffer else b.ctypes.data for b in bufs], *vals)
    return time.perf_counter() - st if wait else None
  def launcher(self, bufs: Sequence[Any], global_size: Sequence[int], local_size: Sequence[int] | None,
               vals: Sequence[int] = ()) -> Callable[[], Any]:
    # the addresses (and for the thread pool, its argument arrays) are worked out once, not on every launch
    if self.threads > 1: return functools.partial(self._pool_call, *self._pool_args(bufs, vals))
    if self.fxn.argtypes is None: self._set_argtypes(len(bufs), len(vals))
    return functools.partial(self.fxn, *[_addr(b) for b in bufs], *vals)
  def caller(self, global_size: Sequence[int], local_size: Sequence[int] | None) -> Callable[..., Any]:
    if self.threads > 1: return super().caller(global_size, local_size)
    # the C function itself: the eager path's handles are HostBuffers, passed as their c_void_p (another array is
    # refused by ctypes, never passed as a truncated int)
    return self.fxn
  def _set_argtypes(self, nbufs: int, nvals: int) -> None: self.fxn.argtypes = [ctypes.c_void_p] * nbufs + [ctypes.c_int] * nvals
  def _pool_args(self, bufs: Sequence[Any], vals: Sequence[int]) -> tuple[Any, Any]:
    return (ctypes.c_void_p * max(1, len(bufs)))(*[_addr(b) for b in bufs]), (ctypes.c_int * max(1, len(vals)))(*vals)
  def _pool_call(self, args: Any, vals: Any) -> None:
    with _pool_lock: self.pool.pool_run(self.entry, args, vals, self.threads)  # one job at a time (ctypes lets other Python threads run meanwhile)

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

# priority 10: above PYTHON (0), so that a machine with a C compiler computes on it by default; below the GPUs (40)
BACKEND = Backend("CLANG", priority=10, check=_check, api_version=TINYCORE_API_VERSION, description="C on the host CPU, compiled with clang or gcc",
                  allocator=lambda device, idx: ClangAllocator(), renderer=lambda device, idx: ClangRenderer(half_type(_find_cc())),
                  compiler=lambda device, idx: ClangCompiler(), program=lambda device, idx: ClangProgram)
tinycore_devices, tinycore_allocator, tinycore_renderer, tinycore_compiler, tinycore_program = BACKEND.hookimpls()

__all__ = ["ClangRenderer", "ClangCompiler", "ClangAllocator", "ClangProgram", "CpuTarget", "cpu_target", "march", "UOp"]
