"""tinycore backend for NVIDIA GPUs through CUDA: CUDA C rendered by a small C-style renderer, compiled by NVRTC, run with
the CUDA driver API (NVIDIA's cuda-bindings).

Importing this module loads neither cuda-bindings nor the driver. Renderer and compiler need no GPU (compile-only use):
  from tinygrad_cuda import make_renderer, make_compiler
  src = make_renderer("sm_90").render("k", uops); cubin = make_compiler("sm_90").compile(src)
Only the allocator and the program open the driver. Devices: CUDA (= CUDA:0), CUDA:1, ... in the driver's order."""
from __future__ import annotations
import os
from tinycore.backend import Backend, lazy
from tinygrad_cuda import mock  # loads nothing: MOCKGPU's settings

TINYCORE_API_VERSION = "1.3.0"
DEFAULT_ARCH = "sm_80"  # compile-only target when no GPU says otherwise; CUDA_ARCH=sm_XX overrides

def check(idx: int = 0) -> str | None:
  """None when CUDA device `idx` can open and compile here, else the reason in words a user can act on."""
  from tinygrad_cuda import runtime
  if (why := runtime.unavailable_reason(idx)) is not None: return why
  from tinygrad_cuda.compiler import nvrtc_unavailable_reason
  return nvrtc_unavailable_reason() or (mock.executor_unavailable(mock.cuda_executor()) if mock.enabled() else None)

def target_arch(device: str | None = None) -> str:
  """The sm_XX to compile for: $CUDA_ARCH, else the GPU's own compute capability when it can open, else sm_80."""
  if (env := os.getenv("CUDA_ARCH")): return env if env.startswith("sm_") else f"sm_{env.replace('.', '')}"
  if device is not None and (idx := device_index(device)) is not None and check(idx) is None:
    from tinygrad_cuda import runtime
    return runtime.get_device(device, idx).arch
  return DEFAULT_ARCH

def make_renderer(arch: str | None = None):
  """A CUDA C renderer for `arch` (sm_XX); needs no GPU."""
  from tinygrad_cuda.renderer import CUDARenderer
  return CUDARenderer(arch or target_arch())

def make_compiler(arch: str | None = None, output: str = "cubin"):
  """An NVRTC compiler for `arch` producing a cubin (output='cubin') or PTX text (output='ptx'); needs no GPU."""
  from tinygrad_cuda.compiler import NVRTCCompiler
  return NVRTCCompiler(arch or target_arch(), output)

def device_compiler(device: str, idx: int):
  """The device's compiler: NVRTC to a cubin; under MOCKGPU the same compile, then an emulated image for the CPU executor."""
  real = make_compiler(arch := target_arch(device))
  if not mock.enabled(): return real
  from tinycore.runtime.emulatedimage import EmulatedCompiler
  if (ex := mock.cuda_executor()) == "ptx": return EmulatedCompiler(real, ex, {"ptx": make_compiler(arch, output="ptx").compile})
  return EmulatedCompiler(real, ex)

# priority 40: above CLANG (10) and OPENCL (5), a GPU here is what the user wants by default; emulated (MOCKGPU), it is
# used only when asked for by name
BACKEND = Backend("CUDA", priority=-40 if mock.enabled() else 40, check=check, api_version=TINYCORE_API_VERSION,
                  description=mock.describe(mock.cuda_executor()) if mock.enabled() else "CUDA C -> NVRTC -> CUDA driver API; CUDA:n is the n-th GPU",
                  allocator=lazy("tinygrad_cuda.runtime:allocator"), program=lazy("tinygrad_cuda.runtime:program"),
                  renderer=lambda device, idx: make_renderer(target_arch(device)), compiler=device_compiler)
tinycore_devices, tinycore_allocator, tinycore_renderer, tinycore_compiler, tinycore_program = BACKEND.hookimpls()
device_index = BACKEND.index
