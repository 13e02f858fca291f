"""Tensor convolution and pooling: windows cut with movement ops, reduced (conv2d, pooling, interpolation).

Two gradients are given by rules (F.Composite) rather than taken through the views: conv2d's (the input gradient a
convolution per phase of the stride, _conv_input_grad) and overlapping windows' (shifted slices per phase, _fold_taps).
Through the views, both were a reduce over the window's copies of each input element (a fold)."""
from __future__ import annotations
import functools, math, itertools
from typing import TYPE_CHECKING, Any, Sequence
import numpy as np
from tinycore.codegen.heuristic import conv_weight_channels_last
from tinycore.codegen.conv_forward import conv_weight_panel, conv_output_channels_last
from tinycore.codegen.conv_backward import conv_input_channels_last, conv_weight_grad_images
from tinycore.device import renderer_of
from tinycore.dtype import DType, dtypes, to_np_dtype
from tinycore.helpers import prod, make_tuple, ceildiv
from tinycore.errors import ShapeError, ArgumentError
from tinycore.tensor.autograd import by_rule
if TYPE_CHECKING: from tinycore.tensor import Tensor

def weight_panel(weight: Tensor) -> int:
  """How many output channels one panel of a conv weight (cout, cin, *k) is stored in before the conv reads it: on a CPU
  with vectors, panels two vectors wide (codegen/conv_forward.py `conv_weight_panel`), or, for channels not in whole
  panels, one panel of all of them (channels-last, codegen/heuristic.py `conv_weight_channels_last`); 1: read as it is.
  A weight being trained is stored the same way: the copy is made under no_grad (_conv's value), and neither of the
  gradients reads the weight's layout (the input gradient convolves with its own copy, the weight's reads no weight);
  channels-last made ResNet-18's 7x7 and 4x4 forward convs 2x slower than the panels."""
  if (r := renderer_of(weight.device)) is None: return 1
  cout = weight.shape[0]
  if (p := conv_weight_panel(r, cout)) > 1: return p
  return cout if conv_weight_channels_last(r, cout) else 1

