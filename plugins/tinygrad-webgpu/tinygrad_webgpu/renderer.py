"""WGSL from the linear UOp program: one compute entry point per kernel.

WGSL is not C: it has no pointers, no implicit conversions (`f32 + i32` does not type), no ternary (`select(f, t, c)`),
no 8- or 16-bit integers, no 64-bit types (without extensions), and storage buffers cannot hold `bool`. So:
  - every buffer is `var<storage, read_write> dataN: array<T>`: WebGPU forbids a buffer bound read-only and writable
    in the same dispatch, and the core may pass one buffer twice; read_write bindings may alias.
  - bool, int8, uint8, int16 and uint16 buffers keep tinycore's layout (1 or 2 bytes per element), packed in words: the
    buffer is `array<atomic<u32>>`, a load takes the element's bytes of its word (sign-extended for int8/int16), a store
    clears and sets them with atomicAnd/atomicOr (threads writing neighbouring elements of one word must not lose each
    other's writes). In registers they are i32/u32, wrapped back to their width after every op (`x & 0xff`,
    `(x << 24) >> 24`), so they overflow as the op set says; local memory holds them unpacked.
  - symbolic Variables arrive in a uniform struct `vars` (binding after the buffers), their members sorted by name.
  - the workgroup size is three `override` constants the runtime sets per launch (WGSL needs it at pipeline creation).
  - a dispatch has at most `global_max` (65535) workgroups per dimension, which the core does not plan for: a kernel
    with more groups along a dimension (and constant sizes) is rendered "folded", its groups numbered linearly over an
    x*y dispatch of global_max columns, and the runtime dispatches it so (FOLDED marks such a shader).
  - constants that WGSL cannot write as literals (NaN, +-inf, the int32 minimum) are bitcasts or conversions of ones it can.
Declared dtypes: bool, int8, uint8, int16, uint16, int32, uint32, float32, and float16 only where the adapter has
`shader-f16` (the runtime asks); never int64, uint64, float64 (WGSL has none) or bfloat16."""
from __future__ import annotations
import math, struct
from collections import Counter
from typing import Callable
from tinycore.backend import Renderer
from tinycore.dtype import DType, PtrDType, dtypes
from tinycore.ops import GroupOp, Ops
from tinycore.uop.uop import UOp

# the WGSL type each dtype has in registers
TYPES = {dtypes.bool: "bool", dtypes.int8: "i32", dtypes.int16: "i32", dtypes.int32: "i32", dtypes.uint8: "u32", dtypes.uint16: "u32",
         dtypes.uint32: "u32", dtypes.float32: "f32", dtypes.float16: "f16"}
# the dtypes packed in u32 words in buffers
PACKED = (dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16)
NARROW_INTS = PACKED[1:]
BASE_DTYPES = (dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.float32)
WORKGROUP_SIZE = ("WGX", "WGY", "WGZ")
FOLDED = "// workgroups folded"

def _bool_op(op: Ops, a: str, b: str) -> str:
  # WGSL has no arithmetic or ordering on bool: ADD is OR, MUL is AND, MAX is OR, a<b is !a&b, XOR is !=
  return {Ops.ADD: f"({a}|{b})", Ops.MUL: f"({a}&{b})", Ops.MAX: f"({a}|{b})", Ops.AND: f"({a}&{b})", Ops.OR: f"({a}|{b})",
          Ops.CMPLT: f"((!{a})&{b})", Ops.CMPNE: f"({a}!={b})", Ops.XOR: f"({a}!={b})"}[op]

def _isnan(x: str, dt: DType) -> str:
  # `x!=x` is an ordered compare here (false for NaN), and lavapipe folds f16 NaN tests to false: in f32, which keeps NaN
  return f"(!({x}=={x}))" if dt == dtypes.float32 else f"(!(f32({x})==f32({x})))"

BINARY = {Ops.ADD: "+", Ops.MUL: "*", Ops.IDIV: "/", Ops.MOD: "%", Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.AND: "&", Ops.OR: "|",
          Ops.XOR: "^"}

