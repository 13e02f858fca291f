"""Small data sets, read from local files or from packages that ship them; nothing is downloaded.

Both return (X_train, Y_train, X_test, Y_test) Tensors: X as uint8 images of shape (N, 1, H, W), Y as uint8 labels."""
from __future__ import annotations
import gzip, os, pathlib
import numpy as np
from tinycore.tensor import Tensor

__all__ = ["mnist", "digits", "read_idx"]

_MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
_IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}

def read_idx(path: str | os.PathLike) -> np.ndarray:
  """An IDX file (the MNIST format), gzipped or raw, as a numpy array of its declared shape."""
  raw = pathlib.Path(path).read_bytes()
  if raw[:2] == b"\x1f\x8b": raw = gzip.decompress(raw)
  if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES: raise ValueError(f"{path}: not an IDX file (bad magic {raw[:4]!r})")
  dt, ndim = np.dtype(_IDX_TYPES[raw[2]]), raw[3]
  shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
  start, n = 4 + 4 * ndim, int(np.prod(shape)) if shape else 1
  if len(raw) < start + n * dt.itemsize: raise ValueError(f"{path}: IDX data of shape {shape} is truncated ({len(raw)} bytes)")
  return np.frombuffer(raw, dt, count=n, offset=start).astype(dt.newbyteorder("=")).reshape(shape)

def _find(base: pathlib.Path, stem: str) -> pathlib.Path | None:
  for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"), stem.replace("-idx", ".idx") + ".gz"):
    if (p := base / name).is_file(): return p
  return None

def mnist(path: str | os.PathLike | None = None, device: str | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """MNIST from local IDX files (train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], t10k-...), in `path` or
  else in the directory named by the MNIST_PATH environment variable. X: uint8 (N, 1, 28, 28), Y: uint8 (N,)."""
  where = path if path is not None else os.getenv("MNIST_PATH")
  if where is None: raise FileNotFoundError("mnist: no path given and MNIST_PATH is not set: point either at a directory holding "
                                            f"{', '.join(_MNIST_FILES)} (each raw or .gz)")
  base = pathlib.Path(where).expanduser()
  if not base.is_dir():
    raise FileNotFoundError(f"mnist: {base} is not a directory (from {'the path argument' if path is not None else 'MNIST_PATH'})")
  found = {stem: _find(base, stem) for stem in _MNIST_FILES}
  if (missing := [s for s, p in found.items() if p is None]): raise FileNotFoundError(f"mnist: {base} lacks {', '.join(missing)} (raw or .gz)")
  xtr, ytr, xte, yte = (read_idx(found[s]) for s in _MNIST_FILES)  # type: ignore[arg-type]
  return (Tensor(xtr.reshape(-1, 1, 28, 28), device=device), Tensor(ytr, device=device),
          Tensor(xte.reshape(-1, 1, 28, 28), device=device), Tensor(yte, device=device))

def digits(test_size: int = 360, seed: int = 0, device: str | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """The 8x8 handwritten digits that scikit-learn ships (1797 images, pixel values 0..16), split into train and test by a
  fixed shuffle (`seed`), `test_size` images for test. X: uint8 (N, 1, 8, 8), Y: uint8 (N,). Needs scikit-learn."""
  try: from sklearn.datasets import load_digits
  except ImportError: raise ImportError("digits() needs scikit-learn, which ships the data: pip install scikit-learn") from None
  d = load_digits()
  X, Y = d.images.astype(np.uint8).reshape(-1, 1, 8, 8), d.target.astype(np.uint8)
  if not 0 < test_size < len(X): raise ValueError(f"test_size must be between 1 and {len(X) - 1}, got {test_size}")
  perm = np.random.default_rng(seed).permutation(len(X))
  tr, te = perm[test_size:], perm[:test_size]
  return Tensor(X[tr], device=device), Tensor(Y[tr], device=device), Tensor(X[te], device=device), Tensor(Y[te], device=device)
