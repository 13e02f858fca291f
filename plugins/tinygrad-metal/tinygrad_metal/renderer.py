"""Metal Shading Language: the core's C-style renderer with Metal's spellings.

Kernel arguments carry their [[buffer(n)]] slots: the buffers first, then each symbolic size as `constant int&`, then the
ids Metal hands a kernel (threadgroup, thread-in-threadgroup and thread-in-grid positions)."""
from __future__ import annotations
from tinycore.dtype import DType, PtrDType, dtypes
from tinycore.ops import Ops
from tinycore.renderer.cstyle import CStyleLanguage
from tinycore.uop.uop import UOp

_XYZ = "xyz"
_HALFS = (dtypes.float16, dtypes.bfloat16)
METAL_STD = "metal3.1"  # bfloat needs Metal 3.1 (macOS 14)

class MetalRenderer(CStyleLanguage):
  kernel_prefix = "kernel "
  buffer_prefix = "device "
  smem_prefix = "threadgroup "
  barrier = "threadgroup_barrier(mem_flags::mem_threadgroup);"
  code_for_workitem = {"g": lambda a: f"gid.{_XYZ[a]}", "l": lambda a: f"lid.{_XYZ[a]}", "i": lambda a: f"tid.{_XYZ[a]}"}
  type_map = {dtypes.bool: "bool", dtypes.int8: "char", dtypes.uint8: "uchar", dtypes.int16: "short", dtypes.uint16: "ushort",
              dtypes.int32: "int", dtypes.uint32: "uint", dtypes.int64: "long", dtypes.uint64: "ulong", dtypes.float16: "half",
              dtypes.bfloat16: "bfloat", dtypes.float32: "float"}
  infinity = "INFINITY"
  nan = "NAN"

  def __init__(self) -> None:
    # Metal has no double; a threadgroup holds at most 1024 threads and 32 KiB of threadgroup memory
    super().__init__(device="METAL", has_local=True, has_shared=True, global_max=(0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF),
                     local_max=(1024, 1024, 1024), shared_max=32 * 1024, max_upcast=16, vector_widths=(1,),
                     dtypes=tuple(d for d in dtypes.all if d != dtypes.float64))

  def render_cast(self, x: str, dt: DType, from_dt: DType) -> str:
    # half <-> bfloat and integer <-> bfloat conversions are not all defined: go through float, which is exact for both
    if (dt in _HALFS or from_dt in _HALFS) and dtypes.float32 not in (dt, from_dt) and dt != from_dt: x = f"((float)({x}))"
    return f"(({self.render_dtype(dt)})({x}))"
  def render_bitcast(self, x: str, dt: DType, from_dt: DType) -> str: return f"as_type<{self.render_dtype(dt)}>({x})"
  def render_math(self, op: Ops, x: str, dt: DType) -> str:
    if op is not Ops.RECIP and dt in _HALFS: return f"(({self.render_dtype(dt)}){self.math_fns[op]}((float)({x})))"  # float math, one rounding
    return super().render_math(op, x, dt)
  def render_prefix(self, uops: list[UOp]) -> str: return "#include <metal_stdlib>\nusing namespace metal;\n"

  def render_kernel(self, name: str, body: list[str], bufs: list[tuple[str, DType, bool]], uops: list[UOp], prefix: str = "") -> str:
    args = [f"device {'' if mut else 'const '}{self.render_dtype(dt.base)}* {n} [[buffer({i})]]" if isinstance(dt, PtrDType)
            else f"constant int& {n} [[buffer({i})]]" for i, (n, dt, mut) in enumerate(bufs)]
    args += ["uint3 gid [[threadgroup_position_in_grid]]", "uint3 lid [[thread_position_in_threadgroup]]",
             "uint3 tid [[thread_position_in_grid]]"]
    return f"{prefix}kernel void {name}({', '.join(args)}) {{\n" + "\n".join(body) + "\n}"
