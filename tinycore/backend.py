"""The backend contract: everything a backend implements or declares, in one module a vendor reads top to bottom.

A backend is a Python module (its distribution registers it under the entry-point group `tinycore.backends`) that
declares `TINYCORE_API_VERSION` and one `Backend(...)`, and binds the five hooks `Backend.hookimpls()` makes:

  TINYCORE_API_VERSION = "1.3.0"
  BACKEND = Backend("MYDEV", allocator=..., renderer=..., compiler=..., program=..., priority=0, check=...,
                    api_version=TINYCORE_API_VERSION)
  tinycore_devices, tinycore_allocator, tinycore_renderer, tinycore_compiler, tinycore_program = BACKEND.hookimpls()

The hooks (`BackendSpec`), what each receives and returns, and when the core calls it:
  tinycore_devices() -> list[DeviceSpec]   once, when the registry loads (the first `Device[...]`, `Device.DEFAULT` or
                                           `python -m tinycore devices`): name, priority, api_version, check, description.
                                           `DeviceSpec.check()` is called lazily, at most once, when someone asks whether
                                           the device can open; it returns None or the reason it cannot, in words.
  tinycore_allocator(device) -> Allocator | None        when `device` is opened (first `Device[device]`), once per device
  tinycore_renderer(device)  -> Renderer | None         string ("NAME" or "NAME:n", the n-th device of that backend).
  tinycore_compiler(device)  -> Compiler | None         Each hook answers None for a device that is not its own. The four
  tinycore_program(device)   -> type[Program] | None    parts together are the device (`Compiled`).
`Program` is a class: the core instantiates it once per kernel as `program(device, name, lib)` and calls the instance for
each launch. `device` stays the device string "NAME:n" (printable, picklable, the same in a repro script and in a plugin
that reuses another's program class); the base class parses it once into `self.index`, so no runtime parses it again.

What may be lazy: importing the plugin module must load no driver (use `lazy("pkg.runtime:allocator")` or import inside the
factories); `check` runs only when asked; the parts are built only when the device opens. What is validated when the
registry loads a plugin (`tinycore.plugin.Registry`): the declared API version (semver below), every function marked as
a hook names a hook of `BackendSpec` with arguments it gives, and no `tinycore_*` function is left unmarked or misspelt. A
plugin that fails any of these is listed as broken, with its name, version and the offending hook, by
`python -m tinycore devices`; asking for its device raises that DeviceError; every other device keeps working.

Errors and what they mean:
  DeviceError     the device does not exist, its plugin is broken, or it cannot open here (no driver, no GPU); also a
                  bad device string. Raised by hooks and `check` machinery; the core adds the plugin and device to it.
  CompileError    the source did not compile; the message must carry the compiler's own output (the suite checks it).
  MemoryError     an allocation that cannot succeed (LRUAllocator frees its cache and retries once on it).
  anything else   raised by a factory while a device opens: reported as "device X failed to build its <part>".

API versions (semver, `API_VERSION` below): a plugin declares the version it was written against. The core loads it when
the major versions are equal and the plugin's minor version is not newer than the core's: a minor version adds to the
contract (a plugin for 1.1 runs on a 1.2 core), a major version changes or removes something (a 1.x plugin does not load
on a 2.x core). 1.0: the hooks and base classes; 1.1: Backend, device_index, lazy, open_once; 1.2: this module, hook
validation at registration, `Program.index`; 1.3: kernels index with loaded values (a gather is a LOAD whose address
holds another LOAD's value; index checks and scatters STORE under a gate): a 1.3 plugin's renderer and runtime must
render and run both, which conformance level 6 checks.

This module is a leaf of the core: it imports only dtype and helpers (and pluggy), never the device registry or the
loading machinery, so a backend and the core can both import it without a circle."""
from __future__ import annotations
import difflib, functools, importlib, inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar
import pluggy
from tinycore.dtype import DType, dtypes
from tinycore.helpers import diskcache_get, diskcache_put
if TYPE_CHECKING: from tinycore.uop.uop import UOp

API_VERSION = "1.3.0"

