"""OnnxRunner: an ONNX model loaded into tinycore Tensor ops.

Loading (`OnnxRunner(path)`) does every check that can fail before the model runs, so that an unsupported model is
refused at once and never halfway through a run:
- the model is parsed with the `onnx` package (the extra `tinycore[onnx]`); external data files next to the model load with it;
- every node finds its implementation for the model's opset (registry.find): an op, op version or attribute tinycore
  lacks raises NotImplementedError naming the op, its version, the opset and the node; subgraphs (If, Loop) are checked too;
  an op without an implementation whose ONNX schema defines it as a function of other ops is expanded into them first
  (functions.py);
- every element type the model names (inputs, outputs, initializers, intermediate values, Cast targets) must have a
  tinycore dtype the device declares (`is_dtype_supported`), else DTypeError naming the value and the device; values
  are tensors, sequences of tensors (Python lists) or optional values (None when empty), not maps;
- initializers become Tensors on the device; then optimize.py folds BatchNormalization into Conv and runs the nodes
  whose inputs are all constants once, so that runs do not repeat them; small integer initializers are host values
  (shapes.py: shape arithmetic runs on the host, not as kernels).
Running (`runner({"input": x})`) binds the inputs (numpy arrays and lists are converted to the input's dtype; a Tensor
must have it), checks their shapes against the model (a named dim, such as "batch", takes the same size everywhere
it appears), runs the nodes in the graph's order and returns {output name: Tensor}.

The runner replays its kernels (`jit=True`, the default): calls with the same input signature (names, shapes, dtypes,
devices, views) go through one TinyJit (engine/jit.py) each: the first runs the graph and realizes the outputs, the
second records its kernels, later ones launch them again without building or scheduling the graph. The outputs of the
second call on are copies of the TinyJit's output buffers (the next replay overwrites those); the TinyJits of the
JIT_SIGNATURES signatures seen last are kept. A signature runs plainly instead, on every call, when its first run read
a value computed on the device into Python (If's condition, NonZero's count: tensors.DeviceReads; the next inputs may
need other kernels), when an output is not a Tensor, or when TinyJit refuses the capture (an output that is an input).
A single call runs plainly when an input needs a gradient, with `debug`, or while another TinyJit captures
(`TinyJit(lambda x: runner(...)...)` records the graph's kernels itself, as in tinygrad). `jit=False`: every call runs
the graph, and the outputs are lazy Tensors."""
from __future__ import annotations
import pathlib
from typing import Any, TYPE_CHECKING
import numpy as np
from tinycore.tensor import Tensor
from tinycore.lazy import LazyBuffer
from tinycore.device import Buffer, Device, is_dtype_supported
from tinycore.engine import realize as _realize
from tinycore.engine.jit import JitError, TinyJit
from tinycore.dtype import DType, dtypes
from tinycore.errors import DTypeError, ShapeError
from tinycore.helpers import DEBUG
from tinycore.nn.onnx import registry
from tinycore.nn.onnx import elementwise, reduce, movement, nn, resize, gridsample, control, attention, extra, recurrent  # noqa: F401
from tinycore.nn.onnx import spectral, detection, sequence, randomness, training, ml  # noqa: F401  (each module registers its ops)
from tinycore.nn.onnx.tensors import DeviceReads, constant, dtype_of, host_kind, remember
from tinycore.nn.onnx.narrow import NARROW, to_carrier
from tinycore.nn.onnx.optimize import optimize
from tinycore.nn.onnx import shapes
if TYPE_CHECKING: import onnx

JIT_SIGNATURES = 4  # input signatures whose TinyJit (and its buffers) a runner keeps

def import_onnx() -> Any:
  """The onnx package, or an ImportError saying how to install it."""
  try: import onnx
  except ImportError as e:
    raise ImportError("tinycore.nn.onnx parses models with the onnx package: pip install 'tinycore[onnx]' (or pip install onnx)") from e
  return onnx

