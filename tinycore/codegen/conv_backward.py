"""A convolution's weight gradient on a CPU with vectors: the input's layout and the register tile of its kernel.

The weight gradient dW[co, ci, ky, kx] = sum over (b, y, x) of g[b, co, y, x] * x[b, ci, y + ky, x + kx] reads the conv's
input with the input channels as the vector lanes (its rows are output channels, each an output gradient value
broadcast). Read as it is stored (bs, cin, h, w), a vector of 16 input channels is 16 loads h*w apart, assembled lane by
lane (layer4's 4x4 images: 16 loads and inserts per 16 multiply-adds). The input is copied channels-last first
(`conv_input_channels_last`, bs*cin*h*w floats, next to the kernel's 9 x cout/rows reads of it): each vector is then one
(masked) load.

Over a long reduce (ResNet-18's layer1: 16 images of 28x28), each tile streams the whole input and output gradient
(3.2 MB each) from beyond L2, once per tile: the batch is cut into groups (`conv_weight_grad_images`), each group's
partial gradient reduced over its images, the partials summed after. A group of ~512 reduce steps or more keeps the
tile's stores amortized and its reads in L2 (layer1 one image a group, layer2's 14x14 four: 1.3-1.45x faster on one
AVX-512 core, channels-last at those sizes 1.3x slower without the groups); layer3's and layer4's whole batch is one.

The tile (`conv_weight_grad_tile`): rows of output channels x two vectors of input channels, the reduce over the
batch and the image left as loops (the forward conv's tile unrolls the window's columns: here the innermost reduce dim
is the image's columns, and unrolled it became the vector dim)."""
from __future__ import annotations
from tinycore.backend import Renderer
from tinycore.ops import Ops
from tinycore.codegen.kernel import Kernel, Opt, OptOps, KernelOptError
from tinycore.codegen.conv_forward import channels_in_vectors

def conv_input_channels_last(r: Renderer, cin: int) -> bool:
  """Whether a conv's input is copied channels-last before its weight gradient reads it: CPUs with vectors (no thread
  ids), the input channels in whole vectors."""
  return channels_in_vectors(r, cin)

# the fewest reduce steps (images x output pixels) of a group of the batch in a weight gradient (see the module docstring)
GROUP_STEPS = 512

def conv_weight_grad_images(r: Renderer, bs: int, pixels: int) -> int:
  """How many images of the batch one partial weight gradient reduces over (bs: no groups): the fewest, dividing bs,
  whose reduce reaches GROUP_STEPS, on CPUs with vectors."""
  if r.has_local or max(r.vector_widths) < 2 or not isinstance(bs, int) or not isinstance(pixels, int): return bs
  return next(n for n in range(1, bs + 1) if bs % n == 0 and (n * pixels >= GROUP_STEPS or n == bs))

def conv_weight_grad_tile(k: Kernel) -> bool:
  """The weight-gradient tile (see the module docstring), applied to k where k is such a kernel: two loads in the reduce,
  an output dim in whole vectors along which one (the channels-last input) is contiguous and the other (the output
  gradient) broadcast, one output dim along which the input is broadcast and the output gradient read (the output
  channels: a forward conv's weight, read the same way, is broadcast along the batch and the image's rows and columns),
  and an output dim besides the lanes along which the output gradient is broadcast (the window's taps). False, k
  unchanged, where k is no such kernel. Rows x vectors: the most accumulators that leave 8 registers (8 x 2 on
  AVX-512, 4 x 2 on AVX2)."""
  r = k.renderer
  if k.reduceop is None or r.has_local or not all(isinstance(s, int) for s in k.full_shape): return False
  w = max(r.vector_widths)
  views = [u.src[1] for u in k.reduceop.toposort() if u.op is Ops.LOAD]
  if w < 2 or len(views) != 2: return False
  def strides(d: int) -> list: return [k.st_for(v).real_strides()[d] for v in views]
  g = k.dims("g")
  lanes = [d for d in g if k.full_shape[d] % w == 0 and sorted(strides(d), key=str) == sorted([0, 1], key=str)]
  for lane in lanes:
    a = strides(lane).index(1)
    rows = [d for d in g if d != lane and k.full_shape[d] > 1 and strides(d)[a] == 0]
    taps = [d for d in g if d != lane and strides(d)[1 - a] == 0 and strides(d)[a] != 0]
    if len(rows) != 1 or not isinstance(s := strides(rows[0])[1 - a], int) or s == 0 or not taps: continue
    row = rows[0]
    size, two = k.full_shape[row], k.full_shape[lane] % (2 * w) == 0
    vecs, nrow = max(((v, n) for v in ((2, 1) if two else (1,)) for n in range(1, min(size, 16) + 1)
                      if size % n == 0 and n * v <= r.vector_registers - 8), key=lambda t: (t[0] * t[1], t[0]))
    t = k.copy()
    # each dim found again after each upcast (a split keeps the outer part in place, a dim upcast whole moves away)
    def again(t: Kernel, want: list) -> int:
      return next(i for i, d in enumerate(t.dims("g")) if [t.st_for(v).real_strides()[d] for v in views] == want and t.full_shape[d] > 1)
    try:
      t.apply_opt(Opt(OptOps.UPCAST, t.dims("g").index(lane), w))
      if vecs == 2: t.apply_opt(Opt(OptOps.UPCAST, again(t, [w * s for s in strides(lane)]), 2))
      if nrow > 1: t.apply_opt(Opt(OptOps.UPCAST, again(t, strides(row)), nrow))
    except (KernelOptError, StopIteration): continue
    k.__dict__.update(t.__dict__)
    return True
  return False
