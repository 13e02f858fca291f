"""State dicts, safetensors and torch_load."""
import io, json, pickle, struct, zipfile
import numpy as np
import pytest
from tinycore import Tensor, dtypes, nn
from tinycore.nn.state import (get_state_dict, get_parameters, load_state_dict, safe_save, safe_load, safe_load_metadata, torch_load,
                               TorchLoadError)

pytestmark = pytest.mark.usefixtures("device")  # every test on CLANG and on PYTHON (conftest)

class Net:
  def __init__(self):
    self.l1 = nn.Linear(3, 4)
    self.blocks = [nn.LayerNorm(4), {"head": nn.Linear(4, 2, bias=False)}]
    self.shared = self.l1.weight  # the same tensor under two names
    self.name, self.scale = "net", 2.0

def test_get_state_dict_names_and_parameters():
  net = Net()
  sd = get_state_dict(net)
  assert sorted(sd) == ["blocks.0.bias", "blocks.0.weight", "blocks.1.head.weight", "l1.bias", "l1.weight", "shared"]
  params = get_parameters(net)
  assert len(params) == 5 and any(p is net.l1.weight for p in params)

def test_load_state_dict_roundtrip_in_place():
  a, b = Net(), Net()
  b.l1.weight.realize()
  buf = b.l1.weight.lazydata.base.buffer
  loaded = load_state_dict(b, get_state_dict(a))
  assert "l1.weight" in loaded
  for k, v in get_state_dict(a).items(): np.testing.assert_array_equal(get_state_dict(b)[k].numpy(), v.numpy())
  assert b.l1.weight.lazydata.base.buffer is buf  # written in place, so a captured TinyJit still sees it

def test_load_state_dict_errors():
  net = Net()
  sd = dict(get_state_dict(Net()))
  del sd["l1.bias"]
  sd["extra.weight"] = Tensor.zeros(2)
  with pytest.raises(ValueError) as e: load_state_dict(net, sd)
  msg = str(e.value)
  assert "missing keys" in msg and "l1.bias" in msg and "unexpected keys" in msg and "extra.weight" in msg and "strict=False" in msg
  assert load_state_dict(net, sd, strict=False)  # allowed without strict
  sd["l1.weight"] = Tensor.zeros(5, 5)
  with pytest.raises(ValueError, match=r"shape mismatch: l1.weight: model \(4, 3\), state dict \(5, 5\)"): load_state_dict(net, sd, strict=False)

def test_load_state_dict_casts_dtype():
  lin = nn.Linear(2, 2)
  load_state_dict(lin, {"weight": Tensor([[1, 2], [3, 4]], dtype=dtypes.int32), "bias": Tensor([0.5, 0.5])})
  assert lin.weight.dtype == dtypes.float32 and lin.weight.numpy().tolist() == [[1, 2], [3, 4]]

# *** safetensors ***

def _sample() -> dict:
  return {"f32": Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)), "f16": Tensor(np.array([1.5, -2], np.float16)),
          "i64": Tensor(np.array([[1, -2**40]], np.int64)), "u8": Tensor(np.array([0, 255], np.uint8)), "bool": Tensor([True, False, True]),
          "scalar": Tensor(np.float32(3.0)), "bf16": Tensor([1.0, -2.5, 3.0], dtype=dtypes.bfloat16)}

def test_safetensors_roundtrip(tmp_path):
  fn = tmp_path / "m.safetensors"
  ts = _sample()
  safe_save(ts, fn, metadata={"format": "pt", "step": 3})
  back = safe_load(fn)
  assert list(back) == list(ts)
  for k, t in ts.items():
    assert back[k].dtype == t.dtype and back[k].shape == t.shape, k
    np.testing.assert_array_equal(back[k].numpy(), t.numpy())
  header, meta = safe_load_metadata(fn)
  assert meta == {"format": "pt", "step": "3"} and header["f32"] == {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}
  raw = fn.read_bytes()
  assert (8 + struct.unpack("<Q", raw[:8])[0]) % 8 == 0  # data starts aligned
  assert safe_load(raw)["u8"].numpy().tolist() == [0, 255]  # bytes work as well as paths

