"""The NV plugin's one door to the GPU. For now it is the CUDA driver API, through the tinygrad-cuda plugin's runtime
(a dependency, not a copy): allocation, copies, loading a cubin, launching, timing. A runtime that talks to the NVIDIA
kernel driver directly can replace this module without touching the renderer or the compiler.

The interface: unavailable_reason(idx), device_arch(device, idx), allocator(device, idx), program_class()."""
from __future__ import annotations
from tinycore.backend import Allocator, Program

def unavailable_reason(idx: int = 0) -> str | None:
  from tinygrad_cuda import runtime
  return runtime.unavailable_reason(idx)

def device_arch(device: str, idx: int) -> str:
  """sm_XX of the GPU (its compute capability)."""
  from tinygrad_cuda import runtime
  return runtime.get_device(device, idx).arch

def allocator(device: str, idx: int) -> Allocator:
  from tinygrad_cuda import runtime
  return runtime.allocator(device, idx)

def program_class(device: str, idx: int) -> type[Program]:
  """The Program class for cubins on this GPU (it reads the ordinal from 'NV:n'); raises DeviceError when it cannot open."""
  from tinygrad_cuda import runtime
  return runtime.program(device, idx)