def api_compatible(plugin_api: str, core_api: str = API_VERSION) -> bool:
  """Semver: same major version, and the plugin needs no newer minor version than the core provides."""
  try: pm_, pn_ = (int(x) for x in plugin_api.split(".")[:2]); cm_, cn_ = (int(x) for x in core_api.split(".")[:2])
  except ValueError: return False
  return pm_ == cm_ and pn_ <= cn_

# *** errors ***

class CompileError(RuntimeError):
  """A kernel failed to compile; the message carries the compiler's own output."""

class DeviceError(RuntimeError):
  """A device was asked for that does not exist, failed to load, or cannot open here."""

# *** memory ***

@dataclass(frozen=True)
class BufferSpec:
  """Allocation options a backend may honour (host-visible memory, uncached, ...); one that it cannot honour it ignores."""
  host: bool = False
  """Memory the host can read and write directly (pinned or mapped)."""
  uncached: bool = False
  """Memory the device does not cache (written by the host while kernels run)."""
  nolru: bool = False
  """Freed at once, never kept by LRUAllocator for reuse."""

class Allocator:
  """Device memory. A backend implements _alloc, _free, _copyin, _copyout; the rest is optional.

  A buffer handle is whatever `_alloc` returns (a pointer as int, a driver object, a numpy array, a tuple): the core only
  stores it and hands it back to this allocator and to this backend's Program, never looks inside. `_alloc(size, options)`
  gets a size in bytes (0 is possible: return a valid handle anyway). `_free` is called once per handle `_alloc` returned.
  Optional: _offset(buf, size, offset) -> a handle for bytes [offset, offset+size) of buf without copying (buffer views;
  a view is never freed: its base is, after every view of it is gone), _as_buffer(buf) -> memoryview for zero-copy host
  access, _transfer(dest, src, nbytes, src_dev, dest_dev) for device-to-device copies, synchronize(); `offset_align`
  (bytes) where _offset needs offsets of a multiple larger than 256 (TinyJit's memory planner places buffers in an
  arena at such offsets, see engine/memory.py)."""
  def alloc(self, size: int, options: BufferSpec | None = None) -> Any:
    """A handle to `size` bytes of device memory (the core's entry point; a backend implements _alloc)."""
    if size < 0: raise ValueError(f"cannot allocate a buffer of negative size {size}")
    return self._alloc(size, options or BufferSpec())
  def free(self, opaque: Any, size: int, options: BufferSpec | None = None) -> None:
    """Releases a handle alloc returned (the core calls it once per handle, with the size it asked for)."""
    self._free(opaque, options or BufferSpec())
  def copyin(self, dest: Any, src: memoryview) -> None:
    """Host bytes into the buffer `dest` (src has exactly the buffer's size)."""
    self._copyin(dest, src)
  def copyout(self, dest: memoryview, src: Any) -> None:
    """The buffer `src` into host bytes (dest has exactly the buffer's size); waits for kernels that write it."""
    self._copyout(dest, src)
  def synchronize(self) -> None:
    """Waits until every kernel launched on this device has finished (the core calls it before timing and reading)."""
  def _alloc(self, size: int, options: BufferSpec) -> Any:
    """A new buffer of `size` bytes (size may be 0): its handle. MemoryError when the device cannot hold it."""
    raise NotImplementedError
  def _free(self, opaque: Any, options: BufferSpec) -> None:
    """Releases the memory of a handle _alloc returned."""
  def _copyin(self, dest: Any, src: memoryview) -> None:
    """Host bytes into the buffer; see copyin."""
    raise NotImplementedError
  def _copyout(self, dest: memoryview, src: Any) -> None:
    """The buffer into host bytes; see copyout."""
    raise NotImplementedError

