"""HIP in host C++ for the host-source executor (tinycore.runtime.hostgrid): our renderer's PRELUDE defines __global__ and
__shared__ as amdgcn attributes, which mean nothing on the host, so the mock redefines those macros (HOST_DEFINES: shared
arrays become static storage, one per work-group in turn); the amdgcn id, barrier and fence builtins become hostgrid's
ids and barrier (SHIM)."""
import re

# the prelude's macros that name amdgcn attributes, and what they mean on the host; the rest of the prelude stays
HOST_DEFINES = {"__global__": "", "__shared__": "static", "__device__": "", "TC_INLINE": "static inline"}
SHIM = r"""
#define __builtin_amdgcn_workgroup_id_x() hg_group_id.x
#define __builtin_amdgcn_workgroup_id_y() hg_group_id.y
#define __builtin_amdgcn_workgroup_id_z() hg_group_id.z
#define __builtin_amdgcn_workitem_id_x() hg_local_id.x
#define __builtin_amdgcn_workitem_id_y() hg_local_id.y
#define __builtin_amdgcn_workitem_id_z() hg_local_id.z
#define __builtin_amdgcn_workgroup_size_x() hg_group_size.x
#define __builtin_amdgcn_workgroup_size_y() hg_group_size.y
#define __builtin_amdgcn_workgroup_size_z() hg_group_size.z
#define __builtin_amdgcn_s_barrier() hg_barrier()
#define __builtin_amdgcn_fence(order, scope) ((void)0)
#define amdgpu_flat_work_group_size(lo, hi)
"""
BARRIER = "__builtin_amdgcn_s_barrier"

def host_source(src: str) -> str:
  """The rendered kernel with the prelude's attribute macros redefined for the host; ValueError for source our renderer
  did not make (no such prelude)."""
  lines, seen = src.split("\n"), set()
  for i, line in enumerate(lines):
    if (m := re.match(r"#define (\w+)\b", line)) and m.group(1) in HOST_DEFINES:
      lines[i] = f"#define {m.group(1)} {HOST_DEFINES[m.group(1)]}"
      seen.add(m.group(1))
  if seen != set(HOST_DEFINES): raise ValueError(f"the kernel lacks the amdgcn prelude's {sorted(set(HOST_DEFINES) - seen)}: not our renderer's HIP")
  return "\n".join(lines)
