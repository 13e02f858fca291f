"""tinycore.nn.onnx's own behaviour: refusals at load time, dtypes the device lacks, the missing-package message,
external data, named dims bound at call time, the ways a model is given, the command line, the PYTHON device, the
runner's replay of its kernels (and tinygrad's TinyJit around it), and the op coverage table of docs/onnx.md.
References are numpy float64 (and onnxruntime for --check)."""
from __future__ import annotations
import pathlib, sys
import numpy as np
import pytest
onnx = pytest.importorskip("onnx")
from onnx import helper, TensorProto, numpy_helper  # noqa: E402
from tinycore import Tensor, dtypes  # noqa: E402
from tinycore.errors import DTypeError, ShapeError  # noqa: E402
from tinycore.nn.onnx import OnnxRunner  # noqa: E402
import tinycore.nn.onnx.runner as runner_module  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent

def model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
  g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
  return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])

def vi(name, elem=TensorProto.FLOAT, shape=(2, 3)): return helper.make_tensor_value_info(name, elem, shape)

def matmul_model(shape_x=("batch", 3)) -> onnx.ModelProto:
  w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 7, "w")
  return model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"), helper.make_node("Relu", ["y"], ["z"], name="relu")],
               [vi("x", shape=shape_x)], [vi("z", shape=(shape_x[0], 4))], [w])

def test_unknown_op_is_refused_at_load_naming_op_opset_and_node():
  m = model([helper.make_node("FooBar", ["x"], ["y"], name="the_node")], [vi("x")], [vi("y")])
  with pytest.raises(NotImplementedError, match=r"FooBar.*the_node.*opset 17"): OnnxRunner(m)

def test_unsupported_attribute_value_is_refused_at_load():
  m = model([helper.make_node("Resize", ["x", "", "s"], ["y"], name="rs", mode="linear", nearest_mode="round_half_away")],
            [vi("x", shape=(1, 1, 4, 4))], [vi("y", shape=(1, 1, 2, 2))], [numpy_helper.from_array(np.array([1, 1, 0.5, 0.5], np.float32), "s")],
            opset=19)
  with pytest.raises(NotImplementedError, match=r"Resize.*'rs'.*Resize version 19.*nearest_mode='round_half_away'"): OnnxRunner(m)

def test_unknown_attribute_is_refused_at_load():
  m = model([helper.make_node("Relu", ["x"], ["y"], name="r", bogus=3)], [vi("x")], [vi("y")])
  with pytest.raises(NotImplementedError, match=r"attribute 'bogus'"): OnnxRunner(m)

def test_op_version_outside_the_implemented_range_is_refused():
  # Upsample was removed at opset 10: its version there is 10, beyond the 7-9 implemented
  m = model([helper.make_node("Upsample", ["x", "s"], ["y"], name="up")], [vi("x", shape=(1, 1, 2, 2)), vi("s", shape=(4,))], [vi("y")], opset=10)
  with pytest.raises(NotImplementedError, match=r"Upsample.*versions 7-9"): OnnxRunner(m)

def test_other_domains_are_refused():
  n = helper.make_node("Frobnicate", ["x"], ["y"], name="b", domain="com.example")
  m = helper.make_model(helper.make_graph([n], "g", [vi("x")], [vi("y")]),
                        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
  with pytest.raises(NotImplementedError, match=r"domain 'com.example' is not supported, only ai.onnx, ai.onnx.ml"): OnnxRunner(m)

def test_an_op_of_a_known_domain_tinycore_lacks_is_named():
  n = helper.make_node("LinearClassifier", ["x"], ["y", "z"], name="lc", domain="ai.onnx.ml", coefficients=[1.0, 2.0, 3.0])
  m = helper.make_model(helper.make_graph([n], "g", [vi("x")], [vi("y"), vi("z")]),
                        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
  with pytest.raises(NotImplementedError, match=r"does not implement ai.onnx.ml.LinearClassifier"): OnnxRunner(m)

def test_a_dtype_the_device_does_not_declare_is_named(monkeypatch):
  monkeypatch.setattr(runner_module, "is_dtype_supported", lambda dt, device=None: dt != dtypes.float64)
  m = model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.DOUBLE)], [vi("x")], [vi("y", TensorProto.DOUBLE)])
  with pytest.raises(DTypeError, match=r"double.*'y'.*does not declare"): OnnxRunner(m)

def test_string_tensors_are_refused_at_load():
  m = model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", TensorProto.STRING)], [vi("y", TensorProto.STRING)])
  with pytest.raises(NotImplementedError, match="STRING"): OnnxRunner(m)

def test_missing_onnx_package_names_the_extra(monkeypatch):
  monkeypatch.setitem(sys.modules, "onnx", None)
  with pytest.raises(ImportError, match=r"tinycore\[onnx\]"): OnnxRunner("model.onnx")

