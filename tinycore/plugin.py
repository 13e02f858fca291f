"""The backend contract: a pluggy hook specification and the discovery of backends through entry points.

A backend is a module registered under the entry-point group `tinycore.backends`. It declares
`TINYCORE_API_VERSION` (the core API it was built for) and implements these hooks with `@hookimpl`.
Discovery is lazy and fault-tolerant: a plugin that fails to import is listed with its error and never
breaks `import tinycore`; asking for its device raises one clear error naming plugin, device and cause.

`Backend` declares a plugin's device in a few lines and makes the five hooks from it; a plugin may still write any hook
by hand (the hookspec is the contract, `Backend` only one way to meet it)."""
from __future__ import annotations
import importlib, traceback
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar
import pluggy
try: from importlib.metadata import entry_points, EntryPoint
except ImportError: from importlib_metadata import entry_points, EntryPoint  # type: ignore[no-redef]
from tinycore.device import Allocator, Compiled, Compiler, DeviceError, Program
from tinycore.renderer import Renderer

API_VERSION = "1.1.0"  # 1.1: the Backend, device_index, lazy and open_once helpers
# tinygrad's names for devices tinycore provides under its own: `Tensor(x, device="CPU")` and DEV=CPU open the CLANG
# backend as a device named "CPU" (its own buffers and kernels; `.device` reads "CPU", as tinygrad code expects)
DEVICE_ALIASES: dict[str, str] = {"CPU": "CLANG"}
ENTRY_POINT_GROUP = "tinycore.backends"
hookspec = pluggy.HookspecMarker("tinycore")
hookimpl = pluggy.HookimplMarker("tinycore")

@dataclass
class DeviceSpec:
  """What a plugin says about one device it provides. `check` returns None when the device can open here, else
  the reason it cannot (for example 'no libcuda.so found'); it is called lazily, once."""
  name: str
  priority: int = 0
  api_version: str = API_VERSION
  check: Callable[[], str | None] = lambda: None
  description: str = ""

class BackendSpec:
  """The hooks a backend plugin implements. Each receives the full device string, e.g. 'OPENCL:1'."""
  @hookspec
  def tinycore_devices(self) -> list[DeviceSpec]: ...  # type: ignore[empty-body]
  @hookspec(firstresult=True)
  def tinycore_allocator(self, device: str) -> Allocator | None: ...
  @hookspec(firstresult=True)
  def tinycore_renderer(self, device: str) -> Renderer | None: ...
  @hookspec(firstresult=True)
  def tinycore_compiler(self, device: str) -> Compiler | None: ...
  @hookspec(firstresult=True)
  def tinycore_program(self, device: str) -> type[Program] | None: ...

def device_index(device: str, name: str) -> int | None:
  """The index n of `device` when it is `name` or `name:n` (0 for `name`), None when it names another device; a
  DeviceError for an index that is not a number."""
  base, _, idx = device.partition(":")
  if base.upper() != name: return None
  if idx and not idx.isdigit(): raise DeviceError(f"bad device {device!r}: expected {name} or {name}:n")
  return int(idx) if idx else 0

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
  `name:n`, and calls its factory with the device string and n. The factories run only when a part is built, so a plugin
  imports its runtime inside them (or through `lazy`), and importing the plugin loads no driver."""
  name: str
  allocator: Callable[[str, int], Allocator]
  renderer: Callable[[str, int], Renderer]
  compiler: Callable[[str, int], Compiler]
  program: Callable[[str, int], type[Program]]
  priority: int = 0
  check: Callable[[], str | None] = lambda: None
  description: str = ""
  api_version: str = API_VERSION  # the plugin's TINYCORE_API_VERSION

  def index(self, device: str) -> int | None:
    """The index of a device string of this backend, None for another backend's."""
    return device_index(device, self.name)

  def hookimpls(self) -> tuple[Callable[..., Any], ...]:
    """tinycore_devices, tinycore_allocator, tinycore_renderer, tinycore_compiler, tinycore_program, in that order: bind
    them to those names in the plugin module (the registry registers the module). To write one by hand, bind `_` instead."""
    @hookimpl
    def tinycore_devices() -> list[DeviceSpec]:
      return [DeviceSpec(self.name, priority=self.priority, api_version=self.api_version, check=self.check, description=self.description)]
    def part_hook(part: str) -> Callable[[str], Any]:
      factory = getattr(self, part)
      def hook(device: str) -> Any: return None if (idx := self.index(device)) is None else factory(device, idx)
      hook.__name__ = hook.__qualname__ = f"tinycore_{part}"
      return hookimpl(hook)
    return (tinycore_devices, *(part_hook(part) for part in ("allocator", "renderer", "compiler", "program")))

def api_compatible(plugin_api: str, core_api: str = API_VERSION) -> bool:
  """Semver: same major version, and the plugin needs no newer minor version than the core provides."""
  try: pm_, pn_ = (int(x) for x in plugin_api.split(".")[:2]); cm_, cn_ = (int(x) for x in core_api.split(".")[:2])
  except ValueError: return False
  return pm_ == cm_ and pn_ <= cn_

@dataclass
class DeviceEntry:
  name: str
  plugin: str
  version: str
  spec: DeviceSpec | None = None
  error: str | None = None       # why the plugin could not be loaded
  _reason: list = field(default_factory=list)
  def reason(self) -> str | None:
    """None when the device can be opened here, else why not."""
    if self.error is not None: return self.error
    if not self._reason:
      try: self._reason.append(self.spec.check() if self.spec is not None else "no device spec")
      except Exception as e: self._reason.append(f"availability check raised {type(e).__name__}: {e}")
    return self._reason[0]

