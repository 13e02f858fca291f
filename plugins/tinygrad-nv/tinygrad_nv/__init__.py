"""tinycore backend for NVIDIA GPUs without CUDA C: PTX rendered directly by our own PTX renderer, assembled by ptxas into
a cubin, run on the NVIDIA driver (for now through the tinygrad-cuda plugin's driver-API runtime: see runtime.py).

Importing this module loads nothing from NVIDIA. Renderer and compiler need no GPU (compile-only use):
  from tinygrad_nv import make_renderer, make_compiler
  cubin = make_compiler("sm_90").compile(make_renderer("sm_90").render("k", uops))
Devices: NV (= NV:0), NV:1, ... the same GPUs CUDA:n names, in the driver's order."""
from __future__ import annotations
import os
from tinycore.plugin import DeviceSpec, hookimpl

TINYCORE_API_VERSION = "1.0.0"
DEVICE_NAME = "NV"
PRIORITY = 35       # just below CUDA: both drive the same GPU, CUDA C through NVRTC is the more travelled path for now
DEFAULT_ARCH = "sm_80"

def device_index(device: str) -> int | None:
  base, _, idx = device.partition(":")
  if base.upper() != DEVICE_NAME: return None
  if idx and not idx.isdigit():
    from tinycore.device import DeviceError
    raise DeviceError(f"bad device {device!r}: expected NV or NV:n")
  return int(idx) if idx else 0

def check(idx: int = 0) -> str | None:
  """None when GPU `idx` can open here and ptxas is there to assemble for it, else why not."""
  from tinygrad_nv import runtime
  if (why := runtime.unavailable_reason(idx)) is not None: return why
  from tinygrad_cuda.compiler import find_ptxas
  return None if find_ptxas() else "ptxas not found (pip install nvidia-cuda-nvcc-cu12, or set PTXAS)"

def target_arch(device: str | None = None) -> str:
  """$CUDA_ARCH, else the opened GPU's sm_XX, else sm_80."""
  if (env := os.getenv("CUDA_ARCH")): return env if env.startswith("sm_") else f"sm_{env.replace('.', '')}"
  if device is not None and (idx := device_index(device)) is not None and check(idx) is None:
    from tinygrad_nv import runtime
    return runtime.device_arch(device, idx)
  return DEFAULT_ARCH

def make_renderer(arch: str | None = None):
  from tinygrad_nv.ptx import PTXRenderer
  return PTXRenderer(arch or target_arch())

def make_compiler(arch: str | None = None):
  """ptxas for `arch`: PTX text -> cubin (tinygrad-cuda's wrapper of NVIDIA's assembler)."""
  from tinygrad_cuda.compiler import PTXASCompiler
  return PTXASCompiler(arch or target_arch())

@hookimpl
def tinycore_devices() -> list[DeviceSpec]:
  return [DeviceSpec(DEVICE_NAME, priority=PRIORITY, api_version=TINYCORE_API_VERSION, check=check,
                     description="PTX rendered directly -> ptxas -> cubin -> NVIDIA driver; NV:n is the n-th GPU")]

@hookimpl
def tinycore_allocator(device: str):
  if (idx := device_index(device)) is None: return None
  from tinygrad_nv import runtime
  return runtime.allocator(device, idx)

@hookimpl
def tinycore_renderer(device: str):
  return None if device_index(device) is None else make_renderer(target_arch(device))

@hookimpl
def tinycore_compiler(device: str):
  return None if device_index(device) is None else make_compiler(target_arch(device))

@hookimpl
def tinycore_program(device: str):
  if (idx := device_index(device)) is None: return None
  from tinygrad_nv import runtime
  return runtime.program_class(device, idx)
