"""Optimizers. A step writes every parameter (and every piece of optimizer state) in place with `assign`, and realizes
them all in one schedule, so a TinyJit-captured train step replays the update kernels on the same buffers. The update
is built under Tensor.no_grad: it records no autograd graph, so nothing of one step is kept alive into the next.

The learning rate is a one-element Tensor (`opt.lr`): assign a new value to it (see `set_lr` and the schedules below)
and a captured step picks it up; a Python float would be baked into the kernels."""
from __future__ import annotations
import math
from typing import Any, Callable
from tinycore.tensor import Tensor
from tinycore.dtype import DType, dtypes, least_upper_dtype, to_dtype
from tinycore.errors import DTypeError
from tinycore.helpers import dedup, getenv, TRAINING
from tinycore.lazy import LazyBuffer, HOLDS_BUFFER
from tinycore.multi import MultiLazyBuffer, to_devices
from tinycore.ops import Ops

def _realize_inplace(ts: list[Tensor]) -> None:
  """Make each tensor a realized contiguous buffer of its own, so later assigns write into it in place."""
  todo = []
  for t in ts:
    lb = t.lazydata
    if not (lb.is_realized() and lb._base is None and lb.st.contiguous):
      t.lazydata = lb.contiguous()
      todo.append(t)
  if todo: Tensor.realize(*todo)

def _like(x: float | Tensor, t: Tensor) -> Tensor:
  """x (a python number, or a one-element tensor such as `opt.lr`) broadcast to t's shape in t's dtype, made on the
  lazy graph directly. An update is built under no_grad from tensors of one shape: this replaces the Tensor-level
  broadcast of every scalar operand (a constant, a reshape and an expand through Function.apply, most of the Python
  of an eager optimizer step before). The arithmetic is the same."""
  return Tensor(_like_lb(x, t), requires_grad=False)
def _like_lb(x: float | Tensor | LazyBuffer | MultiLazyBuffer, t: Tensor) -> LazyBuffer:
  """_like's LazyBuffer (x may be a one-element lazy buffer too)."""
  lb = t.lazydata
  if isinstance(x, Tensor): x = x.lazydata
  if isinstance(x, (LazyBuffer, MultiLazyBuffer)):
    if x.device != lb.device: x = to_devices(x, lb.device)  # optimizer state moved to another device (offloaded), or sharded
    return x.cast(lb.dtype).reshape((1,) * len(lb.shape)).expand(lb.shape)
  return lb.const(x)

def _write(t: Tensor, x: LazyBuffer) -> None:
  """t.assign(x) for an update built on the lazy graph under no_grad: where t is a buffer of its own (as
  _realize_inplace left it) and x a value of its shape and dtype, the write is the ASSIGN node alone (Tensor.assign's
  checks, broadcasting and autograd bookkeeping, a Function.apply and a snapshot Tensor, were ~25 us a tensor, 14 times
  an Adam step of four parameters); anything else goes through Tensor.assign."""
  lb = t.lazydata
  if lb.__class__ is LazyBuffer and lb._base is None and lb.op in HOLDS_BUFFER and x.__class__ is LazyBuffer and x.shape == lb.shape \
     and x.dtype == lb.dtype and x.device == lb.device and lb.st.contiguous and (x.base is not lb or x.st == lb.st):
    t.lazydata = lb.assign(x)
    if t._rg is not True: t._ctx = None
  else: t.assign(Tensor(x, requires_grad=False))

_KEPT_OPS = frozenset((Ops.CONST, Ops.BUFFER))  # a kept constant still unrealized, or lifted into a buffer

def _is_param(t: Tensor) -> bool: return t.is_param and t.requires_grad is not False and dtypes.is_float(t.dtype)

