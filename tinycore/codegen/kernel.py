"""Kernel: one AST plus the shape of its iteration space, and the optimizations (OptOps) applied to it.

Every dim of the iteration space has a kind, kept in this order:
  'g' global (one per output position; a loop on devices without ids)   'l' local (threads of a group)
  't' tile (an output loop nested inside the global dims: a cache tile; on GPUs a loop inside each thread; a whole dim
      made a tile is that loop moved inside the other global loops)
  'G' grouped reduce (reduced across the threads of a group)            'r' reduce loop
  'u' unrolled reduce / 'U' upcast output (expanded into registers, in the innermost positions)
An OptOp splits one dim and moves the new part to the place of its kind; all ShapeTrackers change together."""
from __future__ import annotations
import itertools, operator
from dataclasses import dataclass
from enum import Enum, auto
from tinycore.helpers import prod, colored, to_function_name
from tinycore.ops import Ops
from tinycore.backend import Renderer
from tinycore.shape import ShapeTracker
from tinycore.uop.uop import UOp

class OptOps(Enum):
  UPCAST = auto(); UNROLL = auto(); LOCAL = auto(); GROUP = auto(); TILE = auto()  # noqa: E702
  def __lt__(self, o: OptOps) -> bool: return self.value < o.value

@dataclass(frozen=True, order=True)
class Opt:
  op: OptOps
  axis: int     # UPCAST/LOCAL/TILE: index among the global dims; UNROLL/GROUP: index among the reduce-loop dims
  amount: int   # the size of the new dim; 0 means the whole dim
  def __repr__(self) -> str: return f"Opt({self.op.name}, {self.axis}, {self.amount})"

class KernelOptError(Exception):
  """An optimization that does not apply to this kernel (the search skips it)."""

_ORDER = "gtlGruU"

