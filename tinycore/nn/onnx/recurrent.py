"""ONNX's recurrent layers RNN, LSTM and GRU, unrolled over the sequence (its length is the input's static dim).

All three share the frame: X is (seq, batch, input) (layout 0) or (batch, seq, input) (layout 1); W, R and B hold one
set of weights per direction, the gates stacked along dim 1 (RNN: one gate; LSTM: i, o, f, c; GRU: z, r, h); a
bidirectional layer runs the sequence both ways and stacks the results at dim 1 of Y (seq, directions, batch, hidden).
`clip` clips every gate's input. sequence_lens shorter than the sequence freeze a batch entry's state and zero its
outputs past its length (forward direction). The step of each layer is the formula ONNX's operator table gives."""
from __future__ import annotations
from typing import Callable
from tinycore.tensor import Tensor
from tinycore.nn.onnx.registry import onnx_op
from tinycore.nn.onnx.tensors import scalar

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"Sigmoid": Tensor.sigmoid, "Tanh": Tensor.tanh, "Relu": Tensor.relu}
_NAMES = tuple(ACTIVATIONS)

def _frame(x: Tensor, layout: int, direction: str, seq_lens: Tensor | None) -> tuple[Tensor, list[int], Tensor | None]:
  """x as (seq, batch, input), the directions to run (0 forward, 1 reverse), and the per-batch step mask source."""
  x = x.permute(1, 0, 2) if layout else x
  dirs = {"forward": [0], "reverse": [1], "bidirectional": [0, 1]}[direction]
  lens = seq_lens.reshape(1, -1, 1) if seq_lens is not None else None
  if lens is not None and 1 in dirs and scalar(lens.min() != x.shape[0]):
    raise NotImplementedError("ONNX RNN/LSTM/GRU in reverse with sequence_lens shorter than the sequence")
  return x, dirs, lens

def _run(x: Tensor, d: int, state: tuple[Tensor, ...], step: Callable[[Tensor, tuple[Tensor, ...]], tuple[Tensor, ...]],
         lens: Tensor | None) -> tuple[Tensor, tuple[Tensor, ...]]:
  """Y (seq, batch, hidden) and the final state of one direction (d=1 walks the sequence backwards)."""
  ys: list[Tensor] = []
  for t in (range(x.shape[0] - 1, -1, -1) if d else range(x.shape[0])):
    new = step(x[t], state)
    if lens is not None:
      live = t < lens[0]
      new, y = tuple(live.where(n, s) for n, s in zip(new, state)), live.where(new[0], 0)
    else: y = new[0]
    state = new
    ys.append(y)
  if d: ys.reverse()
  return Tensor.stack(*ys), state

def _out(ys: list[Tensor], finals: list[tuple[Tensor, ...]], layout: int) -> tuple[Tensor, ...]:
  y = Tensor.stack(*ys, dim=1)  # (seq, dirs, batch, hidden)
  states = tuple(Tensor.stack(*[f[i] for f in finals]) for i in range(len(finals[0])))  # each (dirs, batch, hidden)
  if layout: return (y.permute(2, 0, 1, 3), *[s.permute(1, 0, 2) for s in states])
  return (y, *states)

def _split(b: Tensor | None, d: int, n: int, hidden: int) -> tuple[Tensor, Tensor] | tuple[int, int]:
  return (b[d, :n * hidden], b[d, n * hidden:]) if b is not None else (0, 0)

def _init(t: Tensor | None, d: int, batch: int, hidden: int, layout: int, like: Tensor) -> Tensor:
  if t is None: return Tensor.zeros(batch, hidden, dtype=like.dtype)
  return (t.permute(1, 0, 2) if layout else t)[d]

def _acts(activations: list[str] | None, default: list[str], d: int) -> list[Callable[[Tensor], Tensor]]:
  names = activations if activations else default * 2
  per = len(default)
  return [ACTIVATIONS[n] for n in (names[d * per:(d + 1) * per] if len(names) >= (d + 1) * per else names[:per])]

def _clip(t: Tensor, clip: float | None) -> Tensor: return t.clip(-clip, clip) if clip is not None else t

@onnx_op(values={"direction": ("forward", "reverse", "bidirectional"), "activations": _NAMES})
def RNN(x: Tensor, w: Tensor, r: Tensor, b: Tensor | None = None, seq_lens: Tensor | None = None, h0: Tensor | None = None, /, *,
        activation_alpha: list[float] | None = None, activation_beta: list[float] | None = None, activations: list[str] | None = None,
        clip: float | None = None, direction: str = "forward", hidden_size: int | None = None, layout: int = 0) -> tuple[Tensor, Tensor]:
  """H = f(X W^T + H R^T + Wb + Rb)."""
  x, dirs, lens = _frame(x, layout, direction, seq_lens)
  ys, finals = [], []
  for i, d in enumerate(dirs):
    (f,), (wb, rb), hid = _acts(activations, ["Tanh"], i), _split(b, i, 1, r.shape[-1]), r.shape[-1]
    def step(xt: Tensor, s: tuple[Tensor, ...], i: int = i, f: Callable = f, wb=wb, rb=rb) -> tuple[Tensor, ...]:
      return (f(_clip(xt @ w[i].T + s[0] @ r[i].T + wb + rb, clip)),)
    y, fin = _run(x, d, (_init(h0, i, x.shape[1], hid, layout, x),), step, lens)
    ys.append(y); finals.append(fin)  # noqa: E702
  return _out(ys, finals, layout)  # type: ignore[return-value]