class Registry:
  """Loads the built-in PYTHON backend and every entry point of group `tinycore.backends`, once, on first use."""
  def __init__(self) -> None:
    self.pm: pluggy.PluginManager | None = None
    self.entries: dict[str, DeviceEntry] = {}
    self.failed: list[DeviceEntry] = []

  def load(self) -> None:
    if self.pm is not None: return
    self.pm = pluggy.PluginManager("tinycore")
    self.pm.add_hookspecs(BackendSpec)
    from tinycore.runtime import python as python_backend
    self._add(python_backend, "tinycore.runtime.python", "tinycore", _core_version())
    for ep in _entry_points():
      dist = ep.dist.name if getattr(ep, "dist", None) is not None else ep.value
      version = ep.dist.version if getattr(ep, "dist", None) is not None else "?"
      try: module = ep.load()
      except Exception as e:
        detail = traceback.format_exception_only(type(e), e)[-1].strip()
        self.failed.append(DeviceEntry(ep.name.upper(), dist, version, error=f"plugin {dist} {version} failed to import: {detail}"))
        continue
      self._add(module, ep.name, dist, version)

  def _add(self, module: object, name: str, dist: str, version: str) -> None:
    assert self.pm is not None
    api = getattr(module, "TINYCORE_API_VERSION", None)
    if api is None or not api_compatible(str(api)):
      why = (f"plugin {dist} {version} declares no TINYCORE_API_VERSION" if api is None else
             f"plugin {dist} {version} was built for tinycore API {api}, but this tinycore provides API {API_VERSION}: "
             f"install a release of {dist} built for API {API_VERSION.split('.')[0]}.x, or a tinycore that provides API {api}")
      self.failed.append(DeviceEntry(name.upper(), dist, version, error=why))
      return
    try:
      self.pm.register(module, name=name)
      specs = module.tinycore_devices()  # type: ignore[attr-defined]
    except Exception as e:
      if self.pm.is_registered(module): self.pm.unregister(module)
      self.failed.append(DeviceEntry(name.upper(), dist, version, error=f"plugin {dist} {version} is broken: {type(e).__name__}: {e}"))
      return
    for spec in specs:
      if spec.name in self.entries: continue  # first plugin to claim a name keeps it
      err = None if api_compatible(spec.api_version) else \
        f"device {spec.name} of plugin {dist} {version} needs tinycore API {spec.api_version}, this tinycore provides {API_VERSION}"
      self.entries[spec.name] = DeviceEntry(spec.name, dist, version, spec, err)

  def all_entries(self) -> list[DeviceEntry]:
    self.load()
    return sorted(self.entries.values(), key=lambda e: (-(e.spec.priority if e.spec else 0), e.name)) + self.failed
  def device_names(self) -> list[str]: return [e.name for e in self.all_entries()]
  def available_devices(self) -> list[str]: return [e.name for e in self.all_entries() if e.error is None and e.reason() is None]
  def reasons(self) -> dict[str, str]: return {e.name: r for e in self.all_entries() if (r := e.reason()) is not None}
  @staticmethod
  def resolve(name: str) -> str:
    """The device a (base) name opens: an alias's target, else the name itself."""
    return DEVICE_ALIASES.get(name, name)

  def open(self, device: str) -> Compiled:
    """Build `device` (a canonical name, "NAME" or "NAME:n") from its plugin's parts; an alias asks its target's plugin."""
    self.load()
    assert self.pm is not None
    alias = device.split(":")[0]
    base = self.resolve(alias)
    target = base + device[len(alias):]  # what the plugin's hooks answer to
    entry = self.entries.get(base) or next((e for e in self.failed if e.name == base), None)
    if entry is None:
      known = ", ".join(self.device_names())
      raise DeviceError(f"unknown device {device!r}: installed devices are {known}. A backend is a separate package, "
                        f"for example `pip install tinygrad-{base.lower()}`")
    if (why := entry.reason()) is not None: raise DeviceError(f"device {device} (plugin {entry.plugin} {entry.version}) cannot be used: {why}")
    parts = {}
    for part in ("allocator", "renderer", "compiler", "program"):
      try: parts[part] = getattr(self.pm.hook, f"tinycore_{part}")(device=target)
      except DeviceError: raise
      except Exception as e:
        raise DeviceError(f"device {device} (plugin {entry.plugin} {entry.version}) failed to build its {part}: {type(e).__name__}: {e}") from e
      if parts[part] is None: raise DeviceError(f"device {device} (plugin {entry.plugin}) provides no {part}")
    if not isinstance(parts["allocator"], Allocator) or not isinstance(parts["renderer"], Renderer) or \
       not isinstance(parts["compiler"], Compiler) or not (isinstance(parts["program"], type) and issubclass(parts["program"], Program)):
      raise DeviceError(f"device {device} (plugin {entry.plugin}) returned parts of the wrong types: "
                        + ", ".join(f"{k}={type(v).__name__}" for k, v in parts.items()))
    return Compiled(device, parts["allocator"], parts["renderer"], parts["compiler"], parts["program"], plugin=entry.plugin)

def _entry_points() -> list[EntryPoint]: return list(entry_points(group=ENTRY_POINT_GROUP))

def _core_version() -> str:
  try:
    from importlib.metadata import version
    return version("tinycore")
  except Exception: return "dev"

registry = Registry()
