"""The differentiable primitives. Each Function computes forward on LazyBuffers and, side by side, backward: the
gradient of its inputs from the gradient of its output. Everything else in Tensor is composed of these.

The rules the autograd follows:
- apply() (Tensor._apply does the work) records the Function as the output's `_ctx` (its `parents` are the input
  Tensors) when the output is float, some input is differentiable (a float tensor whose requires_grad is not False), the
  Function is differentiable and Tensor.no_grad is off. Otherwise nothing is recorded and the output is a leaf.
- backward(grad) takes and returns Tensors (None for an input that needs no gradient). It reads its inputs from
  `self.parents` and its output from `self.out()`, never from the LazyBuffers forward saw, and builds the gradient
  with Functions applied to those Tensors: the gradient is recorded like any other computation, so it can be
  differentiated again (second order). Under Tensor.no_grad (as Tensor.backward runs it) the same code records nothing.
- An output computed from float tensors without a recorded Function (a comparison, an integer result, detach,
  const_like, an op on detached tensors only) records a Link instead: it carries no gradient, but backward() sees the
  inputs it leads to and gives them a zero .grad, as tinygrad 0.14 does for every float tensor in the graph.
- A Function keeps only what backward needs besides its parents: shapes and axes, and `self.ret` (the output
  LazyBuffer) where the gradient is written in terms of the output."""
from __future__ import annotations
import math, weakref
from typing import TYPE_CHECKING, Any, Callable, ClassVar
from tinycore.dtype import dtypes
from tinycore.helpers import argsort
from tinycore.lazy import LazyBuffer
from tinycore.multi import MultiLazyBuffer, to_devices
from tinycore.ops import Ops
if TYPE_CHECKING: from tinycore.tensor import Tensor

class Function:
  differentiable: ClassVar[bool] = True  # False: the output never records a graph (comparisons, integer ops)
  parents: tuple[Tensor, ...]
  needs_input_grad: tuple[bool, ...]
  ret: LazyBuffer
  def forward(self, *args: Any, **kwargs: Any) -> LazyBuffer: raise NotImplementedError(f"forward not implemented for {type(self)}")
  def backward(self, grad: Tensor) -> Any: raise RuntimeError(f"backward not implemented for {type(self)}")

  @classmethod
  def apply(cls, *x: Tensor, **kwargs: Any) -> Tensor:
    """forward on the inputs' LazyBuffers, the result wrapped (and this Function recorded) by the inputs' Tensor class:
    the container does the wrapping (Tensor._apply), so this module needs no Tensor."""
    return type(x[0])._apply(cls, *x, **kwargs)

  def out(self) -> Tensor:
    """The output as a Tensor recorded with this Function: a gradient built from it stays connected to the inputs."""
    return type(self.parents[0])._output_of(self)

class Link(Function):
  """A dependency without a gradient (see the rules above). Its parents are held, as a recorded Function holds its
  own, except a realized leaf, held weakly: holding it would keep a chain of steps alive (`t = t + 1` in a loop, each t
  realized); a leaf gone is no longer in the graph (in tinygrad a tensor nobody holds gets no .grad either)."""
  differentiable = False
  def __init__(self, *parents: Tensor): self.parents = parents
  @property  # type: ignore[override]
  def parents(self) -> tuple[Tensor, ...]: return tuple(p for r in self._refs if (p := r() if isinstance(r, weakref.ref) else r) is not None)
  @parents.setter
  def parents(self, parents: tuple[Tensor, ...]) -> None:
    self._refs = tuple(weakref.ref(p) if p._ctx is None and p.lazydata.is_realized() else p for p in parents)
    self.needs_input_grad = (False,) * len(parents)

def _const(like: Tensor, val: float) -> Tensor:
  """A constant of like's shape, dtype and device, cut from the graph."""
  T = type(like)
  return T(like.lazydata.const(val), requires_grad=False)

