"""MOCKGPU=1: the CUDA runtime of this plugin runs above a fake of cuda-bindings' driver module (driver.py), with device
memory in host memory and kernels executed on the CPU. Everything above the driver module is the code a GPU user runs.

Settings (environment):
  MOCKGPU=1         use the mock driver (runtime._driver() is the one seam); the NV plugin follows, it runs on this runtime
  MOCKGPU_EXEC      how CUDA kernels execute: `host` (the CUDA C source compiled for the host by tinycore.runtime.hostgrid,
                    the default) or `ptx` (NVRTC's PTX through the PTX interpreter, tinygrad_cuda.mock.ptx). NV always
                    runs its PTX through the interpreter.
  MOCKGPU_MEMORY    bytes of device memory per GPU (default 8 GiB): past it cuMemAlloc fails with CUDA_ERROR_OUT_OF_MEMORY
  MOCKGPU_DEVICES   how many GPUs the driver reports (default 1)
  MOCKGPU_SEED      seed of the work-item order (default 0)

Importing this package loads nothing."""
from __future__ import annotations
import importlib.util, os

EXECUTORS = ("host", "ptx")

def enabled() -> bool:
  """True when MOCKGPU is set to something other than 0."""
  return os.getenv("MOCKGPU", "0") not in ("", "0")

def cuda_executor() -> str:
  """The executor CUDA kernels use under MOCKGPU (MOCKGPU_EXEC)."""
  if (ex := os.getenv("MOCKGPU_EXEC", "host")) not in EXECUTORS: raise ValueError(f"MOCKGPU_EXEC={ex!r}: expected one of {', '.join(EXECUTORS)}")
  return ex

def executor_unavailable(executor: str) -> str | None:
  """None when `executor` can run kernels here, else why not."""
  if executor == "ptx":
    if importlib.util.find_spec("tinygrad_cuda.mock.ptx") is None:
      return "MOCKGPU needs the PTX interpreter (tinygrad_cuda.mock.ptx) to execute PTX, and it is not installed in this version"
    return None
  from tinycore.runtime import hostgrid
  return hostgrid.unavailable_reason()

def describe(executor: str) -> str:
  """The words `python -m tinycore devices` shows for an emulated device."""
  how = "CUDA C compiled for the host CPU (hostgrid)" if executor == "host" else "PTX interpreted on the CPU"
  return f"emulated: mock CUDA driver, kernels run as {how}; the real compiler still runs"
