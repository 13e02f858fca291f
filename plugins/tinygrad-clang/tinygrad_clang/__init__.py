"""tinygrad-clang: the CPU backend. Renders C, compiles it with clang (or the system C compiler) into a shared
object, loads it with ctypes and runs kernels on host memory."""
from __future__ import annotations
import ctypes, functools, os, shutil, subprocess, tempfile, time
from typing import Any, Sequence
import numpy as np
from tinycore.device import BufferSpec, CompileError, Compiler, LRUAllocator, Program
from tinycore.dtype import DType, dtypes
from tinycore.ops import Ops
from tinycore.plugin import DeviceSpec, hookimpl
from tinycore.renderer.cstyle import CStyleLanguage
from tinycore.uop.uop import UOp

TINYCORE_API_VERSION = "1.0.0"
CFLAGS = ["-O2", "-march=native", "-fPIC", "-shared", "-fno-strict-aliasing", "-fno-math-errno", "-ffp-contract=fast"]

class ClangRenderer(CStyleLanguage):
  """C99 for the host: global dims become loops, no local memory."""
  buffer_suffix = " restrict"
  type_map = {**CStyleLanguage.type_map, dtypes.bool: "_Bool", dtypes.int8: "signed char", dtypes.uint8: "unsigned char",
              dtypes.uint16: "unsigned short", dtypes.uint32: "unsigned int", dtypes.int64: "long long",
              dtypes.uint64: "unsigned long long", dtypes.float16: "_Float16"}
  infinity, nan = "__builtin_inff()", "__builtin_nanf(\"\")"
  def __init__(self, half_type: str | None = None) -> None:
    # half is declared only when the compiler has a type for it (_Float16, or clang's storage-only __fp16)
    super().__init__(device="CLANG", has_local=False, has_shared=False, global_max=None, local_max=None,
                     dtypes=tuple(d for d in dtypes.all if d != dtypes.bfloat16 and (d != dtypes.float16 or half_type)))
    if half_type: self.type_map = {**self.type_map, dtypes.float16: half_type}
  def render_math(self, op: Ops, x: str, dt: DType) -> str:
    if op is Ops.RECIP: return super().render_math(op, x, dt)
    fn = self.math_fns[op]
    if dt == dtypes.float64: return f"__builtin_{fn}({x})"
    if dt == dtypes.float32: return f"__builtin_{fn}f({x})"
    return f"(({self.render_dtype(dt)})__builtin_{fn}f((float)({x})))"
  def render_const(self, x: Any, dt: DType) -> str:
    if dt == dtypes.float64 and isinstance(x, float) and x != x: return "__builtin_nan(\"\")"
    if dt == dtypes.float64 and isinstance(x, float) and abs(x) == float("inf"): return ("-" if x < 0 else "") + "__builtin_inf()"
    return super().render_const(x, dt)

def _find_cc() -> str | None:
  return next((c for c in (os.getenv("CC"), "clang", "cc", "gcc") if c and shutil.which(c)), None)

@functools.cache
def _cc_version(cc: str) -> str:
  try: return subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
  except (OSError, subprocess.CalledProcessError, IndexError): return "unknown"

@functools.cache
def half_type(cc: str | None) -> str | None:
  """The C type this compiler offers for float16 values, or None."""
  for t in ("_Float16", "__fp16"):
    src = f"void k({t}* restrict o, const {t}* restrict a) {{ {t} v = a[0]; o[0] = ({t})(v * ({t})2.0f); }}"
    if cc and subprocess.run([cc, "-x", "c", "-O2", "-c", "-", "-o", os.devnull], input=src.encode(), capture_output=True).returncode == 0: return t
  return None

class ClangCompiler(Compiler):
  def __init__(self, cc: str | None = None):
    self.cc = cc or _find_cc()
    if self.cc is None: raise CompileError("no C compiler found: install clang (apt-get install clang) or gcc, or set CC")
    self.cachekey = f"clang:{self.cc}:{_cc_version(self.cc)}:{' '.join(CFLAGS)}"
  def compile(self, src: str) -> bytes:
    with tempfile.TemporaryDirectory() as d:
      out = os.path.join(d, "kernel.so")
      proc = subprocess.run([self.cc, *CFLAGS, "-x", "c", "-", "-o", out, "-lm"], input=src.encode(), capture_output=True)
      if proc.returncode != 0: raise CompileError(f"{self.cc} failed (exit {proc.returncode}):\n{proc.stderr.decode(errors='replace')}")
      with open(out, "rb") as f: return f.read()

class ClangAllocator(LRUAllocator):
  """Host memory as numpy byte arrays, 64-byte aligned; views and host access are zero-copy."""
  def _alloc(self, size: int, options: BufferSpec) -> np.ndarray:
    raw = np.empty(size + 64, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start:start + size]
  def _copyin(self, dest: np.ndarray, src: memoryview) -> None: dest[:] = np.frombuffer(src, dtype=np.uint8)
  def _copyout(self, dest: memoryview, src: np.ndarray) -> None: np.frombuffer(dest, dtype=np.uint8)[:] = src
  def _as_buffer(self, src: np.ndarray) -> memoryview: return memoryview(src)
  def _offset(self, buf: np.ndarray, size: int, offset: int) -> np.ndarray: return buf[offset:offset + size]

class ClangProgram(Program):
  def __init__(self, device: str, name: str, lib: bytes):
    super().__init__(device, name, lib)
    # dlopen needs a file; it can be unlinked once loaded
    with tempfile.NamedTemporaryFile(suffix=".so", delete=False) as f:
      f.write(lib)
    try: self.dll = ctypes.CDLL(f.name)
    finally: os.unlink(f.name)
    self.fxn = getattr(self.dll, name)
  def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] | None = None,
               vals: Sequence[int] = (), wait: bool = False) -> float | None:
    args = [ctypes.c_void_p(b.ctypes.data) for b in bufs] + [ctypes.c_int(v) for v in vals]
    st = time.perf_counter()
    self.fxn(*args)
    return time.perf_counter() - st if wait else None

def _check() -> str | None:
  return None if _find_cc() else "no C compiler found (install clang or gcc, or set CC)"

def _mine(device: str) -> bool: return device.split(":")[0] == "CLANG"

@hookimpl
def tinycore_devices() -> list[DeviceSpec]:
  return [DeviceSpec("CLANG", priority=10, check=_check, description="C on the host CPU, compiled with clang or gcc")]
@hookimpl
def tinycore_allocator(device: str) -> ClangAllocator | None: return ClangAllocator() if _mine(device) else None
@hookimpl
def tinycore_renderer(device: str) -> ClangRenderer | None: return ClangRenderer(half_type(_find_cc())) if _mine(device) else None
@hookimpl
def tinycore_compiler(device: str) -> ClangCompiler | None: return ClangCompiler() if _mine(device) else None
@hookimpl
def tinycore_program(device: str) -> type[ClangProgram] | None: return ClangProgram if _mine(device) else None

__all__ = ["ClangRenderer", "ClangCompiler", "ClangAllocator", "ClangProgram", "UOp"]
