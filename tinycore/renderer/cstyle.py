"""A renderer base for C-like languages (C, OpenCL C, CUDA C, HIP, Metal). Plugins subclass it and change spellings.

It renders the linear UOp program the code generator produces:
  DEFINE_GLOBAL(ptr, arg=i)             buffer argument `data{i}`
  DEFINE_VAR(int, arg=(name, lo, hi))   int argument for a symbolic size
  DEFINE_LOCAL(ptr local, arg=(name, n)) local (shared) memory array
  SPECIAL(int, arg=(name, size))        a group id ("gidx0") or a local id ("lidx0")
  RANGE(int, src=(start, end), arg=i) .. ENDRANGE(src=(range,))   a loop
  DEFINE_ACC(dt, src=(init, *ranges), arg=i), ASSIGN(dt, src=(acc, value))   an accumulator
  LOAD(dt, src=(buf, idx[, gate, alt][, barrier]))  STORE(src=(buf, idx, value[, gate]))  BARRIER(src=stores)
  (a BARRIER among a LOAD's sources only orders that load after the barrier)
  ALU ops, CAST, BITCAST, CONST
  vectors (dtype.count > 1): VECTORIZE(src=lanes) builds one, GEP(src=(vec,), arg=i) takes lane i (GEP(src=(vec, idx))
  the lane an int value says, with lane_loops), a vector LOAD/STORE
  moves count consecutive elements from buf+idx, and ALU ops on vectors work lane by lane
"""
from __future__ import annotations
import math
from collections import Counter
from typing import Callable
from tinycore.dtype import DType, PtrDType, dtypes
from tinycore.ops import Ops
from tinycore.uop.uop import UOp
from tinycore.backend import Renderer

# the C99 types behind the base type_map's OpenCL spellings that C lacks, declared by the base prelude when a kernel uses them
# (`long` is int64 on the LP64 hosts C kernels are compiled for)
_WRAPPING = (Ops.ADD, Ops.MUL, Ops.NEG, Ops.SHL, Ops.MULACC)
_UNSIGNED_OF = {dtypes.int32: dtypes.uint32, dtypes.int64: dtypes.uint64}
C99_TYPES = {dtypes.uint8: "unsigned char", dtypes.uint16: "unsigned short", dtypes.uint32: "unsigned int",
             dtypes.uint64: "unsigned long long", dtypes.float16: "_Float16"}

def _fmax(a: str, b: str, dt: DType) -> str:
  # NaN propagates like numpy.maximum / torch.maximum: a NaN `a` is kept, a NaN `b` wins the comparison
  return f"((({a})!=({a})||({a})>({b}))?({a}):({b}))" if dtypes.is_float(dt) else f"((({a})>({b}))?({a}):({b}))"

