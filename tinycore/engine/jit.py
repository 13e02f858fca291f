"""TinyJit: run a function's kernels again without running the function.

    @TinyJit
    def step(x: Tensor) -> Tensor: ...

Call 1 runs the function normally (it compiles its kernels and realizes any state it creates). Call 2 runs it again
while recording every kernel it runs with the buffers it ran on (run_schedule records into `realize.capturing`). From call 3 on,
the function is not called: the recorded kernels run again, with the buffers of the new input Tensors put where the
inputs of call 2 were. What the function returned at call 2 is returned again, its buffers holding the new results.

So a jitted function must do the same work on every call: the same kernels on the same state. Python-side effects,
values read back with .numpy()/.item() inside it and Python numbers that change between calls are not replayed (put a
changing number in a Tensor, or pass it as a bound Variable). Random numbers do change: the generator's counter is a
device buffer that a captured assign kernel advances.

Inputs are the Tensors (and bound Variables) among the positional and keyword arguments. An input whose shape, dtype,
device or view differs from call 2's raises JitError naming both (the captured kernels were compiled for the old
layout); `jit.reset()` forgets the capture so the next calls warm up and capture again. JIT=0 turns capturing off:
the function simply runs every time."""
from __future__ import annotations
import dataclasses, functools
from typing import Any, Callable, Generic, TypeVar
from tinycore.tensor import Tensor
from tinycore.device import Buffer
from tinycore.helpers import DEBUG, JIT, PROFILE, GlobalCounters
from tinycore import profile
from tinycore.engine import realize as _realize
from tinycore.engine.realize import Capture, CompiledRunner, Runner, exec_runner
from tinycore.engine.memory import MEMPLAN, Plan, plan_capture, free_caches
from tinycore.lazy import merge_var_vals
from tinycore.multi import shards_of
from tinycore.uop.uop import UOp, BoundVariable

ReturnType = TypeVar("ReturnType")

class JitError(RuntimeError):
  """A call that the captured kernels cannot serve (changed inputs), or a function that cannot be captured."""

# *** capturing: realize.capturing is a stack of lists; run_schedule records every kernel into the innermost one ***

class _capturing:
  def __init__(self, cap: Capture): self.cap = cap
  def __enter__(self) -> None: _realize.capturing.append(self.cap)
  def __exit__(self, *exc: Any) -> None:
    if _realize.capturing and _realize.capturing[-1] is self.cap: _realize.capturing.pop()

# *** inputs ***

def _inputs(args: tuple, kwargs: dict[str, Any]) -> tuple[list[tuple[str, Tensor]], dict[UOp, int]]:
  """The Tensors among the arguments (by a readable name) and the values of the Variables: the bound ones among
  the arguments and those bound in the inputs' shapes (`x[:v.bind(n)]`, `Tensor.empty(v.bind(n), 784)`)."""
  named = [(f"argument {i}", a) for i, a in enumerate(args)] + [(f"keyword argument {k!r}", v) for k, v in sorted(kwargs.items())]
  tensors = [(n, a) for n, a in named if isinstance(a, Tensor)]
  bound = [a.vals for _, a in named if isinstance(a, BoundVariable)] + [t.lazydata.var_vals for _, t in tensors if t.lazydata.var_vals]
  return tensors, merge_var_vals(*bound) if bound else {}

def _signature(t: Tensor) -> tuple:
  return (tuple(t.shape), t.dtype, t.device, t.lazydata.st, getattr(t.lazydata, "axis", None))

def _describe(sig: tuple) -> str:
  shape, dtype, device, st, axis = sig
  view = "" if st.contiguous else f", view {st}"
  return f"shape {shape}, dtype {dtype}, device {device}{view}" + (f", sharded on axis {axis}" if axis is not None else "")

def _walk_tensors(x: Any) -> list[Tensor]:
  if isinstance(x, Tensor): return [x]
  if isinstance(x, (list, tuple)): return [t for v in x for t in _walk_tensors(v)]
  if isinstance(x, dict): return [t for v in x.values() for t in _walk_tensors(v)]
  return []

