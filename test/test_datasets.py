"""nn.datasets: MNIST from local IDX files (made here, small), the sklearn digits, and their error messages."""
import gzip, struct, sys
import numpy as np
import pytest
from tinycore import dtypes
from tinycore.nn import datasets

pytestmark = pytest.mark.usefixtures("device")  # every test on CLANG and on PYTHON (conftest)

def _write_idx(path, arr: np.ndarray, gz: bool) -> None:
  data = bytes([0, 0, 0x08, arr.ndim]) + b"".join(struct.pack(">I", s) for s in arr.shape) + arr.astype(np.uint8).tobytes()
  path.write_bytes(gzip.compress(data) if gz else data)

def _fake_mnist(d, n_train=6, n_test=4):
  rng = np.random.default_rng(0)
  arrs = {"train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28)), "train-labels-idx1-ubyte": rng.integers(0, 10, n_train),
          "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28)), "t10k-labels-idx1-ubyte": rng.integers(0, 10, n_test)}
  for i, (name, a) in enumerate(arrs.items()):  # a mix of gzipped and raw files
    _write_idx(d / (name + (".gz" if i % 2 == 0 else "")), a, gz=i % 2 == 0)
  return arrs

def test_read_idx(tmp_path):
  a = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
  _write_idx(tmp_path / "a.gz", a, True)
  _write_idx(tmp_path / "b", a, False)
  assert (datasets.read_idx(tmp_path / "a.gz") == a).all() and (datasets.read_idx(tmp_path / "b") == a).all()
  (tmp_path / "c").write_bytes(b"\x12\x34\x56\x78")
  with pytest.raises(ValueError, match="not an IDX file"): datasets.read_idx(tmp_path / "c")

def test_mnist_from_path_and_env(tmp_path, monkeypatch):
  arrs = _fake_mnist(tmp_path)
  X_train, Y_train, X_test, Y_test = datasets.mnist(tmp_path)
  assert X_train.shape == (6, 1, 28, 28) and Y_train.shape == (6,) and X_test.shape == (4, 1, 28, 28) and Y_test.shape == (4,)
  assert X_train.dtype == dtypes.uint8 and Y_train.dtype == dtypes.uint8
  np.testing.assert_array_equal(X_test.numpy()[:, 0], arrs["t10k-images-idx3-ubyte"])
  np.testing.assert_array_equal(Y_train.numpy(), arrs["train-labels-idx1-ubyte"])
  monkeypatch.setenv("MNIST_PATH", str(tmp_path))
  assert datasets.mnist()[3].numpy().tolist() == arrs["t10k-labels-idx1-ubyte"].tolist()

def test_mnist_errors(tmp_path, monkeypatch):
  monkeypatch.delenv("MNIST_PATH", raising=False)
  with pytest.raises(FileNotFoundError, match="MNIST_PATH is not set"): datasets.mnist()
  with pytest.raises(FileNotFoundError, match="nowhere"): datasets.mnist(tmp_path / "nowhere")
  monkeypatch.setenv("MNIST_PATH", str(tmp_path / "elsewhere"))
  with pytest.raises(FileNotFoundError, match="elsewhere.*MNIST_PATH"): datasets.mnist()
  _fake_mnist(tmp_path)
  (tmp_path / "t10k-labels-idx1-ubyte").unlink()
  with pytest.raises(FileNotFoundError, match="lacks t10k-labels-idx1-ubyte"): datasets.mnist(tmp_path)

def test_digits():
  pytest.importorskip("sklearn")
  X_train, Y_train, X_test, Y_test = datasets.digits()
  assert X_train.shape == (1437, 1, 8, 8) and X_test.shape == (360, 1, 8, 8) and Y_train.shape == (1437,) and Y_test.shape == (360,)
  assert X_train.dtype == dtypes.uint8 and Y_test.dtype == dtypes.uint8
  x, y = X_train.numpy(), Y_train.numpy()
  assert x.max() == 16 and set(np.unique(y)) == set(range(10))
  assert (datasets.digits()[3].numpy() == Y_test.numpy()).all()  # the split is fixed
  assert (datasets.digits(seed=1)[3].numpy() != Y_test.numpy()).any()

def test_digits_without_sklearn(monkeypatch):
  monkeypatch.setitem(sys.modules, "sklearn", None)
  monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
  with pytest.raises(ImportError, match="pip install scikit-learn"): datasets.digits()
