"""OpenCL C: the core's C-style renderer with OpenCL spellings, and capabilities read from the device."""
from __future__ import annotations
from tinycore.dtype import DType, PtrDType, dtypes
from tinycore.ops import Ops
from tinycore.renderer.cstyle import CStyleLanguage
from tinycore.uop.uop import UOp

# dtypes every OpenCL 1.2 device has; half and double are optional extensions, checked per device
_BASE_DTYPES = (dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32,
                dtypes.int64, dtypes.uint64, dtypes.float32)

class OpenCLRenderer(CStyleLanguage):
  kernel_prefix = "__kernel "
  buffer_prefix = "__global "
  smem_prefix = "__local "
  smem_align = "__attribute__ ((aligned (16))) "
  barrier = "barrier(CLK_LOCAL_MEM_FENCE);"
  arg_int_prefix = "const int"
  code_for_workitem = {"g": lambda i: f"get_group_id({i})", "l": lambda i: f"get_local_id({i})", "i": lambda i: f"get_global_id({i})"}
  # the vector widths this renderer would emit for float once the C-style base renders VECTORIZE/GEP and vector loads
  float_vector_widths = (2, 4)

  @classmethod
  def for_device(cls, dev) -> OpenCLRenderer:
    """Capabilities as the device reports them (`dev` is a tinygrad_opencl.runtime.CLDevice)."""
    d = dev.dev
    local_max = tuple(min(s, d.max_work_group_size) for s in d.max_work_item_sizes[:3])
    dts = _BASE_DTYPES + ((dtypes.float16,) if dev.has_fp16 else ()) + ((dtypes.float64,) if dev.has_fp64 else ())
    # global_size counts work-groups; NDRange totals are size_t, so the int32 group id is what limits each axis
    return cls(device=dev.device, has_local=True, has_shared=True, global_max=(0x7FFFFFFF,) * 3, local_max=local_max,
               shared_max=d.local_mem_size, vector_widths=(1,), dtypes=dts)

  # OpenCL forbids bool in kernel argument pointers: bool buffers travel as uchar (one byte, 0 or 1, like tinycore's bool)
  def render_dtype(self, dt: DType) -> str:
    if isinstance(dt, PtrDType) and dt.base == dtypes.bool: return "uchar*"
    return super().render_dtype(dt)
  def render_bitcast(self, x: str, dt: DType, from_dt: DType) -> str:
    if dt.scalar() == dtypes.bool or from_dt.scalar() == dtypes.bool: return super().render_bitcast(x, dt, from_dt)
    return f"as_{self.render_dtype(dt)}({x})"
  def render_prefix(self, uops: list[UOp]) -> str:
    used = {u.dtype.scalar() if not isinstance(u.dtype, PtrDType) else u.dtype.base.scalar() for u in uops}
    used |= {s.dtype.scalar() for u in uops if u.op in (Ops.CAST, Ops.BITCAST) for s in u.src}
    return "".join(f"#pragma OPENCL EXTENSION {ext} : enable\n" for dt, ext in ((dtypes.float16, "cl_khr_fp16"), (dtypes.float64, "cl_khr_fp64"))
                   if dt in used)