def test_safetensors_vs_package(tmp_path):
  st = pytest.importorskip("safetensors.numpy")
  ts = {k: v for k, v in _sample().items() if k != "bf16"}
  safe_save(ts, tmp_path / "ours.safetensors", metadata={"a": "b"})
  theirs = st.load_file(str(tmp_path / "ours.safetensors"))
  for k, t in ts.items(): np.testing.assert_array_equal(theirs[k], t.numpy())
  st.save_file({"x": np.arange(10, dtype=np.int32).reshape(2, 5), "y": np.ones((3,), np.float64)}, str(tmp_path / "theirs.safetensors"),
               metadata={"k": "v"})
  back = safe_load(tmp_path / "theirs.safetensors")
  assert back["x"].numpy().tolist() == np.arange(10).reshape(2, 5).tolist() and back["y"].dtype == dtypes.float64
  assert safe_load_metadata(tmp_path / "theirs.safetensors")[1] == {"k": "v"}

def test_safetensors_errors(tmp_path):
  with pytest.raises(FileNotFoundError, match="nope.safetensors"): safe_load(tmp_path / "nope.safetensors")
  bad = tmp_path / "bad.safetensors"
  hb = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
  bad.write_bytes(struct.pack("<Q", len(hb)) + hb + b"\0" * 8)  # 8 of 16 data bytes
  with pytest.raises(ValueError, match="'w'"): safe_load(bad)
  bad.write_bytes(struct.pack("<Q", 1000) + b"{}")
  with pytest.raises(ValueError, match="runs past the end"): safe_load(bad)

def test_model_through_safetensors(tmp_path):
  a, b = Net(), Net()
  safe_save(get_state_dict(a), tmp_path / "net.safetensors")
  load_state_dict(b, safe_load(tmp_path / "net.safetensors"))
  x = Tensor(np.ones((1, 3), np.float32))
  np.testing.assert_allclose(b.l1(x).numpy(), a.l1(x).numpy())

# *** torch_load ***

def _g(mod: str, name: str) -> bytes: return b"c" + mod.encode() + b"\n" + name.encode() + b"\n"
def _s(x: str) -> bytes: return b"X" + struct.pack("<I", len(x.encode())) + x.encode()
def _i(n: int) -> bytes:
  if -2**31 <= n < 2**31: return b"J" + struct.pack("<i", n)
  raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
  return b"\x8a" + bytes([len(raw)]) + raw  # LONG1, for ints past 32 bits
def _tup(*items: bytes) -> bytes: return b"(" + b"".join(items) + b"t"

def _handmade_pt(tensors: dict, extra_global: tuple | None = None) -> bytes:
  """A .pt file as torch.save writes it (zip: data.pkl, data/<key>, byteorder, version), built without torch:
  name -> (float32 storage values, offset, size, stride)."""
  entries, storages = b"", {}
  for n, (key, (vals, off, size, stride)) in enumerate(tensors.items()):
    storages[str(n)] = np.asarray(vals, np.float32).tobytes()
    pid = _tup(_s("storage"), _g("torch", "FloatStorage"), _s(str(n)), _s("cpu"), _i(len(vals)))
    args = _tup(pid + b"Q", _i(off), _tup(*map(_i, size)), _tup(*map(_i, stride)), b"\x89", _g("collections", "OrderedDict") + b")R")
    entries += _s(key) + _g("torch._utils", "_rebuild_tensor_v2") + args + b"R"
  if extra_global: entries += _s("evil") + _g(*extra_global) + _tup(_s("echo hi")) + b"R"
  pkl = b"\x80\x02" + _g("collections", "OrderedDict") + b")R(" + entries + b"u."
  out = io.BytesIO()
  with zipfile.ZipFile(out, "w") as zf:
    zf.writestr("archive/data.pkl", pkl)
    zf.writestr("archive/byteorder", "little")
    zf.writestr("archive/version", "3\n")
    for k, v in storages.items(): zf.writestr(f"archive/data/{k}", v)
  return out.getvalue()