@onnx_op(values={"direction": ("forward", "reverse", "bidirectional"), "activations": _NAMES, "input_forget": (0,)})
def LSTM(x: Tensor, w: Tensor, r: Tensor, b: Tensor | None = None, seq_lens: Tensor | None = None, h0: Tensor | None = None,
         c0: Tensor | None = None, p: Tensor | None = None, /, *, activation_alpha: list[float] | None = None,
         activation_beta: list[float] | None = None, activations: list[str] | None = None, clip: float | None = None, direction: str = "forward",
         hidden_size: int | None = None, input_forget: int = 0, layout: int = 0) -> tuple[Tensor, Tensor, Tensor]:
  """Gates i, o, f (activation f, with peepholes P on C), c (activation g); C = f * C + i * c; H = o * h(C)."""
  x, dirs, lens = _frame(x, layout, direction, seq_lens)
  ys, finals = [], []
  for i, d in enumerate(dirs):
    (fa, ga, ha), (wb, rb), hid = _acts(activations, ["Sigmoid", "Tanh", "Tanh"], i), _split(b, i, 4, r.shape[-1]), r.shape[-1]
    pi, po, pf = (p[i, :hid], p[i, hid:2 * hid], p[i, 2 * hid:]) if p is not None else (0, 0, 0)
    def step(xt: Tensor, s: tuple[Tensor, ...], i: int = i, fa=fa, ga=ga, ha=ha, wb=wb, rb=rb, pi=pi, po=po, pf=pf,
             hid: int = hid) -> tuple[Tensor, ...]:
      h, c = s
      g = xt @ w[i].T + h @ r[i].T + wb + rb
      gi, go, gf, gc = (g[:, k * hid:(k + 1) * hid] for k in range(4))
      it, ft = fa(_clip(gi + pi * c, clip)), fa(_clip(gf + pf * c, clip))
      c = ft * c + it * ga(_clip(gc, clip))
      return fa(_clip(go + po * c, clip)) * ha(c), c
    y, fin = _run(x, d, (_init(h0, i, x.shape[1], hid, layout, x), _init(c0, i, x.shape[1], hid, layout, x)), step, lens)
    ys.append(y); finals.append(fin)  # noqa: E702
  return _out(ys, finals, layout)  # type: ignore[return-value]

@onnx_op(values={"direction": ("forward", "reverse", "bidirectional"), "activations": _NAMES})
def GRU(x: Tensor, w: Tensor, r: Tensor, b: Tensor | None = None, seq_lens: Tensor | None = None, h0: Tensor | None = None, /, *,
        activation_alpha: list[float] | None = None, activation_beta: list[float] | None = None, activations: list[str] | None = None,
        clip: float | None = None, direction: str = "forward", hidden_size: int | None = None, layout: int = 0,
        linear_before_reset: int = 0) -> tuple[Tensor, Tensor]:
  """Gates z, r (activation f) and h (activation g); H = (1 - z) * h + z * H. linear_before_reset applies r after R's product."""
  x, dirs, lens = _frame(x, layout, direction, seq_lens)
  ys, finals = [], []
  for i, d in enumerate(dirs):
    (fa, ga), (wb, rb), hid = _acts(activations, ["Sigmoid", "Tanh"], i), _split(b, i, 3, r.shape[-1]), r.shape[-1]
    def step(xt: Tensor, s: tuple[Tensor, ...], i: int = i, fa=fa, ga=ga, wb=wb, rb=rb, hid: int = hid) -> tuple[Tensor, ...]:
      h = s[0]
      gx = xt @ w[i].T + wb
      rz, rr, rh = (r[i, k * hid:(k + 1) * hid] for k in range(3))
      rbz, rbr, rbh = (rb[k * hid:(k + 1) * hid] for k in range(3)) if isinstance(rb, Tensor) else (0, 0, 0)
      z = fa(_clip(gx[:, :hid] + h @ rz.T + rbz, clip))
      rt = fa(_clip(gx[:, hid:2 * hid] + h @ rr.T + rbr, clip))
      hh = ga(_clip(gx[:, 2 * hid:] + (rt * (h @ rh.T + rbh) if linear_before_reset else (rt * h) @ rh.T + rbh), clip))
      return ((1 - z) * hh + z * h,)
    y, fin = _run(x, d, (_init(h0, i, x.shape[1], hid, layout, x),), step, lens)
    ys.append(y); finals.append(fin)  # noqa: E702
  return _out(ys, finals, layout)  # type: ignore[return-value]