def test_external_data_loads_from_the_models_folder(tmp_path):
  m = matmul_model((2, 3))
  onnx.save_model(m, str(tmp_path / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
  assert (tmp_path / "weights.bin").exists()
  x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
  out = OnnxRunner(tmp_path / "m.onnx")({"x": x})["z"].numpy()
  np.testing.assert_allclose(out, np.maximum(x.astype(np.float64) @ (np.arange(12).reshape(3, 4) / 7), 0), rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("batch", [1, 5])
def test_named_dims_bind_at_call_time(batch):
  run = OnnxRunner(matmul_model())
  x = np.random.default_rng(batch).standard_normal((batch, 3)).astype(np.float32)
  out = run({"x": x})["z"]
  assert out.shape == (batch, 4)
  np.testing.assert_allclose(out.numpy(), np.maximum(x.astype(np.float64) @ (np.arange(12).reshape(3, 4) / 7), 0), rtol=1e-5, atol=1e-6)

def test_a_named_dim_takes_one_size_across_inputs():
  m = model([helper.make_node("Add", ["a", "b"], ["c"])], [vi("a", shape=("n", 2)), vi("b", shape=("n", 2))], [vi("c", shape=("n", 2))])
  run = OnnxRunner(m)
  with pytest.raises(ShapeError, match=r"'b' dim 0 is 'n', bound to 2"): run({"a": np.zeros((2, 2), np.float32), "b": np.zeros((3, 2), np.float32)})
  with pytest.raises(ShapeError, match="'a' has shape"): run({"a": np.zeros((2, 3), np.float32), "b": np.zeros((2, 3), np.float32)})

def test_inputs_are_checked():
  run = OnnxRunner(matmul_model())
  with pytest.raises(ValueError, match="missing: x"): run({})
  with pytest.raises(DTypeError, match="'x' is float"): run({"x": Tensor([[1, 2, 3]], dtype=dtypes.int32)})

def test_model_as_path_bytes_tensor_or_proto(tmp_path):
  m = matmul_model((1, 3))
  onnx.save_model(m, str(tmp_path / "m.onnx"))
  data = m.SerializeToString()
  x = np.ones((1, 3), np.float32)
  sources = (m, data, str(tmp_path / "m.onnx"), tmp_path / "m.onnx", Tensor(np.frombuffer(data, np.uint8)))
  outs = [OnnxRunner(src)({"x": x})["z"].numpy() for src in sources]
  for o in outs[1:]: np.testing.assert_array_equal(o, outs[0])

def small_cnn() -> onnx.ModelProto:
  """Conv, BatchNormalization, Relu, MaxPool, Flatten, Gemm and Softmax with seeded weights."""
  rng = np.random.default_rng(0)
  w = {"w": rng.standard_normal((4, 2, 3, 3)), "b": rng.standard_normal(4), "s": rng.uniform(0.5, 1.5, 4), "o": rng.standard_normal(4),
       "m": rng.standard_normal(4) * 0.1, "v": rng.uniform(0.5, 1.5, 4), "fw": rng.standard_normal((5, 16)), "fb": rng.standard_normal(5)}
  nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
           helper.make_node("BatchNormalization", ["c", "s", "o", "m", "v"], ["n"]),
           helper.make_node("Relu", ["n"], ["r"]), helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
           helper.make_node("Flatten", ["p"], ["f"]), helper.make_node("Gemm", ["f", "fw", "fb"], ["g"], transB=1),
           helper.make_node("Softmax", ["g"], ["y"], axis=-1)]
  inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in w.items()]
  return model(nodes, [vi("x", shape=(2, 2, 4, 4))], [vi("y", shape=(2, 5))], inits)

# PYTHON interprets every kernel: the matmul model; OPENCL (PoCL here) the CNN
@pytest.mark.parametrize("device,build,shape", [("PYTHON", lambda: matmul_model((2, 3)), (2, 3)), ("OPENCL", small_cnn, (2, 2, 4, 4))])
def test_runs_on_other_devices(device, build, shape):
  ort = pytest.importorskip("onnxruntime")
  from tinycore import Device
  try: Device[device]
  except Exception as e: pytest.skip(f"{device} is not usable here: {e}")
  m, run, name = build(), OnnxRunner(build(), device=device), build().graph.output[0].name
  sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
  for i in range(3):  # the first call runs the graph, the second records its kernels, the third replays them
    x = np.random.default_rng(i).standard_normal(shape).astype(np.float32)
    out = run({"x": x})
    assert out[name].device == device
    np.testing.assert_allclose(out[name].numpy(), sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-6)

def test_command_line_runs_and_checks_against_onnxruntime(tmp_path, capsys):
  pytest.importorskip("onnxruntime")
  from tinycore.nn.onnx.__main__ import main
  onnx.save_model(matmul_model(), str(tmp_path / "m.onnx"))
  assert main([str(tmp_path / "m.onnx"), "--check", "--runs", "1", "--dim", "batch=3"]) == 0
  out = capsys.readouterr().out
  assert "output z: shape (3, 4) float32" in out and "kernels" in out and "check z against onnxruntime" in out and ": ok" in out

def test_op_coverage_table_is_current():
  from tinycore.nn.onnx.coverage import render
  doc = (ROOT / "docs" / "onnx.md").read_text()
  assert doc == render(doc), "run `python -m tinycore.nn.onnx.coverage docs/onnx.md` to regenerate the table"

def test_global_average_pool_of_large_values_does_not_overflow():
  # the light SqueezeNet's activations reach 1e36: a sum before the division overflowed to inf, and Softmax gave NaN
  m = model([helper.make_node("GlobalAveragePool", ["x"], ["y"])], [vi("x", shape=(1, 2, 4, 4))], [vi("y", shape=(1, 2, 1, 1))])
  x = np.full((1, 2, 4, 4), 1e38, np.float32)  # their sum, 1.6e39, is past float32
  np.testing.assert_allclose(OnnxRunner(m)({"x": x})["y"].numpy(), x.astype(np.float64).mean((2, 3), keepdims=True), rtol=1e-6)

def test_to_moves_the_initializers():
  run = OnnxRunner(matmul_model((2, 3))).to("PYTHON")
  assert all(t.device == "PYTHON" for t in run.graph.initializers.values())
  assert run({"x": np.ones((2, 3), np.float32)})["z"].device == "PYTHON"

@pytest.mark.parametrize("op, attrs, mean, std", [("RandomNormal", {"mean": 2.0, "scale": 3.0}, 2.0, 3.0),
                                                  ("RandomUniform", {"low": -1.0, "high": 3.0}, 1.0, 4 / 12 ** 0.5)])
def test_random_ops_shape_dtype_and_statistics(op, attrs, mean, std):
  """ONNX's backend tests cannot check random ops (they compare numpy's exact draws): the shape, dtype, mean and std
  of 20000 draws against the distribution's (5 standard errors), the bounds of the uniform, and the *Like forms."""
  m = model([helper.make_node(op, [], ["y"], shape=[100, 200], dtype=TensorProto.DOUBLE, **attrs),
             helper.make_node(op + "Like", ["x"], ["z"], **attrs)], [vi("x", shape=(3, 5))], [vi("y", TensorProto.DOUBLE, (100, 200)), vi("z")])
  out = OnnxRunner(m)({"x": np.zeros((3, 5), np.float32)})
  y, z = out["y"].numpy(), out["z"].numpy()
  assert y.dtype == np.float64 and y.shape == (100, 200) and z.dtype == np.float32 and z.shape == (3, 5)
  assert abs(y.mean() - mean) < 5 * std / 20000 ** 0.5 and abs(y.std() - std) < 0.05 * std
  if op == "RandomUniform": assert y.min() >= -1.0 and y.max() < 3.0

def test_bernoulli_and_multinomial_frequencies():
  """Bernoulli's ones follow p; Multinomial's draws follow softmax(x) (chi-square-like bound per class)."""
  p = np.linspace(0.0, 1.0, 5, dtype=np.float32)
  logits = np.log(np.array([[0.1, 0.2, 0.7]], np.float32))
  m = model([helper.make_node("Tile", ["p", "reps"], ["pt"]), helper.make_node("Bernoulli", ["pt"], ["b"]),
             helper.make_node("Multinomial", ["x"], ["k"], sample_size=6000, dtype=TensorProto.INT64)],
            [vi("p", shape=(1, 5)), vi("x", shape=(1, 3))], [vi("b", shape=(4000, 5)), vi("k", TensorProto.INT64, (1, 6000))],
            [numpy_helper.from_array(np.array([4000, 1], np.int64), "reps")])
  out = OnnxRunner(m)({"p": p.reshape(1, 5), "x": logits})
  b, k = out["b"].numpy(), out["k"].numpy()
  assert b.dtype == np.float32 and set(np.unique(b)) <= {0.0, 1.0}
  np.testing.assert_allclose(b.mean(0), p, atol=5 * 0.5 / 4000 ** 0.5)
  assert k.dtype == np.int64 and k.shape == (1, 6000)
  np.testing.assert_allclose(np.bincount(k[0], minlength=3) / 6000, [0.1, 0.2, 0.7], atol=5 * 0.5 / 6000 ** 0.5)

def test_maps_are_refused_at_load():
  t = helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, [2]))
  m = model([helper.make_node("Identity", ["x"], ["y"])], [helper.make_value_info("x", t)], [helper.make_value_info("y", t)])
  with pytest.raises(NotImplementedError, match="map_type"): OnnxRunner(m)

