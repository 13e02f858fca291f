"""The differentiable primitives. Each Function computes forward on LazyBuffers and, in backward, the gradient
of its inputs from the gradient of its output. Everything else in Tensor is composed of these."""
from __future__ import annotations
import math
from typing import Any
from tinycore.dtype import dtypes
from tinycore.helpers import argsort
from tinycore.lazy import LazyBuffer
from tinycore.ops import Ops
from tinycore.uop.uop import UOp

class Function:
  def __init__(self, device: str, *tensors: Any):
    self.device = device
    self.needs_input_grad = [t.requires_grad for t in tensors]
    self.requires_grad = True if any(self.needs_input_grad) else None if None in self.needs_input_grad else False
    if self.requires_grad: self.parents = tensors
  def forward(self, *args: Any, **kwargs: Any) -> LazyBuffer: raise NotImplementedError(f"forward not implemented for {type(self)}")
  def backward(self, *args: Any, **kwargs: Any) -> Any: raise RuntimeError(f"backward not implemented for {type(self)}")
  @classmethod
  def apply(cls, *x: Any, **kwargs: Any) -> Any:
    from tinycore.tensor import Tensor
    ctx = cls(x[0].lazydata.device, *x)
    ret = Tensor.__new__(Tensor)
    ret.lazydata, ret.requires_grad, ret.grad = ctx.forward(*[t.lazydata for t in x], **kwargs), ctx.requires_grad, None
    ret._ctx = ctx if ctx.requires_grad and not Tensor.no_grad else None
    return ret

