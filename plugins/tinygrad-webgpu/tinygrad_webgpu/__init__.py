"""tinycore backend for WebGPU: WGSL compute shaders run through wgpu-py (wgpu-native) on the system's WebGPU adapter:
a GPU through Vulkan, Metal or D3D12, or a software adapter such as Mesa's lavapipe on a machine without one.

Importing this module touches no driver and needs no wgpu: the runtime (tinygrad_webgpu.runtime) is imported only when
the device is checked or opened."""
from __future__ import annotations
from tinycore.backend import Backend, DeviceSpec, hookimpl, lazy

TINYCORE_API_VERSION = "1.3.0"

def check() -> str | None:
  """None when a WebGPU adapter exists here, else why not (in words a user can act on)."""
  try: from tinygrad_webgpu import runtime
  except ImportError as e:
    return f"wgpu is not installed (pip install wgpu): {e}" if "wgpu" in str(e) else f"the WebGPU runtime failed to import: {e}"
  return runtime.unavailable_reason()

# priority 3: below OPENCL (5) and CLANG (10), above PYTHON (0): a software adapter is slow, and a user with a GPU
# usually has a native backend for it; WEBGPU is for when it is asked for by name or nothing else is there
BACKEND = Backend("WEBGPU", priority=3, check=check, api_version=TINYCORE_API_VERSION,
                  description="WGSL through wgpu-py on the system's WebGPU adapter",
                  allocator=lazy("tinygrad_webgpu.runtime:allocator"), renderer=lazy("tinygrad_webgpu.runtime:renderer"),
                  compiler=lazy("tinygrad_webgpu.runtime:compiler"), program=lazy("tinygrad_webgpu.runtime:program"))
_, tinycore_allocator, tinycore_renderer, tinycore_compiler, tinycore_program = BACKEND.hookimpls()
device_index = BACKEND.index

@hookimpl
def tinycore_devices() -> list[DeviceSpec]:
  """BACKEND's device, whose description names the adapter once `check` has found it (a software or a hardware one
  makes a large difference): the spec is made without opening anything, and its check fills the adapter in."""
  spec = DeviceSpec(BACKEND.name, priority=BACKEND.priority, api_version=TINYCORE_API_VERSION, description=BACKEND.description)
  def check_and_describe() -> str | None:
    if (why := check()) is None:
      from tinygrad_webgpu import runtime
      spec.description = f"{BACKEND.description}: {runtime.describe(runtime.adapter())}"
    return why
  spec.check = check_and_describe
  return [spec]
