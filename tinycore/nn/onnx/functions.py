"""ONNX ops that ONNX defines as a function of other ops, expanded into those ops when a model loads.

An op tinycore does not implement itself but whose schema (in the installed onnx package) has a function body for the
model's opset, fixed or context-dependent (built for the node's attributes and input types), is replaced by the body's
nodes, as onnx's own `_expanded` test models are built:
- the body's formal inputs and outputs become the node's actual values (an absent optional one, ""), and every other
  value, in nested subgraphs too, gets a prefix unique to the node;
- an attribute that refers to one of the op's attributes (`ref_attr_name`) takes the node's value, or the schema's
  default where the node sets none (and is left out where there is no default);
- the expanded nodes go through the same load-time checks as any others, and are expanded in turn where needed.
Only ops without an implementation of their own are expanded: a registered implementation always wins."""
from __future__ import annotations
from typing import Any, Callable
import onnx
from onnx import AttributeProto, FunctionProto, NodeProto, TypeProto, defs, helper

def body(node: NodeProto, opset: int, types: dict[str, TypeProto]) -> tuple[FunctionProto, dict[str, AttributeProto]] | None:
  """The function body of node's op at `opset` and the op's attribute defaults, or None where its schema has no body
  (or the op is unknown there, or a context-dependent body needs an input type that is not known)."""
  try: schema = defs.get_schema(node.op_type, opset, node.domain)
  except defs.SchemaError: return None
  fn = FunctionProto()
  if schema.has_function: fn.ParseFromString(schema.get_function_with_opset_version(max(v for v in schema.function_opset_versions if v <= opset)))
  elif schema.has_context_dependent_function:
    if any(i and i not in types for i in node.input): return None  # the input types it needs are unknown
    versions = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    if not versions: return None
    with_defaults = NodeProto()
    with_defaults.CopyFrom(node)
    with_defaults.attribute.extend(a.default_value for n, a in schema.attributes.items()
                                   if n not in {x.name for x in node.attribute} and a.default_value.name)
    ins = [types[i].SerializeToString() if i else TypeProto().SerializeToString() for i in node.input]
    fn.ParseFromString(schema.get_context_dependent_function_with_opset_version(max(versions), with_defaults.SerializeToString(), ins))
  else: return None
  return fn, {n: a.default_value for n, a in schema.attributes.items() if a.default_value.name}

def expand(node: NodeProto, fn: FunctionProto, defaults: dict[str, AttributeProto], prefix: str) -> list[NodeProto]:
  """fn's nodes, wired to node's inputs and outputs, their other values prefixed, attribute references resolved."""
  outer = {f: (node.input[i] if i < len(node.input) else "") for i, f in enumerate(fn.input)}
  outer.update({f: node.output[i] for i, f in enumerate(fn.output) if i < len(node.output) and node.output[i]})
  attrs = {a.name: a for a in node.attribute}
  def rename(name: str) -> str: return outer.get(name, prefix + name) if name else ""
  return [_rewire(n, rename, attrs, defaults) for n in fn.node]

def _rewire(n: NodeProto, rename: Callable[[str], str], attrs: dict[str, AttributeProto], defaults: dict[str, AttributeProto]) -> NodeProto:
  out = helper.make_node(n.op_type, [rename(i) for i in n.input], [rename(o) for o in n.output], domain=n.domain)
  for a in n.attribute:
    if a.ref_attr_name:
      src = attrs.get(a.ref_attr_name, defaults.get(a.ref_attr_name))
      if src is None: continue
      new = AttributeProto()
      new.CopyFrom(src)
      new.name = a.name
      out.attribute.append(new)
    elif a.type == AttributeProto.GRAPH: out.attribute.append(helper.make_attribute(a.name, _regraph(a.g, rename, attrs, defaults)))
    else: out.attribute.append(a)
  return out

def _regraph(g: onnx.GraphProto, rename: Callable[[str], str], attrs: dict[str, AttributeProto], defaults: dict[str, AttributeProto]) -> Any:
  new = onnx.GraphProto()
  new.CopyFrom(g)
  for vi in [*new.input, *new.output, *new.value_info]: vi.name = rename(vi.name)
  for t in new.initializer: t.name = rename(t.name)
  del new.node[:]
  new.node.extend(_rewire(n, rename, attrs, defaults) for n in g.node)
  return new
