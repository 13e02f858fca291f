"""Tensor autograd: requires_grad, the Function applied to tensors (Tensor._apply, the rules in function.py),
gradient() and backward()."""
from __future__ import annotations
import functools, itertools
from typing import TYPE_CHECKING, Any, Callable
import tinycore.function as F
from tinycore.dtype import dtypes
from tinycore.tensor.args import _check_differentiable
if TYPE_CHECKING: from tinycore.tensor import Tensor

_FLOATS = frozenset(dtypes.floats)

class _Freed(F.Function):
  """What a recorded tensor's graph is once backward() has used and let go of it (see AutogradMixin.backward): no
  parents, so the inputs and saved values of its Function (forward activations) are held no longer. A later walk
  that meets it raises (as PyTorch's), rather than giving zeros for what lay behind it."""
  def __init__(self) -> None: self.parents, self.needs_input_grad = (), ()
_FREED = _Freed()


def by_rule(inputs: tuple[Tensor, ...], compute: Callable[[], Tensor], rule: Callable[..., tuple], with_value: bool = False) -> Tensor:
  """compute()'s value recorded as one F.Composite of inputs whose gradient is rule(grad, *inputs, needs=...): the
  pieces compute builds are not recorded (no_grad meanwhile), so neither are the values they would save for a backward
  (conv2d's windows, gelu's six intermediates). with_value: the rule also gets value= the value, unrecorded (max pool's
  gradient compares the input with it). Under no_grad, compute() as it is."""
  T = type(inputs[0])
  if T.no_grad: return compute()
  T.no_grad = True
  try: value = compute()
  finally: T.no_grad = False
  return F.Composite.apply(*inputs, value=value.lazydata, rule=functools.partial(rule, value=value) if with_value else rule)

def _link_of(x: tuple[Tensor, ...]) -> F.Link | None:
  """A Link to x, or None where no input leads anywhere: leaves marked requires_grad=False get no .grad, and holding
  them (and the chain of results built on them) would keep every intermediate buffer alive."""
  return F.Link(*x) if any(t._rg is not False or t._ctx is not None for t in x) else None