def test_torch_load_handmade(tmp_path):
  fn = tmp_path / "hand.pt"
  # "t" is a transposed view: stride (1, 3) over a 2x3 storage; "o" starts at an offset
  fn.write_bytes(_handmade_pt({"w": (range(6), 0, (2, 3), (3, 1)), "t": (range(6), 0, (3, 2), (1, 3)), "o": (range(6), 2, (2,), (1,))}))
  sd = torch_load(fn)
  assert list(sd) == ["w", "t", "o"]
  assert sd["w"].numpy().tolist() == [[0, 1, 2], [3, 4, 5]]
  assert sd["t"].numpy().tolist() == [[0, 3], [1, 4], [2, 5]]
  assert sd["o"].numpy().tolist() == [2, 3]

def test_torch_load_refuses_code(tmp_path):
  fn = tmp_path / "evil.pt"
  fn.write_bytes(_handmade_pt({"w": ([1.0], 0, (1,), (1,))}, extra_global=("os", "system")))
  with pytest.raises(TorchLoadError, match="os.system"): torch_load(fn)
  with pytest.raises(TorchLoadError):
    torch_load(pickle.dumps({"x": 1}))  # a plain pickle is neither a zip nor a legacy torch file

def test_torch_load_from_torch(tmp_path):
  torch = pytest.importorskip("torch")
  lin = torch.nn.Linear(3, 2)
  base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
  obj = {"model": lin.state_dict(), "t": base.T, "slice": base[1], "bf16": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
         "i64": torch.tensor([[1, 2]], dtype=torch.int64), "half": torch.ones(2, dtype=torch.float16), "step": 7, "names": ["a", "b"]}
  for zip_format in (True, False):
    fn = tmp_path / f"t{zip_format}.pt"
    torch.save(obj, fn, _use_new_zipfile_serialization=zip_format)
    back = torch_load(fn)
    assert back["step"] == 7 and back["names"] == ["a", "b"]
    np.testing.assert_array_equal(back["model"]["weight"].numpy(), lin.weight.detach().numpy())
    np.testing.assert_array_equal(back["t"].numpy(), base.T.numpy())
    np.testing.assert_array_equal(back["slice"].numpy(), base[1].numpy())
    assert back["bf16"].dtype == dtypes.bfloat16 and back["bf16"].numpy().tolist() == [1.5, -2.0]
    assert back["i64"].dtype == dtypes.int64 and back["half"].dtype == dtypes.float16
  # a torch model's weights load into the same layer of ours
  ours = nn.Linear(3, 2)
  load_state_dict(ours, torch_load(tmp_path / "tTrue.pt")["model"])
  x = np.ones((1, 3), np.float32)
  np.testing.assert_allclose(ours(Tensor(x)).numpy(), lin(torch.tensor(x)).detach().numpy(), atol=1e-6)

# *** malformed files: a clear error naming file and tensor, never a read outside the data (issue 11, items 1, 7, 8) ***

def _st_file(entries: dict, data: bytes) -> bytes:
  hb = json.dumps(entries).encode()
  return struct.pack("<Q", len(hb)) + hb + data

@pytest.mark.parametrize("entries, data, msg", [
  ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}}, b"\0" * 8, "data_offsets"),  # once returned header bytes
  ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, "overlap"),
  ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 12, "trailing bytes"),
  ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8, "gap"),
  ({"a": {"dtype": "F32", "shape": [2]}}, b"\0" * 8, "has no data_offsets"),
  ({"a": [1, 2]}, b"\0" * 8, "must be an object"),
  ({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, b"\0" * 8, "non-negative"),
  ({"a": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}}, b"\0" * 8, "non-negative"),
  ({"a": {"dtype": [], "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, "dtype"),
  ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8, 8]}}, b"\0" * 8, "data_offsets"),
  ({"__metadata__": {"k": 1}, "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, "__metadata__"),
])
def test_safetensors_malformed(tmp_path, entries, data, msg):
  from safetensors import SafetensorError
  from safetensors.numpy import load
  from tinycore.nn.state import SafetensorsError
  fn = tmp_path / "bad.safetensors"
  fn.write_bytes(_st_file(entries, data))
  with pytest.raises(SafetensorError): load(fn.read_bytes())  # the reference package rejects each of these too
  with pytest.raises(SafetensorsError, match=msg) as e: safe_load(fn)
  assert isinstance(e.value, ValueError) and str(fn) in str(e.value)
  if msg not in ("trailing bytes", "__metadata__"): assert any(f"'{k}'" in str(e.value) for k in entries), "the error names the tensor"

