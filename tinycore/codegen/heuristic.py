"""Hand-coded optimizations: a quick, reasonable choice of OptOps when BEAM search is off.

Devices with thread ids (GPUs) get groups of threads and a grouped reduce for big reductions. Devices without them
(CLANG: global dims are loops, the outermost spread over the cores) get register tiles instead: the output dim that
is contiguous in memory is upcast to a vector width (vector loads and stores), the output dim that an input
broadcasts along is upcast too (one loaded value feeds several accumulators, as in the microkernel of a matmul), and
a contiguous reduce is unrolled by a vector width (vector accumulators, combined after the loop). An image width with no
vector width in it (a conv's 11x11 output) takes its vectors along channels-last output channels instead; a kernel that
gets no vector dim at all has its short dims expanded whole (a fold's index / and % become constants).

A symbolic dim (a batch size Variable) is never split: only the integer dims are optimized. A kernel with many loads
gets fewer lanes (LANE_LOADS_MAX bounds lanes times loads): its code is already big, and lowering cost grows with both."""
from __future__ import annotations
from tinycore.backend import Renderer
from tinycore.helpers import prod, all_int
from tinycore.ops import Ops
from tinycore.uop.uop import sint
from tinycore.codegen.kernel import Kernel, Opt, OptOps, KernelOptError
from tinycore.codegen.conv_forward import channels_in_vectors, conv_forward_tile, conv_few_taps_tile
from tinycore.codegen.conv_backward import conv_weight_grad_tile
from tinycore.codegen.matmul import matmul_tile

# upcast lanes times the kernel's loads: lowering cost grows with it (a masked load is indexed lane by lane), and past
# this much the kernel is big enough that more lanes no longer pay (a kernel cut at the scheduler's size limit has
# hundreds of loads: 32 lanes of it took seconds to lower)
LANE_LOADS_MAX = 4096
# rows of a register tile, the most first (the register file decides how many fit; 7 and 14 tile the 56 and 28 of ResNet)
ROW_TILES = (16, 14, 12, 8, 7, 6, 4, 3, 2)
# vectors side by side in a reduce across rows (_column_tile)
COLUMN_VECS = (4, 2)
# an output dim this short, without a vector width in it (a pooled 13x13 image's rows), is expanded whole where no vector dim is found
SHORT_DIM = 16
# outputs a reduce without a vector dim computes side by side, each its own chain of adds
SCALAR_CHAINS = 8
# the most accumulators a gathered-lanes tile (`_gathered_tile`) takes at least, whatever the register file holds
GATHER_ACCS = 24

def _try(k: Kernel, opt: Opt) -> bool:
  if opt.op in (OptOps.UPCAST, OptOps.UNROLL):
    dims = k.dims("g") if opt.op is OptOps.UPCAST else k.dims("r")
    amt = opt.amount or (k.full_shape[dims[opt.axis]] if opt.axis < len(dims) else 1)
    lanes = prod(k.full_shape[i] for i in k.dims("U") + k.dims("u")) * amt
    # a load outside the reduce (an epilogue: a conv input gradient's ReLU mask, a residual) is expanded over the upcast
    # dims only, not the unrolled reduce (counted as the reduce's loads, it cut ResNet's conv tiles from 4 x 2 to 2 x 2)
    nred, nall = len(_reduce_loads(k)), sum(u.op is Ops.LOAD for u in k.ast.toposort())
    out_lanes = prod(k.full_shape[i] for i in k.dims("U")) * (amt if opt.op is OptOps.UPCAST else 1)
    if isinstance(lanes, int) and isinstance(out_lanes, int) and lanes * nred + out_lanes * (nall - nred) > LANE_LOADS_MAX: return False
  try:
    k.apply_opt(opt)
    return True
  except KernelOptError: return False

def _load_sts(k: Kernel) -> list:
  return [k.st_for(u.src[1]) for u in k.ast.toposort() if u.op is Ops.LOAD]

def _out_sts(k: Kernel) -> list:
  return [k.st_for(s.src[1]) for s in k.ast.src]

