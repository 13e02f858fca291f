"""Model state: finding a model's tensors, loading them, and the two file formats weights come in.

- get_state_dict / get_parameters / load_state_dict: a model is any object; its tensors are found through attributes,
  lists, tuples and dicts, named by the path to them ("layers.0.weight"), as torch names them.
- safe_save / safe_load / safe_load_metadata: the safetensors format (written here from its specification: an 8-byte
  little-endian header length, a JSON header of name -> dtype, shape, data_offsets, then the raw data).
- torch_load: a `.pt` / `.pth` file written by torch.save, read without torch and without running pickled code: a
  restricted unpickler only accepts the few functions and classes torch uses to rebuild tensors."""
from __future__ import annotations
import io, json, os, pathlib, pickle, struct, tarfile, zipfile
from collections import OrderedDict
from typing import Any, Callable
import numpy as np
from tinycore.tensor import Tensor
from tinycore.dtype import DType, dtypes, to_np_dtype, bf16_to_f32
from tinycore.helpers import prod
from tinycore.uop.uop import UOp

__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_save", "safe_load", "safe_load_metadata", "torch_load",
           "TorchLoadError", "SafetensorsError"]

# *** finding tensors ***

def get_state_dict(obj: Any, prefix: str = "", tensor_type: type = Tensor) -> dict[str, Tensor]:
  """Every Tensor reachable from obj, keyed by its dotted path. Objects are walked through __dict__ (or __slots__),
  lists and tuples by index, dicts by key; symbolic values (a Variable kept on a model) and an object met again inside
  itself (a cycle) are not walked."""
  return _state_dict(obj, prefix, tensor_type, set())

def _state_dict(obj: Any, prefix: str, tensor_type: type, path: set[int]) -> dict[str, Tensor]:
  if isinstance(obj, tensor_type): return {prefix.strip("."): obj}
  if isinstance(obj, (str, bytes, int, float, bool, type(None), np.ndarray, UOp)) or callable(obj) and not hasattr(obj, "__dict__"): return {}
  if id(obj) in path: return {}
  path.add(id(obj))
  try:
    if hasattr(obj, "_asdict"): items = list(obj._asdict().items())  # namedtuple
    elif isinstance(obj, dict): items = list(obj.items())
    elif isinstance(obj, (list, tuple)): items = list(enumerate(obj))
    elif hasattr(obj, "__dict__"): items = list(vars(obj).items())
    elif hasattr(obj, "__slots__"): items = [(k, getattr(obj, k)) for k in obj.__slots__ if hasattr(obj, k)]
    else: return {}
    state: dict[str, Tensor] = {}
    for k, v in items: state.update(_state_dict(v, f"{prefix}{k}.", tensor_type, path))
    return state
  finally: path.discard(id(obj))

def get_parameters(obj: Any) -> list[Tensor]:
  """The tensors of get_state_dict, each once."""
  seen: dict[int, Tensor] = {}
  for t in get_state_dict(obj).values(): seen.setdefault(id(t), t)
  return list(seen.values())

def _put(dst: Tensor, src: Tensor) -> Tensor:
  """Give dst the value of src; returns the tensor to realize. A realized dst is written in place (through its base when
  it is a full-size view), so kernels a TinyJit captured keep reading the new values; otherwise its lazy value is replaced."""
  src = src.shard_like(dst).detach()  # (to dst's device, or split over its devices as it is)
  if src.dtype != dst.dtype: src = src.cast(dst.dtype)
  lb = dst.lazydata
  if lb.is_realized() and lb.st.contiguous and lb.size == lb.base.size and lb.base.op is not None:
    if lb._base is None: return dst.assign(src)
    return Tensor(lb.base).assign(src.reshape(lb.base.shape))
  dst.lazydata = src.contiguous().lazydata
  return dst

