"""The Renderer base: turns a linear list of UOps into source code, and declares what the target can do.

The core reads these capabilities (never device names) to decide how to lower and optimize a kernel."""
from __future__ import annotations
from dataclasses import dataclass, field
from tinycore.dtype import DType, dtypes
from tinycore.uop.uop import UOp

@dataclass(frozen=True)
class TensorCore:
  """A matrix unit: computes (M,K)@(K,N) tiles of dtype_in, accumulating in dtype_out."""
  dims: tuple[int, int, int]
  dtype_in: DType
  dtype_out: DType

@dataclass
class Renderer:
  device: str = ""
  has_local: bool = True          # global/local ids exist; False means global dims become loops
  has_shared: bool = True         # local (shared) memory and barriers exist
  global_max: tuple[int, ...] | None = (0x7FFFFFFF, 65535, 65535)
  local_max: tuple[int, ...] | None = (1024, 1024, 64)
  shared_max: int = 32768
  max_upcast: int = 16            # largest number of values a kernel may keep in registers per thread (per axis)
  vector_widths: tuple[int, ...] = (1,)  # vector lengths the renderer can emit for loads and stores
  tensor_cores: list[TensorCore] = field(default_factory=list)
  dtypes: tuple[DType, ...] = tuple(d for d in dtypes.all if d != dtypes.bfloat16)

  def supported_dtypes(self) -> tuple[DType, ...]:
    """The dtypes kernels may use on this device; the conformance suite tests exactly these."""
    return self.dtypes
  def render(self, name: str, uops: list[UOp]) -> str: raise NotImplementedError(f"{type(self).__name__} does not implement render")
