"""HIP-style source for AMD GPUs, compiled by clang's amdgcn target without HIP headers or ROCm device libraries.

The kernel carries its own small header (`PRELUDE`): the __global__/__shared__ attributes, half and bfloat16 as clang's
_Float16 and __bf16, the work-item ids and the barrier as amdgcn builtins. float math uses clang builtins that the AMDGPU
backend lowers to hardware instructions; double exp2/log2/sin (which the backend can only do with ROCm's ocml library)
are written out below in plain C: range reduction plus Taylor/atanh series, accurate to a few ulp on normal inputs."""
from __future__ import annotations
import math
from tinycore.dtype import DType, dtypes
from tinycore.helpers import prod
from tinycore.ops import Ops
from tinycore.renderer.cstyle import CStyleLanguage
from tinycore.uop.uop import UOp

def wave_size(arch: str) -> int:
  """Threads per wavefront: 64 on GCN/CDNA (gfx9xx), 32 on RDNA (gfx10xx and later, clang's default there)."""
  if not arch.startswith("gfx") or not arch[3:].isalnum(): raise ValueError(f"bad AMD GPU architecture {arch!r}: expected gfxNNNN, e.g. gfx1100")
  return 64 if len(arch) <= 6 and arch[3] in "6789" else 32

PRELUDE = """#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __device__ __attribute__((device))
#define TC_INLINE static __device__ inline __attribute__((always_inline))
typedef _Float16 half;
typedef __bf16 bfloat16;
"""

def _horner(var: str, coeffs: list[float]) -> str:
  """c0 + var*(c1 + var*(c2 + ...)) with the coefficients as exact C double literals."""
  expr = repr(coeffs[-1])
  for c in reversed(coeffs[:-1]): expr = f"{c!r} + {var}*({expr})"
  return expr

# double exp2/log2/sin, for the AMDGPU backend has no f64 lowering of them. Only fma/rint/ldexp/frexp builtins are used,
# which it does lower to single instructions.
_EXP = [1 / math.factorial(k) for k in range(14)]
_SIN = [(-1) ** k / math.factorial(2 * k + 1) for k in range(9)]
_COS = [(-1) ** k / math.factorial(2 * k) for k in range(10)]
_ATANH = [1 / (2 * k + 1) for k in range(11)]
F64_MATH = {
  Ops.EXP2: f"""TC_INLINE double tc_exp2_f64(double x) {{
  if (x != x) return x;
  if (x >= 1024.0) return __builtin_inf();
  if (x <= -1080.0) return 0.0;
  double n = __builtin_rint(x), t = (x - n) * 0.6931471805599453;  /* x = n + f, |f| <= 1/2; 2^f = e^t */
  return __builtin_ldexp({_horner('t', _EXP)}, (int)n);
}}
""",
  Ops.LOG2: f"""TC_INLINE double tc_log2_f64(double x) {{
  if (x != x || x < 0.0) return __builtin_nan("");
  if (x == 0.0) return -__builtin_inf();
  if (x == __builtin_inf()) return x;
  int e; double m = __builtin_frexp(x, &e);                          /* x = m * 2^e, m in [1/2, 1) */
  if (m < 0.7071067811865476) {{ m *= 2.0; e -= 1; }}                 /* m in [sqrt(1/2), sqrt(2)) */
  double s = (m - 1.0) / (m + 1.0), s2 = s * s;                       /* ln m = 2 atanh(s), |s| < 0.172 */
  return (double)e + 2.0 * s * ({_horner('s2', _ATANH)}) * 1.4426950408889634;
}}
""",
  Ops.SIN: f"""TC_INLINE double tc_sin_f64(double x) {{
  if (x != x || x == __builtin_inf() || x == -__builtin_inf()) return __builtin_nan("");
  double q = __builtin_rint(x * 0.6366197723675814);                  /* quadrant: x = q*pi/2 + r */
  double r = __builtin_fma(-q, 1.5707963267948966, x);
  r = __builtin_fma(-q, 6.123233995736766e-17, r);
  double r2 = r * r;
  long long k = (long long)q & 3;
  double v = (k & 1) ? ({_horner('r2', _COS)}) : r * ({_horner('r2', _SIN)});
  return (k & 2) ? -v : v;
}}
""",
}