class Kernel:
  def __init__(self, ast: UOp, renderer: Renderer):
    if ast.op is not Ops.SINK: raise ValueError("a kernel AST is a SINK of STOREs")
    self.ast, self.renderer = ast, renderer
    self.views: list[UOp] = [u for u in ast.toposort() if u.op is Ops.VIEW]
    self.sts: list[ShapeTracker] = [v.arg for v in self.views]
    reduces = [u for u in ast.toposort() if u.op is Ops.REDUCE_AXIS]
    if len(reduces) > 1: raise ValueError("a kernel holds at most one reduce")
    self.reduceop: UOp | None = reduces[0] if reduces else None
    self.full_shape = max((st.shape for st in self.sts), key=lambda s: prod(x if isinstance(x, int) else x.vmax for x in s))
    red_axes = set(self.reduceop.arg[1]) if self.reduceop is not None else set()
    self.kinds = ["r" if i in red_axes else "g" for i in range(len(self.full_shape))]
    self.applied_opts: list[Opt] = []
    # loads (the AST's LOAD nodes) whose vectors are prefetched this many elements ahead (renderer.prefetch)
    self.prefetch: dict[UOp, int] = {}
    self._refine_dims()
    # reduce dims go last
    perm = sorted(range(len(self.kinds)), key=lambda i: (self.kinds[i] == "r", i))
    self._permute(perm)
    self._merge_dims()

  # *** the shape of the iteration space ***
  @property
  def shape_len(self) -> int: return len(self.full_shape)
  def dims(self, kind: str) -> list[int]: return [i for i, k in enumerate(self.kinds) if k == kind]
  @property
  def output_shape(self) -> tuple: return tuple(1 if k in "Grud" else s for s, k in zip(self.full_shape, self.kinds))

  def _permute(self, perm: list[int]) -> None:
    self.sts = [st.permute(tuple(perm)) for st in self.sts]
    self.full_shape = tuple(self.full_shape[i] for i in perm)
    self.kinds = [self.kinds[i] for i in perm]

  def _reshape(self, new_shape: tuple, new_kinds: list[str]) -> None:
    out_shape = [1 if k in "Grud" else s for s, k in zip(new_shape, new_kinds)]
    self.sts = [st.reshape(tuple(new_shape) if st.shape == self.full_shape else tuple(out_shape)) for st in self.sts]
    self.full_shape, self.kinds = tuple(new_shape), new_kinds

  def _refine_dims(self) -> None:
    """Split dims where a load's view below its top one has finer dims (a pooled gradient broadcast over its windows,
    then reshaped to the input's dims): in the finer shape the two views collapse into one, and its index needs no
    division or modulo. Kept only where the ShapeTrackers hold fewer views in all."""
    for st in list(self.sts):
      if len(st.views) < 2 or st.shape != self.full_shape or (fine := _refinement(self.full_shape, st.views[-2].shape)) is None: continue
      parts, j = [], len(fine)
      for s in reversed(self.full_shape):
        n = 1
        while n < s: j, n = j - 1, n * fine[j - 1]
        parts.append(j)
      cut = list(reversed(parts)) + [len(fine)]
      kinds = [self.kinds[i] for i in range(len(self.full_shape)) for _ in range(cut[i + 1] - cut[i])]
      out = tuple(1 if k in "Grud" else x for x, k in zip(fine, kinds))
      new = [x.reshape(fine if x.shape == self.full_shape else out).simplify() for x in self.sts]
      if sum(len(x.views) for x in new) < sum(len(x.views) for x in self.sts): self.sts, self.full_shape, self.kinds = new, fine, kinds

  def _merge_dims(self) -> None:
    """Merge neighbouring dims of one kind wherever every ShapeTracker stays one View (fewer loops, simpler indices)."""
    i = 0
    while i < len(self.full_shape) - 1:
      if self.kinds[i] != self.kinds[i + 1]: i += 1; continue  # noqa: E702
      shape = self.full_shape[:i] + (self.full_shape[i] * self.full_shape[i + 1],) + self.full_shape[i + 2:]
      kinds = self.kinds[:i] + self.kinds[i + 1:]
      out = tuple(1 if k in "Grud" else s for s, k in zip(shape, kinds))
      new_sts = [st.reshape(shape if st.shape == self.full_shape else out) for st in self.sts]
      if all(len(n.views) == len(o.views) for n, o in zip(new_sts, self.sts)):
        self.sts, self.full_shape, self.kinds = new_sts, shape, kinds
      else: i += 1
    # drop dims of size 1: they index nothing
    keep = [i for i, s in enumerate(self.full_shape) if s != 1]
    if len(keep) != len(self.full_shape):
      shape, kinds = tuple(self.full_shape[i] for i in keep), [self.kinds[i] for i in keep]
      self._reshape(shape, kinds)

  # *** optimizations ***
  def _split(self, dim: int, amount: int, kind: str) -> None:
    """Split dim into (size/amount, amount) and move the `amount` part, as `kind`, to where that kind lives."""
    size = self.full_shape[dim]
    if not isinstance(size, int) or amount <= 0 or size % amount != 0: raise KernelOptError(f"cannot split a dim of {size} by {amount}")
    shape = list(self.full_shape)
    kinds = list(self.kinds)
    if amount == size: kinds[dim] = kind
    else:
      shape[dim:dim + 1] = [size // amount, amount]
      kinds[dim:dim + 1] = [kinds[dim], kind]
    self._reshape(tuple(shape), kinds)
    perm = sorted(range(len(self.kinds)), key=lambda i: (_ORDER.index(self.kinds[i]), i))
    self._permute(perm)
    if amount == size and size == 1: self._merge_dims()

  def apply_opt(self, opt: Opt) -> None:
    r = self.renderer
    if opt.op in (OptOps.UPCAST, OptOps.LOCAL, OptOps.TILE): pool = self.dims("g")
    else: pool = self.dims("r")
    if not 0 <= opt.axis < len(pool): raise KernelOptError(f"{opt}: no such axis (have {len(pool)})")
    dim = pool[opt.axis]
    amount = opt.amount or self.full_shape[dim]
    if not isinstance(amount, int): raise KernelOptError(f"{opt}: the whole of a symbolic dim ({amount.render()}) cannot be split off")
    if opt.op in (OptOps.LOCAL, OptOps.GROUP):
      if not r.has_local or (opt.op is OptOps.GROUP and not r.has_shared): raise KernelOptError(f"{opt}: device has no local ids/memory")
      threads = prod(self.full_shape[i] for i in self.dims("l") + self.dims("G")) * amount
      if r.local_max is not None and threads > r.local_max[0]: raise KernelOptError(f"{opt}: {threads} threads per group is too many")
    if opt.op in (OptOps.UPCAST, OptOps.UNROLL):
      if amount > r.max_upcast: raise KernelOptError(f"{opt}: upcast of {amount} is more than {r.max_upcast}")
      # accumulators live in registers (the upcast outputs); unrolled reduce values are transient but grow the code
      ups, unr = prod(self.full_shape[i] for i in self.dims("U")), prod(self.full_shape[i] for i in self.dims("u"))
      # (256 values, or the whole register file where it holds more: AVX-512's 32 x 16 floats take a 2 x 12 tile of vectors)
      if (ups * amount if opt.op is OptOps.UPCAST else ups) > max(256, r.vector_registers * max(r.vector_widths)) or ups * unr * amount > 4096:
        raise KernelOptError(f"{opt}: too many registers")
    if opt.op is OptOps.GROUP and self.dims("G"): raise KernelOptError("only one GROUP")
    self._split(dim, amount, {OptOps.UPCAST: "U", OptOps.UNROLL: "u", OptOps.LOCAL: "l", OptOps.GROUP: "G", OptOps.TILE: "t"}[opt.op])
    self.applied_opts.append(opt)

  def apply_opts(self, opts: list[Opt]) -> Kernel:
    for o in opts: self.apply_opt(o)
    return self

  def copy(self) -> Kernel:
    k = Kernel.__new__(Kernel)
    k.__dict__.update(self.__dict__)
    k.sts, k.kinds, k.applied_opts = list(self.sts), list(self.kinds), list(self.applied_opts)
    return k

  # *** names ***
  @property
  def name(self) -> str:
    colors = {"g": "blue", "t": "white", "l": "cyan", "G": "green", "r": "red", "u": "magenta", "U": "yellow"}
    kind = "r" if self.reduceop is not None else "E"
    # a symbolic dim shows its Variables' expression (bs, bs*4), not the UOp
    dims = [str(s) if isinstance(s, int) else s.render().replace("(", "").replace(")", "").replace("*", "x") for s in self.full_shape] or ["1"]
    self.display_name = kind + " " + " ".join(colored(d, colors[k]) for d, k in zip(dims, self.kinds or ["g"]))
    return to_function_name(kind + "_" + "_".join(dims))

  def st_for(self, view: UOp) -> ShapeTracker: return self.sts[self.views.index(view)]

def _refinement(a: tuple, b: tuple) -> tuple[int, ...] | None:
  """The coarsest shape that both a and b are merges of neighbouring dims of, or None (sizes that do not nest)."""
  if not all(isinstance(x, int) and x > 0 for x in a + b) or prod(a) != prod(b): return None
  def strides(s: tuple) -> set[int]: return set(itertools.accumulate(reversed(s), operator.mul, initial=1))
  bounds = sorted(strides(a) | strides(b))
  if any(y % x for x, y in zip(bounds, bounds[1:])): return None
  return tuple(y // x for x, y in zip(bounds, bounds[1:]))[::-1]

def upcast_combos(k: Kernel, kinds: str, shortest_inner: bool = False) -> list[dict[int, int]]:
  """Every assignment of constants to the dims of the given kinds (the registers of an upcast/unroll), the last dim
  fastest; with shortest_inner the dims ordered by length first (stable), the shortest fastest."""
  dims = [i for i, kk in enumerate(k.kinds) if kk in kinds]
  if shortest_inner: dims.sort(key=lambda i: -k.full_shape[i])
  return [dict(zip(dims, vals)) for vals in itertools.product(*(range(k.full_shape[i]) for i in dims))]