class AutogradMixin:
  __slots__ = ()

  # *** autograd ***
  # Every float tensor is differentiable unless requires_grad=False (tinygrad 0.14 has no flag at all): each Function
  # applied to one is recorded (see tinycore/function.py for the rules), under Tensor.no_grad nothing is. gradient()
  # returns recorded gradients, which can be differentiated again. backward() fills .grad with plain values, by one of
  # two rules:
  # - tinygrad's: every float tensor in the graph (leaves, intermediates and self) that is not requires_grad=False;
  # - PyTorch's, once the graph holds a tensor marked requires_grad=True (as an Optimizer marks its parameters): only
  #   the marked leaves. A training loop that slices its batches out of one big data tensor would otherwise add a
  #   gradient graph to that tensor's .grad at every step and keep them all alive (tinygrad 0.14 does), and the lazy
  #   .grad of intermediates, read against the parameters, would have to be computed before each optimizer step.
  # A float tensor the graph reaches only through links without a gradient (detach, comparisons: F.Link) gets a zero
  # .grad under tinygrad's rule, as in tinygrad. realize() makes the tensors it computes leaves (as tinygrad): a graph is
  # let go once its result is a buffer.
  @property
  def requires_grad(self) -> bool | None:
    """None (the default): differentiable when float; True: the same, said explicitly (PyTorch's habit, and it
    propagates to results); False: gets no gradient and lets none through. Only float tensors can be set to True."""
    return self._rg
  @requires_grad.setter
  def requires_grad(self, requires_grad: bool | None) -> None:
    if requires_grad: _check_differentiable(self)
    self._rg = requires_grad
  def requires_grad_(self, requires_grad: bool | None = True) -> Tensor:
    """Set requires_grad in place and return self."""
    self.requires_grad = requires_grad
    return self
  def _leaf(self, requires_grad: bool | None) -> Tensor:
    """self cut from the graph it was computed by, with requires_grad set: what a creation function returns."""
    self._ctx = None
    self.requires_grad = requires_grad
    return self
  def is_param_(self, is_param: bool = True) -> Tensor:
    """Mark this tensor as an optimizer parameter (the default for every tensor) or, with False, as a buffer an
    Optimizer realizes along with each step but does not update (as tinygrad's BatchNorm running statistics)."""
    self.is_param = is_param
    return self
  @classmethod
  def _apply(cls, fxn: type[F.Function], *x: Tensor, **kwargs: Any) -> Tensor:
    """fxn's forward on the inputs' LazyBuffers, wrapped in a Tensor that records fxn by the rules of function.py
    (Function.apply comes here)."""
    ctx = fxn.__new__(fxn)
    ret = cls.__new__(cls)
    ret.lazydata = lb = ctx.forward(*[t.lazydata for t in x], **kwargs)
    ret.grad, ret.is_param, ret._ctx = None, True, None
    if cls.no_grad: ret._rg = None
    elif not fxn.differentiable or lb.dtype not in _FLOATS: ret._rg, ret._ctx = None, _link_of(x)
    else:
      # (one loop, not a comprehension and an any() over a generator: this runs for every op made; an input of the
      # output's dtype is float without a look-up in _FLOATS, whose hashing of a dtype is a Python call)
      needs, rg, out_dtype = [], None, lb.dtype
      for t in x:
        needs.append(t._rg is not False and ((dt := t.lazydata.dtype) is out_dtype or dt in _FLOATS))
        if t._rg: rg = True
      if True in needs: ctx.parents, ctx.needs_input_grad, ret._ctx, ret._rg = x, tuple(needs), ctx, rg
      else: ret._rg, ret._ctx = False, _link_of(x)  # computed from detached tensors only: detached too
    return ret
  def _link(self, *sources: Tensor) -> Tensor:
    """self recorded as computed from sources without a gradient (F.Link): what detach and const_like return."""
    if not type(self).no_grad: self._ctx = F.Link(*sources)
    return self
  @classmethod
  def _output_of(cls, ctx: F.Function) -> Tensor:
    """ctx's output (ctx.ret) as a Tensor recorded with ctx (Function.out comes here)."""
    ret = cls.__new__(cls)
    ret.lazydata, ret.grad, ret.is_param, ret._ctx = ctx.ret, None, True, None if cls.no_grad else ctx
    # marked as the output that forward returned (see _apply): under the PyTorch rule, a backward differentiates only
    # through tensors marked True; unmarked, a gradient built from it (sigmoid's, from its output) lost the second-order
    # part through it (d/dx of x * sigmoid(x)'s gradient: off by 0.35)
    ret._rg = None if cls.no_grad or not any(p._rg for p in ctx.parents) else True
    return ret
  def _history(self) -> F.Function | None:
    """self._ctx, cut (None) once self is an in-place write that was made: like a realized tensor, a written buffer is a
    leaf (as in tinygrad). Whoever realized the write, the graph that computed it is let go here: `w.assign(w - lr * g)`
    outside no_grad, step after step, would otherwise chain every step's graph to the next (and a Variable bound to
    another value in each step's graph would then meet its old value)."""
    if type(self._ctx) is F.Assign and self.lazydata.is_realized(): self._ctx = None
    return self._ctx
  def _deepwalk(self) -> list[Tensor]:
    """The recorded tensors self depends on (self included when recorded), each after all of its parents."""
    order: list[Tensor] = []
    seen: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(self, False)]
    while stack:
      t, done = stack.pop()
      if done:
        order.append(t)
        continue
      if id(t) in seen or t._history() is None: continue
      seen.add(id(t))
      stack.append((t, True))
      stack.extend((p, False) for p in t._ctx.parents if id(p) not in seen)
    return order
  def _grads(self, gradient: Tensor | None, targets: set[int] | None, marked: bool = False,
             free: bool = False) -> tuple[list[Tensor], dict[int, Tensor]]:
    """The graph's tensors that gradients flow to (parents of the recorded tensors walked, in that order, repeats
    included) and the gradient of each by id. free: each recorded tensor's graph is let go (_FREED) once its
    Function's backward ran, so that a forward activation nothing else holds can be freed by the realize that
    computes the gradients, after their last reader."""
    if not dtypes.is_float(self.dtype): raise RuntimeError(f"only float Tensors have gradient, this one is {self.dtype}")
    if gradient is None:
      if self.numel() != 1: raise RuntimeError(f"backward() without a gradient needs a scalar, this tensor has shape {self.shape}")
      gradient = type(self)(1.0, dtype=self.dtype, device=self.device, requires_grad=False).reshape(self.shape)
    if gradient.shape != self.shape: raise ValueError(f"gradient shape {gradient.shape} does not match tensor shape {self.shape}")
    order = self._deepwalk()
    if any(t._ctx is _FREED for t in order):
      raise RuntimeError("a gradient through a graph a backward() let go: parameters marked requires_grad=True (PyTorch's "
                         "rule) make backward() free the graph it walked; pass retain_graph=True to that backward to keep it")
    if targets is not None:  # only what lies on a path to a target
      keep = set(targets)
      for t in order:
        if any(id(p) in keep for p in t._ctx.parents): keep.add(id(t))  # type: ignore[union-attr]
      order = [t for t in order if id(t) in keep]
    if marked: order = [t for t in order if t._rg is True]  # requires_grad=True flows from the marked leaves to what uses them
    reached = [p for t in order for p in t._ctx.parents]  # type: ignore[union-attr]
    grads: dict[int, Tensor] = {id(self): gradient}
    for t0 in reversed(order):
      ctx = t0._ctx
      assert ctx is not None
      if (g0 := grads.get(id(t0))) is None or isinstance(ctx, F.Link): continue
      if marked and len(ctx.parents) > 1 and any(n and p._rg is not True for n, p in zip(ctx.needs_input_grad, ctx.parents)):
        # no gradient for the inputs that are not marked (the data a parameter multiplies)
        needs, ctx.needs_input_grad = ctx.needs_input_grad, tuple(n and p._rg is True for n, p in zip(ctx.needs_input_grad, ctx.parents))
        try: gs = ctx.backward(g0)
        finally: ctx.needs_input_grad = needs
      else: gs = ctx.backward(g0)
      for t, g, need in zip(ctx.parents, gs if len(ctx.parents) > 1 else (gs,), ctx.needs_input_grad):
        if g is None or not need: continue
        if g.shape != t.shape: raise RuntimeError(f"{type(ctx).__name__} gave a gradient of shape {g.shape} for an input of shape {t.shape}")
        grads[id(t)] = g if id(t) not in grads else grads[id(t)] + g
      if free: t0._ctx = _FREED
    return reached, grads
  def gradient(self, *targets: Tensor, gradient: Tensor | None = None) -> list[Tensor]:
    """d(self)/d(target) for each target (a vector-Jacobian product with `gradient` when self is not a scalar). The
    results are recorded like any computation: differentiate them again for higher orders. A target self does not
    depend on gets zeros; .grad is left alone and the graph is kept."""
    for t in targets:
      if not dtypes.is_float(t.dtype): raise RuntimeError(f"only float Tensors have gradient, a target is {t.dtype}")
    _, grads = self._grads(gradient, {id(t) for t in targets})
    return [grads[id(t)] if id(t) in grads else type(self)(t.lazydata.const(0), requires_grad=False) for t in targets]
  def backward(self, gradient: Tensor | None = None, retain_graph: bool = False) -> Tensor:
    """Add d(self)/d(t) into t.grad for every float tensor t in the graph of self (leaves, intermediates and self) that
    is not requires_grad=False, as tinygrad: the graph is kept, a second backward() adds again. When the graph holds a
    tensor marked requires_grad=True (an Optimizer marks its parameters), only for the marked leaves, as PyTorch, and,
    as PyTorch, the marked part of the graph is let go (unless retain_graph): its forward activations are then freed
    as soon as the gradients are computed from them, not held until the next step (a second backward through it
    raises). .grad holds plain values, not recorded; use gradient() for gradients to differentiate again."""
    marked = self._rg is True
    prev, type(self).no_grad = self.no_grad, True
    try:
      reached, grads = self._grads(gradient, None, marked, free=marked and not retain_graph)
      seen: set[int] = set()
      for t in itertools.chain((self,), reached):
        if id(t) in seen or t._rg is False or (marked and (t._rg is not True or t._ctx is not None)): continue
        seen.add(id(t))
        if (g := grads.get(id(t))) is None:  # in the graph, but no gradient reaches it (through a Link): zeros, as tinygrad
          if marked or t.lazydata.dtype not in _FLOATS: continue
          g = type(self)(t.lazydata.const(0), requires_grad=False)
        if t.grad is None: t.grad = type(self)(g.lazydata, requires_grad=False)
        else:
          # the .grad of data sliced with a Variable (X[:bs]) holds the value bs had then: with another value now, the sum
          # would be one computation with two values of bs, so the old one is made first
          if any(g.lazydata.var_vals.get(v, x) != x for v, x in t.grad.lazydata.var_vals.items()): t.grad.replace(t.grad.contiguous().realize())
          t.grad.replace(t.grad + g)  # in place: a reference to .grad sees the sum (as torch and tinygrad)
    finally: type(self).no_grad = prev
    return self