_HALFS = (dtypes.float16, dtypes.bfloat16)
_XYZ = "xyz"

class AMDRenderer(CStyleLanguage):
  kernel_prefix = 'extern "C" __global__ '
  smem_prefix = "__shared__ "
  smem_align = "__attribute__((aligned(16))) "
  arg_int_prefix = "const int"
  # the fences make the barrier also order LDS (and global) memory within the work-group, as __syncthreads() does
  barrier = '__builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); ' \
            '__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");'
  code_for_workitem = {"g": lambda a: f"__builtin_amdgcn_workgroup_id_{_XYZ[a]}()",
                       "l": lambda a: f"__builtin_amdgcn_workitem_id_{_XYZ[a]}()",
                       "i": lambda a: f"(__builtin_amdgcn_workgroup_id_{_XYZ[a]}()*__builtin_amdgcn_workgroup_size_{_XYZ[a]}()"
                                      f"+__builtin_amdgcn_workitem_id_{_XYZ[a]}())"}
  type_map = {dtypes.bool: "bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char", dtypes.int16: "short",
              dtypes.uint16: "unsigned short", dtypes.int32: "int", dtypes.uint32: "unsigned int", dtypes.int64: "long long",
              dtypes.uint64: "unsigned long long", dtypes.float16: "half", dtypes.bfloat16: "bfloat16",
              dtypes.float32: "float", dtypes.float64: "double"}
  infinity = "__builtin_inff()"
  nan = '__builtin_nanf("")'

  def __init__(self, arch: str = "gfx1100"):
    self.wave_size = wave_size(arch)
    super().__init__(device="AMD", has_local=True, has_shared=True, global_max=(0x7FFFFFFF, 65535, 65535), local_max=(1024, 1024, 1024),
                     shared_max=64 * 1024, max_upcast=16, vector_widths=(1,), dtypes=tuple(dtypes.all))
    self.arch = arch

  def render_cast(self, x: str, dt: DType, from_dt: DType) -> str:
    if dt == dtypes.bfloat16 and from_dt == dtypes.bool:
      # clang folds (bf16)(float)b into a bool->bfloat16 conversion that LLVM 19's AMDGPU backend cannot select
      return f"(({x})?(bfloat16)1.0f:(bfloat16)0.0f)"
    # half <-> bfloat16 has no direct conversion in clang, and the backend lacks integer <-> bfloat16: go through float
    if (dt in _HALFS or from_dt in _HALFS) and dtypes.float32 not in (dt, from_dt) and dt != from_dt: x = f"((float)({x}))"
    return f"(({self.render_dtype(dt)})({x}))"

  def render_math(self, op: Ops, x: str, dt: DType) -> str:
    if op is Ops.RECIP: return super().render_math(op, x, dt)
    fn = self.math_fns[op]
    if dt == dtypes.float64: return f"__builtin_sqrt({x})" if op is Ops.SQRT else f"tc_{fn}_f64({x})"
    if dt in _HALFS: return f"(({self.render_dtype(dt)})__builtin_{fn}f((float)({x})))"
    return f"__builtin_{fn}f({x})"

  def render_prefix(self, uops: list[UOp]) -> str:
    f64 = [F64_MATH[u.op] for u in uops if u.op in F64_MATH and u.dtype == dtypes.float64]
    return PRELUDE + "".join(dict.fromkeys(f64))

  def render_kernel(self, name: str, body: list[str], bufs: list[tuple[str, DType, bool]], uops: list[UOp], prefix: str = "") -> str:
    src = super().render_kernel(name, body, bufs, uops, prefix)
    specials = [u.arg for u in uops if u.op is Ops.SPECIAL]
    if any(a[0][0] == "l" for a in specials) and not any(a[0][0] == "i" for a in specials):
      threads = prod(a[1] for a in specials if a[0][0] == "l")
      src = src.replace(f"{self.kernel_prefix}void {name}(",
                        f"{self.kernel_prefix}void __attribute__((amdgpu_flat_work_group_size(1, {threads}))) {name}(", 1)
    return src