def load_state_dict(model: Any, state_dict: dict[str, Tensor], strict: bool = True, verbose: bool = True, consume: bool = False,
                    realize: bool = True) -> list[str]:
  """Copy state_dict's tensors into the model's. With strict, keys missing from state_dict or not in the model are an
  error (naming them); shapes must always match, except that a 0-d tensor and a one-element (1,) one load into each other
  (as tinygrad and torch checkpoints store scalars either way). verbose prints the keys not loaded (strict=False);
  consume deletes each loaded key from state_dict (freeing the source as it goes, as tinygrad 0.14). Returns the model
  keys that were loaded."""
  model_sd = get_state_dict(model)
  missing = sorted(k for k in model_sd if k not in state_dict)
  unexpected = sorted(k for k in state_dict if k not in model_sd)
  def fits(m: tuple, s: tuple) -> bool: return m == s or {m, s} == {(), (1,)}
  mismatched = [(k, tuple(model_sd[k].shape), tuple(state_dict[k].shape)) for k in model_sd
                if k in state_dict and not fits(tuple(model_sd[k].shape), tuple(state_dict[k].shape))]
  problems = []
  if strict and missing: problems.append(f"missing keys (in the model, not in the state dict): {missing}")
  if strict and unexpected: problems.append(f"unexpected keys (in the state dict, not in the model): {unexpected}")
  if mismatched: problems.append("shape mismatch: " + ", ".join(f"{k}: model {m}, state dict {s}" for k, m, s in mismatched))
  if problems:
    hint = "\n(strict=False allows missing and unexpected keys, never shape mismatches)" if strict and (missing or unexpected) else ""
    raise ValueError("load_state_dict failed:\n  " + "\n  ".join(problems) + hint)
  if verbose and (missing or unexpected): print(f"load_state_dict: not loading {missing}, ignoring {unexpected}")
  loaded, todo, done = [], [], set()
  for k, v in model_sd.items():
    if k not in state_dict: continue
    loaded.append(k)
    if id(v) in done: continue  # one tensor under two names is loaded once
    done.add(id(v))
    src = state_dict[k]
    todo.append(_put(v, src if src.shape == v.shape else src.reshape(v.shape)))
    if consume: del state_dict[k]
  if realize and todo: Tensor.realize(*todo)
  return loaded

# *** safetensors ***

_SAFE_DTYPES: dict[str, DType] = {"BOOL": dtypes.bool, "U8": dtypes.uint8, "I8": dtypes.int8, "U16": dtypes.uint16, "I16": dtypes.int16,
                                  "U32": dtypes.uint32, "I32": dtypes.int32, "U64": dtypes.uint64, "I64": dtypes.int64, "F16": dtypes.float16,
                                  "BF16": dtypes.bfloat16, "F32": dtypes.float32, "F64": dtypes.float64}
_SAFE_NAMES = {v: k for k, v in _SAFE_DTYPES.items()}

def _read_bytes(fn: str | os.PathLike | bytes | Tensor) -> bytes:
  if isinstance(fn, Tensor): return bytes(fn.cast(dtypes.uint8).numpy().tobytes()) if fn.dtype == dtypes.uint8 else fn.numpy().tobytes()
  if isinstance(fn, (bytes, bytearray, memoryview)): return bytes(fn)
  path = pathlib.Path(fn)
  if not path.is_file(): raise FileNotFoundError(f"no such file: {path}")
  return path.read_bytes()

class SafetensorsError(ValueError):
  """A safetensors file that is malformed: the message names the file and, where there is one, the tensor."""

_SAFE_MAX_HEADER = 100 * 2**20  # the safetensors package's limit too: a larger header is a corrupt length field, not a model

