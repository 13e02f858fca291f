"""A convolution's forward on a CPU with vectors: the weight's layout and the register tile of the conv kernel.

The weight (cout, cin, *k) is stored in panels of output channels, (cout / P, cin, *k, P), P two vectors wide
(`conv_weight_panel`): the conv's reduce then walks one panel contiguously. Stored channels-last whole (P = cout), each
step of the reduce reads 2 vectors out of a cout-wide row, rows kernel-width x cout floats apart, a new page almost every
step for a 512-channel layer (ResNet-18's 7x7 layer: 4x slower than the panels on one AVX-512 core). A weight being
trained is stored in panels too (its gradients read the weight as it is; layer4 of a ResNet-18 training step, 4x4
images: 2.6x faster than channels-last).

The tile (`conv_forward_tile`): the two vectors of a panel x the output columns of one image row as rows (each
input value broadcast to both vectors), the window's columns unrolled (an input value feeds each of them), its rows
left as a loop (unrolled too, the loop body outgrows the registers: 1.4x slower on a 7x7 image). An image narrower than 7
columns takes its columns whole x a few of its rows (a 4x4 image: 4 x 2 x the two vectors), where that makes MIN_ACCS
accumulators or more (as many as the whole register file where fewer leave too few).

Few input channels (`conv_output_channels_last`, `conv_few_taps_tile`): a conv whose reduce is at most FEW_TAPS taps
(input channels x window: the seed conv's 3 x 3x3) stores its output channels-last and returns a permuted view; its
tile is vectors of output channels x a few pixels and images, each output vector one store.

The loop order (`conv_loop_order`): a weight bigger than the batch's input is read once, its panels loop outermost and
each panel serves every image from the cache."""
from __future__ import annotations
from tinycore.backend import Renderer
from tinycore.ops import Ops
from tinycore.helpers import getenv, prod
from tinycore.uop.uop import UOp, sint
from tinycore.codegen.kernel import Kernel, Opt, OptOps, KernelOptError

# the fewest accumulators conv_forward_tile takes (else heuristic.py's tiles): a 4x4 image's 8 at AVX2 measured 2x slower
# than those; the digits CNN's 11 and 13 columns x 1 vector (11, 13 at AVX2) 2x faster than their 4 images x 2 vectors
MIN_ACCS = 10

def channels_in_vectors(r: Renderer, channels: sint) -> bool:
  """Whether a conv's channels can be a CPU tile's vector lanes, laid out channels-last: CPUs with vectors (no thread
  ids), the channels in whole vectors."""
  w = max(r.vector_widths)
  return not r.has_local and w > 1 and isinstance(channels, int) and channels % w == 0

def conv_weight_panel(r: Renderer, cout: sint) -> int:
  """How many output channels one panel of a conv weight holds (two vectors: 32 floats on AVX-512, 16 on AVX2), or 1 for
  no panels: devices with thread ids or without vectors, a channel count not in whole panels."""
  w = 2 * max(r.vector_widths)
  return w if not r.has_local and w > 2 and isinstance(cout, int) and cout % w == 0 else 1

