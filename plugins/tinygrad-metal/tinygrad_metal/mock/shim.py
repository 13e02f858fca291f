"""Metal Shading Language in host C++: the <metal_stdlib> the host-source executor (tinycore.runtime.hostgrid) gives a
kernel. What our renderer emits: address-space words (device, constant, threadgroup: threadgroup arrays become static,
one per work-group in turn), `kernel`, the scalar types, uint3 ids (hostgrid's ids, passed as arguments),
threadgroup_barrier, as_type, the float math functions."""

METAL_STDLIB = r"""#pragma once
#define kernel
#define device
#define constant
#define threadgroup static
namespace metal {
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef _Float16 half;
typedef __bf16 bfloat;
typedef hg_uint3 uint3;
enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
inline void threadgroup_barrier(mem_flags) { hg_barrier(); }
template <typename T, typename U> inline T as_type(U x) {
  static_assert(sizeof(T) == sizeof(U), "as_type<T>(x) needs sizeof(T) == sizeof(x)");
  T r; __builtin_memcpy(&r, &x, sizeof(T)); return r;
}
inline float exp2(float x) { return ::exp2f(x); }
inline float log2(float x) { return ::log2f(x); }
inline float sin(float x) { return ::sinf(x); }
inline float sqrt(float x) { return ::sqrtf(x); }
}
"""
SHIM = ""
HEADERS = {"metal_stdlib": METAL_STDLIB}
BARRIER = "threadgroup_barrier"
