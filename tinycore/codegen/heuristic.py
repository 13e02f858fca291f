"""Hand-coded optimizations: a quick, reasonable choice of OptOps when BEAM search is off."""
from __future__ import annotations
from tinycore.helpers import prod
from tinycore.codegen.kernel import Kernel, Opt, OptOps, KernelOptError

def _try(k: Kernel, opt: Opt) -> bool:
  try:
    k.apply_opt(opt)
    return True
  except KernelOptError: return False

def hand_coded_optimizations(k: Kernel) -> Kernel:
  r = k.renderer
  red = k.dims("r")
  # a big reduce with a small output: spread the reduce over the threads of a group
  if red and r.has_local and r.has_shared and prod(k.full_shape[d] for d in k.dims("g")) <= 256:
    for amt in (16, 8, 4):
      if k.full_shape[red[-1]] % amt == 0 and k.full_shape[red[-1]] >= 256 and _try(k, Opt(OptOps.GROUP, len(red) - 1, amt)): break
  # small reduce dims (a 3x3 window) are unrolled into registers
  for i in reversed(range(len(k.dims("r")))):
    d = k.dims("r")[i]
    if k.full_shape[d] <= 4: _try(k, Opt(OptOps.UNROLL, i, 0))
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