def tensor_from_proto(t: onnx.TensorProto, device: str, what: str) -> Tensor:
  """A TensorProto (an initializer or a tensor attribute) as a Tensor on `device`."""
  from onnx import numpy_helper
  dt = dtype_of(t.data_type, what)
  arr = numpy_helper.to_array(t)
  if t.data_type in NARROW: arr = to_carrier(arr, t.data_type)
  if dt == dtypes.bfloat16: return Tensor(np.array(arr, order="C").view(np.uint16), device=device).bitcast(dtypes.bfloat16)
  return Tensor(np.array(arr, order="C"), device=device, dtype=dt)  # not ascontiguousarray: it makes a 0-d array 1-d

class Graph:
  """The nodes of one ONNX graph, each with its implementation and attributes, checked when the model loads."""
  def __init__(self, g: onnx.GraphProto, opset: dict[str, int], device: str, outer: set[str] | None = None,
               outer_types: dict[str, onnx.TypeProto] | None = None):
    from onnx import helper, AttributeProto
    from tinycore.nn.onnx import functions  # imports onnx
    self.name, self.device, self.opset = g.name, device, opset
    self.initializers = {t.name: tensor_from_proto(t, device, f"initializer {t.name!r}") for t in g.initializer}
    self.inputs = {i.name: i.type for i in g.input if i.name not in self.initializers}
    self.outputs = [o.name for o in g.output]
    for vi in [*g.input, *g.output, *g.value_info]:
      what = f"value {vi.name!r}"
      if (tt := _tensor_type(vi.type, what)) is not None: self._check_dtype(dtype_of(tt.elem_type, what), what)
    for name, t in self.initializers.items(): self._check_dtype(t.dtype, f"initializer {name!r}")
    known = set(self.initializers) | set(self.inputs) | (outer or set())
    self.nodes: list[tuple[registry.OpImpl, onnx.NodeProto, dict[str, Any], dict[str, Any]]] = []
    types = {**(outer_types or {}), **{vi.name: vi.type for vi in [*g.input, *g.output, *g.value_info]},
             **{t.name: helper.make_tensor_type_proto(t.data_type, t.dims) for t in g.initializer}}
    pending, i = list(g.node), 0
    while pending:
      n, i = pending.pop(0), i + 1
      label = n.name or f"#{i} ({n.op_type})"
      op_opset = opset.get(n.domain or "", opset.get("ai.onnx", 1))
      if n.op_type not in registry.REGISTRY and n.domain in registry.DEFAULT_DOMAINS and (fn := functions.body(n, op_opset, types)) is not None:
        pending[:0] = functions.expand(n, *fn, prefix=f"{label}/")
        continue
      attrs: dict[str, Any] = {}
      for a in n.attribute:
        if a.type == AttributeProto.GRAPH: attrs[a.name] = Graph(a.g, opset, device, known, types)
        elif a.type == AttributeProto.TENSOR: attrs[a.name] = tensor_from_proto(a.t, device, f"attribute {a.name} of node {label!r}")
        elif a.type == AttributeProto.TYPE_PROTO: attrs[a.name] = a.tp
        elif a.type in (AttributeProto.STRING, AttributeProto.FLOAT, AttributeProto.INT, AttributeProto.FLOATS, AttributeProto.INTS,
                        AttributeProto.STRINGS):
          v = helper.get_attribute_value(a)
          attrs[a.name] = v.decode() if isinstance(v, bytes) else [s.decode() for s in v] if a.type == AttributeProto.STRINGS else v
        else:
          kind = AttributeProto.AttributeType.Name(a.type)
          raise NotImplementedError(f"ONNX op {n.op_type} in node {label!r}: attribute {a.name} of type {kind} is not supported")
      impl = registry.find(n.op_type, n.domain, op_opset, label, attrs)
      if impl.name == "Cast": self._check_dtype(dtype_of(attrs["to"], f"Cast in node {label!r}"), f"Cast target in node {label!r}")
      version = registry.op_version(n.op_type, "" if n.domain in registry.DEFAULT_DOMAINS else n.domain, op_opset)
      private = {k: v for k, v in (("_noutputs", len(n.output)), ("_version", version),
                                   ("_out_types", [elem_type(types.get(o)) for o in n.output])) if k in impl.private}
      self.nodes.append((impl, n, attrs, private))
      known |= set(n.output)
    optimize(self)
    self._mark_constants()

  def _mark_constants(self) -> None:
    for t in self.initializers.values():
      constant(t)
      if host_kind(t): remember(t, t.tolist())
    for _, _, attrs, _ in self.nodes:
      for v in attrs.values():
        if isinstance(v, Tensor): constant(v)

  def _check_dtype(self, dt: DType, what: str) -> None:
    if not is_dtype_supported(dt, self.device):
      raise DTypeError(f"the model needs {dt.name} for {what}, which device {self.device} does not declare (its renderer supports "
                       f"{', '.join(d.name for d in Device[self.device].renderer.supported_dtypes())})")

  def run(self, values: dict[str, Tensor], debug: int = 0) -> dict[str, Tensor]:
    """Run every node on `values` (inputs, initializers and any outer scope), adding their outputs; returns `values`."""
    values.update(self.initializers)
    for impl, n, attrs, private in self.nodes:
      args = [values[name] if name else None for name in n.input]
      if impl.scoped: private = {**private, "_scope": values}
      out = shapes.run_on_host(n.op_type, args, attrs)  # shape arithmetic stays on the host (shapes.py)
      if out is None: out = impl.fn(*args, **attrs, **private)
      outs = out if isinstance(out, tuple) else (out,)
      if len(outs) < len(n.output):
        raise NotImplementedError(f"ONNX op {n.op_type} in node {n.name!r}: gives {len(outs)} outputs, the node asks for {len(n.output)}")
      for name, t in zip(n.output, outs):
        if name: values[name] = t
      if debug: print(f"{n.op_type:>20} {n.name!r}: " + ", ".join(f"{o} {_describe(t)}" for o, t in zip(n.output, outs) if o))
    return values

  def to(self, device: str) -> None:
    self.device = device
    self.initializers = {k: v.to(device) for k, v in self.initializers.items()}
    for _, _, attrs, _ in self.nodes:
      for k, v in attrs.items():
        if isinstance(v, Tensor): attrs[k] = v.to(device)
        elif isinstance(v, Graph): v.to(device)
    self._mark_constants()