class WGSLRenderer(Renderer):
  """WGSL for WebGPU compute; the capabilities come from the adapter (see `for_limits`)."""

  @classmethod
  def for_limits(cls, device: str, limits: dict[str, int], has_f16: bool) -> WGSLRenderer:
    """Declarations from an adapter's limits (the WebGPU names) and whether it has the shader-f16 feature."""
    local_max = tuple(min(limits[f"max-compute-workgroup-size-{a}"], limits["max-compute-invocations-per-workgroup"]) for a in "xyz")
    return cls(device=device, has_local=True, has_shared=True, global_max=(limits["max-compute-workgroups-per-dimension"],) * 3,
               local_max=local_max, shared_max=limits["max-compute-workgroup-storage-size"],
               dtypes=BASE_DTYPES + ((dtypes.float16,) if has_f16 else ()))

  # *** spellings ***
  def render_dtype(self, dt: DType) -> str:
    if dt.scalar() not in TYPES: raise NotImplementedError(f"WGSL has no {dt}: {self.device or 'WEBGPU'} does not declare it")
    return TYPES[dt.scalar()]

  def render_const(self, x: float | int | bool, dt: DType) -> str:
    if dt == dtypes.bool: return "true" if x else "false"
    if TYPES.get(dt) == "i32": return "i32(-2147483648)" if x == -2**31 else f"{int(x)}i"
    if TYPES.get(dt) == "u32": return f"{int(x)}u"
    if dt not in (dtypes.float32, dtypes.float16): raise NotImplementedError(f"WGSL has no {dt} constant")
    if math.isnan(x) or math.isinf(x):  # no literal for these: the float32 bits, converted for f16 (a conversion keeps nan and inf)
      v = f"bitcast<f32>({struct.unpack('<I', struct.pack('<f', x))[0]:#x}u)"
      return v if dt == dtypes.float32 else f"f16({v})"
    return f"{float(x)!r}{'f' if dt == dtypes.float32 else 'h'}"  # the shortest repr of a float32 or float16 value reads back exactly

  def render_cast(self, x: str, dt: DType, from_dt: DType) -> str:
    if dt == dtypes.bool: return self.render_alu(Ops.CMPNE, [x, self.render_const(0, from_dt)], dt, from_dt)
    if from_dt == dtypes.bool: return f"select({self.render_const(0, dt)}, {self.render_const(1, dt)}, {x})"
    return self.wrap(f"{self.render_dtype(dt)}({x})", dt)
  def render_bitcast(self, x: str, dt: DType, from_dt: DType) -> str:
    # f16 and the 16-bit ints meet in the low half of a u32, through WGSL's f16 packing (naga cannot bitcast vec2<f16>)
    if dt == dtypes.float16: return f"f16(unpack2x16float(bitcast<u32>({x})&0xffffu).x)"
    if from_dt == dtypes.float16: return self.wrap(f"bitcast<{self.render_dtype(dt)}>(pack2x16float(vec2<f32>(f32({x}), 0.0f)))", dt)
    return self.wrap(f"bitcast<{self.render_dtype(dt)}>({x})", dt)
  @staticmethod
  def wrap(x: str, dt: DType) -> str:
    """A narrow int computed in 32 bits, brought back to its width (unsigned: masked; signed: sign-extended)."""
    if dt not in NARROW_INTS: return x
    bits = 8 * dt.itemsize
    return f"({x}&{(1 << bits) - 1:#x}u)" if dtypes.is_unsigned(dt) else f"(({x}<<{32 - bits}u)>>{32 - bits}u)"

  def render_alu(self, op: Ops, args: list[str], dt: DType, src_dt: DType) -> str:
    """An ALU op's expression: dt is the result's dtype, src_dt its first operand's."""
    if op is Ops.RECIP: return f"({self.render_const(1, dt)}/{args[0]})"
    # exp2(y*log2(x)) may be fused into pow(x, y), which on lavapipe gives 0, not NaN, for a NaN x: NaN is passed on by hand
    if op is Ops.EXP2: return f"select(exp2({args[0]}), {args[0]}, {_isnan(args[0], dt)})"
    # lavapipe's log2 of a float32 subnormal is -127 (log2(1.4e-45) is -149): a subnormal is scaled by 2^24 first
    if op is Ops.LOG2 and dt == dtypes.float32:
      x = args[0]
      return f"select(log2({x}), log2({x}*16777216.0f)-24.0f, {x}>0.0f && {x}<1.17549435e-38f)"
    if op in (Ops.LOG2, Ops.SIN, Ops.SQRT): return f"{op.name.lower()}({args[0]})"
    if op is Ops.NEG:
      return f"(!{args[0]})" if dt == dtypes.bool else f"(0u-{args[0]})" if TYPES.get(dt) == "u32" else f"(-{args[0]})"
    if op is Ops.WHERE: return f"select({args[2]}, {args[1]}, {args[0]})"
    if op is Ops.MULACC: return f"(({args[0]}*{args[1]})+{args[2]})"
    a, b = args
    if src_dt == dtypes.bool: return _bool_op(op, a, b)
    if op is Ops.MAX:  # NaN propagates like numpy.maximum: a NaN a is kept, a NaN b wins the comparison
      return f"select({b}, {a}, {_isnan(a, src_dt)}|({a}>{b}))" if dtypes.is_float(src_dt) else f"max({a}, {b})"
    if op in (Ops.SHL, Ops.SHR): return f"({a}{'<<' if op is Ops.SHL else '>>'}u32({b}))"
    if op is Ops.CMPNE and dtypes.is_float(src_dt): return f"(!({a}=={b}))"  # `!=` is an ordered compare here: false for NaN
    return f"({a}{BINARY[op]}{b})"

  # *** loads and stores: packed dtypes (in buffers, not in local memory) are read and written within their word ***
  @staticmethod
  def _element(buf: str, idx: str, dt: DType) -> tuple[str, str, str]:
    """The word holding element idx, the shift to its bits, the mask of its bits."""
    per = 4 // dt.itemsize
    return f"&{buf}[({idx})>>{per.bit_length() - 1}u]", f"(u32(({idx})&{per - 1}i)*{8 * dt.itemsize}u)", f"{(1 << 8 * dt.itemsize) - 1:#x}u"
  def render_load(self, buf: str, idx: str, dt: DType, local: bool) -> str:
    if dt not in PACKED or local: return f"{buf}[{idx}]"
    word, shift, mask = self._element(buf, idx, dt)
    bits = f"((atomicLoad({word})>>{shift})&{mask})"
    if dt == dtypes.bool: return f"({bits}!=0u)"
    return bits if dtypes.is_unsigned(dt) else self.wrap(f"bitcast<i32>({bits})", dt)
  def render_store(self, buf: str, idx: str, val: str, dt: DType, local: bool) -> str:
    if dt not in PACKED or local: return f"{buf}[{idx}] = {val};"
    word, shift, mask = self._element(buf, idx, dt)
    bits = f"select(0u, 1u, {val})" if dt == dtypes.bool else f"({val}&{mask})" if dtypes.is_unsigned(dt) else f"(bitcast<u32>({val})&{mask})"
    return f"atomicAnd({word}, ~({mask}<<{shift})); atomicOr({word}, {bits}<<{shift});"

  # *** the walk over the linear program ***
  def render(self, name: str, uops: list[UOp]) -> str:
    r: dict[UOp, str] = {}
    body: list[str] = []
    module: list[str] = []
    bufs: dict[int, DType] = {}
    variables: list[str] = []
    uses = Counter(s for u in uops for s in u.src)
    # MAX, EXP2 and LOG2 spell their operands more than once: they get names, or a chain of them would grow exponentially
    named = {s for u in uops if u.op in (Ops.MAX, Ops.EXP2, Ops.LOG2) for s in u.src}
    counts: Counter[str] = Counter()
    depth = 1
    def emit(line: str) -> None: body.append("  " * depth + line)
    def fresh(prefix: str) -> str:
      counts[prefix] += 1
      return f"{prefix}{counts[prefix]-1}"
    groups = {int(u.arg[0][-1]): u.arg[1] for u in uops if u.op is Ops.SPECIAL and u.arg[0][0] == "g"}
    group_ids = self.render_group_ids(groups, emit)
    for u in uops:
      op, dt, src = u.op, u.dtype, u.src
      if op is Ops.DEFINE_GLOBAL:
        r[u] = f"data{u.arg}"
        bufs[u.arg] = dt.base
      elif op is Ops.DEFINE_VAR:
        r[u] = u.arg[0]
        variables.append(u.arg[0])
        emit(f"let {r[u]}: i32 = vars.{r[u]};")
      elif op is Ops.DEFINE_LOCAL:
        r[u] = u.arg[0]
        module.append(f"var<workgroup> {r[u]}: array<{self.render_dtype(dt.base)}, {u.arg[1]}>;")
      elif op is Ops.SPECIAL:
        r[u], d = u.arg[0], int(u.arg[0][-1])
        local, group = f"i32(lid.{'xyz'[d]})", group_ids(d)
        emit(f"let {r[u]}: i32 = {group if r[u][0] == 'g' else local if r[u][0] == 'l' else f'({group}*i32({WORKGROUP_SIZE[d]})+{local})'};")
      elif op is Ops.CONST: r[u] = self.render_const(u.arg, dt)
      elif op is Ops.RANGE:
        r[u] = f"ridx{u.arg}"
        emit(f"for (var {r[u]}: i32 = {r[src[0]]}; {r[u]} < {r[src[1]]}; {r[u]}++) {{")
        depth += 1
      elif op is Ops.ENDRANGE:
        depth -= 1
        emit("}")
      elif op is Ops.DEFINE_ACC:
        r[u] = fresh("acc")
        emit(f"var {r[u]}: {self.render_dtype(dt)} = {r[src[0]]};")
      elif op is Ops.ASSIGN:
        emit(f"{r[src[0]]} = {r[src[1]]};")
        r[u] = r[src[0]]
      elif op is Ops.LOAD:
        src = tuple(x for x in src if x.op is not Ops.BARRIER)  # a BARRIER source only orders the load after it
        val = self.render_load(r[src[0]], r[src[1]], dt, src[0].dtype.local)
        # a gated load reads anyway (WebGPU clamps out-of-bounds reads to the buffer), and keeps alt where the gate is false
        if len(src) > 2: val = f"select({r[src[3]]}, {val}, {r[src[2]]})"
        r[u] = fresh("val")
        emit(f"let {r[u]}: {self.render_dtype(dt)} = {val};")
      elif op is Ops.STORE:
        line = self.render_store(r[src[0]], r[src[1]], r[src[2]], src[2].dtype, src[0].dtype.local)
        emit(f"if ({r[src[3]]}) {{ {line} }}" if len(src) > 3 else line)
      elif op is Ops.BARRIER: emit("workgroupBarrier();")
      else:
        if dt.count > 1 or op in (Ops.VECTORIZE, Ops.GEP): raise NotImplementedError(f"WGSLRenderer renders scalar code only, not {op} on {dt}")
        if op is Ops.CAST: expr = self.render_cast(r[src[0]], dt, src[0].dtype)
        elif op is Ops.BITCAST: expr = self.render_bitcast(r[src[0]], dt, src[0].dtype)
        elif op in GroupOp.ALU: expr = self.wrap(self.render_alu(op, [r[s] for s in src], dt, src[0].dtype if op is not Ops.WHERE else dt), dt)
        else: raise NotImplementedError(f"WGSLRenderer cannot render {op}")
        if uses[u] <= 1 and u not in named: r[u] = expr
        else:
          r[u] = fresh("alu")
          emit(f"let {r[u]}: {self.render_dtype(dt)} = {expr};")
    return self.render_module(name, body, module, bufs, sorted(variables), uops)

  def render_group_ids(self, groups: dict[int, int | UOp], emit: Callable[[str], None]) -> Callable[[int], str]:
    """How to read group id d: from workgroup_id, or, for a kernel with more groups along a dimension than a dispatch
    holds (and constant sizes), from the group's linear number over an x*y dispatch of global_max columns."""
    cols = self.global_max[0] if self.global_max else None
    if cols is None or not all(isinstance(n, int) for n in groups.values()) or all(n <= cols for n in groups.values()):
      return lambda d: f"i32(gid.{'xyz'[d]})"
    sizes = [groups.get(d, 1) for d in range(3)]
    emit(f"let lin: i32 = i32(gid.x) + i32(gid.y)*{cols}i;  {FOLDED}")
    emit(f"if (lin >= {sizes[0] * sizes[1] * sizes[2]}i) {{ return; }}")
    return lambda d: f"((lin/{math.prod(sizes[:d])}i)%{sizes[d]}i)"

  def render_module(self, name: str, body: list[str], module: list[str], bufs: dict[int, DType], variables: list[str], uops: list[UOp]) -> str:
    """The whole shader: extensions, bindings (buffers by number, then the variables' uniform), workgroup memory, entry point."""
    used = {u.dtype.base if isinstance(u.dtype, PtrDType) else u.dtype for u in uops}
    lines = ["enable f16;"] if dtypes.float16 in used else []
    lines += [f"override {w}: u32 = 1u;" for w in WORKGROUP_SIZE]
    for i, dt in sorted(bufs.items()):
      elem = "atomic<u32>" if dt in PACKED else self.render_dtype(dt)
      lines.append(f"@group(0) @binding({i}) var<storage, read_write> data{i}: array<{elem}>;")
    if variables:
      lines.append(f"struct Vars {{ {' '.join(f'{v}: i32,' for v in variables)} }}")
      lines.append(f"@group(0) @binding({max(bufs, default=-1) + 1}) var<uniform> vars: Vars;")
    lines += module
    lines.append(f"@compute @workgroup_size({', '.join(WORKGROUP_SIZE)})")
    lines.append(f"fn {name}(@builtin(workgroup_id) gid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {{")
    return "\n".join(lines + body + ["}"]) + "\n"
