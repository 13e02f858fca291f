"""tinycore backend for AMD GPUs: HIP-style source (with its own small header, no HIP headers), compiled by clang's amdgcn
target into a code object, run through the HIP runtime (libamdhip64, ctypes).

Importing this module loads no library. Renderer and compiler need no GPU (compile-only use):
  from tinygrad_amd import make_renderer, make_compiler
  hsaco = make_compiler("gfx942").compile(make_renderer("gfx942").render("k", uops))
Devices: AMD (= AMD:0), AMD:1, ... in the HIP runtime's order."""
from __future__ import annotations
import os
from tinycore.backend import Backend, lazy
from tinygrad_amd import mock  # loads nothing: MOCKGPU's settings

TINYCORE_API_VERSION = "1.3.0"
DEFAULT_ARCH = "gfx1100"  # compile-only target when no GPU says otherwise; AMD_ARCH=gfxNNN overrides (e.g. gfx90a, gfx942)

def check(idx: int = 0) -> str | None:
  """None when AMD GPU `idx` can open here, else why not."""
  from tinygrad_amd import runtime
  if mock.enabled():  # emulated: clang amdgcn still compiles, and hostgrid needs clang++
    from tinycore.runtime.hostgrid import unavailable_reason
    from tinygrad_amd.compiler import toolchain_unavailable_reason
    return runtime.unavailable_reason(idx) or toolchain_unavailable_reason() or unavailable_reason()
  return runtime.unavailable_reason(idx)

def target_arch(device: str | None = None) -> str:
  """The gfx target to compile for: $AMD_ARCH, else the opened GPU's own, else gfx1100."""
  if (env := os.getenv("AMD_ARCH")): return env
  if device is not None and (idx := BACKEND.index(device)) is not None and check(idx) is None:
    from tinygrad_amd import runtime
    return runtime.get_device(device, idx).arch
  return DEFAULT_ARCH

def make_renderer(arch: str | None = None):
  from tinygrad_amd.renderer import AMDRenderer
  return AMDRenderer(arch or target_arch())

def make_compiler(arch: str | None = None):
  from tinygrad_amd.compiler import AMDCompiler
  return AMDCompiler(arch or target_arch())

def device_compiler(device: str, idx: int):
  """clang amdgcn to a code object; under MOCKGPU the same compile, then an emulated image of the source for the CPU."""
  real = make_compiler(target_arch(device))
  if not mock.enabled(): return real
  from tinycore.runtime.emulatedimage import EmulatedCompiler
  return EmulatedCompiler(real, "host")

# emulated (MOCKGPU), it is used only when asked for by name
BACKEND = Backend("AMD", priority=-40 if mock.enabled() else 40, check=check, api_version=TINYCORE_API_VERSION,
                  description=mock.DESCRIPTION if mock.enabled() else
                  "HIP-style source -> clang amdgcn code object -> HIP runtime; AMD:n is the n-th GPU",
                  allocator=lazy("tinygrad_amd.runtime:allocator"), program=lazy("tinygrad_amd.runtime:program"),
                  renderer=lambda device, idx: make_renderer(target_arch(device)),
                  compiler=device_compiler)
tinycore_devices, tinycore_allocator, tinycore_renderer, tinycore_compiler, tinycore_program = BACKEND.hookimpls()