def hand_coded_optimizations(k: Kernel) -> Kernel:
  if not k.renderer.has_local and max(getattr(k.renderer, "vector_widths", (1,))) > 1: return cpu_optimizations(k)
  r = k.renderer
  red = k.dims("r")
  # a big reduce with a small output: spread the reduce over the threads of a group
  if red and r.has_local and r.has_shared and all_int(k.full_shape) and prod(k.full_shape[d] for d in k.dims("g")) <= 256:
    for amt in (16, 8, 4):
      if k.full_shape[red[-1]] % amt == 0 and k.full_shape[red[-1]] >= 256 and _try(k, Opt(OptOps.GROUP, len(red) - 1, amt)): break
  # small reduce dims (a 3x3 window) are unrolled into registers
  for i in reversed(range(len(k.dims("r")))):
    d = k.dims("r")[i]
    if isinstance(k.full_shape[d], int) and k.full_shape[d] <= 4: _try(k, Opt(OptOps.UNROLL, i, 0))
  # upcast output dims that some input broadcasts along (the matmul/conv reuse pattern): values are reused from registers
  upcasted = 0
  for _ in range(2):
    gdims = k.dims("g")
    cands = []
    for i, d in enumerate(gdims):
      s = k.full_shape[d]
      if s % 4 != 0: continue
      if any(st.real_strides()[d] == 0 for st in k.sts[1:] if st.shape == k.full_shape or st.shape[d] != 1):
        cands.append((sum(st.real_strides()[d] == 0 for st in k.sts), i))
    if not cands or upcasted >= 2: break
    _, i = max(cands)
    if _try(k, Opt(OptOps.UPCAST, i, 4)): upcasted += 1
  # a reduce loop gets a small unroll so loads pipeline
  if k.dims("r") and not k.dims("u"):
    d = k.dims("r")[-1]
    for amt in (4, 2):
      if k.full_shape[d] % amt == 0 and _try(k, Opt(OptOps.UNROLL, len(k.dims("r")) - 1, amt)): break
  # elementwise: a few values per thread along the innermost contiguous dim
  if not k.dims("r") and not k.dims("U") and k.dims("g"):
    d = k.dims("g")[-1]
    if k.full_shape[d] % 4 == 0: _try(k, Opt(OptOps.UPCAST, len(k.dims("g")) - 1, 4))
  # threads per group on devices that have them
  if r.has_local and not k.dims("G"):
    for i in reversed(range(len(k.dims("g")))):
      d = k.dims("g")[i]
      for amt in (16, 8, 4, 2):
        if k.full_shape[d] % amt == 0 and k.full_shape[d] > amt and _try(k, Opt(OptOps.LOCAL, i, amt)): break
      if prod(k.full_shape[x] for x in k.dims("l")) >= 64: break
  return k