class LRUAllocator(Allocator):
  """Keeps freed buffers by (size, options) and hands them out again: fresh memory costs page faults. `_free` runs only
  when the cache is emptied (on a MemoryError, or `free_cache()`) or for buffers allocated with BufferSpec(nolru=True)."""
  def __init__(self) -> None: self.cache: dict[tuple[int, BufferSpec | None], list[Any]] = {}
  def alloc(self, size: int, options: BufferSpec | None = None) -> Any:
    """A cached buffer of this size and options when there is one, else a new one (on MemoryError: the cache freed, once more)."""
    if (c := self.cache.get((size, options))): return c.pop()
    try: return super().alloc(size, options)
    except MemoryError:
      self.free_cache()
      return super().alloc(size, options)
  def free_cache(self) -> None:
    """Frees every cached buffer with _free."""
    for (_, opt), bufs in self.cache.items():
      for b in bufs: self._free(b, opt or BufferSpec())
    self.cache.clear()
  def free(self, opaque: Any, size: int, options: BufferSpec | None = None) -> None:
    """Keeps the buffer for reuse (unless options.nolru)."""
    if options is None or not options.nolru:
      if (c := self.cache.get(key := (size, options))) is None: self.cache[key] = [opaque]
      else: c.append(opaque)
    else: super().free(opaque, size, options)

# *** compiling and running ***

class Compiler:
  """Turns rendered source into a loadable binary. `cachekey` names the toolchain (compiler, version, flags):
  binaries are cached on disk under it, so a changed toolchain never reuses an old binary. None disables caching.
  `compile` raises CompileError carrying the compiler's message for source that does not compile."""
  cachekey: str | None = None
  """The toolchain's name, version, target and flags; binaries are cached on disk under (cachekey, source). None: no cache."""
  def compile(self, src: str) -> bytes:
    """The binary of the rendered source (what Program receives as lib); CompileError with the compiler's output."""
    return src.encode()
  def compile_cached(self, src: str) -> bytes:
    """compile, through the disk cache (the core's entry point)."""
    if self.cachekey is None: return self.compile(src)
    if (lib := diskcache_get(self.cachekey, src)) is None: lib = diskcache_put(self.cachekey, src, self.compile(src))
    return lib
  def compile_batch(self, srcs: list[str]) -> list[bytes]:
    """The binaries of several sources whose kernel names differ (engine/compiles.py batches small kernels): a compiler
    whose process start is costly compiles them in one run, and may return one binary holding them all for each."""
    return [self.compile(s) for s in srcs]
  def disassemble(self, lib: bytes) -> str:
    """A readable listing of a binary (shown at DEBUG=5); empty when the backend has none."""
    return ""

def device_index(device: str, name: str) -> int | None:
  """The index n of `device` when it is `name` or `name:n` (0 for `name`), None when it names another device; a
  DeviceError for an index that is not a number."""
  base, _, idx = device.partition(":")
  if base.upper() != name: return None
  if idx and not idx.isdigit(): raise DeviceError(f"bad device {device!r}: expected {name} or {name}:n")
  return int(idx) if idx else 0

class Program:
  """A loaded kernel: `lib` is what this backend's Compiler returned, `name` the kernel's function name in it, `device`
  the device string ("NAME" or "NAME:n") and `index` its n. Called with the buffer handles (the Allocator's), launch sizes
  and the values of symbolic Variables (sorted by variable name, after the buffers, as the renderer declared them);
  with wait=True it blocks until done and returns the run time in seconds, else it may return before the kernel ends.
  `local_size` is None for a renderer with has_local=False."""
  def __init__(self, device: str, name: str, lib: bytes):
    self.device, self.name, self.lib = device, name, lib
    self.index = int(idx) if (idx := device.partition(":")[2]).isdigit() else 0
  def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] | None = (1, 1, 1),
               vals: Sequence[int] = (), wait: bool = False) -> float | None: raise NotImplementedError
  def launcher(self, bufs: Sequence[Any], global_size: Sequence[int], local_size: Sequence[int] | None,
               vals: Sequence[int] = ()) -> Callable[[], Any]:
    """This kernel bound to fixed device buffers and launch arguments, as a call without arguments (a TinyJit replay
    runs a list of these): a backend may do here, once, the work its __call__ does on every launch."""
    return functools.partial(self, *bufs, global_size=global_size, local_size=local_size, vals=vals)
  def caller(self, global_size: Sequence[int], local_size: Sequence[int] | None) -> Callable[..., Any]:
    """This kernel with fixed launch sizes and no Variables, as a call taking the buffer handles only (the eager path
    launches a cached kernel through it on every call): a backend may do here, once, what its __call__ checks each time."""
    return functools.partial(self, global_size=global_size, local_size=local_size)

