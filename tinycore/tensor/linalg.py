"""Tensor linear algebra: dot and matmul, einsum, and the matrix helpers built of them."""
from __future__ import annotations
from typing import TYPE_CHECKING, Sequence
from tinycore import function as F
from tinycore.codegen.matmul import matmul_grad_transposed, matmul_panel, matmul_rows
from tinycore.device import renderer_of
from tinycore.dtype import DType, dtypes, least_upper_float
from tinycore.errors import ShapeError
from tinycore.helpers import prod
from tinycore.tensor.args import _broadcast_shape
if TYPE_CHECKING: from tinycore.tensor import Tensor

def _svd_round_robin(n: int) -> tuple[list[int], int]:
  """For one-sided Jacobi on n (even) columns laid out in pairs (2i, 2i + 1): the column order (x[..., order]) that
  moves from one round's pairing to the next, round robin (column 0 stays, the others move one seat: n - 1 rounds
  pair every two columns once, a sweep), and the number of rounds. Jacobi converges quadratically once near; 4 +
  log2(n) sweeps reach float32's precision on the matrices the tests draw (random, condition numbers up to 1e6)."""
  pos = [2 * j if j < n // 2 else 2 * (n - 1 - j) + 1 for j in range(n)]  # the layout position of seat j of the circle
  came_from = [0, n - 1] + list(range(1, n - 1))  # the seat whose column moves to seat j
  order = [0] * n
  for f, j in zip(came_from, pos): order[j] = pos[f]
  return order, (n - 1) * (4 + max(n - 1, 1).bit_length())

def _panel(x: Tensor, w: Tensor) -> int:
  """The panel width to repack w into for x @ w on w's device (codegen/matmul.py `matmul_panel`), 0 for none: only a
  2-D w stored row-major (read one row per reduce step) or transposed (a Linear's weight.T, read along the reduce in
  both operands) and an x of 16 rows or more (the copy must pay)."""
  if w.ndim != 2 or x.ndim < 2 or not isinstance(x.shape[-2], int) or x.shape[-2] < 16 or not isinstance(m := prod(x.shape[:-1]), int): return 0
  if (r := renderer_of(w.device)) is None or (st := w.lazydata.st.real_strides()) not in ((w.shape[1], 1), (1, w.shape[0])): return 0
  return matmul_panel(r, m, w.shape[0], w.shape[1], w.dtype.itemsize, transposed=st == (1, w.shape[0]),
                      x_contiguous=x.lazydata.st.real_strides()[-1] == 1)

def _dot_rule(x: Tensor, w: Tensor, dtype: DType | str | None) -> bool:
  """Whether x @ w may record Dot (its gradients written as matmuls, the value composed apart): a 2-D w that needs a
  gradient, x and w of one float dtype, on a device with a renderer."""
  if dtype is not None or w.ndim != 2 or x.ndim < 2 or x.dtype != w.dtype or not dtypes.is_float(w.dtype) or w.requires_grad is False: return False
  return not type(x).no_grad and isinstance(prod(x.shape[:-1]), int) and renderer_of(w.device) is not None

def _grad_transposed(x: Tensor, w: Tensor) -> bool:
  """Whether Dot's weight gradient goes through a transposed copy of the output gradient (`matmul_grad_transposed`)."""
  r = renderer_of(w.device)
  return r is not None and matmul_grad_transposed(r, prod(x.shape[:-1]), w.shape[0], w.shape[1], w.dtype.itemsize)

class LinalgMixin:
  __slots__ = ()

  # *** linear algebra ***
  def dot(self, w: Tensor, dtype: DType | str | None = None) -> Tensor:
    """Matrix product as torch.matmul: 1-D and 2-D operands, with broadcasting over leading dims. 16-bit floats are
    multiplied and summed in float32 (`dtype` picks the accumulation and output dtype) and return their own dtype."""
    if not isinstance(w, type(self)): raise TypeError(f"matmul needs a Tensor, got {type(w).__name__}")
    if self.ndim == 0 or w.ndim == 0: raise ShapeError(f"matmul needs tensors with at least 1 dim, got {self.shape} and {w.shape}")
    k_self, k_w = self.shape[-1], w.shape[-min(w.ndim, 2)]
    if k_self != k_w: raise ShapeError(f"matmul shape mismatch: {self.shape} @ {w.shape} ({k_self} != {k_w})")
    try: _broadcast_shape(self.shape[:-2], w.shape[:-2])
    except ValueError: raise ShapeError(f"matmul batch dims of {self.shape} and {w.shape} cannot be broadcast") from None
    # w in panels or a transposed gradient: the gradients by Dot's rule (through the panels' copy, the weight gradient
    # of a Linear's weight.T was reduced over the tokens in the panels' layout: 16 GFLOP/s)
    if (rule := _dot_rule(self, w, dtype)) and ((p := _panel(self, w)) or _grad_transposed(self, w)):
      T = type(self)
      value = T(self.lazydata, requires_grad=False).dot(T(w.lazydata, requires_grad=False))
      return F.Dot.apply(self, w, value=value.lazydata, transposed=_grad_transposed(self, w))
    if not rule and (p := _panel(self, w)): return self._dot_panels(w, p, dtype)
    n1 = min(self.ndim - 1, w.ndim - 1, 1)
    x = self.reshape(*self.shape[:-1], *[1] * n1, self.shape[-1])
    w = w.reshape(*w.shape[:-2], *[1] * n1, *w.shape[-min(w.ndim, 2):]).transpose(-1, -min(w.ndim, 2))
    x, w, out_dt = x._product_operands(w, dtype)
    return (x * w).sum(-1, dtype=dtype).cast(out_dt)
  def _dot_panels(self, w: Tensor, p: int, dtype: DType | str | None) -> Tensor:
    """self @ w with w (k, n) repacked first into (n/p, k, p): column panels contiguous along the reduce (w zero-padded
    to whole panels, and the product's padded columns cut off, where p does not divide n; self's rows likewise where the
    register tile's rows do not divide them, `matmul_rows`)."""
    (k, n), lead, npad = w.shape, self.shape[:-1], -(-w.shape[1] // p) * p
    x, w, out_dt = self._product_operands(w, dtype)
    m = prod(lead)
    mp = matmul_rows(r, m, npad) if isinstance(m, int) and (r := renderer_of(w.device)) is not None else m
    if npad != n: w = w.pad(((0, 0), (0, npad - n)))
    wp = w.reshape(k, npad // p, p).permute(1, 0, 2).contiguous().permute(0, 2, 1)  # (n/p, p, k), k contiguous within a panel
    x = x.reshape(m, k).pad(((0, mp - m), (0, 0))).reshape(mp, 1, 1, k) if mp != m else x.reshape(*lead, 1, 1, k)
    out = (x * wp).sum(-1, dtype=dtype).reshape(*(lead if mp == m else (mp,)), npad)
    if mp != m: out = out.contiguous()[:m, :n].reshape(*lead, n)
    elif npad != n: out = out.contiguous()[..., :n]
    return out.cast(out_dt)
  def matmul(self, x: Tensor, reverse: bool = False, dtype: DType | str | None = None) -> Tensor:
    """self @ x (x @ self with reverse)."""
    if not isinstance(x, type(self)): x = type(self)(x, device=self.device)
    return x.dot(self, dtype=dtype) if reverse else self.dot(x, dtype=dtype)
  def newton_schulz(self, steps: int, params: tuple[float, ...], eps: float = 1.0e-7) -> Tensor:
    """Orthogonalize the last two dims: scale to a Frobenius norm below one, then `steps` times X <- sum_i params[i] *
    (X X^T)^i X (the odd polynomial iteration Muon uses); a tall matrix is worked on transposed."""
    if self.ndim < 2: raise ShapeError(f"newton_schulz needs at least 2 dims, got shape {self.shape}")
    if self.shape[-2] > self.shape[-1]: return self.transpose(-2, -1).newton_schulz(steps, params, eps).transpose(-2, -1)
    x = self / ((self * self).sum(axis=(-2, -1), keepdim=True).sqrt() + eps)
    for _ in range(steps):
      gram, term = x @ x.transpose(-2, -1), x
      out = params[0] * x
      for c in params[1:]:
        term = gram @ term
        out = out + c * term
      x = out
    return x
  def qr(self) -> tuple[Tensor, Tensor]:
    """Q (..., m, m) orthogonal and R (..., m, n) upper triangular with Q @ R = self, by Householder reflections: for each
    column k < min(m, n), H = I - 2 v v^T / (v^T v) with v = x + s |x| e_k (x the column from row k down, s the sign of
    x_k, +1 for 0) turns x into -s |x| e_k; R = H R and Q = Q H. A zero column reflects nothing."""
    if self.ndim < 2: raise ShapeError(f"qr needs at least 2 dims, got shape {self.shape}")
    m, n = self.shape[-2], self.shape[-1]
    x0 = self if dtypes.is_float(self.dtype) else self.cast(least_upper_float(self.dtype))
    rows = type(self).arange(m, device=self.device)
    r, q = x0, type(self).eye(m, dtype=x0.dtype, device=self.device).expand(*self.shape[:-2], m, m)
    for k in range(min(m, n)):
      x = (rows >= k).where(r[..., :, k], 0)
      xk = r[..., k:k + 1, k]
      v = x + (rows == k).where((xk < 0).where(-1.0, 1.0) * x.square().sum(-1, keepdim=True).sqrt(), 0)
      vtv = v.square().sum(-1, keepdim=True)
      w = (vtv == 0).where(0.0, 2 / (vtv == 0).where(1.0, vtv)) * v  # 2 v / (v^T v), 0 for a zero column
      r = r - v.unsqueeze(-1) * (w.unsqueeze(-2) @ r)
      q = q - (q @ v.unsqueeze(-1)) * w.unsqueeze(-2)
    return q, r
  def svd(self, full_matrices: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """U, S, Vh with U @ diag(S) @ Vh = self over the last two dims (batched), S descending, as torch.linalg.svd and
    tinygrad 0.14. A tall matrix (m >= n; a wide one is worked on transposed) is reduced to R of its qr, then one-sided
    Jacobi: each round rotates n/2 disjoint column pairs of R (and of V = I) so that the pair becomes orthogonal, the
    pairs chosen round robin so that a sweep meets every pair once; the fixed number of sweeps (`_svd_round_robin`) makes it
    a plain differentiable graph (gradients follow the rotations). S is the column norms, U the columns over S (a zero
    singular value leaves a zero column of U), full_matrices=True fills U to (m, m) with the rest of qr's Q."""
    if self.ndim < 2: raise ShapeError(f"svd needs at least 2 dims, got shape {self.shape}")
    m, n = self.shape[-2], self.shape[-1]
    if m < n:
      u, s, vh = self.transpose(-2, -1).svd(full_matrices)
      return vh.transpose(-2, -1), s, u.transpose(-2, -1)
    q, r = self.qr()
    k = n + n % 2  # an odd n gets a zero column: it never turns, and sorts last
    v = type(self).eye(n, k, dtype=r.dtype, device=self.device).expand(*r.shape[:-2], n, k)
    x = r[..., :n, :].pad(((0, 0),) * (r.ndim - 1) + ((0, k - n),)).cat(v, dim=-2)  # [R; V], columns paired (2i, 2i + 1)
    order, rounds = _svd_round_robin(k)
    for _ in range(rounds if n > 1 else 0):
      xp, xq = (x.reshape(*x.shape[:-1], k // 2, 2)[..., i] for i in (0, 1))
      w = x[..., :n, :].reshape(*x.shape[:-2], n, k // 2, 2)
      abg = w.square().cat((w[..., 0] * w[..., 1]).unsqueeze(-1), dim=-1).sum(-3, keepdim=True)  # |p|^2, |q|^2, p.q of each pair
      alpha, beta, gamma = abg[..., 0], abg[..., 1], abg[..., 2]
      # tan of the angle that zeroes p.q: the smaller root of t^2 + 2 zeta t = 1, zeta = (beta - alpha) / (2 gamma), written
      # without dividing by gamma so that it (and its gradient) stays finite as the pair becomes orthogonal
      d = beta - alpha
      den = d.abs() + (d.square() + 4 * gamma.square()).sqrt()
      t = (den == 0).where(0, 2 * gamma * (d >= 0).where(1.0, -1.0) / (den == 0).where(1, den))
      c = (1 + t.square()).rsqrt()
      x = (c * xp - c * t * xq).unsqueeze(-1).cat((c * t * xp + c * xq).unsqueeze(-1), dim=-1).reshape(x.shape)[..., order]
    s, order = x[..., :n, :].square().sum(-2).sqrt().sort(-1, descending=True)
    x, s = x.gather(-1, order[..., :n].unsqueeze(-2).expand(*x.shape[:-1], n)), s[..., :n]
    u = q[..., :, :n] @ (x[..., :n, :] / (s != 0).where(s, 1).unsqueeze(-2))
    if full_matrices: u = u.cat(q[..., :, n:], dim=-1)
    return u, s, x[..., n:, :].transpose(-2, -1)
  def linear(self, weight: Tensor, bias: Tensor | None = None, dtype: DType | str | None = None) -> Tensor:
    """self @ weight + bias, weight shaped (in, out) (a 1-D weight multiplies elementwise)."""
    x = self.mul(weight) if weight.ndim == 1 else self.dot(weight, dtype=dtype)
    return x.add(bias) if bias is not None else x
  @staticmethod
  def einsum(formula: str, *operands: Tensor | Sequence[Tensor], dtype: DType | str | None = None) -> Tensor:
    """Einstein summation, as numpy/torch: "ij,jk->ik", implicit output, "..." broadcasting, repeated indices (diagonals)."""
    ops = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], (list, tuple)) else list(operands)
    f = formula.replace(" ", "")
    lhs, rhs = (f.split("->") + [None])[:2] if "->" in f else (f, None)
    ins = lhs.split(",")
    if len(ins) != len(ops): raise ShapeError(f"einsum {formula!r} names {len(ins)} operands, got {len(ops)}")
    # expand "..." into fresh letters
    ell_n = max([t.ndim - len(s.replace("...", "")) for s, t in zip(ins, ops) if "..." in s] + [0])
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in f][:ell_n]
    def expand(s: str, nd: int) -> str:
      if "..." not in s: return s
      k = nd - len(s.replace("...", ""))
      return s.replace("...", "".join(free[ell_n - k:]))
    ins = [expand(s, t.ndim) for s, t in zip(ins, ops)]
    for s, t in zip(ins, ops):
      if not all(c.isalpha() for c in s): raise ShapeError(f"einsum {formula!r}: bad subscript {s!r}")
      if len(s) != t.ndim: raise ShapeError(f"einsum {formula!r}: subscript {s!r} does not match an operand of shape {t.shape}")
    if rhs is None:
      counts = {c: sum(s.count(c) for s in ins) for c in set("".join(ins))}
      rhs = "".join(free[:ell_n]) + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in free))
    else: rhs = rhs.replace("...", "".join(free[:ell_n]))  # an explicit output without "..." sums the ellipsis dims away
    # operands with a repeated letter: take the diagonal
    tensors: list[Tensor] = []
    subs: list[str] = []
    for s, t in zip(ins, ops):
      while len(set(s)) != len(s):
        c = next(ch for ch in s if s.count(ch) > 1)
        i, j = s.index(c), s.index(c, s.index(c) + 1)
        if t.shape[i] != t.shape[j]: raise ShapeError(f"einsum {formula!r}: repeated index {c!r} has sizes {t.shape[i]} and {t.shape[j]}")
        t = t.diagonal(0, i, j)
        s = "".join(ch for k, ch in enumerate(s) if k not in (i, j)) + c
      tensors.append(t)
      subs.append(s)
    letters = sorted(set("".join(subs)))
    sizes: dict[str, int] = {}
    for s, t in zip(subs, tensors):
      for c, n in zip(s, t.shape):
        if sizes.get(c, n) != n and n != 1 and sizes[c] != 1: raise ShapeError(f"einsum {formula!r}: index {c!r} has sizes {sizes[c]} and {n}")
        sizes[c] = max(sizes.get(c, n), n)
    for c in rhs:
      if c not in sizes: raise ShapeError(f"einsum {formula!r}: output index {c!r} is not in the inputs")
    aligned = []
    for s, t in zip(subs, tensors):
      order = sorted(range(len(s)), key=lambda k: letters.index(s[k]))
      t = t.permute(order) if order else t
      ss = "".join(s[k] for k in order)
      aligned.append(t.reshape(*[t.shape[ss.index(c)] if c in ss else 1 for c in letters]) if letters else t)
    out = aligned[0]
    for t in aligned[1:]: out = out * t
    out = out.expand(*[sizes[c] for c in letters]) if letters else out
    red = [k for k, c in enumerate(letters) if c not in rhs]
    if red: out = out.sum(red, dtype=dtype)
    kept = [c for c in letters if c in rhs]
    return out.permute([kept.index(c) for c in rhs]) if rhs else out