def weight_in_panels(weight: Tensor, panel: int) -> Tensor:
  """The weight copied into panels of `panel` output channels, (cout / panel, cin, *k, panel), as a view in its own shape."""
  (cout, cin), hw, nd = weight.shape[:2], weight.shape[2:], weight.ndim
  packed = weight.reshape(cout // panel, panel, cin, *hw).permute(0, *range(2, nd + 1), 1).contiguous()
  return packed.permute(0, nd, *range(1, nd)).reshape(cout, cin, *hw)

def _pad_arg(padding: int | Sequence[int], dims: int) -> tuple[tuple[int, int], ...]:
  """conv/pool padding: an int, one per spatial dim, or (left, right, top, bottom, ...) pairs from the last dim, as torch."""
  if isinstance(padding, int): return ((padding, padding),) * dims
  p = list(padding)
  if len(p) == dims: return tuple((x, x) for x in p)
  if len(p) == 2 * dims: return tuple((p[2 * i], p[2 * i + 1]) for i in reversed(range(dims)))
  raise ValueError(f"padding {padding} must be an int or have {dims} or {2*dims} values")

def _span(x: Tensor, spans: Sequence[tuple[int, int]]) -> Tensor:
  """x[..., start:start + n] along each of the last len(spans) dims, (start, n) each, with zeros where that runs past x."""
  lead = ((0, 0),) * (x.ndim - len(spans))
  x = x.pad(lead + tuple((max(0, -st), max(0, st + n - sz)) for (st, n), sz in zip(spans, x.shape[x.ndim - len(spans):])))
  return x.shrink(tuple((0, sz) for sz in x.shape[:len(lead)]) + tuple((st + max(0, -st), st + max(0, -st) + n) for st, n in spans))

def _conv_grads(grad: Tensor, x: Tensor, weight: Tensor, *, needs: tuple[bool, ...], geo: tuple) -> tuple[Tensor | None, Tensor | None]:
  """conv2d's gradients (F.Composite's rule). The weight's: the output gradient times the input's windows, summed over
  the batch and the output pixels (what autograd through the windows gives). The input's: a convolution of the output
  gradient with the weight transposed and flipped, one per phase of the stride (see _conv_input_grad)."""
  groups, stride, dilation, pads = geo
  # the output gradient is stored once before the two kernels read it: left as an expression (BatchNorm's backward, the
  # ReLU's mask), each kernel recomputes it at every load, once per tap and vector of channels (layer4's weight gradient:
  # 288 times per value), and its loads cost the conv's tile its lanes; the copy is bs * cout * pixels floats
  grad = grad.contiguous()
  dx = _conv_input_grad(grad, weight, x.shape[2:], *geo).cast(x.dtype) if needs[0] else None
  if not needs[1]: return dx, None
  (cout, _), hw = weight.shape[:2], weight.shape[2:]
  r, n = renderer_of(x.device), (bs := x.shape[0])
  # the input channels-last and the batch in groups of n, each group's partial gradient summed after (codegen/conv_backward.py)
  if r is not None and conv_input_channels_last(r, x.shape[1]):
    x = x.permute(0, *range(2, x.ndim), 1).contiguous().permute(0, x.ndim - 1, *range(1, x.ndim - 1))
    n = conv_weight_grad_images(r, bs, prod(grad.shape[2:]))
  xw = x._windowed(hw, groups, stride, dilation, pads, cout // groups)  # (bs, groups, cout/groups, *out, cin/groups, *k)
  g = grad.reshape(*xw.shape[:3 + len(hw)], *[1] * (1 + len(hw)))
  if n == bs: return dx, (xw * g).sum((0, *range(3, 3 + len(hw)))).reshape(weight.shape).cast(weight.dtype)
  part = (xw * g).reshape(bs // n, n, *xw.shape[1:]).sum((1, *range(4, 4 + len(hw))))
  return dx, part.sum(0).reshape(weight.shape).cast(weight.dtype)

def _conv_input_grad(grad: Tensor, weight: Tensor, insp: tuple[int, ...], groups: int, stride: tuple[int, ...],
                     dilation: tuple[int, ...], pads: tuple[tuple[int, int], ...]) -> Tensor:
  """The input gradient of a convolution as stride-1 convolutions of the output gradient, one per phase of the stride.

  Along a dim (input i, padding before pb, stride s, dilation d, kernel K): input position i = s*q + ph is read by
  output o through tap k where o*s + k*d = i + pb. Within a phase ph, the taps with k*d = ph + pb (mod s) are
  k0 + j*s' (s' = s / gcd(s, d)), read at o = q + c - j*d' (c = (ph + pb - k0*d) / s, d' = d / gcd(s, d)): a stride-1
  convolution of the output gradient with those taps flipped, dilation d'. The phases' results interleave into the
  input's positions (a stride of 1 has one phase: the transposed convolution). No multiply by a zero and no fold."""
  (cout, cin), hw, nd = weight.shape[:2], weight.shape[2:], len(insp)
  wt = weight.reshape(groups, cout // groups, cin, *hw).transpose(1, 2)  # (groups, cin/groups, cout/groups, *k)
  per_dim = []
  for i, k, s, d, (pb, _) in zip(insp, hw, stride, dilation, pads):
    sp, dp = s // math.gcd(s, d), d // math.gcd(s, d)
    phases = []
    for ph in range(min(s, i)):
      if (k0 := next((t for t in range(min(k, sp)) if (ph + pb - t * d) % s == 0), None)) is None: continue
      ntap = len(range(k0, k, sp))
      start = (ph + pb - k0 * d) // s - (ntap - 1) * dp  # the first output gradient the phase's first position reads
      phases.append((ph, k0, ntap, start, len(range(ph, i, s))))
    per_dim.append((sp, dp, phases))
  qs = tuple(ceildiv(i, s) for i, s in zip(insp, stride))
  ret: Tensor | None = None
  for combo in itertools.product(*[ph for _, _, ph in per_dim]):
    taps = wt[(slice(None),) * 3 + tuple(slice(k0, None, sp) for (sp, _, _), (_, k0, _, _, _) in zip(per_dim, combo))]
    taps = taps.flip(*range(3, 3 + nd)).reshape(groups * cin, cout // groups, *taps.shape[3:])
    # the output gradient from each phase's first read on, zeros beyond its ends
    g = _span(grad, [(st, q + (n - 1) * dp) for (_, dp, _), (_, _, n, st, q) in zip(per_dim, combo)])
    part = g.conv2d(taps, groups=groups, dilation=tuple(dp for _, dp, _ in per_dim))  # (bs, cin, *phase positions)
    if all(s == 1 for s in stride): return part
    part = part.pad(((0, 0), (0, 0)) + tuple((0, qm - q) for qm, (_, _, _, _, q) in zip(qs, combo)))
    part = _at_phase(part, tuple(ph for ph, *_ in combo), stride)
    ret = part if ret is None else ret + part
  # no tap reads any input position (a 1x1 kernel with stride 3 on 2 pixels, padded by 1): no gradient reaches it
  if ret is None: return type(grad).zeros(grad.shape[0], groups * cin, *insp, dtype=grad.dtype, device=grad.device)
  ret = ret.reshape(*ret.shape[:2], *[q * s for q, s in zip(qs, stride)])
  return ret.shrink(((0, ret.shape[0]), (0, ret.shape[1])) + tuple((0, i) for i in insp))

def _at_phase(part: Tensor, phase: tuple[int, ...], stride: tuple[int, ...]) -> Tensor:
  """part (..., *q), the values of the input positions q*s + ph of one phase (per dim), as (..., q1, s1, q2, s2, ...) with
  zeros at the other phases' positions: the phases' sum, reshaped to (..., q1*s1, q2*s2, ...), interleaves them."""
  n = len(phase)
  lead, qs = part.shape[:-n], part.shape[-n:]
  part = part.reshape(*lead, *[v for q in qs for v in (q, 1)])
  return part.pad(((0, 0),) * len(lead) + tuple(p for ph, s in zip(phase, stride) for p in ((0, 0), (ph, s - 1 - ph))))

def _phase_taps(i: int, k: int, s: int, d: int, pb: int) -> list[tuple[int, list[tuple[int, int]]]]:
  """Along one dim of a windowed input (size i, padding before pb, stride s, dilation d, kernel k; window a's tap t reads
  input position a*s + t*d - pb): per phase ph, the taps reading the positions q*s + ph, as (t, c): window q + c's tap t."""
  return [(ph, [(t, (ph + pb - t * d) // s) for t in range(k) if (ph + pb - t * d) % s == 0]) for ph in range(min(s, i))]

def _max_pool_grad(grad: Tensor, x: Tensor, *, needs: tuple[bool, ...], value: Tensor, k: tuple[int, ...], s: tuple[int, ...],
                   d: tuple[int, ...], pads: tuple[tuple[int, int], ...]) -> tuple[Tensor | None]:
  """Max pooling's input gradient where its windows overlap (F.Composite's rule): each window's gradient is shared evenly
  between its positions holding the max (as Max's gradient), gathered per input position. Per dim, position q*s + ph is
  tap t of window q + c for its phase's taps (_phase_taps): a phase's gradient is the sum over its taps of (x == that
  window's max) * that window's share, shifted slices of the output; the phases interleaved (_at_phase). An elementwise
  kernel over the input after a count of each window's maxima. Through the windows, Max's gradient was a tensor k*k times
  the output's size, then a fold of it per dim (ResNet-18's 3x3/2 pool at 112x112: 5 kernels, 30 ms; torch's: 2.3 ms)."""
  if not needs[0]: return (None,)
  n, xd, out = len(k), x.detach(), value.detach()
  (lead, insp), z = (x.shape[:-n], x.shape[-n:]), ((0, 0),) * (x.ndim - n)
  win = xd.pad(z + pads, value=-math.inf)._windows(k, s, d)
  ties = (win == out.reshape(*out.shape, *[1] * n)).cast(grad.dtype).sum(tuple(range(-n, 0)))
  share = grad * ties.reciprocal()
  qs = tuple(ceildiv(i, ss) for i, ss in zip(insp, s))
  xq = xd.pad(z + tuple((0, q * ss - i) for q, ss, i in zip(qs, s, insp))).reshape(*lead, *[v for q, ss in zip(qs, s) for v in (q, ss)])
  # each tap's term over the whole interleaved grid, its windows' max and share placed at its phase's positions (zeros
  # elsewhere): the pads are on stored buffers only (padded after the compare, each phase's sum was stored first)
  def placed(t: Tensor, phase: tuple[int, ...], spans: tuple) -> Tensor: return _at_phase(_span(t, spans), phase, s)
  # hit * share written as hit.where(share, share * 0) (equal, NaN and inf included): where the share is padding, 0 of
  # the kernel's, the term folds away (the multiply by a 0 does not fold in float, 5 of the 9 terms cost as much as the rest)
  def term(hit: Tensor, sh: Tensor) -> Tensor: return hit.where(sh, sh * 0)
  terms = [term(xq == placed(out, phase, spans), placed(share, phase, spans))
           for combo in itertools.product(*[_phase_taps(i, kk, ss, dd, pb) for i, kk, ss, dd, (pb, _) in zip(insp, k, s, d, pads)])
           for phase in [tuple(ph for ph, _ in combo)]
           for spans in itertools.product(*[[(c, q) for _, c in taps] for q, (_, taps) in zip(qs, combo)])]
  if not terms: return (x.zeros_like(),)
  dx = functools.reduce(lambda a, b: a + b, terms)
  return (dx.reshape(*lead, *[q * ss for q, ss in zip(qs, s)]).shrink(tuple((0, m) for m in lead) + tuple((0, i) for i in insp)),)

def _fold_taps(grad: Tensor, x: Tensor, *, needs: tuple[bool, ...], k: int, s: int, d: int) -> tuple[Tensor | None]:
  """The gradient of overlapping windows along x's last dim (F.Composite's rule): grad (..., o, k) -> (..., i); tap t of
  window a reads position a*s + t*d. Position q*s + ph (phase ph) gets tap t's gradient of window q + (ph - t*d)/s for
  the taps with t*d = ph (mod s): per phase a sum of shifted slices, the phases interleaved. Elementwise, no index / or %."""
  (*lead, o, _), i = grad.shape, x.shape[-1]
  q = ceildiv(i, s)
  dx = None
  for ph in range(min(s, i)):
    taps = [_span(grad.shrink(tuple((0, n) for n in lead) + ((0, o), (t, t + 1))).reshape(*lead, o), [((ph - t * d) // s, q)])
            for t in range(k) if (ph - t * d) % s == 0]
    if not taps: continue
    part = functools.reduce(lambda a, b: a + b, taps).reshape(*lead, q, 1).pad(((0, 0),) * len(lead) + ((0, 0), (ph, s - 1 - ph)))
    dx = part if dx is None else dx + part
  if dx is None: return (None,)
  return (dx.reshape(*lead, q * s).shrink(tuple((0, n) for n in lead) + ((0, i),)) if needs[0] else None,)

class ConvMixin:
  __slots__ = ()

  # *** convolution and pooling ***
  def _windows(self, kernel: tuple[int, ...], stride: int | tuple[int, ...] = 1, dilation: int | tuple[int, ...] = 1) -> Tensor:
    """Sliding windows over the last len(kernel) dims: (..., *spatial) -> (..., *out, *kernel), all views.

    Along one dim of size i: repeat it k times, flatten, pad to rows of i+d and read row b from column a*s; the
    element there is x[a*s + b*d], exactly the window element (see docs/design.md)."""
    k_ = kernel
    s_, d_ = make_tuple(stride, len(k_)), make_tuple(dilation, len(k_))
    if any(s <= 0 for s in s_) or any(d <= 0 for d in d_): raise ValueError(f"stride {stride} and dilation {dilation} must be positive")
    nlead = self.ndim - len(k_)
    x = self
    for j, (k, s, d) in enumerate(zip(k_, s_, d_)):
      ax = nlead + j
      # move the dim to the end, window it, and keep (out, k) at the end
      x = x.permute(*[a for a in range(x.ndim) if a != ax], ax)
      i = x.shape[-1]
      o = (i - d * (k - 1) - 1) // s + 1
      if o <= 0: raise ShapeError(f"kernel {k} with dilation {d} does not fit in an input of {i}")
      lead = x.shape[:-1]
      if d == 1 and s >= k:
        # windows that do not overlap (pooling) are a reshape: no repeated input, and a gradient without a fold
        x = x.pad(((0, 0),) * len(lead) + ((0, o * s - i),)) if o * s > i else x.shrink(tuple((0, n) for n in lead) + ((0, o * s),))
        x = x.reshape(*lead, o, s).shrink(tuple((0, n) for n in lead) + ((0, o), (0, k)))
      else:
        # through these views, the gradient is a reduce over the k copies (a fold at 0.1 GFLOP/s): given instead as a sum
        # of the k taps' gradients, each spread to its input positions (_fold_taps), elementwise
        x = by_rule((x,), functools.partial(x._overlapping_windows, k, s, d, o), functools.partial(_fold_taps, k=k, s=s, d=d))
      # the windowed dim's (o, k) went to the end: restore o to position ax, keep the k's gathered at the end
      nd = x.ndim
      order = list(range(nd - 2))
      order.insert(ax, nd - 2)
      x = x.permute(*order, nd - 1)
    return x

  def _overlapping_windows(self, k: int, s: int, d: int, o: int) -> Tensor:
    """Windows along the last dim (size i) that overlap: (..., i) -> (..., o, k), views (see _windows)."""
    (*lead, i), z = self.shape, ((0, 0),) * (self.ndim - 1)
    x = self.reshape(*lead, 1, i).expand(*lead, k, i).reshape(*lead, k * i)
    x = x.pad(z + ((0, k * d),)).reshape(*lead, k, i + d)
    if o * s > i + d: x = x.pad(z + ((0, 0), (0, o * s - i - d)))
    x = x.shrink(tuple((0, n) for n in lead) + ((0, k), (0, o * s))).reshape(*lead, k, o, s)
    return x.shrink(tuple((0, n) for n in lead) + ((0, k), (0, o), (0, 1))).reshape(*lead, k, o).transpose(-1, -2)
  def conv2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: int | tuple[int, ...] = 1,
             dilation: int | tuple[int, ...] = 1, padding: int | Sequence[int] = 0, dtype: DType | str | None = None) -> Tensor:
    """N-d convolution (cross-correlation, as torch): x (bs, cin, *spatial), weight (cout, cin/groups, *kernel).
    padding: an int, one per spatial dim, or (left, right, top, bottom, ...) for asymmetric padding."""
    if self.ndim < 3: raise ShapeError(f"conv input needs (batch, channels, *spatial) dims, got {self.shape}")
    if self.ndim != weight.ndim: raise ShapeError(f"conv input {self.shape} and weight {weight.shape} need the same number of dims")
    (_, cin_), (cout, cin), hw = self.shape[:2], weight.shape[:2], weight.shape[2:]
    if not isinstance(groups, int) or groups < 1: raise ArgumentError(f"conv groups must be a positive int, got {groups!r}")
    if groups * cin != cin_: raise ShapeError(f"conv input has {cin_} channels, weight {weight.shape} with groups={groups} expects {groups*cin}")
    if cout % groups: raise ShapeError(f"conv output channels {cout} are not divisible by groups={groups}")
    if bias is not None and bias.shape != (cout,): raise ShapeError(f"conv bias must have shape ({cout},), got {bias.shape}")
    geo = (groups, make_tuple(stride, len(hw)), make_tuple(dilation, len(hw)), _pad_arg(padding, len(hw)))
    # the value is the windowed product below; its gradient is given by _conv_grads (through the windows, autograd's
    # input gradient is a reduce into a k*k times larger tensor and a fold of it, 13 ms a ResNet layer at 0.4 GFLOP/s)
    ret = by_rule((self, weight), functools.partial(self._conv, weight, *geo, dtype), functools.partial(_conv_grads, geo=geo))
    return ret if bias is None else ret.add(bias.reshape(1, -1, *[1] * len(hw)))
  def _conv(self, weight: Tensor, groups: int, stride: tuple[int, ...], dilation: tuple[int, ...], pads: tuple[tuple[int, int], ...],
            dtype: DType | str | None) -> Tensor:
    """conv2d's value: the input's windows times the weight, summed over input channels and the window."""
    (bs, cout, cin), hw = (self.shape[0], *weight.shape[:2]), weight.shape[2:]
    src, weight, out_dt = self._product_operands(weight, dtype)
    panel = weight_panel(weight) if groups == 1 else 1
    if panel > 1: weight = weight_in_panels(weight, panel)
    x = src._windowed(hw, groups, stride, dilation, pads, cout // groups)  # (bs, groups, cout/groups, *out, cin/groups, *k)
    # the output channels as (panels, channels of a panel): the weight's index is linear in both (one view)
    rcout, p, oyx = cout // groups, panel if panel < cout else 1, x.shape[3:3 + len(hw)]
    if groups == 1 and (r := renderer_of(weight.device)) is not None and conv_output_channels_last(r, cout, cin * prod(hw)):
      # a short reduce: the output stored channels-last (bs, *out, cout) and its value a permuted view (conv_forward.py)
      x, w = x.permute(0, 1, *range(3, 3 + len(hw)), 2, *range(3 + len(hw), x.ndim)), weight.reshape(1, 1, *[1] * len(hw), cout, cin, *hw)
      out = (x * w).sum([-1 - i for i in range(1 + len(hw))], dtype=dtype).cast(out_dt).reshape(bs, *oyx, cout)
      return out.permute(0, len(hw) + 1, *range(1, len(hw) + 1))
    x = x.reshape(bs, groups, rcout // p, p, *x.shape[3:])
    w = weight.reshape(1, groups, rcout // p, p, *[1] * len(oyx), cin, *hw)
    return (x * w).sum([-1 - i for i in range(1 + len(hw))], keepdim=True, dtype=dtype).cast(out_dt).reshape(bs, cout, *oyx)
  def _windowed(self, hw: tuple[int, ...], groups: int, stride: tuple[int, ...], dilation: tuple[int, ...],
                pads: tuple[tuple[int, int], ...], rcout: int) -> Tensor:
    """The padded input's windows as (bs, groups, rcout, *out, cin/groups, *kernel), expanded along rcout."""
    x = self.pad(((0, 0), (0, 0)) + pads)._windows(hw, stride, dilation)  # (bs, cin_, *out, *k)
    (bs, cin_), oyx, n = x.shape[:2], x.shape[2:2 + len(hw)], len(hw)
    x = x.reshape(bs, groups, cin_ // groups, 1, *oyx, *hw).expand(bs, groups, cin_ // groups, rcout, *oyx, *hw)
    return x.permute(0, 1, 3, *[4 + i for i in range(n)], 2, *[4 + n + i for i in range(n)])
  def conv_transpose2d(self, weight: Tensor, bias: Tensor | None = None, groups: int = 1, stride: int | tuple[int, ...] = 1,
                       dilation: int | tuple[int, ...] = 1, padding: int | Sequence[int] = 0, output_padding: int | Sequence[int] = 0) -> Tensor:
    """Transposed convolution (as torch.conv_transpose2d): weight (cin, cout/groups, *kernel)."""
    if self.ndim < 3 or self.ndim != weight.ndim:
      raise ShapeError(f"conv_transpose input {self.shape} and weight {weight.shape} need matching (batch, channels, *spatial) dims")
    hw = weight.shape[2:]
    cin, rcout = weight.shape[:2]
    if self.shape[1] != cin: raise ShapeError(f"conv_transpose input has {self.shape[1]} channels, weight {weight.shape} expects {cin}")
    if cin % groups: raise ShapeError(f"conv_transpose input channels {cin} are not divisible by groups={groups}")
    nd = len(hw)
    s_, d_, op_ = make_tuple(stride, nd), make_tuple(dilation, nd), make_tuple(output_padding, nd)
    pads = _pad_arg(padding, nd)
    for o, s, d in zip(op_, s_, d_):
      if o >= max(s, d): raise ArgumentError(f"output_padding {output_padding} must be smaller than stride {stride} or dilation {dilation}")
    # weight (groups, cin/g, cout/g, *k) -> (groups * cout/g, cin/g, *k), flipped spatially
    w = weight.reshape(groups, cin // groups, rcout, *hw).permute(0, 2, 1, *range(3, 3 + nd)).flip(*range(3, 3 + nd))
    w = w.reshape(groups * rcout, cin // groups, *hw)
    x = self
    # spread the input: stride-1 zeros between elements
    for j, s in enumerate(s_):
      if s == 1: continue
      ax = 2 + j
      n = x.shape[ax]
      x = x.unsqueeze(ax + 1).pad(tuple((0, s - 1) if i == ax + 1 else (0, 0) for i in range(x.ndim + 1)))
      x = x.reshape(*x.shape[:ax], n * s, *x.shape[ax + 2:]).shrink(tuple((0, n * s - (s - 1)) if i == ax else None for i in range(x.ndim - 1)))
    full = []
    for (pb, pa), k, d, o in zip(pads, hw, d_, op_):
      full += [d * (k - 1) - pb, d * (k - 1) - pa + o]
    flat: list[int] = []
    for i in reversed(range(nd)): flat += [full[2 * i], full[2 * i + 1]]
    return x.conv2d(w, bias, groups=groups, dilation=dilation, padding=flat)
  def _pool_setup(self, kernel_size: Any, stride: Any, dilation: Any, padding: Any, ceil_mode: bool) -> tuple:
    k = make_tuple(kernel_size, 2)
    if self.ndim < len(k): raise ShapeError(f"pool kernel {k} needs at least {len(k)} dims, got shape {self.shape}")
    s = make_tuple(stride if stride is not None else k, len(k))
    d = make_tuple(dilation, len(k))
    pads = _pad_arg(padding, len(k))
    extra = []
    for i, (kk, ss, dd, (pb, pa)) in enumerate(zip(k, s, d, pads)):
      n = self.shape[self.ndim - len(k) + i] + pb + pa
      eff = dd * (kk - 1) + 1
      if eff > n: raise ShapeError(f"pool kernel {kk} with dilation {dd} does not fit in a padded input of {n}")
      if ceil_mode:
        o = ceildiv(n - eff, ss) + 1
        # the last window must start inside the input or the left padding (as torch)
        if (o - 1) * ss >= self.shape[self.ndim - len(k) + i] + pb: o -= 1
        extra.append(max(0, (o - 1) * ss + eff - n))
      else: extra.append(0)
    return k, s, d, pads, extra
  def max_pool2d(self, kernel_size: int | tuple[int, ...] = (2, 2), stride: int | tuple[int, ...] | None = None, dilation: int | tuple[int, ...] = 1,
                 padding: int | Sequence[int] = 0, ceil_mode: bool = False, return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """Max pooling over the last len(kernel_size) dims (padding counts as -inf). With return_indices, also the flat
    spatial index of each max (int32, as tinygrad; torch gives int64), for max_unpool2d."""
    k, s, d, pads, extra = self._pool_setup(kernel_size, stride, dilation, padding, ceil_mode)
    lead = self.ndim - len(k)
    full = ((0, 0),) * lead + tuple((pb, pa + e) for (pb, pa), e in zip(pads, extra))
    def padded() -> Tensor:
      return self.pad(full, value=-math.inf if dtypes.is_float(self.dtype) else dtypes.min(self.dtype)) if any(p != (0, 0) for p in full) else self
    axes = tuple(range(-len(k), 0))
    def pooled() -> Tensor: return padded()._windows(k, s, d).max(axis=axes)
    # overlapping windows: the gradient by a rule (_max_pool_grad), not through the windows' fold
    if any(not (dd == 1 and ss >= kk) for kk, ss, dd in zip(k, s, d)):
      out = by_rule((self,), pooled, functools.partial(_max_pool_grad, k=k, s=s, d=d, pads=full[lead:]), with_value=True)
    else: out = pooled()
    if not return_indices: return out
    w = padded()._windows(k, s, d)
    sp = self.shape[lead:]
    idx = self._iota(prod(sp), self.device).reshape(sp)
    idx = idx.pad(full[lead:], value=-1) if any(p != (0, 0) for p in full) else idx
    iw = idx._windows(k, s, d)
    wd = w.detach()
    od = out.detach().reshape(*out.shape, *[1] * len(k))
    hit = (wd == od) | (wd != wd) if dtypes.is_float(self.dtype) else wd == od
    # the first hit in window order: flatten the window dims, take the first true
    nw = prod(k)
    hitf = hit.reshape(*hit.shape[:-len(k)], nw)
    first = self._argfirst_static(hitf)
    onehot = first.unsqueeze(-1) == self._iota(nw, self.device)
    ind = self._select_sum(onehot, iw.reshape(*iw.shape[:-len(k)], nw).expand(*hitf.shape)).cast(dtypes.int32)
    return out, ind
  @classmethod
  def _argfirst_static(cls, mask: Tensor) -> Tensor:
    n = mask.shape[-1]
    rev = (n - 1) - cls._iota(n, mask.device)
    return ((n - 1) - mask.where(rev, -1).max(-1)).cast(dtypes.int32)
  def max_unpool2d(self, indices: Tensor, kernel_size: int | tuple[int, ...] = (2, 2), stride: int | tuple[int, ...] | None = None,
                   dilation: int | tuple[int, ...] = 1, padding: int | Sequence[int] = 0, output_size: Sequence[int] | None = None) -> Tensor:
    """The inverse of max_pool2d(return_indices=True): each value goes to its flat spatial index, zeros elsewhere (a
    scatter: O(input) writes into zeros; an index out of range raises IndexError at the next sync)."""
    k = make_tuple(kernel_size, 2)
    s = make_tuple(stride if stride is not None else k, len(k))
    d = make_tuple(dilation, len(k))
    pads = _pad_arg(padding, len(k))
    if indices.shape != self.shape: raise ShapeError(f"max_unpool2d indices shape {indices.shape} must match the input {self.shape}")
    lead = self.ndim - len(k)
    insp = self.shape[lead:]
    if output_size is None: osp = tuple((i - 1) * ss - pb - pa + dd * (kk - 1) + 1 for i, ss, (pb, pa), dd, kk in zip(insp, s, pads, d, k))
    else: osp = tuple(output_size)[-len(k):]
    n_out = prod(osp)
    xf, idx = self.reshape(*self.shape[:lead], prod(insp)), indices.reshape(*self.shape[:lead], prod(insp))
    zeros = self.zeros(*self.shape[:lead], n_out, dtype=self.dtype, device=self.device, requires_grad=False)
    out = zeros._scatter(idx, xf, lead)
    if any(ss < dd * (kk - 1) + 1 for ss, dd, kk in zip(s, d, k)):
      # overlapping windows may name one position twice, with the same value: the value is their mean, while each
      # input still gets the full gradient of its position (as torch)
      cnt = zeros._scatter(idx, 1, lead)
      out = (out / cnt.maximum(1)).detach() + (out - out.detach())
    return out.reshape(*self.shape[:lead], *osp)
  def avg_pool2d(self, kernel_size: int | tuple[int, ...] = (2, 2), stride: int | tuple[int, ...] | None = None, dilation: int | tuple[int, ...] = 1,
                 padding: int | Sequence[int] = 0, ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """Average pooling over the last len(kernel_size) dims. count_include_pad counts zero padding in the divisor;
    the extra padding of ceil_mode never counts (as torch)."""
    k, s, d, pads, extra = self._pool_setup(kernel_size, stride, dilation, padding, ceil_mode)
    lead = self.ndim - len(k)
    full = ((0, 0),) * lead + tuple((pb, pa + e) for (pb, pa), e in zip(pads, extra))
    x = self._float()
    xs = x.pad(full)._windows(k, s, d).sum(axis=tuple(range(-len(k), 0)))
    if count_include_pad and not any(extra): return xs / prod(k)
    # the divisor of each window depends only on shapes: count it on the host
    sp = self.shape[lead:]
    inside = np.ones([n + pb + pa for n, (pb, pa) in zip(sp, pads)], np.int64) if count_include_pad else \
      np.pad(np.ones(sp, np.int64), pads)
    inside = np.pad(inside, [(0, e) for e in extra])
    cnt = np.zeros(xs.shape[lead:], np.int64)
    for pos in itertools.product(*[range(o) for o in cnt.shape]):
      cnt[pos] = inside[tuple(slice(p * ss, p * ss + dd * (kk - 1) + 1, dd) for p, ss, dd, kk in zip(pos, s, d, k))].sum()
    return xs / type(self)(cnt.astype(np.float32), device=self.device).cast(xs.dtype)
  def interpolate(self, size: tuple[int, ...], mode: str = "linear", align_corners: bool = False) -> Tensor:
    """Resize the last len(size) dims: mode "linear" (bi/tri-linear, as torch's linear modes), "nearest" or "nearest-exact".
    The dtype is kept: integer inputs (uint8 images) are resized as torch does, one dim at a time, last first, each with
    the weights in fixed point (rounded to 15 significant bits) and the result rounded and clamped to the dtype."""
    if mode not in ("linear", "nearest", "nearest-exact"):
      raise ArgumentError(f"interpolate mode must be linear, nearest or nearest-exact, got {mode!r}")
    if align_corners and mode != "linear": raise ArgumentError("align_corners only applies to mode 'linear'")
    size = tuple(size)
    if len(size) > self.ndim: raise ShapeError(f"interpolate size {size} has more dims than the input {self.shape}")
    fixed = mode == "linear" and not dtypes.is_float(self.dtype)
    x = self.cast(dtypes.int32 if self.dtype.itemsize <= 2 else dtypes.int64) if fixed else self._float()
    for j in reversed(range(len(size))):
      out_n, ax = size[j], self.ndim - len(size) + j
      in_n = x.shape[ax]
      w = np.zeros((in_n, out_n), np.float64)
      dst = np.arange(out_n, dtype=np.float64)
      if mode == "linear":
        if align_corners: src = dst * ((in_n - 1) / (out_n - 1)) if out_n > 1 else dst * 0
        else: src = np.maximum((dst + 0.5) * (in_n / out_n) - 0.5, 0)
        i0 = np.minimum(np.floor(src).astype(np.int64), in_n - 1)
        i1 = np.minimum(i0 + 1, in_n - 1)
        l1 = src - i0
        np.add.at(w, (i0, np.arange(out_n)), 1 - l1)
        np.add.at(w, (i1, np.arange(out_n)), l1)
      else:
        off = 0.5 if mode == "nearest-exact" else 0.0
        src = np.minimum(np.floor((dst + off) * (in_n / out_n)).astype(np.int64), in_n - 1)
        w[src, np.arange(out_n)] = 1
      if fixed: x = x._fixed_point_resize(w, ax).clip(dtypes.min(self.dtype), dtypes.max(self.dtype))
      else:
        wt = type(self)(w.astype(to_np_dtype(x.dtype) if x.dtype != dtypes.bfloat16 else np.float32), device=self.device, dtype=x.dtype)
        x = (x.transpose(ax, -1) @ wt).transpose(ax, -1)
    return x.cast(self.dtype)
  def _fixed_point_resize(self, w: np.ndarray, ax: int) -> Tensor:
    """self (integer) @ w along ax as torch computes uint8 images: w scaled by 2**p with p the most bits that keep its
    largest entry under 2**15 (int16), rounded; the sums rounded half up and shifted back."""
    p = next((p for p in range(22) if int(0.5 + float(w.max()) * 2 ** (p + 1)) >= 2 ** 15), 22)
    wi = type(self)(np.floor(w * 2 ** p + 0.5).astype(to_np_dtype(self.dtype)), device=self.device, dtype=self.dtype)
    return ((self.transpose(ax, -1) @ wi + (1 << p >> 1)) >> p).transpose(ax, -1)
