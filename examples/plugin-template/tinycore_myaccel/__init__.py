"""tinycore backend for MyAccel (a template: every part is declared, nothing is implemented yet).

As it stands it passes level 1 of the conformance suite (it is found, loads, and its hooks build parts of the right
types) and fails level 2, each failure saying what to implement next. Work through the TODOs in level order:

  python -m tinycore_conformance MYACCEL --level 2      # allocator
  python -m tinycore_conformance MYACCEL --level 3      # compiler
  python -m tinycore_conformance MYACCEL --level 4      # renderer (the big one)
  python -m tinycore_conformance MYACCEL                # program, tensor, model: all 7 levels

The guide is docs/writing-a-backend.md in the tinycore repository."""
from __future__ import annotations
from typing import Any, Sequence
from tinycore.backend import Allocator, Backend, BufferSpec, Compiler, Program, Renderer
from tinycore.dtype import dtypes
from tinycore.uop.uop import UOp

# The tinycore API this plugin is written against (tinycore.backend.API_VERSION when you wrote it), stated once here and
# passed to Backend below. tinycore refuses plugins built for another major version or a newer minor one.
TINYCORE_API_VERSION = "1.3.0"
DEVICE = "MYACCEL"
GUIDE = "docs/writing-a-backend.md"

def todo(level: int, what: str) -> NotImplementedError:
  return NotImplementedError(f"TODO(myaccel, level {level}): implement {what} (see {GUIDE}, level {level})")

def available() -> str | None:
  """None when the device can be used here, else why not (a user reads this in `python -m tinycore devices`).
  TODO(level 1): look for your driver/runtime and return e.g. 'libmyaccel.so not found' when it is missing."""
  return None

class MyAllocator(Allocator):
  """Device memory. TODO(level 2): implement these four; a handle (`opaque`) is whatever your runtime uses for a buffer
  (an int pointer, a driver object, a numpy array): the core only hands it back to this allocator and to MyProgram.
  Optional, each a declared capability the suite then tests: _offset(buf, size, offset) for zero-copy views (a view's
  handle is never freed: only its base is, once),
  _as_buffer(buf) -> memoryview for zero-copy host access, _transfer(dest, src, nbytes, src_dev, dest_dev) for
  device-to-device copies, synchronize(). Raise MemoryError when an allocation cannot succeed."""
  def _alloc(self, size: int, options: BufferSpec) -> Any: raise todo(2, f"MyAllocator._alloc: return a handle to {size} bytes of device memory")
  def _free(self, opaque: Any, options: BufferSpec) -> None: raise todo(2, "MyAllocator._free: release a buffer")
  def _copyin(self, dest: Any, src: memoryview) -> None: raise todo(2, "MyAllocator._copyin: copy host bytes into a device buffer")
  def _copyout(self, dest: memoryview, src: Any) -> None: raise todo(2, "MyAllocator._copyout: copy a device buffer's bytes to the host")

class MyCompiler(Compiler):
  """Source -> binary. TODO(level 3): compile with your toolchain; raise tinycore.backend.CompileError carrying the
  compiler's own message when the source is broken. The cache key names the toolchain (compiler, version, target, flags):
  compiled kernels are cached on disk under it."""
  cachekey = "myaccel:TODO-toolchain-version"
  def compile(self, src: str) -> bytes: raise todo(3, "MyCompiler.compile: turn rendered source into a loadable binary")

class MyRenderer(Renderer):
  """Linear UOp program -> source. TODO(level 4): render every op of the op set for every dtype you declare. For a
  C-like language, subclass tinycore.renderer.cstyle.CStyleLanguage instead of Renderer and change its spellings."""
  def __init__(self) -> None:
    # Declare only what you support: the suite tests exactly this, and reports the rest as not declared.
    super().__init__(device=DEVICE, has_local=False, has_shared=False, global_max=None, local_max=None, vector_widths=(1,),
                     dtypes=(dtypes.bool, dtypes.int32, dtypes.float32))
  def render(self, name: str, uops: list[UOp]) -> str: raise todo(4, "MyRenderer.render: the source of a kernel from its linear UOp program")

class MyProgram(Program):
  """A loaded kernel. TODO(level 5): load `lib` in __init__ (self.device is "MYACCEL:n", self.index its n); in __call__
  launch it on the buffer handles (in DEFINE_GLOBAL number order) with the values of its DEFINE_VARs (sorted by name);
  with wait=True block and return the run time in seconds. local_size is None when the renderer has has_local=False."""
  def __init__(self, device: str, name: str, lib: bytes):
    super().__init__(device, name, lib)
  def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] | None = None,
               vals: Sequence[int] = (), wait: bool = False) -> float | None:
    raise todo(5, "MyProgram.__call__: launch the kernel")

# *** the hooks tinycore calls, made from one declaration: each answers only for MYACCEL and MYACCEL:n, calling its
# factory with the device string and n (build per-device state there). A hook that needs more than a factory: bind `_`
# in its place below and write it by hand with @hookimpl from tinycore.backend (the registry checks every hook's name and
# arguments against the spec when it loads the plugin). priority picks the default device when the user names none: the
# highest available wins (PYTHON 0, OPENCL 5, CLANG 10, GPUs 40). -1 keeps this unfinished device from being anyone's
# default; see DeviceSpec.priority in docs/backend-reference.md for the value to choose when it works. ***

BACKEND = Backend(DEVICE, priority=-1, check=available, api_version=TINYCORE_API_VERSION, description="MyAccel (template)",
                  allocator=lambda device, idx: MyAllocator(), renderer=lambda device, idx: MyRenderer(),
                  compiler=lambda device, idx: MyCompiler(), program=lambda device, idx: MyProgram)
tinycore_devices, tinycore_allocator, tinycore_renderer, tinycore_compiler, tinycore_program = BACKEND.hookimpls()