def conv_forward_tile(k: Kernel) -> bool:
  """The conv tile (see the module docstring), applied to k where k reads a weight in panels (or channels-last): an output
  dim in whole panels along which one load in the reduce is contiguous (the weight) and the others broadcast (the input), and an
  output dim along which the weight is broadcast and the input read (the columns). False, k unchanged, where k is no such
  kernel. The rows: the most accumulators (rows x vectors) that leave two registers of the file (14 x 2 on AVX-512: 56
  and 28 wide images; 7 x 2 on a 7x7 image and on AVX2, whose 16 registers then hold a step's vectors only by reusing
  them: 7 x 2 measured 2x faster than 4 x 2 there, as fast as 14 x 1). 14 x 2 on AVX-512 spills a few vectors in the
  loop (objdump), and still measured 1.2x faster than 7 x 2 on a 56-wide image."""
  r = k.renderer
  if k.reduceop is None or r.has_local or not (red := k.dims("r")) or not all(isinstance(s, int) for s in k.full_shape): return False
  w = max(r.vector_widths)
  loads = [u for u in k.reduceop.toposort() if u.op is Ops.LOAD]
  views = [u.src[1] for u in loads]
  def strides(t: Kernel, d: int) -> list: return [t.st_for(v).real_strides()[d] for v in views]
  def panels(t: Kernel) -> list[int]:
    return [d for d in t.dims("g") if t.full_shape[d] % (2 * w) == 0 and set(s := strides(t, d)) == {0, 1} and s.count(1) == 1]
  if w < 2 or len(panel := panels(k)) != 1: return False
  # a dim longer than a panel (a trained weight, channels-last) only with a window to reduce over: not a matmul (matmul tiles: heuristic.py)
  if k.full_shape[panel[0]] != 2 * w and not (len(red) > 1 and k.full_shape[red[-1]] <= 7): return False
  weight = strides(k, panel[0]).index(1)
  def pixels(t: Kernel) -> list[int]:  # output dims the weight is broadcast along and every input read along: images, rows, columns
    return [d for d in t.dims("g") if (s := strides(t, d))[weight] == 0 and all(isinstance(x, int) and x != 0 for x in s[:weight] + s[weight + 1:])]
  if not (cols := pixels(k)): return False
  size = k.full_shape[cols[-1]]
  # an image narrower than 7 columns (layer4's 4x4 in a 112x112 training step), its weight in panels: its columns whole x a
  # few of the next pixel dim (its rows, or the images) as the rows (channels-last, 2x slower than heuristic.py's tile)
  nxt = cols[-2] if size < 7 and len(cols) > 1 and k.full_shape[panel[0]] == 2 * w else None
  more = [m for m in (1, 2, 3, 4) if nxt is not None and k.full_shape[nxt] % m == 0] or [1]
  # (vectors, rows, more rows): the most accumulators, then the most vectors (fewer broadcasts per multiply-add)
  def best(accs: int) -> tuple[int, int, int]:
    return max(((v, a, m) for v in (2, 1) for a in range(1, min(size, 16) + 1) for m in more
                if size % a == 0 and (m == 1 or a == size) and v * a * m <= accs), key=lambda t: (t[0] * t[1] * t[2], t[0]))
  vecs, rows, extra = best(r.vector_registers - 2)
  # fewer than MIN_ACCS accumulators leave the multiply-adds waiting on each other: a narrow image under AVX2's 16 registers
  # (4 columns x 2 vectors: 2x slower than the tiles of codegen/heuristic.py) takes as many as the register file, the step's
  # vectors then read from memory by the multiply-adds (4 columns x 2 rows x 2 vectors: 1.7x faster than heuristic.py's
  # 4 images x 2 vectors on one Zen 4 core at AVX2, ResNet-18's layer4 in a training step)
  if vecs * rows * extra < MIN_ACCS and nxt is not None: vecs, rows, extra = best(r.vector_registers)
  if vecs * rows * extra < MIN_ACCS: return False
  t = k.copy()
  try:
    if extra > 1: t.apply_opt(Opt(OptOps.UPCAST, t.dims("g").index(nxt), extra))
    if rows > 1: t.apply_opt(Opt(OptOps.UPCAST, t.dims("g").index(pixels(t)[-1]), rows))
    p = t.dims("g").index(panels(t)[0])  # (a split keeps the outer part in place; a dim upcast whole moves away)
    t.apply_opt(Opt(OptOps.UPCAST, p, w))
    if vecs == 2: t.apply_opt(Opt(OptOps.UPCAST, p, 2))
    # the window's columns (the innermost reduce dim, a few long) unrolled
    if k.full_shape[red[-1]] <= 7: t.apply_opt(Opt(OptOps.UNROLL, len(t.dims("r")) - 1, 0))
    conv_loop_order(t, loads[weight], [u for u in loads if u is not loads[weight]])
  except KernelOptError: return False
  k.__dict__.update(t.__dict__)
  return True

# a conv whose reduce (input channels x window) is at most this many taps stores its output channels-last
# (`conv_output_channels_last`): the seed's 3 x 3x3 (27), the digits CNN's first 1 x 3x3 (9); FEW_TAPS=0 turns it off
FEW_TAPS = getenv("FEW_TAPS", 32)

def conv_output_channels_last(r: Renderer, cout: sint, taps: sint) -> bool:
  """Whether a conv with a short reduce (`taps` = input channels x window, at most FEW_TAPS) computes its output
  channels-last, (bs, *out, cout) stored and the conv's value a permuted view of it: CPUs with vectors (no thread ids),
  the output channels in whole vectors. Its vector lanes are the output channels (one weight vector per tap, each input
  value broadcast); stored (bs, cout, *out), a vector of channels goes out lane by lane, one scalar store per value
  against taps/16 vector multiply-adds (the seed conv: 16 stores per 1.7; 2.6 -> 0.55 ms on one AVX-512 core, 3.0 ->
  0.9 ms at AVX2), channels-last it is one vector store."""
  return channels_in_vectors(r, cout) and isinstance(taps, int) and taps <= FEW_TAPS