# *** rendering ***

@dataclass(frozen=True)
class TensorCore:
  """A matrix unit: computes (M,K)@(K,N) tiles of dtype_in, accumulating in dtype_out."""
  dims: tuple[int, int, int]
  """(M, N, K): the tile the unit multiplies."""
  dtype_in: DType
  """The dtype of the tiles multiplied."""
  dtype_out: DType
  """The dtype of the accumulator."""

# the dtypes a bare Renderer declares: what every target has
MINIMAL_DTYPES: tuple[DType, ...] = (dtypes.bool, dtypes.int32, dtypes.float32)

@dataclass
class Renderer:
  """Turns a kernel's linear UOp program into source, and declares what the target can do: the core and the conformance
  suite read these declarations, never device names. A bare Renderer declares the least (no local ids, no shared memory,
  bool/int32/float32, scalar code), so a backend claims exactly what it sets. `render(name, uops)` returns the source
  text that the backend's Compiler.compile receives."""
  device: str = ""
  """The device string this renderer renders for ("CUDA:1"); set by the backend's factory."""
  has_local: bool = False
  """Work-groups and thread ids exist: kernels get SPECIAL gidxN/lidxN ids and run with a local_size. False: the global
  dims become loops, no SPECIAL is ever rendered and the Program gets local_size=None (a CPU)."""
  has_shared: bool = False
  """Local (shared) memory and barriers exist: DEFINE_LOCAL and BARRIER may appear. Needs has_local."""
  global_max: tuple[int, ...] | None = None
  """The largest global size (number of groups) per dim; None: unbounded (with has_local=False the dims are loops). A
  declaration the code generator does not plan for: a kernel may get more groups along a dim, which the runtime launches
  some other way (over several dims, in parts) or refuses with an error naming the kernel, the size and the limit."""
  local_max: tuple[int, ...] | None = None
  """The largest local size (threads per group) per dim; three positive ints when has_local, else None."""
  shared_max: int = 0
  """Bytes of local memory one kernel may use (has_shared only)."""
  max_upcast: int = 16
  """The most values a kernel may keep in registers per thread along one axis (the heuristics' unroll limit)."""
  vector_widths: tuple[int, ...] = (1,)
  """Vector lengths the renderer can emit for loads, stores and the vector ALU ops; (1,) renders scalar code only."""
  vector_registers: int = 16
  """Vector registers the target has (a CPU's register file): a register tile's accumulators and the vectors one reduce
  step loads must fit in them, or the compiler spills to the stack."""
  cache_bytes: int = 0
  """The cache one core's working set should fit in (a CPU's L2); 0: unknown, no blocking for it. A matmul operand
  larger than this is repacked into panels that stream contiguously (see codegen/matmul.py `matmul_panel`)."""
  prefetch: bool = False
  """The renderer spells a LOAD's int arg n as a hint to fetch the element n past its address into the cache (a
  software prefetch, see codegen/matmul.py); False: the code generator never sets one."""
  lane_loops: bool = False
  """The renderer spells a GEP by a lane variable, `GEP(src=(vector, index))`: a kernel whose stores go lane by lane (a
  vector dim strided in the output) then stores in a loop over the lanes (see codegen/lowerer.py `_lane_loop_store`)
  instead of one store, and one copy of the value's code, per lane. False: lane by lane, unrolled."""
  tensor_cores: list[TensorCore] = field(default_factory=list)
  """Matrix units the code generator may use; empty for none."""
  dtypes: tuple[DType, ...] = MINIMAL_DTYPES
  """Element dtypes kernels may use; the conformance suite tests exactly these (and skips the others as 'not declared')."""

  def supported_dtypes(self) -> tuple[DType, ...]:
    """The dtypes kernels may use on this device; the conformance suite tests exactly these."""
    return self.dtypes
  def render(self, name: str, uops: list[UOp]) -> str:
    """The source of kernel `name` (the function name Program will look up) from the linear program `uops`."""
    raise NotImplementedError(f"{type(self).__name__} does not implement render")