def _load(model: Any) -> onnx.ModelProto:
  onnx = import_onnx()
  if isinstance(model, onnx.ModelProto): return model
  if isinstance(model, Tensor): return onnx.load_from_string(model.numpy().tobytes())
  if isinstance(model, (bytes, bytearray)): return onnx.load_from_string(bytes(model))
  return onnx.load(str(pathlib.Path(model)), load_external_data=True)

class OnnxRunner:
  """Runs an ONNX model with tinycore: `OnnxRunner("model.onnx")({"input": x})` -> {output name: Tensor}.

  model: a path (str or Path; external data files are read from its folder), the model's bytes (bytes or a uint8
  Tensor) or an onnx.ModelProto. device: where initializers live and the model runs (Device.DEFAULT when None).
  jit: replay the kernels of calls with the same input shapes (see the module docstring); False runs the graph every call."""
  def __init__(self, model: Tensor | str | pathlib.Path | bytes | onnx.ModelProto, device: str | None = None, jit: bool = True):
    self.jit, self._read_data = jit, False
    self._jits: dict[tuple, TinyJit | None] = {}  # input signature -> its TinyJit (None: it runs plainly), oldest first
    proto = _load(model)
    self.opset = {(o.domain or ""): o.version for o in proto.opset_import}
    self.device = Device.canonicalize(device) if device is not None else Device.DEFAULT
    try:
      from onnx import shape_inference
      proto = shape_inference.infer_shapes(proto)  # value_info for every intermediate: their dtypes are checked at load
    except Exception: pass  # a model the inference cannot follow still loads; its intermediates are then checked as they run
    self.graph = Graph(proto.graph, self.opset, self.device)
    self._inputs = {k: (_dims(t), dtype_of(_tensor_type(t, k).elem_type, k)) for k, t in self.graph.inputs.items()}  # (read on every call)

  @property
  def inputs(self) -> dict[str, tuple[tuple[int | str | None, ...] | None, DType]]:
    """{name: (shape, dtype)} of the inputs to give (initializers excluded); a dim is an int, a name, or None when unknown;
    the shape is None where the model does not give it, or where the input is a sequence or an optional value (the dtype
    is then its tensors')."""
    return dict(self._inputs)
  @property
  def outputs(self) -> list[str]: return list(self.graph.outputs)

  def to(self, device: str | None) -> OnnxRunner:
    """Move the initializers to `device` (Device.DEFAULT when None); later runs use it."""
    self.device = Device.canonicalize(device) if device is not None else Device.DEFAULT
    self.graph.to(self.device)
    self._jits.clear()  # the captured kernels read the old initializers
    return self

  def _bind(self, name: str, value: Any, bound: dict[str, int]) -> Any:
    shape, dt = self._inputs[name]
    kind = self.graph.inputs[name].WhichOneof("value")
    code = _tensor_type(self.graph.inputs[name], name).elem_type
    if kind == "optional_type" and value is None: return None
    if kind == "sequence_type" or (kind == "optional_type" and self.graph.inputs[name].optional_type.elem_type.HasField("sequence_type")):
      return [self._tensor(name, v, dt, code) for v in value]
    t = self._tensor(name, value, dt, code)
    if shape is None: return t
    if len(shape) != t.ndim: raise ShapeError(f"ONNX input {name!r} has shape {shape}, got {tuple(t.shape)}")
    for i, (want, got) in enumerate(zip(shape, t.shape)):
      if isinstance(want, str) and bound.setdefault(want, got) != got:
        raise ShapeError(f"ONNX input {name!r} dim {i} is {want!r}, bound to {bound[want]} by an earlier input, got {got}")
      if isinstance(want, int) and want != got: raise ShapeError(f"ONNX input {name!r} has shape {shape}, got {tuple(t.shape)}")
    return t

  def _tensor(self, name: str, value: Any, dt: DType, code: int) -> Tensor:
    if isinstance(value, Tensor):
      if value.dtype != dt: raise DTypeError(f"ONNX input {name!r} is {dt.name}, got a Tensor of {value.dtype.name}")
      return value.to(self.device) if value.device != self.device else value
    if dt == dtypes.bfloat16: return Tensor(np.asarray(value).astype(np.float32), device=self.device).cast(dt)  # numpy has no bfloat16
    if code in NARROW: return Tensor(to_carrier(value, code), device=self.device)
    return Tensor(np.asarray(value), device=self.device).cast(dt)

  def __call__(self, inputs: dict[str, Any], debug: int | bool = False) -> dict[str, Tensor]:
    """Run the model on `inputs` ({name: Tensor, numpy array or list}); returns {output name: Tensor}: realized under the
    runner's TinyJit, else lazy (see the module docstring). debug (or DEBUG>=3) prints each node's outputs' shapes."""
    if (missing := [k for k in self._inputs if k not in inputs]):
      raise ValueError(f"ONNX model inputs missing: {', '.join(missing)} (it takes {', '.join(self.inputs)})")
    if (unknown := [k for k in inputs if k not in self._inputs and k not in self.graph.initializers]):
      raise ValueError(f"not inputs of the ONNX model: {', '.join(unknown)} (it takes {', '.join(self.inputs)})")
    bound: dict[str, int] = {}
    values = {k: self._bind(k, v, bound) for k, v in inputs.items() if k in self._inputs}
    values.update({k: _as_tensor(v, self.device) for k, v in inputs.items() if k not in self._inputs})
    debug = int(debug) or int(DEBUG.value >= 3)
    if not self.jit or debug or _realize.capturing or not all(isinstance(v, Tensor) and not v.requires_grad for v in values.values()):
      return self._run(values, debug)
    names = sorted(values)
    key = tuple((k, tuple(values[k].shape), values[k].dtype, values[k].device, values[k].lazydata.st) for k in names)
    if key not in self._jits:
      if len(self._jits) >= JIT_SIGNATURES: del self._jits[next(iter(self._jits))]  # the oldest signature's buffers go
      self._jits[key] = TinyJit(lambda *ts: self._traced(dict(zip(names, ts))))
    if (jit := self._jits[key]) is None: return self._run(values, debug)
    was, self._read_data = jit.cnt, False  # (cnt >= 1: this call captures or replays; its outputs are the TinyJit's buffers)
    try: out = jit(*(values[k] for k in names))
    except JitError:  # inputs sharing one buffer, an output that is an input: this signature runs plainly
      self._jits[key] = None
      return self._run(values, debug)
    if was < 2 and (self._read_data or not all(isinstance(t, Tensor) for t in out.values())): self._jits[key] = None
    return {k: _copy(t) for k, t in out.items()} if was >= 1 else out

  def _run(self, values: dict[str, Any], debug: int = 0) -> dict[str, Tensor]:
    values = self.graph.run(dict(values), debug)
    return {k: values[k] for k in self.graph.outputs}

  def _traced(self, values: dict[str, Tensor]) -> dict[str, Tensor]:
    """_run, noting in _read_data whether an op read a run-time device value into Python (the run depends on the data)."""
    before = DeviceReads.count
    out = self._run(values)
    self._read_data = DeviceReads.count != before
    return out