def conv_few_taps_tile(k: Kernel) -> bool:
  """The tile of a conv stored channels-last with a short reduce (`conv_output_channels_last`), applied to k where k is
  such a kernel: the output's contiguous dim in whole vectors, along which one load in the reduce (the weight) is
  contiguous and the others broadcast, and output dims the weight is broadcast along (pixels and images). Lanes: up to
  two vectors of output channels; rows: 2 columns x 2 image rows x 2 images, the first of them that make 8 accumulators
  (2 x 2 x 2 x 1 vector on AVX-512's seed conv: 2.6 -> 0.55 ms, 4.6x; 16 accumulators 3% slower, 4 1.2x slower); the
  window unrolled (its columns only with 16 registers: the whole window measured 1.2x slower at AVX2). False, k
  unchanged, where k is no such kernel."""
  r = k.renderer
  if k.reduceop is None or r.has_local or not (red := k.dims("r")) or not all(isinstance(s, int) for s in k.full_shape): return False
  w = max(r.vector_widths)
  views = [u.src[1] for u in k.reduceop.toposort() if u.op is Ops.LOAD]
  outs = [k.st_for(s.src[1]) for s in k.ast.src]
  g = k.dims("g")
  if w < 2 or len(views) != 2 or not g or any(st.real_strides()[g[-1]] != 1 for st in outs) or k.full_shape[g[-1]] % w: return False
  lane = g[-1]
  def strides(d: int) -> list: return [k.st_for(v).real_strides()[d] for v in views]
  if sorted(strides(lane), key=str) != [0, 1] or prod(k.full_shape[d] for d in red) > FEW_TAPS: return False
  weight = strides(lane).index(1)
  pixels = [d for d in g[:-1] if strides(d)[weight] == 0 and strides(d)[1 - weight] != 0 and k.full_shape[d] % 2 == 0]
  vecs = 2 if k.full_shape[lane] % (2 * w) == 0 else 1
  t = k.copy()
  try:
    t.apply_opt(Opt(OptOps.UPCAST, t.dims("g").index(lane), w))
    if vecs == 2: t.apply_opt(Opt(OptOps.UPCAST, t.dims("g").index(lane), 2))
    # the pixel dims innermost first (columns, rows, images), each split by 2 (a split keeps the dim's place)
    for d in reversed(pixels):
      if prod(t.full_shape[u] for u in t.dims("U")) // w >= 8: break
      t.apply_opt(Opt(OptOps.UPCAST, t.dims("g").index(d), 2))
    t.apply_opt(Opt(OptOps.UNROLL, len(t.dims("r")) - 1, 0))
    if r.vector_registers >= 32 and len(t.dims("r")) > 1: t.apply_opt(Opt(OptOps.UNROLL, len(t.dims("r")) - 1, 0))
  except KernelOptError: return False
  k.__dict__.update(t.__dict__)
  return True

def conv_loop_order(k: Kernel, weight: UOp, inputs: list[UOp]) -> None:
  """The order of the conv tile's outer loops (images, panels, rows, column blocks), applied to k: a weight bigger than
  the batch's input (layer4's 9.4 MB against 0.8 MB of 7x7 images at batch 8) has its panels loop outermost, each panel
  (590 KB) reused from L2 for every image and row: it was read again from L3 for every image (84 -> 110 GFLOP/s). Where
  the input is the bigger one the images stay outermost (the panels innermost instead, each row of input reused for
  every panel, measured no faster on ResNet's layers 1-3 at batch 8 and 7% slower on the stem and the 1x1 convs)."""
  ws = k.st_for(weight.src[1]).real_strides()
  panels, pixels = [d for d in k.dims("g") if ws[d] != 0], [d for d in k.dims("g") if ws[d] == 0]
  if len(panels) != 1 or not any(d < panels[0] for d in pixels) or _span(k, weight) <= sum(_span(k, u) for u in inputs): return
  # (a whole dim made a tile moves its loop inside the global ones: the pixel dims innermost first keep their order)
  for d in reversed(pixels): k.apply_opt(Opt(OptOps.TILE, k.dims("g").index(d), 0))

def _span(k: Kernel, load: UOp) -> sint:
  """The bytes from the first to the last element a load may read (its buffer-side view's extent): a stride-2 1x1 conv
  reads every other value, but every cache line of its input."""
  v = k.st_for(load.src[1]).views[0]
  return (sum((s - 1) * abs(st) for s, st in zip(v.shape, v.strides)) + 1) * load.dtype.itemsize