# *** the device: its parts together ***

class Compiled:
  """Everything the core needs from one opened device: its allocator, renderer, compiler and program class."""
  def __init__(self, device: str, allocator: Allocator, renderer: Renderer, compiler: Compiler, program: type[Program],
               plugin: str = ""):
    self.device, self.allocator, self.renderer, self.compiler, self.program, self.plugin = \
      device, allocator, renderer, compiler, program, plugin
  def synchronize(self) -> None:
    """Waits for every kernel launched on this device (the allocator's synchronize)."""
    self.allocator.synchronize()
  def __repr__(self) -> str: return f"<Compiled {self.device} from {self.plugin}>"

# *** the hooks ***

hookspec = pluggy.HookspecMarker("tinycore")
hookimpl = pluggy.HookimplMarker("tinycore")

@dataclass
class DeviceSpec:
  """What a plugin says about one device it provides (Backend makes it from its own fields)."""
  name: str
  """The upper-case identifier users type: `DEV=NAME`, `Tensor(x, device="NAME:1")`."""
  priority: int = 0
  """Which device is the default when the user names none: the available device with the highest priority (ties: by
  name). PYTHON has 0, OPENCL 5, CLANG 10, the GPUs 40. Choose above 10 only for an accelerator that users want instead
  of the CPU whenever it is present; 1-9 for a device that should win only over PYTHON; below 0 for a device used only
  when asked for by name (an emulator, a test double)."""
  api_version: str = API_VERSION
  """The contract version the device was written against: the plugin's TINYCORE_API_VERSION."""
  check: Callable[[], str | None] = lambda: None
  """None when the device can open here, else the reason it cannot, in words a user can act on ('no libcuda.so found:
  install the NVIDIA driver'); called lazily, at most once, and never raising."""
  description: str = ""
  """One line shown by `python -m tinycore devices`."""

class BackendSpec:
  """The hooks a backend plugin implements. Each part hook receives the full device string, e.g. 'OPENCL:1'."""
  @hookspec
  def tinycore_devices(self) -> list[DeviceSpec]:  # type: ignore[empty-body]
    """The devices the plugin provides; called once when the registry loads. Must not open a driver."""
  @hookspec(firstresult=True)
  def tinycore_allocator(self, device: str) -> Allocator | None:
    """The Allocator of `device` ("NAME" or "NAME:n"), None for another plugin's device; may need the hardware."""
  @hookspec(firstresult=True)
  def tinycore_renderer(self, device: str) -> Renderer | None:
    """The Renderer of `device`, None for another's; must work without the hardware (--compile-only)."""
  @hookspec(firstresult=True)
  def tinycore_compiler(self, device: str) -> Compiler | None:
    """The Compiler of `device`, None for another's; must work without the hardware (--compile-only)."""
  @hookspec(firstresult=True)
  def tinycore_program(self, device: str) -> type[Program] | None:
    """The Program class (not an instance) of `device`, None for another's; may need the hardware."""

HOOK_NAMES = tuple(n for n in vars(BackendSpec) if n.startswith("tinycore_"))

def hook_problems(module: object) -> list[str]:
  """What is wrong with the hooks a plugin module defines: a function marked as a hook (or named `tinycore_*`) whose
  name is not a hook of BackendSpec, an unmarked function with a hook's name (pluggy would ignore it), a hook taking
  arguments the spec does not give. Empty when all is well."""
  problems = []
  for attr, fn in vars(module).items():
    if not callable(fn) or not attr.startswith("tinycore_") or isinstance(fn, type): continue
    marked = hasattr(fn, "tinycore_impl")
    if attr not in HOOK_NAMES:
      close = difflib.get_close_matches(attr, HOOK_NAMES, n=1)
      problems.append(f"hook {attr} is not a hook of the tinycore API{f' (did you mean {close[0]}?)' if close else ''}")
    elif not marked: problems.append(f"hook {attr} is not marked with @hookimpl (pluggy would ignore it)")
    else:
      try: params = list(inspect.signature(fn).parameters)
      except (TypeError, ValueError): continue
      allowed = [p for p in inspect.signature(getattr(BackendSpec, attr)).parameters if p != "self"]
      if (extra := [p for p in params if p not in allowed]):
        problems.append(f"hook {attr}({', '.join(params)}) takes {', '.join(extra)}, the spec gives only ({', '.join(allowed)})")
  return problems