def test_batchnorm_folds_into_conv_and_constants_fold_at_load():
  """Load-time rewrites (optimize.py): Conv + inference BatchNormalization becomes one Conv, and a node of constants
  only (a Transpose of an initializer, a Constant) runs once at load; the outputs still match float64 torch, and a
  Conv output that a subgraph also reads is left alone."""
  import torch
  rng = np.random.default_rng(3)
  x, w, b = rng.standard_normal((2, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3)), rng.standard_normal(4)
  scale, bias, mean, var = rng.standard_normal(4), rng.standard_normal(4), rng.standard_normal(4), rng.random(4) + 0.5
  wt = rng.standard_normal((5, 4))  # (out, in): the model transposes it
  inits = [numpy_helper.from_array(a.astype(np.float32), k) for k, a in
           dict(w=w, b=b, scale=scale, bias=bias, mean=mean, var=var, wt=wt).items()]
  nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
           helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["n"], epsilon=1e-3),
           helper.make_node("Transpose", ["wt"], ["wt_t"], perm=[1, 0]),
           helper.make_node("Transpose", ["n"], ["nt"], perm=[0, 2, 3, 1]), helper.make_node("MatMul", ["nt", "wt_t"], ["y"])]
  m = model(nodes, [vi("x", shape=(2, 3, 6, 6))], [vi("y", shape=(2, 6, 6, 5))], inits)
  run = OnnxRunner(m)
  assert [n.op_type for _, n, _, _ in run.graph.nodes] == ["Conv", "Transpose", "MatMul"]
  out = run({"x": x.astype(np.float32)})["y"].numpy()
  c = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), padding=1)
  nrm = (c - torch.tensor(mean).view(1, -1, 1, 1)) / torch.sqrt(torch.tensor(var).view(1, -1, 1, 1) + 1e-3)
  ref = (nrm * torch.tensor(scale).view(1, -1, 1, 1) + torch.tensor(bias).view(1, -1, 1, 1)).permute(0, 2, 3, 1) @ torch.tensor(wt).T
  np.testing.assert_allclose(out, ref.numpy(), rtol=1e-4, atol=1e-4)
  # the same Conv output read inside an If branch: the rewrite leaves the pair alone
  branch = helper.make_graph([helper.make_node("Identity", ["c"], ["r"])], "then", [], [vi("r", shape=None)])
  other = helper.make_graph([helper.make_node("Identity", ["n"], ["r2"])], "else", [], [vi("r2", shape=None)])
  cond = numpy_helper.from_array(np.array(True), "cond")
  m2 = model(nodes[:2] + [helper.make_node("If", ["cond"], ["z"], then_branch=branch, else_branch=other)], [vi("x", shape=(2, 3, 6, 6))],
             [vi("z", shape=None)], [*inits, cond])
  run2 = OnnxRunner(m2)
  assert [n.op_type for _, n, _, _ in run2.graph.nodes] == ["Conv", "BatchNormalization", "If"]
  np.testing.assert_allclose(run2({"x": x.astype(np.float32)})["z"].numpy(), c.numpy(), rtol=1e-4, atol=1e-4)