def cpu_optimizations(k: Kernel) -> Kernel:
  """Register tiles for a CPU with vector units (see the module docstring)."""
  widths = sorted((w for w in k.renderer.vector_widths if w > 1), reverse=True)
  if conv_few_taps_tile(k) or matmul_tile(k) or conv_weight_grad_tile(k) or conv_forward_tile(k): return k
  def fits(d: int, amt: int) -> bool: return isinstance(k.full_shape[d], int) and k.full_shape[d] % amt == 0
  def strides(d: int, sts: list) -> list: return [st.real_strides()[d] for st in sts]
  # dims are positions in the iteration space: a split keeps the outer part in place, a whole dim moves away
  def upcast(d: int, amt: int) -> bool: return d in k.dims("g") and _try(k, Opt(OptOps.UPCAST, k.dims("g").index(d), amt))
  def unroll(d: int, amt: int) -> bool: return d in k.dims("r") and _try(k, Opt(OptOps.UNROLL, k.dims("r").index(d), amt))
  # small reduce dims (a 3x3 window) are unrolled into registers; the gathered-lanes tile starts from the kernel before
  # (a conv weight gradient's reduce over 4x4 images unrolled took the lanes its rows need: 9x slower on AVX-512)
  pre = k.copy()
  for d in reversed(k.dims("r")):
    if isinstance(k.full_shape[d], int) and k.full_shape[d] <= 4 and len(k.dims("r")) > 1: unroll(d, 0)
  # the loads in the reduce decide the tile: an epilogue load is read once per output, lane by lane like the stores (a
  # conv input gradient's ReLU mask, strided along the channels its vectors take)
  loads, outs = [k.st_for(u.src[1]) for u in _reduce_loads(k)], _out_sts(k)
  # the lane dim: the innermost output dim contiguous in the output
  lane = next((d for d in reversed(k.dims("g")) if all(s == 1 for s in strides(d, outs))), None)
  lane_w = next((w for w in widths if lane is not None and fits(lane, w)), None)
  # where that takes no two full vectors (a conv's 56 columns: 8 of AVX-512's 16 lanes, 7 AVX2 vectors), two along an output
  # dim that one input is contiguous along and another broadcast along (the output channels of a conv whose weight is
  # stored channels-last, see conv_weight_channels_last); the stores, once per long reduce, go lane by lane
  if k.reduceop is not None and lane is not None and (lane_w is None or lane_w < widths[0] or not fits(lane, 2 * lane_w)) and \
     isinstance(nred := prod(k.full_shape[d] for d in k.dims("r") + k.dims("u")), int) and nred >= 64:
    wide = [d for d in k.dims("g") if fits(d, 2 * widths[0]) and set(strides(d, loads)) == {0, 1}]
    if wide: lane, lane_w = wide[-1], widths[0]
  if k.reduceop is None:
    # elementwise: vectors along the contiguous dim, two of them per iteration
    if lane is not None and lane_w is not None and upcast(lane, lane_w):
      if _transpose_tile(k, lane_w): return k
      g = k.dims("g")
      if g and fits(g[-1], 2) and k.full_shape[g[-1]] >= 64 and all(s == lane_w for s in strides(g[-1], _out_sts(k))): upcast(g[-1], 2)
      return k
    # no vector dim (a max pool's input gradient, its phases interleaved in dims of 2): the short dims expanded whole,
    # innermost first, their masks become constants
    for d in reversed(k.dims("g")):
      if isinstance(n := k.full_shape[d], int) and n <= 4 and prod(k.full_shape[u] for u in k.dims("U")) * n <= SHORT_DIM: upcast(d, 0)
    return k
  red = k.dims("r")
  if lane is not None and lane_w is not None and any(s == 0 for s in strides(lane, loads)) and \
     all(s in (0, 1) for s in strides(lane, loads)):
    # matmul / conv microkernel: vectors along the lane dim, rows along a dim the vector-loaded input broadcasts
    # along (one vector load feeds every row), the reduce unrolled. Sized to the register file: the rows x vectors
    # accumulators and one step's loaded vectors fit in it (measured on AVX2 and AVX-512, a ResNet conv: 7 rows x 2
    # vectors, its 3x3 window unrolled, beats every smaller tile; the compiler streams the window's loads)
    upcast(lane, lane_w)
    # a second vector along the lane dim where it is long enough, unless it leaves fewer accumulators: beside two vectors
    # LANE_LOADS_MAX may refuse the rows (a 7x7 ResNet conv: 7 rows x 1 vector beat 1 row x 2 vectors, 1.6x)
    one, two = k.copy(), k.copy()
    nrows1 = _row_tile(one, 1)[1]
    vecs = 2 if lane in two.dims("g") and fits(lane, 2) and _try(two, Opt(OptOps.UPCAST, two.dims("g").index(lane), 2)) and \
      2 * _row_tile(two, 2)[1] >= nrows1 else 1
    if vecs == 2: upcast(lane, 2)
    rows, nrows = _row_tile(k, vecs)
    regs = k.renderer.vector_registers
    red = k.dims("r")
    if red and not k.dims("u"):
      for amt in (4, 2):
        if nrows * vecs + vecs * amt <= regs and fits(red[-1], amt) and unroll(red[-1], amt): break
    # a cache tile: when the inputs are bigger than the caches, a block of rows stays hot while the columns sweep
    g = k.dims("g")
    if rows is not None and len(g) >= 2 and g.index(rows) == 0:
      rest = prod(k.full_shape[x] for x in g[1:])
      for amt in (16, 8):
        if isinstance(rest, int) and rest >= 16 and fits(rows, amt) and k.full_shape[rows] >= 2 * amt and _try(k, Opt(OptOps.TILE, 0, amt)): break
    return k
  if red and any(s == 1 for s in strides(red[-1], loads)) and all(s in (0, 1) for s in strides(red[-1], loads)):
    # a reduce along contiguous memory (sum, softmax, A @ B.T): vector accumulators combined after the loop; output
    # dims that an input broadcasts along are upcast a little so each loaded vector feeds several accumulators. Not where
    # another input is strided along the reduce (a conv input gradient's output gradient): gathered lanes inside the
    # loop, 20x slower on AVX2 than the tile below
    d = red[-1]
    w = next((w for w in widths if fits(d, w)), None)
    # at least 8 vectors long: a short reduce (a conv input gradient's 64 channels against a channels-last weight) is
    # mostly the combining of the lanes; it gets the gathered-lanes tile below (measured 5x faster there on AVX-512)
    if w is not None and k.full_shape[d] >= 8 * w and unroll(d, w):
      # rows x 2 accumulators, the rows from the first (longest) dim: as many as fit beside one step's rows x 2 loaded
      # vectors (8 x 2 on AVX-512: 1.5-2x over 2 x 2 on GPT's x @ W.T; the rows from the second dim, or 4 x 4, measured slower than 2 x 2)
      cands = [g for g in sorted(k.dims("g"), key=lambda g: -k.full_shape[g] if isinstance(k.full_shape[g], int) else 0)[:2]
               if any(s == 0 for s in strides(g, _load_sts(k))) and fits(g, 2) and k.full_shape[g] >= 16]
      rows = next(a for a in (8, 4, 2) if 3 * a + 2 <= k.renderer.vector_registers) if len(cands) == 2 else 2
      tiled = [g for g, amt in zip(cands, (rows, 2)) if upcast(g, next(a for a in (amt, 4, 2) if fits(g, a)))]
      # one dim only (a matrix-vector product: decoding a token; or the other dim odd, a 50257-word vocabulary): as many
      # rows of it as accumulators fit beside the step's loads, 16 on AVX-512, 8 on AVX2 (was 4). The vector operand, and
      # what it computes inline (decoding GPT: fc2 recomputes the GELU of its input), is loaded once per `rows` outputs:
      # GPT decoding's matrix-vector kernels 1.17 -> 0.76 ms a token on one AVX-512 core
      if len(tiled) == 1:
        regs = k.renderer.vector_registers
        more = next((a for a in (8, 4, 2) if 2 * a + 4 <= regs and fits(tiled[0], a) and k.full_shape[tiled[0]] >= 8 * a), None)
        if more is not None: upcast(tiled[0], more)
      red = k.dims("r")
      if red and not k.dims("U") and fits(red[-1], 4) and k.full_shape[red[-1]] >= 16: unroll(red[-1], 4)
      return k
  if red and lane is not None and lane_w is not None and _column_tile(k, lane, lane_w): return k
  if red and _gathered_tile(pre, widths):
    k.__dict__.update(pre.__dict__)
    return k
  # a pool: vectors along the output's contiguous dim, each lane's loads gathered (a stride-2 window's columns)
  if _pool_lanes(k, lane, lane_w): upcast(lane, lane_w)  # type: ignore[arg-type]
  # no vector dim: short dims expanded whole, their index arithmetic (a fold's or a pool's / and %) becomes constants
  for d in reversed(k.dims("r")):
    if isinstance(k.full_shape[d], int) and k.full_shape[d] <= 4: unroll(d, 0)
  if (g := k.dims("g")) and isinstance(k.full_shape[g[-1]], int) and k.full_shape[g[-1]] <= SHORT_DIM: upcast(g[-1], 0)
  if (red := k.dims("r")) and not k.dims("u"):
    for amt in (4, 2):
      if fits(red[-1], amt) and unroll(red[-1], amt): break
  # a reduce left scalar and not unrolled keeps SCALAR_CHAINS outputs side by side: one output's sum is a chain of
  # dependent adds, each waiting the add's latency (BatchNorm's statistics over 16 images of 7x7: 3x faster on one Zen 4 core)
  if k.reduceop is not None and not k.dims("U") and not k.dims("u") and (g := k.dims("g")):
    for amt in (SCALAR_CHAINS, 4, 2):
      if fits(g[-1], amt) and upcast(g[-1], amt): break
  return k

