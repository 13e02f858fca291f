"""MOCKGPU=1: this plugin's HIP runtime runs above a fake of libamdhip64 (hip.py: the functions the runtime calls through
ctypes), with device memory in host memory and the HIP source of each kernel compiled for the host CPU by the
host-source executor (tinycore.runtime.hostgrid, shim.py). clang's amdgcn compile still runs on every kernel; its code
object is only hashed: no emulator of AMD's ISA exists here, so the GPU binary itself never executes.
Settings: MOCKGPU_MEMORY (bytes per GPU, default 8 GiB), MOCKGPU_DEVICES (default 1), MOCKGPU_SEED; the GPUs report
AMD_ARCH (default gfx1100). Importing this package loads nothing."""
from __future__ import annotations
import os

def enabled() -> bool:
  """True when MOCKGPU is set to something other than 0."""
  return os.getenv("MOCKGPU", "0") not in ("", "0")

DESCRIPTION = "emulated: mock HIP runtime, kernels run as HIP source compiled for the host CPU (hostgrid); clang amdgcn still compiles"