class Optimizer:
  """Holds the parameters (float tensors marked is_param, as every tensor is by default, and not requires_grad=False)
  and the buffers (the others, realized along with each step, like BatchNorm's running statistics). The parameters
  are marked requires_grad=True: backward() then fills .grad of them (and what is computed from them) only, not of
  the data tensors a training loop takes its batches from (see Tensor.backward)."""
  def __init__(self, params: list[Tensor], lr: float, device: str | None = None):
    """device: where the learning rate and step counters live (default: the first parameter's); param_dtype (the
    OPTIM_DTYPE environment variable, float32 by default) is the dtype of the optimizer's state (momentum, moments)."""
    self.params: list[Tensor] = dedup([x for x in params if _is_param(x)])
    for x in self.params: x._leaf(True)  # a parameter is a leaf of the graph
    if not self.params: raise ValueError("optimizer got no parameters: every tensor given is requires_grad=False, not float or is_param False")
    self.buffers: list[Tensor] = dedup([x for x in params if not _is_param(x)])
    self.device = device or self.params[0].device
    self.param_dtype: DType = to_dtype(getenv("OPTIM_DTYPE", "float32"))
    # lr lives on the device, in at least float32, so that changing it needs no recompile
    self.lr = Tensor([lr], device=self.device, dtype=least_upper_dtype(dtypes.default_float, dtypes.float32), requires_grad=False)
    _realize_inplace(self.params + self.buffers + [self.lr])
    self._kept: dict[tuple, tuple[Any, LazyBuffer]] = {}  # see _const

  def zero_grad(self) -> None:
    for p in self.params: p.grad = None

  def step(self) -> None:
    """Apply one update to every parameter that has a gradient, in place, and realize it."""
    ts = self.schedule_step()
    if ts: Tensor.realize(*ts)

  def schedule_step(self) -> list[Tensor]:
    """The update as lazy assigns, not yet run: the tensors to realize (parameters, optimizer state, buffers)."""
    if not TRAINING:
      raise RuntimeError(f"TRAINING={TRAINING.value}: step an optimizer inside `with Context(TRAINING=1):` or `with Tensor.train():` "
                         "(or set Tensor.training = True)")
    with_grad = [p for p in self.params if p.grad is not None]
    if not with_grad: raise RuntimeError("no parameter has a gradient: call backward() before step()")
    with Tensor.test():  # no_grad
      updates, state = self._step(with_grad, [p.grad.detach() if p.grad is not None else None for p in with_grad])  # type: ignore[misc]
      for p, u in zip(with_grad, updates): _write(p, p.lazydata.alu(Ops.ADD, u.lazydata.alu(Ops.NEG)))  # p - u
    # the gradients are realized with the update (into buffers of their own, as torch's): left lazy, each one's graph
    # would hold the activations and backward values it is computed from, during the step and until the next one.
    # Last parameter first: the schedule follows this order, and a model's parameters are listed in forward order
    # (get_parameters), so each weight gradient is then computed soon after the backward value it reads (as torch's
    # backward does), not after the whole backward chain that keeps every activation and backward value alive.
    grads = [p.grad for p in with_grad if not p.grad.lazydata.is_realized()]  # type: ignore[union-attr]
    return (with_grad + state + self.buffers + grads)[::-1]

  def _step(self, params: list[Tensor], grads: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    """Per parameter the amount to subtract, and the state tensors that were assigned."""
    raise NotImplementedError

  def _const(self, x: float | Tensor, t: Tensor) -> Tensor:
    """_like(x, t) for a hyperparameter (a python number, or `self.lr`), kept from step to step: its lazy nodes never
    change, and a lifted constant's one-element buffer is then allocated and written once, not on every step. The
    learning rate's is made again when `lr` was assigned (its lazy node is then another one)."""
    return Tensor(self._const_lb(x, t), requires_grad=False)
  def _const_lb(self, x: float | Tensor, t: Tensor) -> LazyBuffer:
    """_const's LazyBuffer (what an update built on the lazy graph directly uses, without a Tensor around it)."""
    lb = t.lazydata
    if isinstance(x, Tensor): src, key = x.lazydata, (id(x), lb.dtype, lb.shape, lb.device)
    else: src, key = x, (x, lb.dtype, lb.shape, lb.device)
    # (a number is its key: `1.0 - b1`, a new float object each step, is still the constant kept)
    if (hit := self._kept.get(key)) is None or (hit[0] is not src and src.__class__ is LazyBuffer) or hit[1].base.op not in _KEPT_OPS:
      self._kept[key] = hit = (src, _like_lb(x, t))
    return hit[1]

  def _state_for(self, params: list[Tensor], store: list[Tensor]) -> list[Tensor]:
    idx = {id(p): i for i, p in enumerate(self.params)}
    return [store[idx[id(p)]] for p in params]

class OptimizerGroup(Optimizer):
  """Several optimizers (say, different learning rates for different parameters) stepped as one."""
  def __init__(self, *optimizers: Optimizer):
    self.optimizers = optimizers
    self.params = dedup([p for o in optimizers for p in o.params])
    self.buffers = dedup([b for o in optimizers for b in o.buffers])
  def __getitem__(self, i: int) -> Optimizer: return self.optimizers[i]
  def zero_grad(self) -> None:
    for o in self.optimizers: o.zero_grad()
  def schedule_step(self) -> list[Tensor]: return dedup([t for o in self.optimizers for t in o.schedule_step()])

class LARS(Optimizer):
  """Layer-wise adaptive rate scaling (You et al. 2017): SGD with momentum whose step per tensor is scaled by the trust
  ratio tcoef * |w| / (|g| + wd * |w|). With tcoef=0 it is plain SGD (see `SGD`); with ns_coefficients set, the
  momentum is orthogonalized by Newton-Schulz before the step (see `Muon`)."""
  def __init__(self, params: list[Tensor], lr: float = 0.001, momentum: float = 0.9, weight_decay: float = 1e-4, ns_steps: int = 0,
               ns_coefficients: tuple[float, ...] | None = None, nesterov: bool = False, classic: bool = True, pre_wd: bool = True,
               tcoef: float = 0.001, device: str | None = None):
    super().__init__(params, lr, device)
    self.ns_steps, self.ns_coefficients = ns_steps, tuple(ns_coefficients) if ns_coefficients is not None else None
    self.momentum, self.wd, self.nesterov, self.classic, self.pre_wd, self.tcoef = momentum, weight_decay, nesterov, classic, pre_wd, tcoef
    self.b = [Tensor.zeros(*t.shape, dtype=self.param_dtype, device=t.device, requires_grad=False) for t in self.params] if momentum else []
    _realize_inplace(self.b)

  def _step(self, params: list[Tensor], grads: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    out, bs = [], self._state_for(params, self.b) if self.momentum else []
    for i, (t, g) in enumerate(zip(params, grads)):
      g = g.cast(t.dtype) if g.dtype != t.dtype else g
      r: Tensor | None = None  # the trust ratio (none: 1)
      if self.tcoef != 0:
        r1, r2 = t.detach().square().sum().sqrt(), g.square().sum().sqrt()
        r = (r1 > 0).where((r2 > 0).where(self.tcoef * r1 / (r2 + self.wd * r1), 1.0), 1.0)
      if self.pre_wd and self.wd > 0: g = g + self._const(self.wd, g) * t.detach()
      if self.classic: g = self._scaled(g, r)  # classic momentum accumulates the lr-scaled step
      if self.momentum:
        bs[i].assign(self._const(self.momentum, bs[i]) * bs[i] + g)  # zero on the first step, so no special case
        g = (g + self._const(self.momentum, bs[i]) * bs[i]) if self.nesterov else bs[i]
      if self.ns_coefficients: g = g.reshape(g.shape[0], -1).newton_schulz(self.ns_steps, self.ns_coefficients).reshape(g.shape)
      if not self.pre_wd and self.wd > 0: g = g + self._const(self.wd, g) * t.detach()
      if not self.classic: g = self._scaled(g, r)
      out.append(g.cast(t.dtype))
    return out, bs

  def _scaled(self, g: Tensor, r: Tensor | None) -> Tensor: return (g if r is None else g * _like(r, g)) * self._const(self.lr, g)

def SGD(params: list[Tensor], lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
        classic: bool = False, device: str | None = None) -> LARS:
  """Stochastic gradient descent, as torch.optim.SGD (dampening 0): buf = momentum*buf + g (+ wd*w); w -= lr * buf
  (or lr * (g + momentum*buf) with nesterov)."""
  return LARS(params, lr, momentum, weight_decay, nesterov=nesterov, classic=classic, pre_wd=True, tcoef=0.0, device=device)

def Muon(params: list[Tensor], lr: float = 0.001, momentum: float = 0.95, weight_decay: float = 0.1, ns_steps: int = 5,
         ns_coefficients: tuple[float, ...] = (3.4445, -4.775, 2.0315), nesterov: bool = True, device: str | None = None) -> LARS:
  """Muon (Jordan et al. 2024), as tinygrad 0.14: SGD momentum (nesterov by default), each update orthogonalized by
  ns_steps Newton-Schulz iterations over the parameter viewed as (shape[0], -1), then w -= lr * (update + wd * w)."""
  return LARS(params, lr, momentum, weight_decay, ns_steps, ns_coefficients, nesterov, classic=False, pre_wd=False, tcoef=0.0, device=device)

class LAMB(Optimizer):
  """LAMB (You et al. 2019): Adam's bias-corrected step plus weight decay, scaled per tensor by |w| / |step|.
  With adam=True the scaling is off: that is Adam (weight_decay=0) or AdamW (decoupled weight decay)."""
  def __init__(self, params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6, weight_decay: float = 0.0,
               adam: bool = False, device: str | None = None):
    super().__init__(params, lr, device)
    self.b1, self.b2, self.eps, self.wd, self.adam = b1, b2, eps, weight_decay, adam
    # b1^t and b2^t, kept on the device so a replayed step advances them
    self.b1_t, self.b2_t = (Tensor.ones(1, dtype=dtypes.float32, device=self.device, requires_grad=False) for _ in range(2))
    self.m = [Tensor.zeros(*t.shape, dtype=self.param_dtype, device=t.device, requires_grad=False) for t in self.params]
    self.v = [Tensor.zeros(*t.shape, dtype=self.param_dtype, device=t.device, requires_grad=False) for t in self.params]
    _realize_inplace([self.b1_t, self.b2_t] + self.m + self.v)

  def _step(self, params: list[Tensor], grads: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    # the arithmetic of `b_t.assign(b_t * b)` and `(1.0 - b_t).reciprocal()`, on the lazy graph (see _adam_step)
    for bt, b in ((self.b1_t, self.b1), (self.b2_t, self.b2)): _write(bt, bt.lazydata.alu(Ops.MUL, bt.lazydata.const(b)))
    # the bias corrections' divisors, once for all parameters (x / y is x * (1/y))
    c1, c2 = (bt.lazydata.const(1.0).alu(Ops.ADD, bt.lazydata.alu(Ops.NEG)).alu(Ops.RECIP) for bt in (self.b1_t, self.b2_t))
    ms, vs = self._state_for(params, self.m), self._state_for(params, self.v)
    out = []
    for t, g, m, v in zip(params, grads, ms, vs):
      # state offloaded (`m.to_("CPU")`): the update is made where the state lives and comes back to the parameter
      tm, g = (t, g) if g.device == m.device else (t.detach().to(m.device), g.to(m.device))
      up = Tensor(self._adam_step(tm, g.float(), m, v, c1, c2), requires_grad=False)
      if up.device != t.device: up = up.to(t.device)
      if self.adam: lr = self._const_lb(self.lr, up)
      else:
        r1, r2 = t.detach().float().square().sum().sqrt(), up.square().sum().sqrt()
        lr = _like_lb(self.lr * (r1 > 0).where((r2 > 0).where(r1 / r2, 1.0), 1.0), up)
      out.append(Tensor(lr.alu(Ops.MUL, up.lazydata).cast(t.dtype), requires_grad=False))
    return out, [self.b1_t, self.b2_t] + ms + vs

  def _adam_step(self, t: Tensor, g: Tensor, m: Tensor, v: Tensor, c1: LazyBuffer, c2: LazyBuffer) -> LazyBuffer:
    """Assign m and v their new values; Adam's step m_hat / (sqrt(v_hat) + eps) (+ wd * t). Made on the lazy graph
    directly, the arithmetic of the Tensor expressions `b1*m + (1-b1)*g`, `b2*v + (1-b2)*(g*g)`, `m*c1 / ((v*c2).sqrt() +
    eps)` op for op, without their Python per op (Function.apply, broadcasting: most of an eager step's optimizer time).
    The scheduler makes the three assigns of a parameter one kernel."""
    if not m.dtype == v.dtype == g.dtype: raise DTypeError(f"optimizer state of {m.dtype} with gradients of {g.dtype}: set OPTIM_DTYPE=float32")
    def k(x: float) -> LazyBuffer: return self._const_lb(x, m)
    gl, MUL, ADD = g.lazydata, Ops.MUL, Ops.ADD
    _write(m, k(self.b1).alu(MUL, m.lazydata).alu(ADD, k(1.0 - self.b1).alu(MUL, gl)))
    _write(v, k(self.b2).alu(MUL, v.lazydata).alu(ADD, k(1.0 - self.b2).alu(MUL, gl.alu(MUL, gl))))
    m_hat, v_hat = m.lazydata.alu(MUL, _like_lb(c1, m)), v.lazydata.alu(MUL, _like_lb(c2, v))
    up = m_hat.alu(MUL, v_hat.alu(Ops.SQRT).alu(ADD, k(self.eps)).alu(Ops.RECIP))
    return up.alu(ADD, k(self.wd).alu(MUL, t.lazydata.cast(dtypes.float32))) if self.wd else up

def Adam(params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, device: str | None = None) -> LAMB:
  """Adam, as torch.optim.Adam."""
  return LAMB(params, lr, b1, b2, eps, 0.0, adam=True, device=device)

def AdamW(params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, weight_decay: float = 0.01,
          device: str | None = None) -> LAMB:
  """AdamW, as torch.optim.AdamW: w -= lr * (adam_step + weight_decay * w)."""
  return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True, device=device)

# *** learning rates: plain code that writes opt.lr ***

def set_lr(opt: Optimizer, lr: float) -> None:
  """Write a new learning rate into the optimizer(s) in place (a captured train step sees it)."""
  for o in (opt.optimizers if isinstance(opt, OptimizerGroup) else (opt,)):
    o.lr.assign(Tensor([lr], device=o.lr.device, dtype=o.lr.dtype)).realize()

def cosine_lr(base_lr: float, total_steps: int, warmup_steps: int = 0, min_lr: float = 0.0) -> Callable[[int], float]:
  """lr(step): linear warmup from 0 to base_lr, then a cosine decay to min_lr at total_steps."""
  def lr(step: int) -> float:
    if step < warmup_steps: return base_lr * (step + 1) / warmup_steps
    frac = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr + (base_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * frac))
  return lr

def step_lr(base_lr: float, step_size: int, gamma: float = 0.1) -> Callable[[int], float]:
  """lr(step): base_lr multiplied by gamma every step_size steps (torch's StepLR)."""
  return lambda step: base_lr * gamma ** (step // step_size)