def _pool_lanes(k: Kernel, lane: int | None, w: int | None) -> bool:
  """Whether k is a pool without a vector dim of its own: a short window reduced (every reduce dim at most 7 long), an
  output dim contiguous in the output that w lanes fit. Its lanes then gather their loads (a 3x3/2 max pool reads every
  other column): ResNet-18's max pool 1.34 -> 0.5 ms on one AVX-512 core, scalar before."""
  return lane is not None and w is not None and lane in k.dims("g") and bool(red := k.dims("r")) and \
    all(isinstance(k.full_shape[d], int) and k.full_shape[d] <= 7 for d in red)

def _transpose_tile(k: Kernel, w: int) -> bool:
  """An elementwise kernel whose vector lanes (the output's contiguous dim, upcast by w) read an input strided by a row
  (a transposed copy): the input's contiguous dim upcast by w too, so that each input cache line read feeds w lanes at
  once. Lane by lane, a column of 1024 rows 4 KB apart fills few cache sets and its lines are gone before the next
  column reads them (a 1024x1024 transpose: 6 ms on one AVX-512 core). A contiguous dim with no vector width in it, as
  long as the lanes' stride (a 3x3 conv weight copied into panels of input channels: 9 taps, channels 9 apart, either
  direction where the taps are flipped) is upcast whole instead, the lanes to two vectors where their dim holds them: each
  iteration reads whole blocks of the input (32 channels x 9 taps, 1152 bytes; ResNet-18's layer4 weight 1.3x faster on
  one Zen 4 core at AVX-512, 2.1x at AVX2). Applied to k; False where no input is such."""
  U = k.dims("U")
  loads = [st for st in _load_sts(k) if U and st.real_strides()[U[-1]] not in (0, 1)]
  rows = [d for d in k.dims("g") if any(st.real_strides()[d] == 1 for st in loads) and isinstance(k.full_shape[d], int) and k.full_shape[d] % w == 0]
  if rows: return _try(k, Opt(OptOps.UPCAST, k.dims("g").index(rows[-1]), w))
  lane = U[-1] if U else None
  blocks = [d for d in k.dims("g") if any(st.real_strides()[d] in (1, -1) and st.real_strides()[lane] == k.full_shape[d] for st in loads)
            and isinstance(k.full_shape[d], int) and k.full_shape[d] <= SHORT_DIM]
  if not blocks or not _try(k, Opt(OptOps.UPCAST, k.dims("g").index(blocks[-1]), 0)): return False
  # (the lane dim's outer part: its stride in the output is the vector width)
  outer = [d for d in k.dims("g") if k.full_shape[d] == 2 and all(st.real_strides()[d] == w for st in _out_sts(k))]
  if outer: _try(k, Opt(OptOps.UPCAST, k.dims("g").index(outer[-1]), 2))
  return True