# *** narrow element types (narrow.py): carried unpacked, each cast compared with ml_dtypes' (onnx's reference) ***
NARROW_FLOATS = {TensorProto.FLOAT8E4M3FN: "float8_e4m3fn", TensorProto.FLOAT8E4M3FNUZ: "float8_e4m3fnuz", TensorProto.FLOAT8E5M2: "float8_e5m2",
                 TensorProto.FLOAT8E5M2FNUZ: "float8_e5m2fnuz", TensorProto.FLOAT4E2M1: "float4_e2m1fn"}

def _cast_model(to, n, saturate=None, round_mode=None, src=TensorProto.FLOAT):
  kw = {k: v for k, v in (("saturate", saturate), ("round_mode", round_mode)) if v is not None}
  return model([helper.make_node("Cast", ["x"], ["y"], to=to, **kw)], [vi("x", src, (n,))], [vi("y", to, (n,))], opset=25)

def _floats_across_exponents(seed=0):
  r = np.random.default_rng(seed)
  x = (r.uniform(1, 2, 3000) * 2.0 ** r.integers(-20, 20, 3000) * r.choice([-1, 1], 3000)).astype(np.float32)
  return np.concatenate([x, np.array([0, -0.0, np.inf, -np.inf, np.nan, 448, 460, 470, 240, 57344, 61440, 6, 5, 7], np.float32)])

@pytest.mark.parametrize("code", list(NARROW_FLOATS), ids=list(NARROW_FLOATS.values()))
@pytest.mark.parametrize("saturate", [1, 0])
def test_cast_to_narrow_floats_rounds_as_ml_dtypes(code, saturate):
  ml_dtypes = pytest.importorskip("ml_dtypes")
  from tinycore.nn.onnx.backend import TinycoreBackend
  dt, x = getattr(ml_dtypes, NARROW_FLOATS[code]), _floats_across_exponents()
  fmax = float(ml_dtypes.finfo(dt).max)
  ref = (np.clip(x, -fmax, fmax) if saturate else x).astype(dt).astype(np.float32)
  got = TinycoreBackend.prepare(_cast_model(code, len(x), saturate)).run([x])[0]
  assert got.dtype == dt
  np.testing.assert_array_equal(got.astype(np.float32), ref)

