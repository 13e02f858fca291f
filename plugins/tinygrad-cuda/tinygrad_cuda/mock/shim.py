"""CUDA C in host C++: the shim header the host-source executor (tinycore.runtime.hostgrid) puts before a kernel, and the
stand-ins for the CUDA headers our renderer includes. hostgrid provides the ids (hg_*_id) and hg_barrier()."""

SHIM = r"""
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __syncthreads() hg_barrier()
#define __trap() __builtin_trap()
#define threadIdx hg_local_id
#define blockIdx hg_group_id
#define blockDim hg_group_size
#define gridDim hg_grid_size
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
"""

# half and bfloat16 as the host compiler's own types: each operation rounds to the type (hostgrid turns off excess
# precision), as CUDA's operators on __half and __nv_bfloat16 do
HEADERS = {"cuda_fp16.h": "#pragma once\ntypedef _Float16 half;\ntypedef _Float16 __half;\n",
           "cuda_bf16.h": "#pragma once\ntypedef __bf16 __nv_bfloat16;\n"}
BARRIER = "__syncthreads"