def _column_tile(k: Kernel, lane: int, w: int) -> bool:
  """A reduce across rows (a bias's or a LayerNorm weight's gradient: the sum over tokens of (tokens, features) values)
  whose reduce loads are all contiguous along the output's lane dim: COLUMN_VECS vectors along it side by side, each
  row's loaded vectors added into their accumulators, the reduce unrolled a little. Lane by lane, each output read its
  column one float per row, rows 4 KB apart (GPT's MLP bias gradient, 1024 x 1024: 4.9 ms on one AVX-512 core).
  Applied to k; False where the loads are not such."""
  if not (strides := [k.st_for(u.src[1]).real_strides()[lane] for u in _reduce_loads(k)]) or any(s != 1 for s in strides): return False
  g = k.dims("g")
  if not _try(k, Opt(OptOps.UPCAST, g.index(lane), w)): return False
  vecs = next((v for v in COLUMN_VECS if lane in k.dims("g") and isinstance(n := k.full_shape[lane], int) and n % v == 0), 1)
  if vecs > 1: _try(k, Opt(OptOps.UPCAST, k.dims("g").index(lane), vecs))
  red = k.dims("r")
  for amt in (4, 2):
    if red and isinstance(k.full_shape[red[-1]], int) and k.full_shape[red[-1]] % amt == 0 and _try(k, Opt(OptOps.UNROLL, len(red) - 1, amt)): break
  return True