@pytest.mark.parametrize("name, code", [("int4", TensorProto.INT4), ("uint4", TensorProto.UINT4), ("int2", TensorProto.INT2),
                                        ("uint2", TensorProto.UINT2)])
def test_narrow_ints_truncate_and_wrap_as_ml_dtypes_and_round_trip(name, code):
  ml_dtypes = pytest.importorskip("ml_dtypes")
  from tinycore.nn.onnx.backend import TinycoreBackend
  x = np.linspace(-40, 40, 321).astype(np.float32)
  got = TinycoreBackend.prepare(_cast_model(code, len(x))).run([x])[0]
  np.testing.assert_array_equal(got, x.astype(getattr(ml_dtypes, name)))
  back = TinycoreBackend.prepare(_cast_model(TensorProto.FLOAT, len(x), src=code)).run([got])[0]  # an input of the type, unpacked
  np.testing.assert_array_equal(back, got.astype(np.float32))

@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [1, 0])
def test_cast_to_float8e8m0_as_onnx_numpy_helper(round_mode, saturate):
  pytest.importorskip("ml_dtypes")
  from tinycore.nn.onnx.backend import TinycoreBackend
  x = np.concatenate([np.abs(_floats_across_exponents(1)), np.array([2.0 ** 127 * 1.5, 2.0 ** -126, 1e-40, 3.0 * 2 ** 126], np.float32)])
  ref = numpy_helper.to_float8e8m0(x, bool(saturate), round_mode)
  got = TinycoreBackend.prepare(_cast_model(TensorProto.FLOAT8E8M0, len(x), saturate, round_mode)).run([x])[0]
  np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))

def test_quantize_to_int4_saturates_to_its_range():
  from onnx.reference import ReferenceEvaluator
  from tinycore.nn.onnx.backend import TinycoreBackend
  x, scale = np.linspace(-30, 30, 61).astype(np.float32), numpy_helper.from_array(np.array(2.0, np.float32), "s")
  zero = helper.make_tensor("z", TensorProto.INT4, (), [1])
  m = model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], [vi("x", shape=(61,))], [vi("y", TensorProto.INT4, (61,))],
            [scale, zero], opset=21)
  got, ref = TinycoreBackend.prepare(m).run([x])[0], ReferenceEvaluator(m).run(None, {"x": x})[0]
  assert got.min() == -8 and got.max() == 7
  np.testing.assert_array_equal(got, ref)

# *** training ops (ai.onnx.preview.training), training modes and ai.onnx.ml: numpy float64 and ONNX's reference evaluator ***
def _training_model(nodes, inputs, outputs, inits=()):
  g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
  return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.preview.training", 1)])

@pytest.mark.parametrize("step", [0, 3])
def test_adam_updates_two_tensors_as_its_formula(step):
  from tinycore.nn.onnx.backend import TinycoreBackend
  r = np.random.default_rng(step)
  xs, gs, vs, hs = ([r.standard_normal(s).astype(np.float32) for s in ((3,), (2, 2))] for _ in range(4))
  hs = [np.abs(h) for h in hs]
  names = [f"{k}{i}" for k in "xgvh" for i in range(2)]
  node = helper.make_node("Adam", ["r", "t", *names], [f"{k}{i}_new" for k in "xvh" for i in range(2)], domain="ai.onnx.preview.training",
                          alpha=0.8, beta=0.95, epsilon=1e-3, norm_coefficient=0.01, norm_coefficient_post=0.02)
  arrays = [*xs, *gs, *vs, *hs]
  ins = [vi("r", shape=()), vi("t", TensorProto.INT64, ())] + [vi(n, shape=a.shape) for n, a in zip(names, arrays)]
  outs = [vi(o, shape=None) for o in node.output]
  got = TinycoreBackend.prepare(_training_model([node], ins, outs)).run([np.float32(0.1), np.int64(step), *arrays])
  for i in range(2):
    x, g, v, h = (a.astype(np.float64) for a in (xs[i], gs[i], vs[i], hs[i]))
    g = g + 0.01 * x
    v, h = 0.8 * v + 0.2 * g, 0.95 * h + 0.05 * g * g
    lr = 0.1 * np.sqrt(1 - 0.95 ** step) / (1 - 0.8 ** step) if step > 0 else 0.1
    np.testing.assert_allclose(got[i], (x - lr * v / (np.sqrt(h) + 1e-3)) * 0.98, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2 + i], v, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[4 + i], h, rtol=1e-5, atol=1e-6)

def test_gradient_differentiates_the_graph_by_its_inputs():
  from tinycore.nn.onnx.backend import TinycoreBackend
  nodes = [helper.make_node("Sin", ["a"], ["s"]), helper.make_node("Mul", ["s", "b"], ["y"]),
           helper.make_node("Gradient", ["a", "b"], ["da", "db"], domain="ai.onnx.preview.training", xs=["a", "b"], y="y")]
  m = _training_model(nodes, [vi("a", shape=()), vi("b", shape=())], [vi("y", shape=()), vi("da", shape=()), vi("db", shape=())])
  y, da, db = TinycoreBackend.prepare(m).run([np.float32(0.7), np.float32(-1.5)])
  np.testing.assert_allclose([y, da, db], [np.sin(0.7) * -1.5, np.cos(0.7) * -1.5, np.sin(0.7)], rtol=1e-6)

