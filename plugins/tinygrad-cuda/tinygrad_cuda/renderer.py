"""CUDA C: the core's C-style renderer with CUDA's spellings (blockIdx/threadIdx, __shared__, __syncthreads, cuda_fp16.h)."""
from __future__ import annotations
from tinycore.dtype import DType, PtrDType, dtypes
from tinycore.helpers import prod
from tinycore.ops import Ops
from tinycore.renderer.cstyle import CStyleLanguage
from tinycore.uop.uop import UOp

def arch_number(arch: str) -> int:
  """'sm_80' -> 80, 'sm_90a' -> 90."""
  digits = "".join(c for c in arch.split("_")[-1] if c.isdigit())
  if not arch.startswith(("sm_", "compute_")) or not digits: raise ValueError(f"bad CUDA architecture {arch!r}: expected sm_XX, e.g. sm_80")
  return int(digits)

_XYZ = "xyz"
_HALFS = (dtypes.float16, dtypes.bfloat16)

class CUDARenderer(CStyleLanguage):
  kernel_prefix = 'extern "C" __global__ '
  smem_prefix = "__shared__ "
  smem_align = "__align__(16) "
  arg_int_prefix = "const int"
  barrier = "__syncthreads();"
  code_for_workitem = {"g": lambda a: f"blockIdx.{_XYZ[a]}", "l": lambda a: f"threadIdx.{_XYZ[a]}",
                       "i": lambda a: f"(blockIdx.{_XYZ[a]}*blockDim.{_XYZ[a]}+threadIdx.{_XYZ[a]})"}
  # char is unsigned on some hosts NVRTC targets (aarch64), so the signed types are spelled out
  type_map = {dtypes.bool: "bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char", dtypes.int16: "short",
              dtypes.uint16: "unsigned short", dtypes.int32: "int", dtypes.uint32: "unsigned int", dtypes.int64: "long long",
              dtypes.uint64: "unsigned long long", dtypes.float16: "half", dtypes.bfloat16: "__nv_bfloat16",
              dtypes.float32: "float", dtypes.float64: "double"}
  # NVRTC has no math.h, so no INFINITY/NAN macros: build them from their bits
  infinity = "__int_as_float(0x7f800000)"
  nan = "__int_as_float(0x7fffffff)"

  # -x of a narrow signed int: NVRTC 13.0 compiles ((short)(-x)) < y with the negation in 32 bits and no wrap, so
  # -(-32768) < 32766 came out false on an H100 (every spelling through a cast did; -G or a sign-extending shift pair
  # did not). The shifts wrap in unsigned arithmetic (no signed overflow) and sign-extend with an arithmetic right shift.
  code_for_op = {**CStyleLanguage.code_for_op,
                 Ops.NEG: lambda x, dt: (f"((int)((unsigned)(-{x}) << {32 - 8 * dt.itemsize}) >> {32 - 8 * dt.itemsize})"
                                         if dt in (dtypes.int8, dtypes.int16) else CStyleLanguage.code_for_op[Ops.NEG](x, dt))}

  def __init__(self, arch: str = "sm_80"):
    n = arch_number(arch)
    supported = tuple(d for d in dtypes.all if (d != dtypes.float16 or n >= 53) and (d != dtypes.bfloat16 or n >= 80))
    super().__init__(device="CUDA", has_local=True, has_shared=True, global_max=(0x7FFFFFFF, 65535, 65535),
                     local_max=(1024, 1024, 64), shared_max=48 * 1024, max_upcast=16, vector_widths=(1,), dtypes=supported)
    self.arch = arch

  def render_cast(self, x: str, dt: DType, from_dt: DType) -> str:
    # half and bfloat16 convert to and from float exactly and unambiguously; other pairs go through float
    if (dt in _HALFS or from_dt in _HALFS) and dtypes.float32 not in (dt, from_dt) and dt != from_dt:
      x = f"((float)({x}))"
    return f"(({self.render_dtype(dt)})({x}))"

  def render_math(self, op: Ops, x: str, dt: DType) -> str:
    if op is Ops.RECIP: return super().render_math(op, x, dt)
    fn = self.math_fns[op]
    if dt == dtypes.float64: return f"{fn}({x})"
    if dt in _HALFS: return f"(({self.render_dtype(dt)}){fn}f((float)({x})))"  # computed in float, rounded once
    return f"{fn}f({x})"

  def render_prefix(self, uops: list[UOp]) -> str:
    used = {(u.dtype.base if isinstance(u.dtype, PtrDType) else u.dtype).scalar() for u in uops}
    return "".join(f"#include <{h}>\n" for d, h in ((dtypes.float16, "cuda_fp16.h"), (dtypes.bfloat16, "cuda_bf16.h")) if d in used)

  def render_kernel(self, name: str, body: list[str], bufs: list[tuple[str, DType, bool]], uops: list[UOp], prefix: str = "") -> str:
    src = super().render_kernel(name, body, bufs, uops, prefix)
    # the block size is fixed by the kernel's local ids: telling ptxas lets it use more registers per thread
    specials = [u.arg for u in uops if u.op is Ops.SPECIAL]
    if any(a[0][0] == "l" for a in specials) and not any(a[0][0] == "i" for a in specials):
      threads = prod(a[1] for a in specials if a[0][0] == "l")
      src = src.replace(f"{self.kernel_prefix}void {name}(", f"{self.kernel_prefix}void __launch_bounds__({threads}) {name}(", 1)
    return src