def _gathered_tile(k: Kernel, widths: list[int]) -> bool:
  """No contiguous dim to vectorize (a conv weight gradient, odd sizes like a conv's 11x11 outputs): lanes along an output
  dim that an input is broadcast along (a channel dim), gathered from the other inputs, and rows along dims that the
  gathered inputs are broadcast along (each gathered vector feeds every row). Applied to k; False where no dim fits."""
  loads, outs = _load_sts(k), _out_sts(k)
  def strides(d: int, sts: list) -> list: return [st.real_strides()[d] for st in sts]
  def fits(d: int, amt: int) -> bool: return isinstance(k.full_shape[d], int) and k.full_shape[d] % amt == 0
  if not any(s == 0 for d in k.dims("g") for s in strides(d, loads)): return False
  if not (lanes := [d for d in k.dims("g") if fits(d, widths[0]) and any(s == 0 for s in strides(d, loads))]): return False
  # the stores closest together along the lanes first (lane by lane, once per output: a weight gradient's input channels,
  # 9 apart, before its output channels, 4608 apart; then its rows are output channels, unmasked loads of the output
  # gradient, where lanes along the output channels, closer in the output gradient, left the rows to the window's masked
  # taps: 2-3x slower on ResNet's stride-2 and the digits CNN's weight gradients), then the gathered inputs close together
  def gather_span(d: int) -> int: return max((abs(s) if isinstance(s, int) else 1 << 30 for s in strides(d, loads) if s != 0), default=0)
  def out_span(d: int) -> int: return max((abs(s) if isinstance(s, int) else 1 << 30 for s in strides(d, outs)), default=0)
  lane = min(lanes, key=lambda d: (-sum(s == 0 for s in strides(d, loads)), out_span(d), gather_span(d), -k.full_shape[d]))
  if not _try(k, Opt(OptOps.UPCAST, k.dims("g").index(lane), widths[0])): return False
  # accumulators: the register file less 8 (the step's gathered vector, its broadcast values and addresses): 24 of AVX-512's
  # 32 (a 7x7 stem's weight gradient: 3 input channels x 7 columns, 6x faster than 3 rows). Never fewer than GATHER_ACCS:
  # a gathered vector costs a load per lane, more than reloading the accumulators that a smaller register file spills (the
  # stem's weight gradient at AVX2's 16 registers: 3 input channels x 7 columns 2.1x faster than the 3 that fit, one Zen 4 core)
  accs, most = 1, max(k.renderer.vector_registers - 8, GATHER_ACCS)
  # small dims first: a 3x3 window upcast whole gives 9 rows
  while accs < 8:
    rows = [d for d in k.dims("g") if isinstance(k.full_shape[d], int) and all(k.st_for(v).real_strides()[d] == 0 for v in _gathered_views(k))]
    amts = [(k.full_shape[d], d, a) for d in rows for a in range(min(16, most // accs), 1, -1) if fits(d, a)]
    # the most rows of the smallest dim that takes any (LANE_LOADS_MAX may refuse the most: then fewer)
    tries = ((d, a) for _, d, a in sorted(amts, key=lambda x: (x[0], x[1], -x[2])))
    if not (ok := next(((d, a) for d, a in tries if _try(k, Opt(OptOps.UPCAST, k.dims("g").index(d), a))), None)): break
    accs *= ok[1]
  return True

def _row_tile(k: Kernel, vecs: int) -> tuple[int | None, int]:
  """The rows of a register tile beside `vecs` vectors, applied to k: the longest output dim that every vector-loaded
  input is broadcast along (one vector load feeds every row; a conv's batch is short, its output channels long), upcast by
  the most rows whose accumulators fit in the registers with one step's vectors. (dim or None, rows)."""
  vviews = _vec_views(k)
  if not (cands := [d for d in k.dims("g") if vviews and all(k.st_for(v).real_strides()[d] == 0 for v in vviews)]): return None, 1
  d = max(cands, key=lambda d: (k.full_shape[d] if isinstance(k.full_shape[d], int) else 0, d))
  for amt in ROW_TILES:
    if amt * vecs + vecs <= k.renderer.vector_registers and isinstance(k.full_shape[d], int) and k.full_shape[d] % amt == 0 and \
       _try(k, Opt(OptOps.UPCAST, k.dims("g").index(d), amt)):
      return (d if d in k.dims("g") else None), amt
  return None, 1

def conv_weight_channels_last(r: Renderer, cout: sint) -> bool:
  """Whether a conv's weight (cout, cin, *k) is stored output-channels-last first: then a full vector of output channels
  is one load, and the register tile is vectors of channels x rows of output columns (each input value broadcast to
  them), whatever the image width. Only CPUs with vectors (no thread ids), channels in whole vectors."""
  return channels_in_vectors(r, cout)

def _gathered_views(k: Kernel) -> list:
  """The VIEWs of the loads that are not broadcast along the innermost upcast dim (the vector lanes)."""
  U = k.dims("U")
  return [u.src[1] for u in _reduce_loads(k) if U and k.st_for(u.src[1]).real_strides()[U[-1]] != 0]

def _reduce_loads(k: Kernel) -> list:
  """The loads inside the reduce (the ones in the inner loop), or every load of a kernel without one."""
  return [u for u in (k.reduceop if k.reduceop is not None else k.ast).toposort() if u.op is Ops.LOAD]

def _vec_views(k: Kernel) -> list:
  """The VIEWs of the loads in the reduce that are contiguous along the innermost upcast dim (loaded as vectors)."""
  U = k.dims("U")
  return [u.src[1] for u in _reduce_loads(k) if U and k.st_for(u.src[1]).real_strides()[U[-1]] == 1]