def test_batchnorm_training_mode_uses_batch_statistics():
  from tinycore.nn.onnx.backend import TinycoreBackend
  r = np.random.default_rng(0)
  x, scale, bias, mean, var = r.standard_normal((4, 3, 5)), r.standard_normal(3), r.standard_normal(3), r.standard_normal(3), r.uniform(1, 2, 3)
  node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1, momentum=0.7, epsilon=1e-3)
  m = model([node], [vi(n, TensorProto.DOUBLE, a.shape) for n, a in zip("xsbmv", (x, scale, bias, mean, var))],
            [vi("y", TensorProto.DOUBLE, x.shape), vi("rm", TensorProto.DOUBLE, (3,)), vi("rv", TensorProto.DOUBLE, (3,))], opset=15)
  y, rm, rv = TinycoreBackend.prepare(m).run([x, scale, bias, mean, var])
  bm, bv = x.mean((0, 2)), x.var((0, 2))
  mom, eps = float(np.float32(0.7)), float(np.float32(1e-3))  # ONNX float attributes are float32
  np.testing.assert_allclose(y, (x - bm[:, None]) / np.sqrt(bv[:, None] + eps) * scale[:, None] + bias[:, None], rtol=1e-10)
  np.testing.assert_allclose(rm, mom * mean + (1 - mom) * bm, rtol=1e-10)
  np.testing.assert_allclose(rv, mom * var + (1 - mom) * bv, rtol=1e-10)

def test_dropout_training_mode_keeps_one_minus_ratio_scaled():
  from tinycore.nn.onnx.backend import TinycoreBackend
  node = helper.make_node("Dropout", ["x", "p", "t"], ["y", "mask"])
  m = model([node], [vi("x", shape=(200, 100)), vi("p", shape=()), vi("t", TensorProto.BOOL, ())],
            [vi("y", shape=(200, 100)), vi("mask", TensorProto.BOOL, (200, 100))], opset=13)
  x = np.random.default_rng(0).uniform(1, 2, (200, 100)).astype(np.float32)
  y, mask = TinycoreBackend.prepare(m).run([x, np.float32(0.25), np.bool_(True)])
  assert abs(mask.mean() - 0.75) < 0.02
  np.testing.assert_allclose(y, np.where(mask, x / 0.75, 0), rtol=1e-6)

@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
def test_tree_ensemble_as_onnx_reference(aggregate):
  from onnx.reference import ReferenceEvaluator
  from tinycore.nn.onnx.backend import TinycoreBackend
  # two trees: tree 0 is nodes 0-2 (node 0 splits to nodes 1 and 2, each to two leaves), tree 1 is node 3 (two leaves)
  modes = numpy_helper.from_array(np.array([0, 3, 2, 1], np.uint8), "nodes_modes")
  splits = numpy_helper.from_array(np.array([0.5, -0.2, 0.1, 0.0], np.float64), "nodes_splits")
  weights = numpy_helper.from_array(np.array([1.5, -2.0, 3.0, 0.25, 4.0, -1.0], np.float64), "leaf_weights")
  node = helper.make_node("TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", n_targets=3, aggregate_function=aggregate, tree_roots=[0, 3],
                          nodes_modes=modes, nodes_splits=splits, nodes_featureids=[0, 1, 2, 1], nodes_truenodeids=[1, 0, 2, 4],
                          nodes_trueleafs=[0, 1, 1, 1], nodes_falsenodeids=[2, 1, 3, 5], nodes_falseleafs=[0, 1, 1, 1],
                          leaf_targetids=[0, 1, 2, 0, 1, 2], leaf_weights=weights, nodes_missing_value_tracks_true=[0, 1, 0, 0])
  m = helper.make_model(helper.make_graph([node], "g", [vi("x", TensorProto.DOUBLE, (50, 3))], [vi("y", TensorProto.DOUBLE, (50, 3))]),
                        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)])
  x = np.random.default_rng(aggregate).standard_normal((50, 3))
  x[::7, 1] = np.nan
  np.testing.assert_allclose(TinycoreBackend.prepare(m).run([x])[0], ReferenceEvaluator(m).run(None, {"x": x})[0], rtol=1e-12)

