"""tinycore backend for NVIDIA GPUs without CUDA C: PTX rendered directly by our own PTX renderer, assembled by ptxas into
a cubin, run on the NVIDIA driver (for now through the tinygrad-cuda plugin's driver-API runtime: see runtime.py).

Importing this module loads nothing from NVIDIA. Renderer and compiler need no GPU (compile-only use):
  from tinygrad_nv import make_renderer, make_compiler
  cubin = make_compiler("sm_90").compile(make_renderer("sm_90").render("k", uops))
Devices: NV (= NV:0), NV:1, ... the same GPUs CUDA:n names, in the driver's order."""
from __future__ import annotations
import os
from tinycore.backend import Backend, lazy
from tinygrad_cuda import mock  # loads nothing: MOCKGPU's settings (NV runs on tinygrad-cuda's runtime, and its mock)

TINYCORE_API_VERSION = "1.3.0"
DEFAULT_ARCH = "sm_80"

def check(idx: int = 0) -> str | None:
  """None when GPU `idx` can open here and ptxas is there to assemble for it, else why not."""
  from tinygrad_nv import runtime
  if (why := runtime.unavailable_reason(idx)) is not None: return why
  from tinygrad_cuda.compiler import find_ptxas
  if not find_ptxas(): return "ptxas not found (pip install nvidia-cuda-nvcc-cu12, or set PTXAS)"
  return mock.executor_unavailable("ptx") if mock.enabled() else None

def target_arch(device: str | None = None) -> str:
  """$CUDA_ARCH, else the opened GPU's sm_XX, else sm_80."""
  if (env := os.getenv("CUDA_ARCH")): return env if env.startswith("sm_") else f"sm_{env.replace('.', '')}"
  if device is not None and (idx := BACKEND.index(device)) is not None and check(idx) is None:
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

def device_compiler(device: str, idx: int):
  """ptxas to a cubin; under MOCKGPU the same assembly, then an emulated image of the PTX for the PTX interpreter."""
  real = make_compiler(target_arch(device))
  if not mock.enabled(): return real
  from tinycore.runtime.emulatedimage import EmulatedCompiler
  return EmulatedCompiler(real, "ptx")

# priority 35, just below CUDA: both drive the same GPU, CUDA C through NVRTC is the more travelled path for now;
# emulated (MOCKGPU), it is used only when asked for by name
BACKEND = Backend("NV", priority=-35 if mock.enabled() else 35, check=check, api_version=TINYCORE_API_VERSION,
                  description=mock.describe("ptx") if mock.enabled() else
                  "PTX rendered directly -> ptxas -> cubin -> NVIDIA driver; NV:n is the n-th GPU",
                  allocator=lazy("tinygrad_nv.runtime:allocator"), program=lazy("tinygrad_nv.runtime:program_class"),
                  renderer=lambda device, idx: make_renderer(target_arch(device)),
                  compiler=device_compiler)
tinycore_devices, tinycore_allocator, tinycore_renderer, tinycore_compiler, tinycore_program = BACKEND.hookimpls()
