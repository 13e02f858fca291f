"""Small shared utilities: environment knobs, context variables, counters and math helpers."""
from __future__ import annotations
import collections, contextlib, functools, hashlib, itertools, math, os, pathlib, sys, tempfile, time, warnings
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

T = TypeVar("T")

U = TypeVar("U")

# parameter names follow tinygrad 0.14's helpers, so user code calling them by keyword works unchanged
def prod(x: Iterable[Any], start: Any = 1) -> Any: return math.prod(x, start=start)  # (symbolic sizes multiply too)
def dedup(x: Iterable[T]) -> list[T]: return list(dict.fromkeys(x))
def flatten(l: Iterable[Iterable[T]]) -> list[T]: return [x for xs in l for x in xs]
def fully_flatten(l: Any) -> list[Any]:
  """Every scalar of a nested sequence (lists, tuples, numpy arrays; a 0-d array gives its scalar) in order."""
  if isinstance(l, str) or not (hasattr(l, "__len__") and hasattr(l, "__getitem__")): return [l]
  if getattr(l, "shape", None) == (): return [l[()]]
  return [y for x in l for y in fully_flatten(x)]
def get_shape(x: Any) -> tuple[int, ...]:
  """The shape of a nested sequence; ValueError when its rows differ in shape."""
  if isinstance(x, str) or not hasattr(x, "__len__") or getattr(x, "shape", None) == (): return ()
  shapes = [get_shape(y) for y in x]
  if any(s != shapes[0] for s in shapes): raise ValueError(f"inhomogeneous shape: rows have shapes {sorted(set(shapes))}")
  return (len(shapes), *(shapes[0] if shapes else ()))
def get_child(obj: Any, key: str) -> Any:
  """`get_child(model, "layers.0.weight")`: attributes, dict keys and (numeric parts) sequence indices along a dotted path."""
  for part in key.split("."):
    obj = obj[int(part)] if part.isnumeric() else obj[part] if isinstance(obj, dict) else getattr(obj, part)
  return obj
def get_single_element(x: Sequence[T]) -> T:
  if len(x) != 1: raise ValueError(f"expected exactly one element, got {len(x)}: {x!r}")
  return x[0]
def merge_dicts(ds: Iterable[dict[T, U]]) -> dict[T, U]:
  """The union of dicts; RuntimeError when two give one key different values."""
  out: dict[T, U] = {}
  for d in ds:
    for k, v in d.items():
      if k in out and out[k] != v: raise RuntimeError(f"merge_dicts: key {k!r} has two values, {out[k]!r} and {v!r}")
      out[k] = v
  return out
def unwrap(x: T | None) -> T:
  if x is None: raise ValueError("unwrap: got None")
  return x
def to_tuple(x: T | tuple[T, ...]) -> tuple[T, ...]: return x if isinstance(x, tuple) else (x,)
def next_power2(x: int) -> int: return 1 << max(x - 1, 0).bit_length()
def round_down(num: int, amt: int) -> int: return num // amt * amt
def cdiv(x: int, y: int) -> int:
  """Integer division rounding toward zero, as C does (0 when y is 0)."""
  if y == 0: return 0
  q = abs(x) // abs(y)
  return -q if (x < 0) != (y < 0) else q
def cmod(x: int, y: int) -> int: return x - cdiv(x, y) * y  # the remainder of C's division: it takes x's sign
def floordiv(x: int, y: int) -> int: return x // y
def floormod(x: int, y: int) -> int: return x % y
def strides_for_shape(shape: tuple[T, ...]) -> tuple[T, ...]:
  """Contiguous (row-major) strides; an axis of size 1 gets stride 0, as in tinycore's views."""
  strides, acc = [], 1
  for s in reversed(shape):
    strides.append(0 if s == 1 else acc)
    acc = acc * s
  return tuple(reversed(strides))
def temp(x: str, append_user: bool = False) -> str:
  """A path in the system's temporary folder (with the user name appended to `x` when append_user)."""
  user = os.getenv("USER") or (str(os.getuid()) if hasattr(os, "getuid") else "user")
  return str(pathlib.Path(tempfile.gettempdir()) / (f"{x}.{user}" if append_user else x))