def test_safetensors_bool_bytes_are_bools(tmp_path):
  raw = _st_file({"b": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]}}, bytes([0, 1, 7]))
  assert safe_load(raw)["b"].numpy().tolist() == [False, True, True]

@pytest.mark.parametrize("off, size, stride, msg", [
  (0, (3,), (-1,), "non-negative"), (2, (3,), (-1,), "non-negative"),  # stride -1 once returned heap bytes
  (0, (2,), (-2**40,), "non-negative"),  # once a segfault
  (-2, (2,), (1,), "non-negative"), (0, (7,), (1,), "exceeds its storage"), (5, (2,), (1,), "exceeds its storage"),
  (0, (2, 3), (1,), "one stride per dim"), (0, (2**40,), (0,), "refusing to expand"), (0, (2,), (2**62,), "exceeds its storage"),
])
def test_torch_load_out_of_bounds(tmp_path, off, size, stride, msg):
  torch = pytest.importorskip("torch")
  fn = tmp_path / "bad.pt"
  fn.write_bytes(_handmade_pt({"w": (range(6), off, size, stride)}))
  if size != (2**40,):  # torch itself refuses all but the huge broadcast, which it keeps lazy
    with pytest.raises(RuntimeError): torch.load(fn, weights_only=True)
  with pytest.raises(TorchLoadError, match=msg) as e: torch_load(fn)
  assert str(fn) in str(e.value)

def test_torch_load_malformed_is_torch_load_error(tmp_path):
  good = _handmade_pt({"w": (range(6), 0, (2, 3), (3, 1))})
  for bad in (good[:len(good) // 2], b"PK\x03\x04" + b"\0" * 40, b"\x80\x02K\x01.", b""):
    with pytest.raises(TorchLoadError): torch_load(bad)
def test_load_state_dict_0d_and_one_element():
  # a 0-d tensor and a (1,) one load into each other (tinygrad 0.14 and torch checkpoints store scalars either way)
  class M:
    def __init__(self): self.a, self.b = Tensor.zeros(()).contiguous().realize(), Tensor.zeros(1).contiguous().realize()
  m = M()
  load_state_dict(m, {"a": Tensor([3.0]), "b": Tensor(4.0)})
  assert m.a.shape == () and m.a.item() == 3.0 and m.b.shape == (1,) and m.b.tolist() == [4.0]
  with pytest.raises(ValueError, match="shape mismatch"): load_state_dict(m, {"a": Tensor([[3.0]]), "b": Tensor(4.0)})
  with pytest.raises(ValueError, match="shape mismatch"): load_state_dict(m, {"a": Tensor([1.0, 2.0]), "b": Tensor(4.0)})
  bn = nn.BatchNorm(2)
  sd = {"weight": Tensor.ones(2), "bias": Tensor.zeros(2), "running_mean": Tensor.zeros(2), "running_var": Tensor.ones(2),
        "num_batches_tracked": Tensor([5])}
  load_state_dict(bn, sd)
  assert bn.num_batches_tracked.shape == () and bn.num_batches_tracked.item() == 5 and bn.num_batches_tracked.dtype == dtypes.int64

def test_state_dict_skips_variables_and_cycles():
  """get_state_dict recursed without end into a Variable kept on a model (a UOp) and into cycles; both are skipped, a
  tensor shared by two paths is listed under both (as tinygrad 0.14)."""
  from tinycore import Variable
  class M:
    def __init__(self):
      self.w, self.pos = Tensor.ones(2), Variable("pos", 1, 8).bind(3)
      self.me, self.alias = self, [self.w]
  m = M()
  sd = get_state_dict(m)
  assert sorted(sd) == ["alias.0", "w"] and sd["w"] is m.w and sd["alias.0"] is m.w
