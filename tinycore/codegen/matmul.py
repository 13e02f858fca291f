"""A matmul on a CPU with vectors: the layout of its operands and the register and cache tiles of its kernel.

Layout (graph changes, chosen by Tensor.dot, kept under NOOPT): a row-major second operand past the cache, or one whose
width leaves the register tile fewer accumulators than panels would, is repacked into column panels as wide as the
register tile's vectors (`matmul_panel`), and a weight gradient past the cache is computed from the output gradient
stored transposed (`matmul_grad_transposed`).

The tile (`matmul_tile`), for a kernel out[m, n] = sum_k a[m, k] * b[k, n] with b read as vectors along n (its rows or
its panels contiguous) and a row-major (contiguous along the reduce), each a's value broadcast to the vectors:
- registers: rows of m x vectors of n accumulators, the most that leave a step's loads room in the register file
  (8 x 2 of AVX-512's 32 zmm, 4 x 2 of AVX2's 16 ymm), two vectors before one where both give as many;
- the reduce is unrolled only where an unrolled step's loads also fit beside the accumulators: the compiler (clang 14)
  hoists every load of the unrolled steps above their multiply-adds, and 8 x 2 unrolled by 4 spilled accumulators to
  the stack 64 times per iteration on AVX-512 (objdump), 1.3x slower than no unroll (2048 matmul, one core);
- a cache tile (TILE) over blocks of rows: a block of a's rows and one panel of b stay in one core's cache
  (`cache_bytes`, L2) while the block sweeps the panels (2048: 128-row blocks on AVX-512, 3x faster than none; the
  panel is read from memory once per block);
- b's vectors prefetched PREFETCH_STEPS reduce steps ahead where the renderer can (`Renderer.prefetch`): a panel of the
  whole reduce (384 KB on AVX-512) streams from L2 into L1 once per row tile, three lines a step, and the hardware's
  prefetcher alone left the multiply-adds waiting on it."""
from __future__ import annotations
from tinycore.backend import Renderer
from tinycore.ops import Ops
from tinycore.uop.uop import sint
from tinycore.codegen.kernel import Kernel, Opt, OptOps, KernelOptError

# rows of x from which a second operand is repacked whatever its size (transposed, or row-major with a width the register tile
# does not divide): its copy (k*n elements) is under 1% of the multiply-adds
PANEL_ROWS = 128
# reduce steps ahead that b's vectors are prefetched (renderer.prefetch): 2048 on one core, the generated kernels alone in
# one process, medians: AVX-512 114-118 -> 124-129 GFLOP/s at 16 steps (3 KB ahead; 8 and 32 about as fast, 64 less),
# AVX2 51-65 -> 55-68 (1.5 KB ahead)
PREFETCH_STEPS = 16
# a row count with every row tile in it: the panels are chosen for the tile of any m (its rows are padded to whole tiles, `matmul_rows`)
ROWS_ANY = 1 << 20