class CapturedJit(Generic[ReturnType]):
  """The kernels of one captured call, where the inputs go in them, and what the call returned. With `writes` (the
  buffer slots each kernel writes, as Capture records them) the buffers only these kernels use share memory where
  their lifetimes do not overlap (engine/memory.py; MEMPLAN=0 keeps each its own)."""
  def __init__(self, ret: Any, kernels: list[tuple[Runner, list[Buffer]]], input_bufs: list[Buffer], names: list[str],
               signatures: list[tuple], var_names: list[UOp], writes: list[tuple[int, ...]] | None = None):
    self.writes = writes
    self.plan: Plan | None = None  # where the private buffers went (without the kernels' lists)
    if writes is not None and MEMPLAN.value:
      plan = plan_capture(kernels, writes)
      if plan.placed:
        kernels[:] = plan.kernels  # type: ignore[assignment]  # (the capture's own lists: its old buffers go now)
        self.plan = dataclasses.replace(plan, kernels=[])
        free_caches({m.device for m, *_ in plan.placed})  # (where the old buffers went: the arenas take their place)
        if DEBUG >= 1: print(f"JIT memory plan: {plan.bytes_before/1e6:.1f} MB of buffers in {plan.bytes_after/1e6:.1f} MB")
      del plan
    self.ret, self.kernels, self.names, self.signatures, self.var_names = ret, kernels, names, signatures, var_names
    pos = {id(b): i for i, b in enumerate(input_bufs)}
    # (kernel, buffer slot) -> input number, for every slot that held an input buffer
    self.input_replace: dict[tuple[int, int], int] = {(j, i): pos[id(b)] for j, (_, bufs) in enumerate(kernels)
                                                      for i, b in enumerate(bufs) if id(b) in pos}
    # drop the references to call 2's input buffers: their owners may free them
    self.kernels = [(r, [b if (j, i) not in self.input_replace else None for i, b in enumerate(bufs)]) for j, (r, bufs) in enumerate(kernels)]  # type: ignore[misc]
    # the replay's fast path: every kernel bound once to its buffers (Program.launcher), those reading an input bound
    # again when that input's memory changes, those whose launch takes Variables' values (a KV cache's length) bound
    # again when the values change
    runners = [r for r, _ in self.kernels]
    self.bindable = all(isinstance(r, CompiledRunner) for r in runners)
    self.reads: list[set[int]] = [{k for (j2, _), k in self.input_replace.items() if j2 == j} for j in range(len(self.kernels))]
    self.symbolic = {j for j, r in enumerate(runners) if not getattr(r, "plain", True)}
    self.calls: list[Callable[[], Any] | None] = [None] * len(self.kernels)
    self.call_bufs: list[list[Buffer] | None] = [None] * len(self.kernels)  # the buffers each call is bound to
    self.bound: list[Any] = [None] * len(input_bufs)  # the inputs' device memory the calls are bound to
    self.bound_vals: dict[UOp, int] | None = None  # the Variables' values the symbolic calls are bound to
    self.ops = sum(r.op_estimate for r in runners)
    self.mem = sum(b.size * b.dtype.itemsize for _, bufs in kernels for b in bufs)

  def __call__(self, input_bufs: list[Buffer], var_vals: dict[UOp, int]) -> ReturnType:
    if self.bindable and DEBUG < 2 and not _realize.capturing and not PROFILE.value:
      mem = [b.ensure_allocated()._buf for b in input_bufs]
      changed = {k for k, (x, y) in enumerate(zip(mem, self.bound)) if x is not y}
      new_vals = bool(self.symbolic) and var_vals != self.bound_vals
      if changed or new_vals or None in self.calls:
        for j, (runner, _) in enumerate(self.kernels):
          if self.calls[j] is None or not changed.isdisjoint(self.reads[j]):
            self.call_bufs[j] = [b.ensure_allocated() for b in self._bufs(j, input_bufs)]
          elif not (new_vals and j in self.symbolic): continue
          self.calls[j] = runner.launcher(self.call_bufs[j], var_vals)  # type: ignore[attr-defined]
        self.bound, self.bound_vals = mem, var_vals  # (held: a bound address stays valid while its memory object lives)
      for f in self.calls: f()  # type: ignore[misc]
      gc = GlobalCounters
      gc.kernel_count, gc.global_ops, gc.global_mem = gc.kernel_count + len(self.calls), gc.global_ops + self.ops, gc.global_mem + self.mem
    else:
      st = profile.now()  # (a replay's span on the timeline while profiling)
      for j, (runner, _) in enumerate(self.kernels):
        run_bufs = self._bufs(j, input_bufs)
        for b in run_bufs: b.ensure_allocated()
        exec_runner(runner, run_bufs, var_vals, jit=True)
        if _realize.capturing:  # a jit replayed inside another's capture (what it writes unknown without `writes`: nothing)
          _realize.capturing[-1].record(runner, run_bufs, self.writes[j] if self.writes is not None else ())
      if PROFILE.value and self.kernels:
        profile.record(self.kernels[0][0].device, "jit", f"replay, {len(self.kernels)} kernels", st, profile.now() - st)
    # returned tensors of a symbolic shape now hold the results for these values
    if var_vals:
      for t in _walk_tensors(self.ret): t.lazydata.rebind(var_vals)
    return self.ret

  def _bufs(self, j: int, input_bufs: list[Buffer]) -> list[Buffer]:
    return [input_bufs[self.input_replace[(j, i)]] if b is None else b for i, b in enumerate(self.kernels[j][1])]