class CStyleLanguage(Renderer):
  """A C99 renderer for the host as it stands (a bare CStyleLanguage's output compiles with `cc -x c`, and it declares
  what a bare Renderer declares: bool, int32, float32, no local ids, no shared memory, scalar code); a backend for another
  C-like language subclasses it and sets the spellings below, and declares what its target has (Renderer's settings).
  Ops go through one of three tables: EXP2, LOG2, SIN, SQRT (and RECIP) through `render_math` (spelled by `math_fns`);
  every other ALU op through `code_for_op`; CAST, BITCAST, VECTORIZE, GEP through their render_* methods."""
  kernel_prefix: str = ""
  """Written before `void name(...)`: `__kernel `, `extern "C" __global__ `, `kernel `."""
  buffer_prefix: str = ""
  """Written before each buffer argument's type: `__global `, `device `."""
  buffer_suffix: str = ""
  """Written after each buffer argument's type: ` restrict`, or Metal's `[[buffer(n)]]` by overriding render_kernel."""
  smem_prefix: str = ""
  """Written before a DEFINE_LOCAL array: `__local `, `__shared__ `, `threadgroup ` (has_shared only)."""
  smem_align: str = ""
  """Written before smem_prefix: an alignment attribute for local arrays, e.g. `__attribute__ ((aligned (16))) `."""
  arg_int_prefix: str = "const int"
  """The type of an int argument (a symbolic Variable's value): `const int`, `constant int&`."""
  barrier: str = ""
  """The statement a BARRIER renders to: `barrier(CLK_LOCAL_MEM_FENCE);`, `__syncthreads();` (has_shared only)."""
  code_for_workitem: dict[str, Callable[[int], str]] = {}
  """How to read thread ids, by the first letter of a SPECIAL's name and its dim: 'g' group id (gidxN), 'l' local id
  (lidxN), 'i' global id (idxN). Only a renderer with has_local=True gets SPECIALs; it must set 'g' and 'l' (and 'i')."""
  round_results: tuple[DType, ...] = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16)
  """Dtypes whose ALU results are cast back to their type after every op, so they wrap or round as the op set says (C
  computes narrow integers in int; a compiler may keep half in float)."""
  type_map: dict[DType, str] = {dtypes.bool: "bool", dtypes.int8: "char", dtypes.uint8: "uchar", dtypes.int16: "short",
                                dtypes.uint16: "ushort", dtypes.int32: "int", dtypes.uint32: "uint", dtypes.int64: "long",
                                dtypes.uint64: "ulong", dtypes.float16: "half", dtypes.bfloat16: "bfloat16",
                                dtypes.float32: "float", dtypes.float64: "double"}
  """The spelling of each scalar dtype (OpenCL C's by default; the C99 prelude defines those a bare renderer uses). A
  vector type is the scalar spelling plus its count (`float4`), see render_dtype."""
  vector_alu: frozenset[Ops] = frozenset()
  """Ops rendered on whole vectors (`a+b` on float4); the others are computed lane by lane through GEP and VECTORIZE."""
  vector_dtypes: tuple[DType, ...] = ()
  """Element dtypes that vectors may have (with vector_widths > 1). A vector load or store reads or writes count
  consecutive elements at buf+idx through a pointer cast: the core aligns such accesses to the vector's size only when
  the buffer's offset allows it, so a target that needs aligned vector access must make render_vector_load unaligned."""
  infinity: str = "INFINITY"
  """The spelling of +inf (float32); -inf is `-` before it."""
  nan: str = "NAN"
  """The spelling of a quiet NaN (float32)."""
  float_suffix: str = "f"
  """Written after a float32 literal (`1.5f`); float64 literals have none."""
  math_fns: dict[Ops, str] = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.SQRT: "sqrt"}
  """Unary math functions by op, used by render_math as `fn(x)`; override render_math to spell them per dtype."""
  code_for_op: dict[Ops, Callable[..., str]] = {
    Ops.NEG: lambda x, dt: f"(!{x})" if dt == dtypes.bool else f"(-{x})",
    Ops.ADD: lambda a, b, dt: f"({a}+{b})", Ops.MUL: lambda a, b, dt: f"({a}*{b})",
    Ops.IDIV: lambda a, b, dt: f"({a}/{b})", Ops.MOD: lambda a, b, dt: f"({a}%{b})", Ops.MAX: _fmax,
    Ops.CMPLT: lambda a, b, dt: f"({a}<{b})", Ops.CMPNE: lambda a, b, dt: f"({a}!={b})",
    Ops.AND: lambda a, b, dt: f"({a}&{b})", Ops.OR: lambda a, b, dt: f"({a}|{b})", Ops.XOR: lambda a, b, dt: f"({a}^{b})",
    Ops.SHL: lambda a, b, dt: f"({a}<<{b})", Ops.SHR: lambda a, b, dt: f"({a}>>{b})",
    Ops.WHERE: lambda c, a, b, dt: f"({c}?{a}:{b})", Ops.MULACC: lambda a, b, c, dt: f"(({a}*{b})+{c})",
  }
  """Every other ALU op: a function of the operands' spellings and the operand dtype (the result dtype for WHERE)."""

  # *** spellings a subclass may override ***
  def render_dtype(self, dt: DType) -> str:
    """A dtype's spelling: type_map's for a scalar, the scalar's plus the count for a vector (`float4`), `T*` for a pointer."""
    if isinstance(dt, PtrDType): return self.render_dtype(dt.base) + "*"
    if dt.count > 1: return self.type_map[dt.scalar()] + str(dt.count)
    return self.type_map[dt]
  def render_cast(self, x: str, dt: DType, from_dt: DType) -> str:
    """A value converted to dt (CAST): a C cast by default."""
    return f"(({self.render_dtype(dt)})({x}))"
  def render_wrapping(self, op: Ops, xs: list[str], dt: DType) -> str:
    """Signed op that wraps on overflow (ADD, MUL, NEG, SHL, MULACC of int32/int64 data): done in the unsigned type of
    the same width, where C defines the wrap, and converted back."""
    udt = _UNSIGNED_OF[dt]
    return self.render_cast(self.code_for_op[op](*[self.render_cast(x, udt, dt) for x in xs], udt), dt, udt)
  def render_bitcast(self, x: str, dt: DType, from_dt: DType) -> str:
    """The bits of x (an lvalue: the walk stores the value in a variable first) read as dt (BITCAST)."""
    return f"(*(({self.render_dtype(dt)}*)&({x})))"
  def render_math(self, op: Ops, x: str, dt: DType) -> str:
    """EXP2, LOG2, SIN, SQRT (through math_fns) and RECIP of x of dtype dt (a vector dtype for the ops in vector_alu)."""
    if op is Ops.RECIP: return f"(1/{x})" if not dtypes.is_float(dt) else f"({self.render_const(1.0, dt.scalar())}/{x})"
    return f"{self.math_fns[op]}({x})"
  def render_const(self, x: float | int | bool, dt: DType) -> str:
    """A literal of dtype dt, NaN and inf through `nan` and `infinity`, the suffixes C needs; a vector's lanes vectorized."""
    # a vector constant (the code generator makes them, e.g. for uint32 vectors) is its lanes, vectorized
    if dt.count > 1: return self.render_vectorize([self.render_const(x, dt.scalar())] * dt.count, dt)
    if dtypes.is_float(dt):
      if math.isnan(x): v = self.nan
      elif math.isinf(x): v = ("-" if x < 0 else "") + self.infinity
      else: v = repr(float(x)) + (self.float_suffix if dt != dtypes.float64 else "")
      return v if dt in (dtypes.float32, dtypes.float64) else self.render_cast(v, dt, dtypes.float32)
    if dt == dtypes.bool: return "1" if x else "0"
    if dt in (dtypes.int64, dtypes.uint64):
      if x == dtypes.min(dtypes.int64) and dt == dtypes.int64: return "(-9223372036854775807ll-1)"
      return f"{x}{'ull' if dt == dtypes.uint64 else 'll'}"
    if dt == dtypes.uint32: return f"{x}u"
    if dt == dtypes.int32 and x == dtypes.min(dtypes.int32): return "(-2147483647-1)"
    return str(int(x)) if dt == dtypes.int32 else self.render_cast(str(int(x)), dt, dtypes.int32)
  # vectors (used where the renderer declares vector_widths > 1 and lists the ops and dtypes in vector_alu, vector_dtypes)
  def render_vectorize(self, xs: list[str], dt: DType) -> str:
    """A vector of dtype dt from its lanes' spellings (VECTORIZE): a compound literal by default."""
    return f"(({self.render_dtype(dt)}){{{','.join(xs)}}})"
  def render_gep(self, x: str, i: int | str, dt: DType) -> str:
    """Lane i of the vector x of dtype dt (GEP); i an int value's spelling with lane_loops."""
    return f"{x}[{i}]"
  def render_vector_load(self, buf: str, idx: str, dt: DType) -> str:
    """dt.count consecutive elements at buf+idx as one vector; see vector_dtypes on alignment."""
    return f"(*(({self.render_dtype(dt)}*)({buf}+{idx})))"
  def render_vector_store(self, buf: str, idx: str, val: str, dt: DType) -> str:
    """The statement storing vector val at buf+idx."""
    return f"*(({self.render_dtype(dt)}*)({buf}+{idx})) = {val};"
  def render_local(self, name: str, dt: DType, size: int) -> str:
    """The declaration of a local-memory array of `size` elements (DEFINE_LOCAL; has_shared only)."""
    return f"{self.smem_align}{self.smem_prefix}{self.render_dtype(dt)} {name}[{size}];"
  def render_kernel(self, name: str, body: list[str], bufs: list[tuple[str, DType, bool]], uops: list[UOp], prefix: str = "") -> str:
    """The whole source: prefix, then the kernel's signature with its arguments (bufs: (name, dtype, written) in launch
    order: buffers by number, then int variables sorted by name), then the body's lines."""
    args = [f"{self.buffer_prefix}{'' if mut else 'const '}{self.render_dtype(dt)}{self.buffer_suffix} {n}" if isinstance(dt, PtrDType)
            else f"{self.arg_int_prefix} {n}" for n, dt, mut in bufs]
    return f"{prefix}{self.kernel_prefix}void {name}({', '.join(args)}) {{\n" + "\n".join(body) + "\n}"
  def render_prefetch(self, buf: str, idx: str) -> str:
    """The statement that fetches buf[idx] into the cache (renderer.prefetch only): GCC's and clang's builtin."""
    return f"__builtin_prefetch({buf}+{idx});"
  def render_prefix(self, uops: list[UOp]) -> str:
    """Declarations the kernel needs before it (includes, typedefs, helper functions). The base writes a C99 prelude
    for its own spellings; a subclass for another language replaces it."""
    used = {u.dtype.scalar() for u in uops} | {u.dtype.base.scalar() for u in uops if isinstance(u.dtype, PtrDType)}
    used |= {_UNSIGNED_OF[dt] for dt in used if dt in _UNSIGNED_OF}  # render_wrapping's
    return "#include <math.h>\n#include <stdbool.h>\n" + "".join(f"typedef {C99_TYPES[dt]} {self.type_map[dt]};\n" for dt in sorted(used, key=str)
                                                              if dt in C99_TYPES and self.type_map.get(dt) == CStyleLanguage.type_map[dt])

  # *** the walk over the linear program ***
  def render(self, name: str, uops: list[UOp], bounds: dict[UOp, tuple[UOp, UOp]] | None = None) -> str:
    """Walks the linear program once, spelling each UOp with the settings and methods above (see the module docstring).
    `bounds`: loops run over other bounds than their sources (a renderer that splits a loop over cores: its users keep
    the loop they were built with, nothing is rebuilt); those bounds' nodes come before the loop in `uops`."""
    r: dict[UOp, str] = {}
    body: list[str] = []
    bufs: list[tuple[str, DType, bool]] = []
    written = {u.src[0] for u in uops if u.op is Ops.STORE}
    uses = Counter(s for u in uops for s in u.src)
    # values computed from loaded data: their signed arithmetic may overflow and must wrap (C calls it undefined, and
    # compilers fold (a+b)<a to b<0); index arithmetic cannot overflow (the lowerer checks its reach) and stays plain
    data: set[UOp] = set()
    for u in uops:
      if u.op is Ops.LOAD or any(s in data for s in u.src): data.add(u)
    counts: Counter[str] = Counter()
    depth = 1
    def emit(line: str) -> None: body.append("  " * depth + line)
    def fresh(prefix: str) -> str:
      counts[prefix] += 1
      return f"{prefix}{counts[prefix]-1}"
    for u in uops:
      op, dt, src = u.op, u.dtype, u.src
      if op is Ops.DEFINE_GLOBAL:
        r[u] = f"data{u.arg}"
        bufs.append((r[u], dt, u in written))
      elif op is Ops.DEFINE_VAR:
        r[u] = u.arg[0]
        bufs.append((r[u], dt, False))
      elif op is Ops.DEFINE_LOCAL:
        r[u] = u.arg[0]
        emit(self.render_local(u.arg[0], dt.base, u.arg[1]))
      elif op is Ops.SPECIAL:
        r[u] = u.arg[0]
        size = u.arg[1].render() if isinstance(u.arg[1], UOp) else u.arg[1]  # a symbolic size: its Variables' expression
        if (read := self.code_for_workitem.get(u.arg[0][0])) is None:
          raise NotImplementedError(f"{type(self).__name__} renders thread id {u.arg[0]} but sets no code_for_workitem[{u.arg[0][0]!r}]: "
                                    "a renderer with has_local=True sets how to read group ('g'), local ('l') and global ('i') ids")
        emit(f"int {u.arg[0]} = {read(int(u.arg[0][-1]))}; /* {size} */")
      elif op is Ops.CONST: r[u] = self.render_const(u.arg, dt)
      elif op is Ops.RANGE:
        r[u] = f"ridx{u.arg}"
        lo, hi = bounds.get(u, src) if bounds else src
        emit(f"for (int {r[u]} = {r[lo]}; {r[u]} < {r[hi]}; {r[u]}++) {{")
        depth += 1
      elif op is Ops.ENDRANGE:
        depth -= 1
        emit("}")
      elif op is Ops.DEFINE_ACC:
        r[u] = fresh("acc")
        emit(f"{self.render_dtype(dt)} {r[u]} = {r[src[0]]};")
      elif op is Ops.ASSIGN:
        emit(f"{r[src[0]]} = {r[src[1]]};")
        r[u] = r[src[0]]
      elif op is Ops.LOAD:
        src = tuple(x for x in src if x.op is not Ops.BARRIER)  # a BARRIER source only orders the load after it
        val = self.render_vector_load(r[src[0]], r[src[1]], dt) if dt.count > 1 else f"{r[src[0]]}[{r[src[1]]}]"
        if len(src) > 2: val = f"({r[src[2]]}?{val}:{r[src[3]]})"
        r[u] = fresh("val")
        emit(f"{self.render_dtype(dt)} {r[u]} = {val};")
        if self.prefetch and isinstance(u.arg, int) and len(src) == 2: emit(self.render_prefetch(r[src[0]], f"({r[src[1]]})+{u.arg}"))
      elif op is Ops.STORE:
        if src[2].dtype.count > 1: line = self.render_vector_store(r[src[0]], r[src[1]], r[src[2]], src[2].dtype)
        else: line = f"{r[src[0]]}[{r[src[1]]}] = {r[src[2]]};"
        emit(f"if ({r[src[3]]}) {{ {line} }}" if len(src) > 3 else line)
      elif op is Ops.BARRIER: emit(self.barrier)
      else:
        if op is Ops.VECTORIZE: expr = self.render_vectorize([r[x] for x in src], dt)
        elif op is Ops.GEP: expr = self.render_gep(r[src[0]], u.arg if len(src) == 1 else r[src[1]], src[0].dtype)
        elif op is Ops.CAST: expr = self.render_cast(r[src[0]], dt, src[0].dtype)
        elif op is Ops.BITCAST:
          # bitcasting needs an lvalue in C-like languages
          tmp = fresh("cast")
          emit(f"{self.render_dtype(src[0].dtype)} {tmp} = {r[src[0]]};")
          expr = self.render_bitcast(tmp, dt, src[0].dtype)
        elif op in self.math_fns or op is Ops.RECIP: expr = self.render_math(op, r[src[0]], dt)
        elif op in _WRAPPING and dt in _UNSIGNED_OF and u in data: expr = self.render_wrapping(op, [r[s] for s in src], dt)
        elif op in self.code_for_op: expr = self.code_for_op[op](*[r[s] for s in src], src[0].dtype if op is not Ops.WHERE else dt)
        else: raise NotImplementedError(f"{type(self).__name__} cannot render {op}")
        # C promotes narrow integers to int: cast each result back so it wraps like the op set says
        if (dt.scalar() in self.round_results and op not in (Ops.CAST, Ops.BITCAST)) or (dt == dtypes.bool and op in (Ops.ADD, Ops.MUL)):
          expr = self.render_cast(expr, dt, dt)
        # MAX spells its operands more than once: inlined in a chain it would grow exponentially
        if uses[u] <= 1 and op not in (Ops.BITCAST, Ops.MAX, Ops.VECTORIZE): r[u] = expr
        else:
          r[u] = fresh("alu")
          emit(f"{self.render_dtype(dt)} {r[u]} = {expr};")
    # arguments in launch order: buffers by their number, then variables by name (as the runner passes them)
    bufs.sort(key=lambda b: (0, int(b[0][4:]), "") if isinstance(b[1], PtrDType) else (1, 0, b[0]))
    return self.render_kernel(name, body, bufs, uops, self.render_prefix(uops))