def _safe_header(data: bytes, name: str) -> tuple[dict[str, Any], int]:
  if len(data) < 8: raise SafetensorsError(f"{name}: not a safetensors file (only {len(data)} bytes)")
  n = struct.unpack("<Q", data[:8])[0]
  if n > _SAFE_MAX_HEADER: raise SafetensorsError(f"{name}: safetensors header length {n} is over the limit of {_SAFE_MAX_HEADER} bytes")
  if 8 + n > len(data): raise SafetensorsError(f"{name}: safetensors header of {n} bytes runs past the end of the file ({len(data)} bytes)")
  try: header = json.loads(data[8:8 + n].decode("utf-8"))
  except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e: raise SafetensorsError(f"{name}: bad safetensors header: {e}") from None
  if not isinstance(header, dict): raise SafetensorsError(f"{name}: safetensors header must be a JSON object")
  meta = header.get("__metadata__")
  if meta is not None and not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
    raise SafetensorsError(f"{name}: __metadata__ must be an object of strings, not {json.dumps(meta)[:80]}")
  return header, 8 + n

def _uint(x: Any) -> bool: return isinstance(x, int) and not isinstance(x, bool) and x >= 0

def _safe_entries(header: dict[str, Any], data_len: int, name: str) -> list[tuple[str, DType, tuple[int, ...], int, int]]:
  """(name, dtype, shape, begin, end) of every tensor, checked as the safetensors package checks them: each entry has a
  known dtype, a shape of non-negative ints, and data_offsets [begin, end] holding exactly its bytes; sorted by offset
  the tensors tile the data with no gap, overlap or trailing byte. Nothing is read until all of this holds."""
  out = []
  for k, info in header.items():
    if k == "__metadata__": continue
    if not isinstance(info, dict): raise SafetensorsError(f"{name}: tensor {k!r}: entry must be an object, not {json.dumps(info)[:80]}")
    missing = [f for f in ("dtype", "shape", "data_offsets") if f not in info]
    if missing: raise SafetensorsError(f"{name}: tensor {k!r}: entry has no {', '.join(missing)}")
    dt, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dt, str) or dt not in _SAFE_DTYPES:
      raise SafetensorsError(f"{name}: tensor {k!r} has dtype {dt!r}, which tinycore does not read (it reads {', '.join(_SAFE_DTYPES)})")
    if not isinstance(shape, list) or not all(_uint(d) for d in shape):
      raise SafetensorsError(f"{name}: tensor {k!r}: shape {shape!r} must be a list of non-negative integers")
    if not isinstance(offs, list) or len(offs) != 2 or not all(_uint(o) for o in offs) or offs[0] > offs[1]:
      raise SafetensorsError(f"{name}: tensor {k!r}: data_offsets {offs!r} must be [begin, end] with 0 <= begin <= end")
    if offs[1] - offs[0] != prod(shape) * _SAFE_DTYPES[dt].itemsize:
      raise SafetensorsError(f"{name}: tensor {k!r} of shape {tuple(shape)} and dtype {dt} needs {prod(shape) * _SAFE_DTYPES[dt].itemsize} bytes, "
                             f"its data_offsets {offs} hold {offs[1] - offs[0]}")
    out.append((k, _SAFE_DTYPES[dt], tuple(shape), offs[0], offs[1]))
  at = 0
  for k, _, _, b, e in sorted(out, key=lambda x: (x[3], x[4])):
    if b != at: raise SafetensorsError(f"{name}: tensor {k!r}: data_offsets [{b}, {e}] " + ("overlap the previous tensor" if b < at else
                                       f"leave a gap after byte {at}") + " (the tensors must tile the data)")
    if e > data_len: raise SafetensorsError(f"{name}: tensor {k!r}: data_offsets [{b}, {e}] run past the {data_len} bytes of data (truncated file?)")
    at = e
  if at != data_len: raise SafetensorsError(f"{name}: the tensors cover {at} bytes of data, the file holds {data_len} (trailing bytes)")
  return out

def _member_tensors(members: list[tuple[str, bytes]]) -> dict[str, Tensor]:
  return {name: Tensor(np.frombuffer(data, dtype=np.uint8).copy()) for name, data in members}

