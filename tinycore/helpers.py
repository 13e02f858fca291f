"""Small shared utilities: environment knobs, context variables, counters and math helpers."""
from __future__ import annotations
import contextlib, functools, hashlib, itertools, math, os, pathlib, sys, tempfile, time, warnings
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

T = TypeVar("T")

def prod(xs: Iterable[Any], start: Any = 1) -> Any: return math.prod(xs, start=start)  # (symbolic sizes multiply too)
def dedup(xs: Iterable[T]) -> list[T]: return list(dict.fromkeys(xs))
def flatten(xss: Iterable[Iterable[T]]) -> list[T]: return [x for xs in xss for x in xs]
def argfix(*x: Any) -> tuple:
  """Accept both f(1, 2, 3) and f((1, 2, 3)) style arguments."""
  if x and x[0].__class__ in (tuple, list):
    if len(x) != 1: raise ValueError(f"bad arg {x}")
    return tuple(x[0])
  return x
def argsort(x: Sequence[Any]) -> list[int]: return sorted(range(len(x)), key=x.__getitem__)
def all_int(t: Sequence[Any]) -> bool: return all(isinstance(s, int) for s in t)
def all_same(items: Sequence[Any]) -> bool: return all(x == items[0] for x in items)
def round_up(num: int, amt: int) -> int: return (num + amt - 1) // amt * amt
def ceildiv(num: int, amt: int) -> int: return -(-num // amt)
def make_tuple(x: int | Sequence[int], cnt: int) -> tuple[int, ...]: return (x,) * cnt if isinstance(x, int) else tuple(x)
def partition(xs: Iterable[T], fn: Callable[[T], bool]) -> tuple[list[T], list[T]]:
  a: list[T] = []
  b: list[T] = []
  for x in xs: (a if fn(x) else b).append(x)
  return a, b
def colored(s: str, color: str | None) -> str:
  codes = {"red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36, "white": 37}
  return f"\u001b[{codes[color]}m{s}\u001b[0m" if color and sys.stdout.isatty() else s
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
  def __init__(self, key: str, default: Any):
    self.key, self.value = key, getenv(key, default)
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
# TRAINING turns dropout, BatchNorm's batch statistics and Optimizer.step on (Tensor.training and Tensor.train() are views
# of it); DEFAULT_FLOAT / DEFAULT_INT name the dtypes of python floats and ints (dtypes.default_float reads it), as tinygrad
TRAINING = ContextVar("TRAINING", 0)
DEFAULT_FLOAT, DEFAULT_INT = ContextVar("DEFAULT_FLOAT", "float32"), ContextVar("DEFAULT_INT", "int32")

class GlobalCounters:
  """Totals since the last reset: kernels run, operations, memory moved and time spent."""
  global_ops: int = 0
  global_mem: int = 0
  time_sum_s: float = 0.0
  kernel_count: int = 0
  mem_used: int = 0
  @staticmethod
  def reset() -> None: GlobalCounters.global_ops, GlobalCounters.global_mem, GlobalCounters.time_sum_s, GlobalCounters.kernel_count = 0, 0, 0.0, 0

class Timing(contextlib.ContextDecorator):
  def __init__(self, prefix: str = "", enabled: bool = True): self.prefix, self.enabled = prefix, enabled
  def __enter__(self) -> None: self.st = time.perf_counter_ns()
  def __exit__(self, *exc: Any) -> None:
    self.et = time.perf_counter_ns() - self.st
    if self.enabled: print(f"{self.prefix}{self.et*1e-6:6.2f} ms")

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