@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
def test_tfidf_vectorizer_as_onnx_reference(mode):
  from onnx.reference import ReferenceEvaluator
  from tinycore.nn.onnx.backend import TinycoreBackend
  # 1-grams 1, 2, 5; 2-grams (1,2), (2,2), (5,1); 3-gram (1,2,2); output columns shuffled
  node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode=mode, min_gram_length=1, max_gram_length=3, max_skip_count=2,
                          ngram_counts=[0, 3, 9], ngram_indexes=[6, 0, 3, 1, 5, 2, 4], pool_int64s=[1, 2, 5, 1, 2, 2, 2, 5, 1, 1, 2, 2],
                          weights=[0.5, 1.0, 2.0, 3.0, 0.25, 1.5, 4.0])
  m = model([node], [vi("x", TensorProto.INT64, (3, 12))], [vi("y", shape=(3, 7))], opset=9)
  x = np.random.default_rng(1).integers(0, 6, (3, 12)).astype(np.int64)
  np.testing.assert_allclose(TinycoreBackend.prepare(m).run([x])[0], ReferenceEvaluator(m).run(None, {"x": x})[0], rtol=1e-6)

def test_flex_attention_with_a_score_mod_graph_as_onnx_reference():
  from onnx.reference import ReferenceEvaluator
  from tinycore.nn.onnx.backend import TinycoreBackend
  mod = helper.make_graph([helper.make_node("Tanh", ["s"], ["t"]), helper.make_node("Mul", ["t", "c"], ["u"])], "mod",
                          [vi("s", shape=(2, 4, 5, 6))], [vi("u", shape=(2, 4, 5, 6))], [numpy_helper.from_array(np.array(3.0, np.float32), "c")])
  node = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain="ai.onnx.preview", score_mod=mod, scale=0.3)
  g = helper.make_graph([node], "g", [vi("q", shape=(2, 4, 5, 8)), vi("k", shape=(2, 2, 6, 8)), vi("v", shape=(2, 2, 6, 3))],
                        [vi("y", shape=(2, 4, 5, 3))])
  m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23), helper.make_opsetid("ai.onnx.preview", 1)])
  r = np.random.default_rng(0)
  q, k, v = (r.standard_normal(s).astype(np.float32) for s in ((2, 4, 5, 8), (2, 2, 6, 8), (2, 2, 6, 3)))
  np.testing.assert_allclose(TinycoreBackend.prepare(m).run([q, k, v])[0], ReferenceEvaluator(m).run(None, {"q": q, "k": k, "v": v})[0],
                             rtol=1e-5, atol=1e-6)

def test_attention_scale_from_shape_and_constant_gathers_cost_no_kernels():
  # as torch's attention exports: scale = sqrt(1 / sqrt(float(shape[-1]))) from Shape on every call, q/k/v split by Gather 0/1/2
  from tinycore import GlobalCounters
  one = numpy_helper.from_array(np.array([1.0], np.float32), "one")
  idx = [numpy_helper.from_array(np.array(i, np.int64), f"i{i}") for i in range(3)]
  nodes = [helper.make_node("Shape", ["x"], ["s"], start=-1), helper.make_node("Cast", ["s"], ["f"], to=TensorProto.FLOAT),
           helper.make_node("Sqrt", ["f"], ["r"]), helper.make_node("Div", ["one", "r"], ["d"]), helper.make_node("Sqrt", ["d"], ["scale"]),
           *[helper.make_node("Gather", ["x", f"i{i}"], [f"g{i}"], axis=0) for i in range(3)],
           helper.make_node("Mul", ["g0", "scale"], ["m"]), helper.make_node("Add", ["m", "g1"], ["a"]), helper.make_node("Sub", ["a", "g2"], ["y"])]
  m = model(nodes, [vi("x", shape=(3, 4, 16))], [vi("y", shape=(4, 16))], [one, *idx])
  x = np.random.default_rng(0).standard_normal((3, 4, 16)).astype(np.float32)
  run, xt = OnnxRunner(m), Tensor(x).realize()
  GlobalCounters.reset()
  y = run({"x": xt})["y"].numpy()
  assert GlobalCounters.kernel_count == 1, "one fused kernel: the scale is a constant, the gathers are views"
  np.testing.assert_allclose(y, x[0] * np.sqrt(1 / np.sqrt(16.0)) + x[1] - x[2], rtol=1e-6)