def tar_extract(t: str | os.PathLike | bytes | Tensor) -> dict[str, Tensor]:
  """The regular files of a tar archive (a path, its bytes or a uint8 Tensor of them), by member name, as uint8 Tensors
  of their contents."""
  with tarfile.open(fileobj=io.BytesIO(_read_bytes(t)), mode="r:*") as tf:
    return _member_tensors([(m.name, tf.extractfile(m).read()) for m in tf.getmembers() if m.isfile()])  # type: ignore[union-attr]

def zip_extract(t: str | os.PathLike | bytes | Tensor) -> dict[str, Tensor]:
  """The files of a zip archive (a path, its bytes or a uint8 Tensor of them), by name, as uint8 Tensors of their contents."""
  with zipfile.ZipFile(io.BytesIO(_read_bytes(t))) as zf:
    return _member_tensors([(i.filename, zf.read(i)) for i in zf.infolist() if not i.is_dir()])

def safe_load_metadata(fn: str | os.PathLike | bytes) -> tuple[dict[str, Any], dict[str, str]]:
  """(the header's tensor entries, the __metadata__ strings) of a safetensors file, without reading the tensors.
  A malformed header raises SafetensorsError."""
  if isinstance(fn, (str, os.PathLike)):
    with open(fn, "rb") as f:
      head = f.read(8)
      if len(head) < 8: raise SafetensorsError(f"{fn}: not a safetensors file (only {len(head)} bytes)")
      n = struct.unpack("<Q", head)[0]
      data = head + f.read(min(n, _SAFE_MAX_HEADER + 1))
  else: data = _read_bytes(fn)
  header, _ = _safe_header(data, str(fn) if isinstance(fn, (str, os.PathLike)) else "<bytes>")
  meta = header.pop("__metadata__", {}) or {}
  return header, meta

def safe_load(fn: str | os.PathLike | bytes | Tensor, device: str | None = None) -> dict[str, Tensor]:
  """The tensors of a safetensors file (path, bytes or a uint8 Tensor of the file), by name. A malformed file (bad header,
  entries that are incomplete, overlap, leave gaps or trailing bytes, or run past the end) raises SafetensorsError, a
  ValueError naming the file and the tensor; no byte outside a tensor's own data is ever read."""
  name = str(fn) if isinstance(fn, (str, os.PathLike)) else "<bytes>"
  data = _read_bytes(fn)
  header, start = _safe_header(data, name)
  out: dict[str, Tensor] = {}
  for k, dt, shape, b, e in _safe_entries(header, len(data) - start, name):
    raw = data[start + b:start + e]
    if dt == dtypes.bool: t = Tensor((np.frombuffer(raw, np.uint8) != 0).reshape(shape), device=device)  # any nonzero byte is True
    elif dt == dtypes.bfloat16: t = Tensor(bf16_to_f32(np.frombuffer(raw, np.uint16)).reshape(shape), dtype=dtypes.bfloat16, device=device)
    elif prod(shape) == 0: t = Tensor.zeros(*shape, dtype=dt, device=device) if shape else Tensor.zeros(0, dtype=dt, device=device)
    else: t = Tensor(np.frombuffer(raw, to_np_dtype(dt)).copy().reshape(shape), dtype=dt, device=device)
    out[k] = t
  return out