def register_tile(r: Renderer, m: int, n: int, w: int | None = None, padded: bool = True) -> tuple[int, int]:
  """(rows, vectors) of a matmul's register tile on a CPU: rows of its m dividing m (up to 16), vectors of width w (the
  widest) along its n, n padded to whole rows of vectors (or only counts that divide n). The most accumulators rows x
  vectors that leave one step's vectors and one broadcast value room in the register file (rows outermost in the code:
  a step loads its vectors, then broadcasts one row's value at a time), each counted by the share of its columns that
  are real where n is padded, then the fewest loads per multiply-add, then the most rows (AVX2 on 512 columns: 4 x 2
  ran 1.7x faster than 2 x 4): 8 x 3 of AVX-512's 32 zmm, 4 x 3 of AVX2's 16 ymm
  (AVX2's 4 x 2 holds 8 accumulators, just the multiply-add latency x 2 units: 61 -> 77 GFLOP/s on a 2048 matmul, one
  core; AVX-512's 8 x 2: 88 -> 102, medians)."""
  w, regs = w or max(r.vector_widths), r.vector_registers
  def real(v: int) -> float: return n / (-(-n // (v * w)) * v * w)
  return max(((a, v) for v in (1, 2, 3, 4) if padded or n % (v * w) == 0 for a in range(1, min(m, 16) + 1) if m % a == 0 and a * v + v + 1 <= regs),
             key=lambda t: (t[0] * t[1] * real(t[1]), -(t[0] + t[1]) / (t[0] * t[1]), t[0]))

def matmul_rows(r: Renderer, m: int, n: int) -> int:
  """The rows a matmul's first operand (m, k) is zero-padded to before a product with panels of n columns: m where the
  register tile's rows divide it; else m rounded up to whole tiles of rows, 8 of them where m holds 64 (a cache tile of
  them; the padded rows are cut off by the caller). A 2047 matmul took 1 row x 4 vectors (7.6 GFLOP/s on one AVX-512 core)."""
  rows = register_tile(r, ROWS_ANY, n)[0]
  block = 8 * rows if m >= 64 * rows else rows
  return m if m % rows == 0 else -(-m // block) * block

def tile_lanes(r: Renderer, n: int, panels: bool) -> float:
  """The output values a matmul's register tile over n columns accumulates that are real: in panels, rows x vectors of
  the widest width with n padded to whole panels (the padded columns discounted); in place, of the widest width that
  divides n (as `matmul_tile` takes it), the vectors dividing n too."""
  w = max(r.vector_widths) if panels else next(v for v in sorted(r.vector_widths, reverse=True) if v > 1 and n % v == 0)
  a, v = register_tile(r, ROWS_ANY, n, w, padded=panels)
  return a * v * w * (n / (-(-n // (v * w)) * v * w) if panels else 1)

def matmul_panel(r: Renderer, m: sint, k: sint, n: sint, itemsize: int, transposed: bool = False, x_contiguous: bool = True) -> int:
  """How wide the column panels are that a matmul's row-major (k, n) second operand is repacked into first, or 0 for
  not at all. Read along the reduce, a row-major operand is one vector per row, rows n*itemsize bytes apart: past the
  cache (`cache_bytes`), every step is a new page to the prefetcher and a power-of-two row size lands all rows in one
  cache set. Repacked as (n/p, k, p) for the register tile's vectors (`register_tile`: p = 3 vectors, zero-padded to whole
  panels, the padded columns cut off by the caller), a panel streams contiguously; the copy costs k*n elements, the matmul
  m*k*n multiply-adds (2048: 3x faster on one AVX-512 core). A width n with no vector width in it (a GPT-2 vocabulary's
  50257 = 29 x 1733) is repacked whatever its size: unpacked, its columns take no vector dim at all. In the cache, from
  PANEL_ROWS rows of x contiguous along the reduce (`x_contiguous`: then the product in place takes `matmul_tile`), where
  n leaves the tile in place fewer real accumulators than in panels (`tile_lanes`): in place its vectors must divide n,
  and AVX-512's 8 x 3 vectors needs n in 48s (256 and 1024 took 4 x 4). A weight gradient's x^T, strided along the
  reduce, takes the generic tile (8 x 2 vectors, unrolled) in place: 92 GFLOP/s at 256 x 1024 @ 1024 x 256, in panels 65."""
  w = max(r.vector_widths)
  if r.has_local or not r.cache_bytes or w <= 1 or not all(isinstance(v, int) for v in (m, k, n)) or n <= 2 * w: return 0
  p = register_tile(r, ROWS_ANY, n)[1] * w
  # transposed (a Linear's weight.T: the reduce contiguous in both operands), whatever the size where the rows reuse it:
  # otherwise each output is a vector of partial sums combined across its lanes after the reduce (GPT's x @ W.T over
  # 1024 tokens: 36-55 -> 70-100 GFLOP/s on one AVX-512 core, the copy included)
  if transposed: return p if m >= PANEL_ROWS else 0
  if not any(n % v == 0 for v in r.vector_widths if v > 1) or k * n * itemsize > r.cache_bytes: return p
  # GPT's input gradients (W's rows 1 and 4 KB apart, 4 x 4 in place) on one Zen 4 core, the copy included: 1024 x 256 @
  # 256 x 1024 62 -> 100 GFLOP/s (AVX2 34 -> 95), 1024 x 1024 @ 1024 x 256 69 -> 95 (77 -> 102), 512^3 75 -> 99 (50 -> 92);
  # where the tile divides n (384, 768 columns) in place is within 10% of the panels
  return p if x_contiguous and m >= PANEL_ROWS and tile_lanes(r, n, panels=False) < tile_lanes(r, n, panels=True) else 0

def matmul_grad_transposed(r: Renderer, m: sint, k: sint, n: sint, itemsize: int) -> bool:
  """Whether the weight gradient of x (m, k) @ w (k, n) is computed as (grad^T, stored) @ x rather than as the reduce
  over m of grad and x read in place. In place, both operands step a row (k and n elements) per reduce step: a row of x
  for the vector lanes, a few values of grad for the rows of the tile, each re-read once per tile. Where a row is a
  multiple of 4 KB (the span of one L1 way, a page), every row falls in the same few cache sets and the re-reads
  miss (GPT's 1024-wide MLP over 1024 tokens: 35-47 GFLOP/s on one AVX-512 core; its 768-wide qkv, rows 3 KB apart,
  runs at 83-85 in place). With grad transposed (m*n elements copied) its rows stream along the reduce and x is an
  ordinary second operand (repacked into panels where matmul_panel says so). CPUs with vectors, operands past the cache."""
  if r.has_local or max(r.vector_widths) <= 1 or not r.cache_bytes or not all(isinstance(v, int) for v in (m, k, n)): return False
  return m >= 256 and m * (k + n) * itemsize > r.cache_bytes and any(d * itemsize % 4096 == 0 for d in (k, n))

def matmul_tile(k: Kernel) -> bool:
  """The matmul tile (see the module docstring), applied to k where k is such a matmul: one reduce dim and two loads in
  it, the output's contiguous dim read as vectors from one (b) and broadcast from the other (a), a contiguous along the
  reduce, and an output dim that b is broadcast along (the rows). False, k unchanged, where k is no such kernel."""
  r = k.renderer
  if k.reduceop is None or r.has_local or len(red := k.dims("r")) != 1 or not all(isinstance(s, int) for s in k.full_shape): return False
  loads = [u for u in k.reduceop.toposort() if u.op is Ops.LOAD]
  outs = [k.st_for(s.src[1]) for s in k.ast.src]
  if len(loads) != 2 or not (widths := sorted((w for w in r.vector_widths if w > 1), reverse=True)): return False
  def strides(d: int) -> list: return [k.st_for(u.src[1]).real_strides()[d] for u in loads]
  lane = next((d for d in reversed(k.dims("g")) if all(st.real_strides()[d] == 1 for st in outs)), None)
  if lane is None or strides(lane) not in ([0, 1], [1, 0]): return False
  if (w := next((w for w in widths if k.full_shape[lane] % w == 0), None)) is None: return False
  b = strides(lane).index(1)
  if strides(red[0])[1 - b] != 1 or strides(red[0])[b] == 0: return False
  if not (cands := [d for d in k.dims("g") if (s := strides(d))[b] == 0 and isinstance(s[1 - b], int) and s[1 - b] != 0]): return False
  rows_dim, size = max(((d, k.full_shape[d]) for d in cands), key=lambda x: (x[1], x[0]))
  rows, vecs = register_tile(r, size, k.full_shape[lane], w, padded=False)
  regs = r.vector_registers
  unroll = next((u for u in (4, 2) if k.full_shape[red[0]] % u == 0 and rows * vecs + u * (rows + vecs) <= regs), 1)
  # the cache tile: the most row blocks (of `rows`) whose a rows plus one panel of b fit in the cache, where they do not all
  reduce_bytes = k.full_shape[red[0]] * loads[0].dtype.itemsize
  fits = [t for t in (32, 16, 8, 4, 2) if size % (rows * t) == 0 and size >= 2 * rows * t and (rows * t + vecs * w) * reduce_bytes <= r.cache_bytes]
  tile = fits[0] if fits and (size + vecs * w) * reduce_bytes > r.cache_bytes else 1
  t = k.copy()
  def split(op: OptOps, d: int, amt: int) -> int | None:
    """Split dim d of t by amt: where amt is the whole dim it moves away and the dims after it move down one (returned)."""
    whole = t.full_shape[d] == amt
    t.apply_opt(Opt(op, t.dims("g").index(d), amt))
    return d if whole else None
  try:
    for amt in (w, vecs) if vecs > 1 else (w,):
      if (gone := split(OptOps.UPCAST, lane, amt)) is not None: rows_dim -= rows_dim > gone
    if rows > 1 and split(OptOps.UPCAST, rows_dim, rows) is not None: tile = 1
    if unroll > 1: t.apply_opt(Opt(OptOps.UNROLL, 0, unroll))
    if tile > 1: split(OptOps.TILE, rows_dim, tile)
  except KernelOptError: return False
  if r.prefetch: t.prefetch = {loads[b]: strides(red[0])[b] * PREFETCH_STEPS}
  k.__dict__.update(t.__dict__)
  return True