def lazy(target: str) -> Callable[..., Any]:
  """`"package.module:function"` as a function that imports the module only when it is called, the way an entry point
  names its object: it keeps a runtime's driver bindings out of `import plugin` and out of `python -m tinycore devices`."""
  module, _, attr = target.partition(":")
  def call(*args: Any, **kwargs: Any) -> Any: return getattr(importlib.import_module(module), attr)(*args, **kwargs)
  call.__name__ = call.__qualname__ = f"lazy({target})"
  return call

T = TypeVar("T")
def open_once(reason: Callable[[int], str | None], make: Callable[[str, int], T]) -> Callable[[str, int], T]:
  """`get_device(device, idx)` for a runtime: opens device number idx with `make(device, idx)` on first use and returns
  the same object after; raises DeviceError "device X cannot be used: <reason(idx)>" when it cannot open."""
  opened: dict[int, T] = {}
  def get_device(device: str, idx: int) -> T:
    if idx not in opened:
      if (why := reason(idx)) is not None: raise DeviceError(f"device {device} cannot be used: {why}")
      opened[idx] = make(device, idx)
    return opened[idx]
  return get_device

@dataclass(frozen=True)
class Backend:
  """A plugin's device, declared once. `hookimpls()` makes the five hooks from it: each answers only for `name` and
  `name:n`, and calls its factory with the device string and n. The factories run only when a part is built (when the
  device opens), so a plugin imports its runtime inside them (or through `lazy`), and importing the plugin loads no
  driver. `program` returns the Program class (not an instance). See DeviceSpec for name, priority and check;
  `api_version` is the plugin's TINYCORE_API_VERSION (pass it: the default is the core's own version)."""
  name: str
  """The device name, as DeviceSpec.name."""
  allocator: Callable[[str, int], Allocator]
  """`(device, n) -> Allocator`, called when the device opens (once per device string)."""
  renderer: Callable[[str, int], Renderer]
  """`(device, n) -> Renderer`; must work without the hardware."""
  compiler: Callable[[str, int], Compiler]
  """`(device, n) -> Compiler`; must work without the hardware."""
  program: Callable[[str, int], type[Program]]
  """`(device, n) -> the Program class`."""
  priority: int = 0
  """As DeviceSpec.priority: how to choose it is said there."""
  check: Callable[[], str | None] = lambda: None
  """As DeviceSpec.check."""
  description: str = ""
  """As DeviceSpec.description."""
  api_version: str = API_VERSION
  """The plugin's TINYCORE_API_VERSION: pass it (the default is the version of whichever core is installed)."""

  def index(self, device: str) -> int | None:
    """The index of a device string of this backend, None for another backend's."""
    return device_index(device, self.name)

  def hookimpls(self) -> tuple[Callable[..., Any], ...]:
    """tinycore_devices, tinycore_allocator, tinycore_renderer, tinycore_compiler, tinycore_program, in that order: bind
    them to those names in the plugin module (the registry registers the module)."""
    @hookimpl
    def tinycore_devices() -> list[DeviceSpec]:
      return [DeviceSpec(self.name, priority=self.priority, api_version=self.api_version, check=self.check, description=self.description)]
    def part_hook(part: str) -> Callable[[str], Any]:
      factory = getattr(self, part)
      def hook(device: str) -> Any: return None if (idx := self.index(device)) is None else factory(device, idx)
      hook.__name__ = hook.__qualname__ = f"tinycore_{part}"
      return hookimpl(hook)
    return (tinycore_devices, *(part_hook(part) for part in ("allocator", "renderer", "compiler", "program")))