def safe_save(tensors: dict[str, Tensor], fn: str | os.PathLike, metadata: dict[str, Any] | None = None) -> None:
  """Write tensors (name -> Tensor) and optional string metadata as a safetensors file."""
  header: dict[str, Any] = {}
  blobs, offset = [], 0
  for k, t in tensors.items():
    if not isinstance(t, Tensor): raise TypeError(f"safe_save: {k!r} is a {type(t).__name__}, not a Tensor")
    if t.dtype not in _SAFE_NAMES: raise ValueError(f"safe_save: tensor {k!r} has dtype {t.dtype}, which safetensors cannot hold")
    # bfloat16 comes back from numpy() as float32 holding bf16 values exactly: its top 16 bits are the bf16 bits
    raw = (t.numpy().view(np.uint32) >> 16).astype(np.uint16).tobytes() if t.dtype == dtypes.bfloat16 else t.numpy().tobytes()
    header[k] = {"dtype": _SAFE_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
    blobs.append(raw)
    offset += len(raw)
  if metadata: header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
  hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
  hb += b" " * (-len(hb) % 8)  # the data starts 8-byte aligned
  with open(fn, "wb") as f:
    f.write(struct.pack("<Q", len(hb)))
    f.write(hb)
    for b in blobs: f.write(b)

# *** torch .pt files, without torch ***

class TorchLoadError(pickle.UnpicklingError):
  """A .pt file that cannot be read safely: it names a global outside the allowed set, or is malformed."""

_TORCH_STORAGES: dict[str, np.dtype] = {
  "DoubleStorage": np.dtype(np.float64), "FloatStorage": np.dtype(np.float32), "HalfStorage": np.dtype(np.float16),
  "BFloat16Storage": np.dtype(np.uint16), "LongStorage": np.dtype(np.int64), "IntStorage": np.dtype(np.int32),
  "ShortStorage": np.dtype(np.int16), "CharStorage": np.dtype(np.int8), "ByteStorage": np.dtype(np.uint8), "BoolStorage": np.dtype(np.bool_)}
_TORCH_DTYPES: dict[str, np.dtype] = {"float64": np.dtype(np.float64), "float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
                                      "bfloat16": np.dtype(np.uint16), "int64": np.dtype(np.int64), "int32": np.dtype(np.int32),
                                      "int16": np.dtype(np.int16), "int8": np.dtype(np.int8), "uint8": np.dtype(np.uint8), "bool": np.dtype(np.bool_)}

class _StorageType:
  def __init__(self, name: str, np_dtype: np.dtype): self.name, self.np_dtype = name, np_dtype
  def __repr__(self) -> str: return f"torch.{self.name}"

class _TorchDtype:
  def __init__(self, name: str): self.name, self.np_dtype = name, _TORCH_DTYPES[name]

class _Storage:
  """One storage of the file: its raw bytes and element type (bfloat16 comes as uint16 bits)."""
  def __init__(self, raw: bytes, np_dtype: np.dtype, bf16: bool): self.raw, self.np_dtype, self.bf16 = raw, np_dtype, bf16

_PT_MAX_EXPAND = 2**30  # bytes a tensor may take beyond its storage (stride-0 broadcasts): more is a crafted size, not a model

def _rebuild_tensor(storage: _Storage, storage_offset: int, size: tuple[int, ...], stride: tuple[int, ...], *_: Any) -> Tensor:
  """A tensor from its storage, after checking every number the file gave: offset, sizes and strides are non-negative
  ints (torch has no negative strides), and the furthest element lies inside the storage, so the strided view built
  from them never reaches outside the storage's bytes."""
  if not isinstance(storage, _Storage): raise TorchLoadError(f"tensor built from {type(storage).__name__}, not a storage")
  size, stride = tuple(size) if isinstance(size, (tuple, list)) else size, tuple(stride) if isinstance(stride, (tuple, list)) else stride
  if not (isinstance(size, tuple) and isinstance(stride, tuple) and len(size) == len(stride) and all(_uint(x) for x in size + stride)
          and _uint(storage_offset)):
    raise TorchLoadError(f"tensor of size {size!r}, stride {stride!r} and offset {storage_offset!r}: these must be non-negative ints, "
                         "one stride per dim")
  if len(storage.raw) % storage.np_dtype.itemsize:
    raise TorchLoadError(f"storage of {len(storage.raw)} bytes is not a whole number of {storage.np_dtype} elements")
  arr = np.frombuffer(storage.raw, storage.np_dtype)
  n = prod(size)
  if n == 0: view = np.zeros(size, storage.np_dtype)
  else:
    if storage_offset + sum((s - 1) * st for s, st in zip(size, stride)) >= len(arr):
      raise TorchLoadError(f"tensor of size {size} and stride {stride} at offset {storage_offset} exceeds its storage of {len(arr)} elements")
    if (n - len(arr)) * arr.itemsize > _PT_MAX_EXPAND:
      raise TorchLoadError(f"tensor of size {size} has {n} elements from a storage of {len(arr)}: refusing to expand it by more than "
                           f"{_PT_MAX_EXPAND} bytes")
    view = np.lib.stride_tricks.as_strided(arr[storage_offset:], shape=size, strides=tuple(s * arr.itemsize for s in stride))
  data = np.ascontiguousarray(view).reshape(size)  # (ascontiguousarray makes a 0-d tensor 1-d)
  if storage.bf16: return Tensor(bf16_to_f32(data), dtype=dtypes.bfloat16)
  return Tensor(data.copy())

def _rebuild_parameter(data: Any, requires_grad: bool, *_: Any) -> Any: return data

class _RestrictedUnpickler(pickle.Unpickler):
  """Only torch's tensor-rebuilding functions, its storage and dtype names, and OrderedDict may be named in the pickle."""
  def __init__(self, f: io.BytesIO, load_storage: Callable[[Any], _Storage]):
    super().__init__(f)
    self._load_storage = load_storage
  def find_class(self, module: str, name: str) -> Any:
    if (module, name) == ("collections", "OrderedDict"): return OrderedDict
    # tensors are built after the whole pickle is read (a legacy file's storage data follows its pickle)
    if module == "torch._utils" and name == "_rebuild_tensor_v2": return _LazyTensor
    if module == "torch._utils" and name in ("_rebuild_parameter", "_rebuild_parameter_with_state"): return _rebuild_parameter
    if module == "torch" and name in _TORCH_STORAGES: return _StorageType(name, _TORCH_STORAGES[name])
    if module == "torch" and name in _TORCH_DTYPES: return _TorchDtype(name)
    if (module, name) == ("torch", "Size"): return tuple
    raise TorchLoadError(f"torch_load refuses to load global {module}.{name}: only tensors, storages and OrderedDict are allowed")
  def persistent_load(self, pid: Any) -> Any:
    if not isinstance(pid, tuple) or not pid or pid[0] != "storage": raise TorchLoadError(f"unsupported persistent id {pid!r}")
    return self._load_storage(pid)

def _storage_kind(st: Any) -> tuple[np.dtype, bool]:
  if isinstance(st, _StorageType): return st.np_dtype, st.name == "BFloat16Storage"
  if isinstance(st, _TorchDtype): return st.np_dtype, st.name == "bfloat16"
  raise TorchLoadError(f"unsupported storage type {st!r}")

def torch_load(t: str | os.PathLike | bytes | Tensor) -> Any:
  """Read a file written by torch.save (the zip format of torch >= 1.6, or the older tar-less legacy format): tensors
  become Tensors on the default device, containers stay containers. Nothing in the file is executed. t: a path, the
  file's bytes, or a uint8 Tensor of them (tinygrad 0.14 takes the Tensor)."""
  data = _read_bytes(t)
  name = str(t) if isinstance(t, (str, os.PathLike)) else "<bytes>"
  try:
    if zipfile.is_zipfile(io.BytesIO(data)): return _torch_load_zip(data, name)
    return _torch_load_legacy(data, name)
  except TorchLoadError as e:
    if str(e).startswith(name): raise
    raise TorchLoadError(f"{name}: {e}") from None
  # a malformed file makes pickle, zipfile, struct or numpy raise almost anything: all of it is the file's fault
  except (Exception, RecursionError) as e: raise TorchLoadError(f"{name}: malformed torch file: {type(e).__name__}: {e}") from None

def _torch_load_zip(data: bytes, name: str) -> Any:
  with zipfile.ZipFile(io.BytesIO(data)) as zf:
    pkls = [n for n in zf.namelist() if n.endswith("data.pkl") and n.count("/") <= 1]
    if len(pkls) != 1: raise TorchLoadError(f"{name}: expected one data.pkl in the archive, found {pkls or 'none'}")
    root = pkls[0][:-len("data.pkl")]
    if (bo := root + "byteorder") in zf.namelist() and zf.read(bo).strip() not in (b"little",):
      raise TorchLoadError(f"{name}: byteorder {zf.read(bo)!r} is not supported")
    cache: dict[str, _Storage] = {}
    def load_storage(pid: tuple) -> _Storage:
      _, st_type, key, _location, _numel = pid[:5]
      if key not in cache:
        np_dt, bf16 = _storage_kind(st_type)
        try: raw = zf.read(f"{root}data/{key}")
        except KeyError: raise TorchLoadError(f"{name}: storage {key} is missing from the archive") from None
        cache[key] = _Storage(raw, np_dt, bf16)
      return cache[key]
    return _relink(_RestrictedUnpickler(io.BytesIO(zf.read(pkls[0])), load_storage).load())

def _torch_load_legacy(data: bytes, name: str) -> Any:
  """The pre-1.6 format: pickled magic number, protocol, sys info, the object (storages as persistent ids), the
  storage keys; then each storage as an 8-byte element count and its raw data, in key order."""
  f = io.BytesIO(data)
  def plain_load() -> Any: return _RestrictedUnpickler(f, lambda pid: (_ for _ in ()).throw(TorchLoadError("unexpected storage"))).load()
  try:
    magic = plain_load()
    if magic != 0x1950a86a20f9469cfc6c: raise TorchLoadError(f"{name}: not a torch file (bad magic number)")
    plain_load(); plain_load()  # protocol version, sys info  # noqa: E702
  except (pickle.UnpicklingError, EOFError) as e:
    if isinstance(e, TorchLoadError): raise
    raise TorchLoadError(f"{name}: not a torch file: {e}") from None
  pending: dict[str, tuple[np.dtype, bool, int, _Storage]] = {}
  def load_storage(pid: tuple) -> _Storage:
    _, st_type, key, _location, numel = pid[:5]
    if key not in pending:
      np_dt, bf16 = _storage_kind(st_type)
      pending[key] = (np_dt, bf16, numel, _Storage(b"", np_dt, bf16))
    return pending[key][3]
  obj = _RestrictedUnpickler(f, load_storage).load()
  keys = _RestrictedUnpickler(f, load_storage).load()
  for key in keys:
    if key not in pending: raise TorchLoadError(f"{name}: storage {key!r} is listed but no tensor uses it")
    np_dt, _, _, st = pending[key]
    n = struct.unpack("<q", f.read(8))[0]
    if n < 0 or n * np_dt.itemsize > len(data) - f.tell():
      raise TorchLoadError(f"{name}: storage {key!r} of {n} elements runs past the end of the file")
    st.raw = f.read(n * np_dt.itemsize)
  return _relink(obj)

def _relink(obj: Any) -> Any:
  if isinstance(obj, _LazyTensor): return obj.build()
  if isinstance(obj, OrderedDict): return OrderedDict((k, _relink(v)) for k, v in obj.items())
  if isinstance(obj, dict): return {k: _relink(v) for k, v in obj.items()}
  if isinstance(obj, list): return [_relink(v) for v in obj]
  if isinstance(obj, tuple): return tuple(_relink(v) for v in obj)
  return obj

class _LazyTensor:
  def __init__(self, *args: Any): self.args = args
  def build(self) -> Tensor: return _rebuild_tensor(*self.args)
