"""How the mock driver runs a kernel on the CPU: `host` compiles the CUDA C source for the host (tinycore.runtime.hostgrid
with the CUDA shim), `ptx` interprets the PTX (ptx.run_ptx). Both see device memory as DeviceMemory."""
from __future__ import annotations
import signal
from typing import Any
from tinycore.runtime.hostgrid import HostKernel

def load(executor: str, sections: dict[str, bytes], name: str) -> Any:
  """What `run` needs to execute kernel `name` (compiled once per function); CompileError when the host cannot compile it."""
  if executor == "ptx": return sections["ptx"].decode()
  from tinygrad_cuda.mock.shim import BARRIER, HEADERS, SHIM
  return HostKernel(SHIM, sections["source"].decode(), name, BARRIER, HEADERS)

def run(kernel: Any, name: str, params: list[tuple[int, bool]], mem: Any, grid: tuple[int, ...], block: tuple[int, ...],
        raw: list[int], seed: int) -> tuple[str, str] | None:
  """Runs one launch; raw is each parameter's value (pointers as device addresses). None, or (error name, what happened)
  for a kernel that faulted. DeviceMemoryError (host) for a pointer argument that is not live device memory."""
  if isinstance(kernel, str):
    from tinygrad_cuda.mock.ptx import PTXFault, run_ptx
    try: run_ptx(kernel, name, grid, block, raw, mem)
    except PTXFault as e: return e.cuda_error, f"kernel {name}: {e}"  # an illegal or misaligned address, a trap
    except NotImplementedError as e: return "CUDA_ERROR_NOT_SUPPORTED", f"kernel {name}: {e}"  # PTX the interpreter lacks
    return None
  if not (sig := kernel.run(grid, block, params, raw, mem, seed)): return None
  what = f"kernel {name} raised {signal.Signals(sig).name} on the host (grid {grid}, block {block})"
  return ("CUDA_ERROR_ILLEGAL_ADDRESS" if sig in (signal.SIGSEGV, signal.SIGBUS) else "CUDA_ERROR_LAUNCH_FAILED"), what