class TinyJit(Generic[ReturnType]):
  """Capture the kernels fxn runs on its second call and replay them from the third on (see the module docstring)."""
  def __new__(cls, fxn: Callable[..., ReturnType] | None = None, captured: CapturedJit | None = None, prune: bool = False, **kwargs: Any) -> Any:
    # `@TinyJit(prune=True)` (no function yet) makes a decorator, as in tinygrad 0.14
    if fxn is None and captured is None: return functools.partial(cls, captured=captured, prune=prune, **kwargs)
    return super().__new__(cls)
  def __init__(self, fxn: Callable[..., ReturnType] | None = None, captured: CapturedJit | None = None, prune: bool = False, **kwargs: Any):
    """prune is accepted for tinygrad 0.14's signature: tinycore replays every captured kernel (pruning the ones that do
    not depend on the inputs only saves time there); any other keyword is a TypeError."""
    if kwargs: raise TypeError(f"TinyJit got unexpected keyword argument(s) {sorted(kwargs)}")
    if fxn is None and captured is None: raise ValueError("TinyJit needs a function or a CapturedJit")
    self.fxn, self.captured, self.prune = fxn, captured, prune
    self.cnt: int = 2 if captured is not None else 0
    if fxn is not None: functools.update_wrapper(self, fxn)  # type: ignore[arg-type]

  def reset(self) -> None:
    """Forget the capture: the next call runs the function normally, the one after captures again."""
    if self.fxn is None: raise JitError("this TinyJit was built from a CapturedJit and has no function to capture again")
    self.cnt, self.captured = 0, None

  def __get__(self, obj: Any, objtype: Any = None) -> Any:
    return self if obj is None else functools.partial(self.__call__, obj)  # decorating a method: bind self

  @property
  def jit_cache(self) -> list[tuple[Runner, list[Buffer]]]: return self.captured.kernels if self.captured is not None else []

  def __call__(self, *args: Any, **kwargs: Any) -> ReturnType:
    tensors, var_vals = _inputs(args, kwargs)
    if not JIT and self.fxn is not None: return self.fxn(*args, **kwargs)
    # every input is a realized buffer before anything is recorded
    pending = [t for _, t in tensors if not t.lazydata.is_realized()]
    if pending: Tensor.realize(*pending)
    # (a tensor on several devices is an input buffer per shard)
    per_tensor = [[lb.base.buffer for lb in shards_of(t.lazydata)] for _, t in tensors]
    input_bufs = [b for bs in per_tensor for b in bs]
    if len({id(b) for b in input_bufs}) != len(input_bufs):
      dup = [n for (n, _), bs in zip(tensors, per_tensor) if any(sum(x is b for x in input_bufs) > 1 for b in bs)]
      raise JitError(f"the inputs {dup} share one buffer: a jitted function needs distinct input tensors")

    if self.cnt >= 2 and self.captured is not None:
      self._check(tensors, var_vals)
      return self.captured(input_bufs, var_vals)

    assert self.fxn is not None
    if self.cnt == 0:
      ret = self.fxn(*args, **kwargs)
      if (outs := _walk_tensors(ret)): Tensor.realize(*outs)
      self.cnt = 1
      return ret

    # cnt == 1: run it again, recording every kernel
    kernels = Capture()
    with _capturing(kernels):
      ret = self.fxn(*args, **kwargs)
      if (outs := _walk_tensors(ret)): Tensor.realize(*outs)
    if any(not t.lazydata.is_realized() for _, t in tensors):
      raise JitError("an input of the jitted function was replaced by an unrealized value during the call")
    for o in outs:
      if any(lb.base.buffer is b for lb in shards_of(o.lazydata) for b in input_bufs):
        raise JitError("a jitted function may not return one of its inputs unchanged")
    self.captured = CapturedJit(ret, kernels, input_bufs, [n for n, _ in tensors], [_signature(t) for _, t in tensors], sorted(var_vals, key=repr),
                                kernels.writes)
    if DEBUG >= 1: print(f"JIT captured {len(kernels)} kernels with {len(input_bufs)} inputs")
    self.cnt = 2
    return ret

  def _check(self, tensors: list[tuple[str, Tensor]], var_vals: dict[UOp, int]) -> None:
    cap = self.captured
    assert cap is not None
    names = [n for n, _ in tensors]
    if names != cap.names: raise JitError(f"jitted function called with tensor inputs {names}, but it was captured with {cap.names}")
    for (name, t), old in zip(tensors, cap.signatures):
      if (new := _signature(t)) != old:
        raise JitError(f"jitted function input changed: {name} was {_describe(old)} when captured, now {_describe(new)}; "
                       "the captured kernels only fit the old one (call .reset() to capture again)")
    if sorted(var_vals, key=repr) != cap.var_names:
      raise JitError(f"jitted function called with Variables {sorted(var_vals, key=repr)}, but it was captured with {cap.var_names}")