class Contiguous(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer: return x.contiguous()
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return grad

class Clone(Function):
  """A fresh buffer holding a copy of x, even when x is already a realized contiguous buffer."""
  def forward(self, x: LazyBuffer) -> LazyBuffer: return LazyBuffer.metaop(Ops.CONTIGUOUS, x.shape, x.dtype, x.device, srcs=(x,))
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return grad

class ContiguousBackward(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer: return x
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return grad.contiguous()

class Cast(Function):
  def forward(self, x: LazyBuffer, dtype: Any, bitcast: bool = False) -> LazyBuffer:
    self.input_dtype, self.bitcast = x.dtype, bitcast
    if not bitcast and x.is_unrealized_const() and x._base is not None and any(v.mask is not None for v in x.st.views) \
       and not isinstance(x.const_value(), UOp):
      # LazyBuffer.cast folds a const view into a fresh const and drops the padding mask (core bug): keep the view
      val = x.const_value()
      arg = dtypes.as_const(val, dtype) if not (isinstance(val, float) and math.isnan(val)) else val
      base = LazyBuffer.metaop(Ops.CONST, (), dtype, x.device, arg=arg)
      return LazyBuffer(x.device, x.st, dtype, base=base)
    return x.cast(dtype, bitcast)
  def backward(self, grad: LazyBuffer) -> LazyBuffer:
    if self.bitcast: raise RuntimeError("bitcast is not differentiable")
    return grad.cast(self.input_dtype)

# *** unary ***
class Neg(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer: return x.alu(Ops.NEG)
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return grad.alu(Ops.NEG)

class Reciprocal(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    self.ret = x.alu(Ops.RECIP)
    return self.ret
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return grad.alu(Ops.NEG).alu(Ops.MUL, self.ret).alu(Ops.MUL, self.ret)

class Log2(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    self.x = x
    return x.alu(Ops.LOG2)
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return grad.alu(Ops.MUL, self.x.alu(Ops.MUL, self.x.const(math.log(2))).alu(Ops.RECIP))

class Exp2(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    self.ret = x.alu(Ops.EXP2)
    return self.ret
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return self.ret.alu(Ops.MUL, grad).alu(Ops.MUL, grad.const(math.log(2)))

class Trunc(Function):
  """Round toward zero; its gradient is zero (as torch). Floats beyond 2^52 (and inf, NaN) are already integral."""
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    if not dtypes.is_float(x.dtype): return x
    small = x.alu(Ops.MAX, x.alu(Ops.NEG)).alu(Ops.CMPLT, x.const(2.0 ** 52))
    return small.alu(Ops.WHERE, x.cast(dtypes.int64).cast(x.dtype), x)
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return grad.const(0)

class Sin(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    self.x = x
    return x.alu(Ops.SIN)
  def backward(self, grad: LazyBuffer) -> LazyBuffer:
    # cos(x) = sin(pi/2 - x)
    return self.x.const(math.pi / 2).alu(Ops.ADD, self.x.alu(Ops.NEG)).alu(Ops.SIN).alu(Ops.MUL, grad)

class Relu(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    self.ret = x.alu(Ops.MAX, x.const(0))
    return self.ret
  def backward(self, grad: LazyBuffer) -> LazyBuffer:
    return self.ret.const(0).alu(Ops.CMPLT, self.ret).cast(grad.dtype).alu(Ops.MUL, grad)

class Log(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    self.x = x
    return x.alu(Ops.LOG2).alu(Ops.MUL, x.const(math.log(2)))
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return grad.alu(Ops.MUL, self.x.alu(Ops.RECIP))

class Exp(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    self.ret = x.alu(Ops.MUL, x.const(1 / math.log(2))).alu(Ops.EXP2)
    return self.ret
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return self.ret.alu(Ops.MUL, grad)

class Sqrt(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    self.ret = x.alu(Ops.SQRT)
    return self.ret
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return grad.alu(Ops.MUL, self.ret.alu(Ops.MUL, self.ret.const(2)).alu(Ops.RECIP))

class Sigmoid(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    self.ret = x.const(1).alu(Ops.ADD, x.alu(Ops.MUL, x.const(-1 / math.log(2))).alu(Ops.EXP2)).alu(Ops.RECIP)
    return self.ret
  def backward(self, grad: LazyBuffer) -> LazyBuffer:
    return self.ret.alu(Ops.MUL, self.ret.const(1).alu(Ops.ADD, self.ret.alu(Ops.NEG))).alu(Ops.MUL, grad)

class Sign(Function):
  def forward(self, x: LazyBuffer) -> LazyBuffer:
    if x.dtype == dtypes.bool: return x
    pos = x.const(0).alu(Ops.CMPLT, x).cast(x.dtype)
    neg = x.alu(Ops.CMPLT, x.const(0)).cast(x.dtype)
    return pos.alu(Ops.ADD, neg.alu(Ops.NEG))  # sign(NaN) is 0, as torch
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return grad.const(0)

# *** binary ***
class Less(Function):
  def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer: return x.alu(Ops.CMPLT, y)
  def backward(self, grad: LazyBuffer) -> tuple[None, None]: return None, None

class Neq(Function):
  def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer: return x.alu(Ops.CMPNE, y)
  def backward(self, grad: LazyBuffer) -> tuple[None, None]: return None, None

class BitwiseOp(Function):
  def forward(self, x: LazyBuffer, y: LazyBuffer, op: Ops) -> LazyBuffer: return x.alu(op, y)
  def backward(self, grad: LazyBuffer) -> tuple[None, None]: return None, None

class IDiv(Function):
  def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer: return x.alu(Ops.IDIV, y)
  def backward(self, grad: LazyBuffer) -> tuple[None, None]: return None, None

class Mod(Function):
  def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer: return x.alu(Ops.MOD, y)
  def backward(self, grad: LazyBuffer) -> tuple[None, None]: return None, None

class Add(Function):
  def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer: return x.alu(Ops.ADD, y)
  def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, LazyBuffer | None]:
    return grad if self.needs_input_grad[0] else None, grad if self.needs_input_grad[1] else None

class Mul(Function):
  def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
    self.x, self.y = x, y
    return x.alu(Ops.MUL, y)
  def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, LazyBuffer | None]:
    return (self.y.alu(Ops.MUL, grad) if self.needs_input_grad[0] else None, self.x.alu(Ops.MUL, grad) if self.needs_input_grad[1] else None)

class Maximum(Function):
  def forward(self, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
    self.x, self.y = x, y
    self.ret = x.alu(Ops.MAX, y)
    return self.ret
  def backward(self, grad: LazyBuffer) -> tuple[LazyBuffer | None, LazyBuffer | None]:
    # ties split the gradient evenly, as in tinygrad
    xeq = self.x.alu(Ops.CMPNE, self.ret).alu(Ops.CMPNE, self.x.const(True).cast(dtypes.bool)).cast(grad.dtype)
    yeq = self.y.alu(Ops.CMPNE, self.ret).alu(Ops.CMPNE, self.y.const(True).cast(dtypes.bool)).cast(grad.dtype)
    share = grad.alu(Ops.MUL, xeq.alu(Ops.ADD, yeq).alu(Ops.RECIP))
    return (share.alu(Ops.MUL, xeq) if self.needs_input_grad[0] else None, share.alu(Ops.MUL, yeq) if self.needs_input_grad[1] else None)

class Where(Function):
  def forward(self, c: LazyBuffer, x: LazyBuffer, y: LazyBuffer) -> LazyBuffer:
    self.c = c
    return c.alu(Ops.WHERE, x, y)
  def backward(self, grad: LazyBuffer) -> tuple[None, LazyBuffer | None, LazyBuffer | None]:
    zero = grad.const(0)
    return (None, self.c.alu(Ops.WHERE, grad, zero) if self.needs_input_grad[1] else None,
            self.c.alu(Ops.WHERE, zero, grad) if self.needs_input_grad[2] else None)

# *** reduce ***
class Sum(Function):
  def forward(self, x: LazyBuffer, axis: tuple[int, ...]) -> LazyBuffer:
    self.input_shape = x.shape
    return x.reduce(Ops.ADD, axis)
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return grad.expand(self.input_shape)

class Max(Function):
  def forward(self, x: LazyBuffer, axis: tuple[int, ...]) -> LazyBuffer:
    self.x, self.ret, self.axis = x, x.reduce(Ops.MAX, axis), axis
    return self.ret
  def backward(self, grad: LazyBuffer) -> LazyBuffer:
    # the gradient goes to the maxima, shared evenly between ties
    hit = self.x.alu(Ops.CMPNE, self.ret.expand(self.x.shape)).alu(Ops.CMPNE, self.x.const(True).cast(dtypes.bool)).cast(grad.dtype)
    count = hit.reduce(Ops.ADD, self.axis).expand(self.x.shape)
    return hit.alu(Ops.MUL, count.alu(Ops.RECIP)).alu(Ops.MUL, grad.expand(self.x.shape))

# *** movement ***
class Expand(Function):
  def forward(self, x: LazyBuffer, shape: tuple[int, ...]) -> LazyBuffer:
    self.expanded_axis = tuple(i for i, (si, so) in enumerate(zip(x.shape, shape)) if si != so)
    return x.expand(shape)
  def backward(self, grad: LazyBuffer) -> LazyBuffer:
    if not self.expanded_axis: return grad
    acc = grad.cast(dtypes.float32) if grad.dtype in (dtypes.float16, dtypes.bfloat16) else grad
    return acc.reduce(Ops.ADD, self.expanded_axis).cast(grad.dtype)

class Reshape(Function):
  def forward(self, x: LazyBuffer, shape: tuple[int, ...]) -> LazyBuffer:
    self.input_shape = x.shape
    return x.reshape(shape)
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return grad.reshape(self.input_shape)

class Permute(Function):
  def forward(self, x: LazyBuffer, order: tuple[int, ...]) -> LazyBuffer:
    self.input_order = order
    return x.permute(order)
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return grad.permute(tuple(argsort(self.input_order)))

class Pad(Function):
  def forward(self, x: LazyBuffer, arg: tuple[tuple[int, int], ...]) -> LazyBuffer:
    self.narg = tuple((p[0], s + p[0]) for s, p in zip(x.shape, arg))
    return x.pad(arg)
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return grad.shrink(self.narg)

class Shrink(Function):
  def forward(self, x: LazyBuffer, arg: tuple[tuple[int, int], ...]) -> LazyBuffer:
    self.narg = tuple((p[0], s - p[1]) for s, p in zip(x.shape, arg))
    return x.shrink(arg)
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return grad.pad(self.narg)

class Flip(Function):
  def forward(self, x: LazyBuffer, axis: tuple[int, ...]) -> LazyBuffer:
    self.arg = tuple(i in axis for i in range(len(x.shape)))
    return x.flip(self.arg)
  def backward(self, grad: LazyBuffer) -> LazyBuffer: return grad.flip(self.arg)