@pytest.mark.parametrize("cout", [16, 64])
def test_a_conv_weight_is_not_copied_on_every_run(cout):
  # Tensor.conv2d stores a weight in panels of output channels (or channels-last) on a CPU with vectors: the loader keeps
  # it in that layout once
  from tinycore import GlobalCounters
  r = np.random.default_rng(0)
  w, b = r.standard_normal((cout, 8, 3, 3)).astype(np.float32), r.standard_normal(cout).astype(np.float32)
  m = model([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])], [vi("x", shape=(1, 8, 10, 10))],
            [vi("y", shape=(1, cout, 10, 10))], [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
  x = r.standard_normal((1, 8, 10, 10)).astype(np.float32)
  torch = pytest.importorskip("torch")
  run, xt = OnnxRunner(m), Tensor(x).realize()
  run({"x": xt})["y"].realize()
  GlobalCounters.reset()
  y = run({"x": xt})["y"].numpy()
  assert GlobalCounters.kernel_count == 1
  ref = torch.nn.functional.conv2d(*(torch.tensor(a, dtype=torch.float64) for a in (x, w, b)), padding=1)
  np.testing.assert_allclose(y, ref.numpy(), rtol=1e-5, atol=1e-5)

def _relu_matmul_reference(x: np.ndarray) -> np.ndarray:
  return np.maximum(x.astype(np.float64) @ (np.arange(12, dtype=np.float32).reshape(3, 4) / 7).astype(np.float64), 0)

def test_repeated_calls_replay_the_kernels_and_each_output_keeps_its_values(monkeypatch):
  # call 1 runs the graph, call 2 records its kernels, later calls replay them without running the graph; every call's
  # outputs are its own (a replay writes the TinyJit's buffers, the runner hands out copies)
  run = OnnxRunner(matmul_model())
  graph_runs = []
  real_run = run.graph.run
  monkeypatch.setattr(run.graph, "run", lambda values, debug=0: graph_runs.append(1) or real_run(values, debug))
  xs = [np.random.default_rng(i).standard_normal((5, 3)).astype(np.float32) for i in range(6)]
  outs = [run({"x": x})["z"] for x in xs]
  assert len(graph_runs) == 2, "calls 3 to 6 replay the captured kernels"
  for x, out in zip(xs, outs): np.testing.assert_allclose(out.numpy(), _relu_matmul_reference(x), rtol=1e-6)
  other = np.random.default_rng(9).standard_normal((2, 3)).astype(np.float32)  # another batch size: its own capture
  np.testing.assert_allclose(run({"x": other})["z"].numpy(), _relu_matmul_reference(other), rtol=1e-6)
  assert len(graph_runs) == 3

def test_jit_false_runs_the_graph_every_call_and_gives_lazy_outputs():
  run = OnnxRunner(matmul_model(), jit=False)
  x = np.ones((2, 3), np.float32)
  outs = [run({"x": x})["z"] for _ in range(3)]
  assert not any(o.lazydata.is_realized() for o in outs)
  np.testing.assert_allclose(outs[-1].numpy(), _relu_matmul_reference(x), rtol=1e-6)

def test_user_tinyjit_around_the_runner_replays_it():
  # tinygrad's way: TinyJit(lambda x: run({...})[...].realize()); the runner runs plainly while that TinyJit captures
  from tinycore import TinyJit
  run = OnnxRunner(matmul_model())
  jit = TinyJit(lambda x: run({"x": x})["z"].realize())
  for i in range(5):
    x = np.random.default_rng(i).standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(jit(Tensor(x)).numpy(), _relu_matmul_reference(x), rtol=1e-6)
  assert len(jit.jit_cache) == 1

def test_a_run_that_reads_device_values_is_not_replayed():
  # NonZero's output length is read from the device: inputs of one shape need other kernels (and another output shape)
  run = OnnxRunner(model([helper.make_node("NonZero", ["x"], ["y"])], [vi("x", shape=(6,))], [vi("y", TensorProto.INT64, shape=(1, None))]))
  for i in range(4):
    x = (np.random.default_rng(i).standard_normal(6) > 0).astype(np.float32)
    np.testing.assert_array_equal(run({"x": x})["y"].numpy(), np.stack(np.nonzero(x)))
  assert list(run._jits.values()) == [None]

def test_an_identity_model_under_the_runners_jit():
  # the TinyJit refuses to capture a function returning its input unchanged: the runner then runs the graph plainly
  run = OnnxRunner(model([helper.make_node("Identity", ["x"], ["y"])], [vi("x")], [vi("y")]))
  for i in range(4):
    x = np.full((2, 3), i, np.float32)
    np.testing.assert_array_equal(run({"x": x})["y"].numpy(), x)

def test_a_layer_norm_before_a_matmul_is_computed_once():
  # the scheduler fuses elementwise ops into the product's loads, once per output column: a normalization before a wide
  # head cost the Transformer encoder 8.9 of its 11 ms; the product's operand is now computed once
  from tinycore import GlobalCounters
  r = np.random.default_rng(0)
  x, w = r.standard_normal((4, 64)).astype(np.float32), r.standard_normal((64, 512)).astype(np.float32)
  g, b = r.standard_normal(64).astype(np.float32), r.standard_normal(64).astype(np.float32)
  m = model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"]), helper.make_node("MatMul", ["n", "w"], ["y"])],
            [vi("x", shape=(4, 64))], [vi("y", shape=(4, 512))], [numpy_helper.from_array(a, k) for a, k in ((w, "w"), (g, "g"), (b, "b"))])
  run = OnnxRunner(m, jit=False)
  xt = Tensor(x).realize()
  run({"x": xt})["y"].realize()
  GlobalCounters.reset()
  y = run({"x": xt})["y"].numpy()
  assert GlobalCounters.global_ops < 1.5 * 2 * 4 * 64 * 512, f"{GlobalCounters.global_ops} operations: the normalization ran per column"
  x64 = x.astype(np.float64)
  n = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5) * g + b
  np.testing.assert_allclose(y, n @ w, rtol=1e-4, atol=1e-4)