def _copy(t: Tensor) -> Tensor:
  """A TinyJit's output with its own buffer (the next replay overwrites the TinyJit's): a copy of the buffer, no kernel;
  the same view of it where the output is a view. An output without a buffer (a constant) is itself."""
  lb = t.lazydata
  if not (isinstance(lb, LazyBuffer) and lb.is_realized()): return t
  src = lb.base.buffer
  buf = Buffer(src.device, src.size, src.dtype)
  buf.copy_from(src)
  base = LazyBuffer.from_buffer(buf, lb.base.shape)
  return Tensor(base if lb._base is None else LazyBuffer(lb.device, lb.st, lb.dtype, base=base))

def _as_tensor(v: Any, device: str) -> Tensor: return v if isinstance(v, Tensor) else Tensor(np.asarray(v), device=device)

def _tensor_type(t: onnx.TypeProto, what: str) -> Any:
  """The tensor type of a tensor value, or of the elements of a sequence or optional value; None where the type is not
  given; NotImplementedError for maps and sparse tensors."""
  kind = t.WhichOneof("value")
  if kind is None: return None
  if kind == "tensor_type": return t.tensor_type
  if kind in ("sequence_type", "optional_type"): return _tensor_type(getattr(t, kind).elem_type, what)
  raise NotImplementedError(f"{what} is a {kind}: only tensors, sequences of tensors and optional values are supported")

def elem_type(t: onnx.TypeProto | None) -> int:
  """The ONNX element type of a tensor value's type (of a sequence's or optional's tensors), 0 where not known."""
  tt = _tensor_type(t, "") if t is not None else None
  return tt.elem_type if tt is not None else 0

def _describe(v: Any) -> str:
  if isinstance(v, Tensor): return f"{tuple(v.shape)} {v.dtype.name}"
  return "empty optional" if v is None else f"sequence of {len(v)}: " + ", ".join(_describe(t) for t in v)

def _dims(t: onnx.TypeProto) -> tuple[int | str | None, ...] | None:
  if t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField("shape"): return None
  return tuple(d.dim_value if d.HasField("dim_value") else d.dim_param if d.HasField("dim_param") else None for d in t.tensor_type.shape.dim)
