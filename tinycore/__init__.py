"""tinycore: a small, lazy, compiling deep-learning framework whose accelerators are plugins."""
from tinycore.tensor import Tensor  # noqa: F401
from tinycore.dtype import dtypes, DType  # noqa: F401
from tinycore.backend import CompileError, DeviceError  # noqa: F401
from tinycore.device import Device, Buffer  # noqa: F401
from tinycore.helpers import Context, GlobalCounters, getenv, DEBUG  # noqa: F401
from tinycore.uop.uop import Variable, UOp  # noqa: F401
from tinycore.engine.jit import TinyJit  # noqa: F401
from tinycore import nn  # noqa: F401
__version__ = "0.1.0"