class Contiguous(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer: return x.contiguous()
  def backward(self, grad: Tensor) -> Tensor: return grad

class Clone(Function):
  """A fresh buffer holding a copy of x, even when x is already a realized contiguous buffer."""
  def forward(self, x: LazyBuffer) -> LazyBuffer: return LazyBuffer.metaop(Ops.CONTIGUOUS, x.shape, x.dtype, x.device, srcs=(x,))
  def backward(self, grad: Tensor) -> Tensor: return grad

class Assign(Function):
  """x written into the buffer `target` (a LazyBuffer, or None to take x as it is): the gradient goes to x, as the
  written tensor now holds x's values. `old` (what the tensor held, detached) is a parent without a gradient: the graph
  still reaches it, as tinygrad's assign reaches its target (backward() gives it a zero .grad)."""
  def forward(self, x: LazyBuffer, old: LazyBuffer, target: LazyBuffer | None = None) -> LazyBuffer: return x if target is None else target.assign(x)
  def backward(self, grad: Tensor) -> tuple[Tensor, None]: return grad, None

class ContiguousBackward(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer: return x
  def backward(self, grad: Tensor) -> Tensor: return Contiguous.apply(grad)

class Cast(Function):
  def forward(self, x: LazyBuffer, dtype: Any, bitcast: bool = False) -> LazyBuffer:
    self.input_dtype, self.bitcast = x.dtype, bitcast
    return x.cast(dtype, bitcast)
  def backward(self, grad: Tensor) -> Tensor | None:
    # reinterpreted bits have no derivative: the gradient stops there (as a cast through an integer dtype does)
    return None if self.bitcast else Cast.apply(grad, dtype=self.input_dtype)

class Composite(Function):
  """An op composed of other ops whose gradient is given by a rule instead of taken through its pieces (conv2d: through
  its windows, the input gradient is a reduce into a tensor k*k times the input's size and a fold of it). forward takes
  the value the caller computed from the inputs without recording it; rule(grad, *parents, needs=needs_input_grad)
  returns one gradient (or None) per parent, built of Functions as every backward is (so it differentiates again)."""
  def forward(self, *x: LazyBuffer, value: LazyBuffer, rule: Callable[..., tuple]) -> LazyBuffer:
    self.rule = rule
    return value
  def backward(self, grad: Tensor) -> Any:
    gs = self.rule(grad, *self.parents, needs=self.needs_input_grad)
    return gs if len(self.parents) > 1 else gs[0]

# *** unary ***
class Neg(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer: return x.alu(Ops.NEG)
  def backward(self, grad: Tensor) -> Tensor: return Neg.apply(grad)

class Reciprocal(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    self.ret = x.alu(Ops.RECIP)
    return self.ret
  def backward(self, grad: Tensor) -> Tensor:
    r = self.out()
    return Mul.apply(Mul.apply(Neg.apply(grad), r), r)

class Log2(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer: return x.alu(Ops.LOG2)
  def backward(self, grad: Tensor) -> Tensor:
    x, = self.parents
    return Mul.apply(grad, Reciprocal.apply(Mul.apply(x, _const(x, math.log(2)))))

class Exp2(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    self.ret = x.alu(Ops.EXP2)
    return self.ret
  def backward(self, grad: Tensor) -> Tensor: return Mul.apply(Mul.apply(self.out(), grad), _const(grad, math.log(2)))

class Trunc(Function):
  """Round toward zero; its gradient is zero (as torch). Floats beyond 2^mantissa bits (and inf, NaN) are already
  integral; the others go through the narrowest int that holds them: int32 for float32 and narrower, which every
  device has (int64 is optional: WebGPU lacks it), int64 for float64."""
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    if not dtypes.is_float(x.dtype): return x
    wide = x.dtype.itemsize > 4
    small = x.alu(Ops.MAX, x.alu(Ops.NEG)).alu(Ops.CMPLT, x.const(2.0 ** (52 if wide else 23)))
    return small.alu(Ops.WHERE, x.cast(dtypes.int64 if wide else dtypes.int32).cast(x.dtype), x)
  def backward(self, grad: Tensor) -> Tensor: return _const(grad, 0)

class Sin(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer: return x.alu(Ops.SIN)
  def backward(self, grad: Tensor) -> Tensor:
    x, = self.parents
    # cos(x) = sin(pi/2 - x)
    return Mul.apply(Sin.apply(Add.apply(_const(x, math.pi / 2), Neg.apply(x))), grad)

class Relu(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    self.ret = x.alu(Ops.MAX, x.const(0))
    return self.ret
  def backward(self, grad: Tensor) -> Tensor:
    # the mask is piecewise constant: it carries no gradient of its own
    return Mul.apply(type(grad)(self.ret.const(0).alu(Ops.CMPLT, self.ret).cast(grad.dtype), requires_grad=False), grad)

class Log(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer: return x.alu(Ops.LOG2).alu(Ops.MUL, x.const(math.log(2)))
  def backward(self, grad: Tensor) -> Tensor: return Mul.apply(grad, Reciprocal.apply(self.parents[0]))

class Exp(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    self.ret = x.alu(Ops.MUL, x.const(1 / math.log(2))).alu(Ops.EXP2)
    return self.ret
  def backward(self, grad: Tensor) -> Tensor: return Mul.apply(self.out(), grad)

class Sqrt(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    self.ret = x.alu(Ops.SQRT)
    return self.ret
  def backward(self, grad: Tensor) -> Tensor: return Mul.apply(grad, Reciprocal.apply(Mul.apply(self.out(), _const(grad, 2))))

class Sigmoid(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    self.ret = x.const(1).alu(Ops.ADD, x.alu(Ops.MUL, x.const(-1 / math.log(2))).alu(Ops.EXP2)).alu(Ops.RECIP)
    return self.ret
  def backward(self, grad: Tensor) -> Tensor:
    s = self.out()
    return Mul.apply(Mul.apply(s, Add.apply(_const(s, 1), Neg.apply(s))), grad)

class Sign(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    if x.dtype == dtypes.bool: return x
    pos = x.const(0).alu(Ops.CMPLT, x).cast(x.dtype)
    neg = x.alu(Ops.CMPLT, x.const(0)).cast(x.dtype)
    return pos.alu(Ops.ADD, neg.alu(Ops.NEG))  # sign(NaN) is 0, as torch
  def backward(self, grad: Tensor) -> Tensor: return _const(grad, 0)

# *** binary ***
class BinaryNoGrad(Function):
  """A binary op whose result is piecewise constant or an integer, so it has no gradient: the comparisons (CMPLT,
  CMPNE), integer division and modulo (IDIV, MOD) and the bitwise ops."""
  differentiable = False
  def forward(self, x: LazyBuffer, y: LazyBuffer, op: Ops) -> LazyBuffer: return x.alu(op, y)

class Add(Function):
  def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer: return x.alu(Ops.ADD, y)
  def backward(self, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
    return grad if self.needs_input_grad[0] else None, grad if self.needs_input_grad[1] else None

class Sub(Function):
  """x - y, computed as x + (-y) (the graph, and so the kernels, of Add after Neg), in one Function."""
  def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer: return x.alu(Ops.ADD, y.alu(Ops.NEG))
  def backward(self, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
    return grad if self.needs_input_grad[0] else None, Neg.apply(grad) if self.needs_input_grad[1] else None

class Mul(Function):
  def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer: return x.alu(Ops.MUL, y)
  def backward(self, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
    x, y = self.parents
    return Mul.apply(y, grad) if self.needs_input_grad[0] else None, Mul.apply(x, grad) if self.needs_input_grad[1] else None

class Maximum(Function):
  def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
    self.x, self.y = x, y
    self.ret = x.alu(Ops.MAX, y)
    return self.ret
  def backward(self, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
    # ties split the gradient evenly, as in tinygrad; the masks are piecewise constant
    T = type(grad)
    xeq = self.x.alu(Ops.CMPNE, self.ret).alu(Ops.CMPNE, self.x.const(True).cast(dtypes.bool)).cast(grad.dtype)
    yeq = self.y.alu(Ops.CMPNE, self.ret).alu(Ops.CMPNE, self.y.const(True).cast(dtypes.bool)).cast(grad.dtype)
    share = Mul.apply(grad, T(xeq.alu(Ops.ADD, yeq).alu(Ops.RECIP), requires_grad=False))
    return (Mul.apply(share, T(xeq, requires_grad=False)) if self.needs_input_grad[0] else None,
            Mul.apply(share, T(yeq, requires_grad=False)) if self.needs_input_grad[1] else None)

class Where(Function):
  def forward(self, c: LazyBuffer, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer: return c.alu(Ops.WHERE, x, y)
  def backward(self, grad: Tensor) -> tuple[None, Tensor | None, Tensor | None]:
    c, zero = self.parents[0], _const(grad, 0)
    return (None, Where.apply(c, grad, zero) if self.needs_input_grad[1] else None,
            Where.apply(c, zero, grad) if self.needs_input_grad[2] else None)

class Pow(Function):
  """x ** y for float x and y of one shape: C's pow on the edge values (0 ** 0 == 1, (-inf) ** 0.3 == inf, a negative
  base keeps its sign for an odd integer exponent and is NaN for a fractional one), gradients as torch's."""
  def forward(self, x: LazyBuffer, y: LazyBuffer, value: LazyBuffer) -> LazyBuffer:
    # the value is composed of elementwise ops by the Tensor side (Tensor._pow_value): Pow records it with its gradients
    self.ret = value
    return self.ret
  def backward(self, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
    x, y = self.parents
    gx = (y == 0).where(0.0, grad * y * x.pow(y - 1)) if self.needs_input_grad[0] else None
    gy = ((x == 0) & (y >= 0)).where(0.0, grad * self.out() * x.log()) if self.needs_input_grad[1] else None
    return gx, gy

class Dot(Function):
  """x @ w for a 2-D w (k, n) and x (..., k): the value composed by the Tensor side (Tensor.dot: w maybe repacked in
  panels), recorded with gradients written as matmuls themselves. The weight gradient x^T @ grad reduces over every row
  of x (a Linear's tokens), where both operands are strided: with `transposed` it is computed with grad stored
  transposed first, so that its first operand streams along the reduce and x is read (or repacked, Tensor.dot's panels)
  as the second operand of an ordinary matmul (codegen/matmul.py `matmul_grad_transposed` says when the copy pays)."""
  def forward(self, x: LazyBuffer, w: LazyBuffer, value: LazyBuffer, transposed: bool = True) -> LazyBuffer:
    self.transposed = transposed
    return value
  def backward(self, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
    x, w = self.parents
    gx = grad.dot(w.transpose()) if self.needs_input_grad[0] else None
    if not self.needs_input_grad[1]: return gx, None
    x2, g2 = x.reshape(-1, x.shape[-1]), grad.reshape(-1, grad.shape[-1])
    return gx, g2.transpose().contiguous().dot(x2).transpose() if self.transposed else x2.transpose().dot(g2)

# *** reduce ***
class Sum(Function):
  def forward(self, x: LazyBuffer, axis: tuple[int, ...]) -> LazyBuffer:
    self.input_shape = x.shape
    return x.reduce(Ops.ADD, axis)
  def backward(self, grad: Tensor) -> Tensor: return Expand.apply(grad, shape=self.input_shape)

class Max(Function):
  def forward(self, x: LazyBuffer, axis: tuple[int, ...]) -> LazyBuffer:
    self.x, self.ret, self.axis = x, x.reduce(Ops.MAX, axis), axis
    return self.ret
  def backward(self, grad: Tensor) -> Tensor:
    # the gradient goes to the maxima, shared evenly between ties; the share is piecewise constant
    hit = self.x.alu(Ops.CMPNE, self.ret.expand(self.x.shape)).alu(Ops.CMPNE, self.x.const(True).cast(dtypes.bool)).cast(grad.dtype)
    share = hit.alu(Ops.MUL, hit.reduce(Ops.ADD, self.axis).expand(self.x.shape).alu(Ops.RECIP))
    return Mul.apply(type(grad)(share, requires_grad=False), Expand.apply(grad, shape=self.x.shape))

# *** movement ***
class Expand(Function):
  def forward(self, x: LazyBuffer, shape: tuple[int, ...]) -> LazyBuffer:
    self.expanded_axis = tuple(i for i, (si, so) in enumerate(zip(x.shape, shape)) if si != so)
    return x.expand(shape)
  def backward(self, grad: Tensor) -> Tensor:
    if not self.expanded_axis: return grad
    if grad.dtype not in (dtypes.float16, dtypes.bfloat16): return Sum.apply(grad, axis=self.expanded_axis)
    return Cast.apply(Sum.apply(Cast.apply(grad, dtype=dtypes.float32), axis=self.expanded_axis), dtype=grad.dtype)

class Reshape(Function):
  def forward(self, x: LazyBuffer, shape: tuple[int, ...]) -> LazyBuffer:
    self.input_shape = x.shape
    return x.reshape(shape)
  def backward(self, grad: Tensor) -> Tensor: return Reshape.apply(grad, shape=self.input_shape)

class Permute(Function):
  def forward(self, x: LazyBuffer, order: tuple[int, ...]) -> LazyBuffer:
    self.input_order = order
    return x.permute(order)
  def backward(self, grad: Tensor) -> Tensor: return Permute.apply(grad, order=tuple(argsort(self.input_order)))

class Pad(Function):
  def forward(self, x: LazyBuffer, arg: tuple[tuple[int, int], ...]) -> LazyBuffer:
    self.narg = tuple((p[0], s + p[0]) for s, p in zip(x.shape, arg))
    return x.pad(arg)
  def backward(self, grad: Tensor) -> Tensor: return Shrink.apply(grad, arg=self.narg)

class Shrink(Function):
  def forward(self, x: LazyBuffer, arg: tuple[tuple[int, int], ...]) -> LazyBuffer:
    self.input_shape, self.narg = x.shape, tuple((p[0], s - p[1]) for s, p in zip(x.shape, arg))
    return x.shrink(arg)
  def backward(self, grad: Tensor) -> Tensor:
    out = Pad.apply(grad, arg=self.narg)
    # a symbolic shrink pads back to sizes like bs + (32 - bs): name them as the input's
    return out if out.shape == self.input_shape else Reshape.apply(out, shape=self.input_shape)

class Flip(Function):
  def forward(self, x: LazyBuffer, axis: tuple[int, ...]) -> LazyBuffer:
    self.axis = axis
    return x.flip(tuple(i in axis for i in range(len(x.shape))))
  def backward(self, grad: Tensor) -> Tensor: return Flip.apply(grad, axis=self.axis)

# *** indexed: positions read from data ***
class Gather(Function):
  """x's entries at idx along axis; the gradient adds grad back at the same positions (a scatter-add into zeros)."""
  def forward(self, x: LazyBuffer, idx: LazyBuffer, axis: int, checks: tuple[LazyBuffer, ...] = ()) -> LazyBuffer:
    self.axis = axis
    return x.gather(idx, axis, checks)
  def backward(self, grad: Tensor) -> tuple[Tensor, None]:
    x, idx = self.parents
    return Scatter.apply(_const(x, 0), idx, grad, axis=self.axis, op=Ops.ADD), None

class Scatter(Function):
  """x with src added (op ADD), multiplied in (MUL) or written (None, the last write wins) at idx along axis. The gradient
  of src reads grad at those positions (a gather); x's is grad, where written over zero at the written positions (as
  torch's). MUL's, as torch's scatter_reduce 'prod': grad times the product of the others, taken apart from a zero (x's,
  or src's only zero at its target); src entries that share their target with another zero get 0."""
  def forward(self, x: LazyBuffer, idx: LazyBuffer, src: LazyBuffer, axis: int, op: Ops | None, checks: tuple[LazyBuffer, ...] = ()) -> LazyBuffer:
    if op not in (Ops.ADD, Ops.MUL, None): raise ValueError(f"Scatter differentiates ADD, MUL and None (a write), not {op}")
    self.axis, self.op = axis, op
    self.ret = x.scatter(idx, src, axis, op, checks)
    return self.ret
  def backward(self, grad: Tensor) -> tuple[Tensor | None, None, Tensor | None]:
    x, idx, src = self.parents
    if self.op is Ops.MUL: return self._mul_grads(grad, x, idx, src)
    gx = (grad if self.op is Ops.ADD else Scatter.apply(grad, idx, _const(src, 0), axis=self.axis, op=None)) if self.needs_input_grad[0] else None
    return gx, None, Gather.apply(grad, idx, axis=self.axis) if self.needs_input_grad[2] else None
  def _mul_grads(self, grad: Tensor, x: Tensor, idx: Tensor, src: Tensor) -> tuple[Tensor | None, None, Tensor | None]:
    def mul(t: Tensor, s: Tensor) -> Tensor: return Scatter.apply(t, idx, s, axis=self.axis, op=Ops.MUL)
    def at_idx(t: Tensor) -> Tensor: return Gather.apply(t, idx, axis=self.axis)
    x_nz = (x == 0).where(1, x)  # a zero in x: the product of the others is the product with 1 in its place
    gx = grad * mul(x_nz, src) / x_nz if self.needs_input_grad[0] else None
    if not self.needs_input_grad[2]: return gx, None, None
    zero = src == 0
    zeros_at = at_idx(Scatter.apply(_const(x, 0), idx, zero.cast(x.dtype), axis=self.axis, op=Ops.ADD))  # src's zeros at each one's target
    only = zero & (zeros_at == 1)
    gsrc = only.where(at_idx(grad * mul(x, only.where(1, src))), at_idx(grad * self.out()) / zero.where(1, src))
    return gx, None, gsrc

# *** devices ***
class Copy(Function):
  """x on `device`: one device (a sharded x joined there), or a tuple of devices (x split on `axis` over them, a whole
  copy on each for None: Tensor.shard). The gradient goes back the same way, to x's devices and sharding."""
  def forward(self, x: LazyBuffer | MultiLazyBuffer, device: str | tuple[str, ...], axis: int | None = None) -> LazyBuffer | MultiLazyBuffer:
    self.device, self.axis = x.device, x.axis if isinstance(x, MultiLazyBuffer) else None
    return to_devices(x, device, axis)
  def backward(self, grad: Tensor) -> Tensor: return Copy.apply(grad, device=self.device, axis=self.axis)
