"""HIP in host C++ for the host-source executor (tinycore.runtime.hostgrid): our renderer's PRELUDE gives __global__ and
__shared__ amdgcn attributes, which mean nothing on the host, so the mock swaps it for HOST_PRELUDE (shared arrays become
static storage, one per work-group in turn); the amdgcn id, barrier and fence builtins become hostgrid's ids and barrier."""

HOST_PRELUDE = """#define __global__
#define __shared__ static
#define __device__
#define TC_INLINE static inline
typedef _Float16 half;
typedef __bf16 bfloat16;
"""
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
  """The rendered kernel with its amdgcn prelude swapped for the host's; ValueError for source our renderer did not make."""
  from tinygrad_amd.renderer import PRELUDE
  if PRELUDE not in src: raise ValueError("the kernel does not start with tinygrad_amd.renderer.PRELUDE: not our renderer's HIP")
  return src.replace(PRELUDE, HOST_PRELUDE, 1)