def argfix(*x: Any) -> tuple:
  """Accept both f(1, 2, 3) and f((1, 2, 3)) style arguments."""
  if x and x[0].__class__ in (tuple, list):
    if len(x) != 1: raise ValueError(f"bad arg {x}")
    return tuple(x[0])
  return x
def argsort(x: Sequence[Any]) -> list[int]: return sorted(range(len(x)), key=x.__getitem__)
def all_int(t: Sequence[Any]) -> bool:
  for s in t:  # (a loop, not all() over a generator: asked of shapes dozens of times per op, ~3x cheaper)
    if not isinstance(s, int): return False
  return True
def all_same(items: Sequence[Any]) -> bool: return all(x == items[0] for x in items)
def round_up(num: int, amt: int) -> int: return (num + amt - 1) // amt * amt
def ceildiv(num: int, amt: int) -> int: return -(-num // amt)
def make_tuple(x: int | Sequence[int], cnt: int) -> tuple[int, ...]: return (x,) * cnt if isinstance(x, int) else tuple(x)
def partition(itr: Iterable[T], fxn: Callable[[T], bool]) -> tuple[list[T], list[T]]:
  a: list[T] = []
  b: list[T] = []
  for x in itr: (a if fxn(x) else b).append(x)
  return a, b
def colored(st: str, color: str | None, background: bool = False) -> str:
  codes = {"black": 30, "red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36, "white": 37}
  return f"\u001b[{codes[color] + (10 if background else 0)}m{st}\u001b[0m" if color and sys.stdout.isatty() else st
def to_function_name(s: str) -> str: return "".join(c if c.isalnum() or c == "_" else f"{ord(c):02X}" for c in s)
def pairwise(xs: Iterable[T]) -> Iterator[tuple[T, T]]: return itertools.pairwise(xs)

@functools.cache
def getenv(key: str, default: Any = 0) -> Any:
  """Read an environment variable, converted to the type of `default`."""
  return type(default)(os.getenv(key, default))

class ContextVar:
  """A global knob set from the environment and overridable with `Context(NAME=value)`; its value has the type of the
  default (an int, or a str such as DEFAULT_FLOAT's dtype name)."""
  _cache: dict[str, ContextVar] = {}
  def __init__(self, key: str, default_value: Any):
    self.key, self.value = key, getenv(key, default_value)
    ContextVar._cache[key] = self
  def __bool__(self) -> bool: return bool(self.value)
  def __ge__(self, x: int) -> bool: return self.value >= x
  def __gt__(self, x: int) -> bool: return self.value > x
  def __lt__(self, x: int) -> bool: return self.value < x
  def __le__(self, x: int) -> bool: return self.value <= x
  def __eq__(self, x: object) -> bool: return self.value == x
  def __hash__(self) -> int: return hash(self.key)
  def __repr__(self) -> str: return f"ContextVar({self.key}={self.value})"

class Context(contextlib.ContextDecorator):
  """Temporarily override ContextVars: `with Context(DEBUG=2, NOOPT=1): ...`."""
  def __init__(self, **kwargs: int):
    unknown = [k for k in kwargs if k not in ContextVar._cache]
    if unknown: raise KeyError(f"unknown context variable(s) {unknown}, known: {sorted(ContextVar._cache)}")
    self.kwargs = kwargs
  def __enter__(self) -> None:
    self.old = {k: ContextVar._cache[k].value for k in self.kwargs}
    for k, v in self.kwargs.items(): ContextVar._cache[k].value = v
  def __exit__(self, *args: Any) -> None:
    for k, v in self.old.items(): ContextVar._cache[k].value = v

DEBUG, BEAM, NOOPT, JIT = ContextVar("DEBUG", 0), ContextVar("BEAM", 0), ContextVar("NOOPT", 0), ContextVar("JIT", 1)
# DEV names the default device (Device.DEFAULT reads it; `Context(DEV="CPU")` as in tinygrad 0.14); empty: the best available
DEV = ContextVar("DEV", "")
GRAPH, GRAPHUOPS, CACHELEVEL = ContextVar("GRAPH", 0), ContextVar("GRAPHUOPS", 0), ContextVar("CACHELEVEL", 2)
# VIZ=1 records every kernel's journey for a local web page at exit (VIZ=file: one HTML file instead), see tinycore/viz;
# PROFILE=1 records a timeline (tinycore/profile.py), on by default under VIZ, whose page shows it
VIZ = ContextVar("VIZ", "")
if VIZ.value == "0": VIZ.value = ""  # VIZ=0 is off, as for every other knob (a str knob: "0" would be true)
PROFILE = ContextVar("PROFILE", 1 if VIZ.value else 0)
# TRAINING turns dropout, BatchNorm's batch statistics and Optimizer.step on (Tensor.training and Tensor.train() are views
# of it); DEFAULT_FLOAT / DEFAULT_INT name the dtypes of python floats and ints (dtypes.default_float reads it), as tinygrad
TRAINING = ContextVar("TRAINING", 0)
DEFAULT_FLOAT, DEFAULT_INT = ContextVar("DEFAULT_FLOAT", "float32"), ContextVar("DEFAULT_INT", "int32")

class _Counters:
  """Totals since the last reset: kernels run, operations, memory moved and time spent. One object, GlobalCounters:
  every kernel run and every allocation writes them, and a write to a class's attribute (what they were) invalidates
  the interpreter's attribute caches of that class (five writes per tiny op)."""
  def __init__(self) -> None:
    self.global_ops, self.global_mem, self.time_sum_s, self.kernel_count = 0, 0, 0.0, 0
    self.mem_used_per_device: collections.defaultdict[str, int] = collections.defaultdict(int)  # bytes allocated, by device name
  @property
  def mem_used(self) -> int:
    """Bytes allocated on all devices (the sum of mem_used_per_device: an allocation counts itself once)."""
    return sum(self.mem_used_per_device.values())
  def reset(self) -> None: self.global_ops, self.global_mem, self.time_sum_s, self.kernel_count = 0, 0, 0.0, 0

GlobalCounters = _Counters()

class Timing(contextlib.ContextDecorator):
  """Print the time a block took: `with Timing("step "): ...`; on_exit(ns) returns text appended to the line."""
  def __init__(self, prefix: str = "", on_exit: Callable[[int], str] | None = None, enabled: bool = True):
    self.prefix, self.on_exit, self.enabled = prefix, on_exit, enabled
  def __enter__(self) -> None: self.st = time.perf_counter_ns()
  def __exit__(self, *exc: Any) -> None:
    self.et = time.perf_counter_ns() - self.st
    if self.enabled: print(f"{self.prefix}{self.et*1e-6:6.2f} ms" + (self.on_exit(self.et) if self.on_exit else ""))

class _PlainLines:
  """Where tqdm writes when the output is no terminal: each redraw becomes a line of its own, and tqdm redraws only
  every `miniters` steps there, so a CI log gets a short line per N steps instead of a line of carriage returns."""
  def __init__(self, f: Any): self.f = f
  def write(self, s: str) -> None:
    if (s := s.replace("\r", "").strip()): self.f.write(s + "\n")
  def flush(self) -> None: self.f.flush()

def tqdm(iterable: Iterable[T] | None = None, desc: str = "", disable: bool | None = False, unit: str = "it", unit_scale: Any = False,
         total: int | None = None, rate: int = 100, every: int | None = None, delay: float = 0, file: Any = None) -> Any:
  """A progress bar over `iterable` (or updated by hand): the tqdm package's, on stderr unless `file` is given. On a
  terminal it redraws in place with the rate and the ETA; otherwise it prints a plain line every `every` steps (by
  default a tenth of `total`, else 100). Nothing shows before `delay` seconds. `rate` is accepted for tinygrad's
  signature and unused. Postfixes should be set with refresh=False, so they never print a line of their own."""
  try: import tqdm as _tqdm
  except ImportError: raise ImportError("tinycore.helpers.tqdm needs the tqdm package: pip install tqdm") from None
  out = file if file is not None else sys.stderr
  common = dict(desc=desc, disable=disable, unit=unit, unit_scale=unit_scale, total=total, delay=delay)
  if getattr(out, "isatty", lambda: False)(): return _tqdm.tqdm(iterable, file=out, **common)
  n = total if total is not None else len(iterable) if hasattr(iterable, "__len__") else None  # type: ignore[arg-type]
  every = every or (max(1, n // 10) if n else 100)
  return _tqdm.tqdm(iterable, file=_PlainLines(out), miniters=every, mininterval=0, maxinterval=float("inf"), ascii=True, ncols=120, **common)
def trange(n: int, **kwargs: Any) -> Any:
  """tqdm(range(n), **kwargs)."""
  return tqdm(range(n), **kwargs)


# *** on-disk cache: one file per key, written atomically so concurrent processes never see half a file ***
# An entry is MAGIC, the payload's length (8 bytes, little-endian), its sha256, then the payload. An entry that is
# emptied, truncated or corrupted fails the check: it is discarded with a warning naming its file and built again.
# The check finds accidents, not attacks: entries are pickles and shared objects, so anyone who can write to the cache
# folder can run code in the process that reads it. Folders are created 0700 and entries 0600 for that reason.

_CACHE_MAGIC = b"TCCACHE1"
_CACHE_HEAD = len(_CACHE_MAGIC) + 8 + 32

def cache_dir() -> pathlib.Path:
  base = os.getenv("TINYCORE_CACHE_DIR") or os.path.join(os.getenv("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tinycore")
  return pathlib.Path(base)

def _cache_path(table: str, key: str) -> pathlib.Path:
  # the table names a toolchain (any characters): a readable prefix plus a hash keeps the folder name safe and unique
  # (the entry format is hashed in too: a tinycore writing bare entries into a shared folder never reads these, nor these it)
  safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in table)[:40]
  folder = f"{safe}-{hashlib.sha256((table + chr(0) + _CACHE_MAGIC.decode()).encode()).hexdigest()[:16]}"
  return cache_dir() / folder / hashlib.sha256(key.encode()).hexdigest()

def _cache_problem(raw: bytes) -> str | None:
  if len(raw) < _CACHE_HEAD: return f"{len(raw)} bytes, shorter than an entry's header" if raw else "empty"
  if not raw.startswith(_CACHE_MAGIC): return "not a tinycore cache entry (an older format, or overwritten)"
  n = int.from_bytes(raw[len(_CACHE_MAGIC):len(_CACHE_MAGIC) + 8], "little")
  if n != len(raw) - _CACHE_HEAD: return f"truncated or extended: {len(raw) - _CACHE_HEAD} bytes of data, the header says {n}"
  if hashlib.sha256(raw[_CACHE_HEAD:]).digest() != raw[len(_CACHE_MAGIC) + 8:_CACHE_HEAD]: return "corrupted: its sha256 does not match"
  return None

def diskcache_get(table: str, key: str) -> bytes | None:
  """The cached value for (table, key), or None when there is none; a damaged entry is removed (with a warning) and is
  a miss, so the caller builds the value again."""
  if CACHELEVEL < 1 or getenv("DISABLE_COMPILER_CACHE"): return None
  path = _cache_path(table, key)
  try: raw = path.read_bytes()
  except OSError: return None
  if (why := _cache_problem(raw)) is None: return raw[_CACHE_HEAD:]
  warnings.warn(f"tinycore cache entry {path} ({table}) is damaged: {why}; discarding it, it will be rebuilt", RuntimeWarning, stacklevel=2)
  with contextlib.suppress(OSError): path.unlink()
  return None

def diskcache_put(table: str, key: str, value: bytes) -> bytes:
  """Store value under (table, key) (see the entry format above); returns value. A cache that cannot be written only
  costs a rebuild next time."""
  if CACHELEVEL < 1 or getenv("DISABLE_COMPILER_CACHE"): return value
  path = _cache_path(table, key)
  try:
    for d in (path.parent.parent, path.parent): d.mkdir(mode=0o700, parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as f:
      f.write(_CACHE_MAGIC + len(value).to_bytes(8, "little") + hashlib.sha256(value).digest())
      f.write(value)
    os.replace(f.name, path)
  except OSError: pass  # a read-only or full cache directory only costs a recompile
  return value
