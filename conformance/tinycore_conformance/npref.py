"""numpy references for the tensor and model layers (forward values and hand-derived gradients), written from the
definitions: nothing here runs tinycore."""
from __future__ import annotations
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

def floordiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """numpy's a // b, whose integer division by zero is 0 and MIN // -1 is MIN (the definition tinycore follows)."""
  with np.errstate(all="ignore"): return np.floor_divide(a, b)

def mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """numpy's a % b (the divisor's sign), 0 for a division by zero."""
  with np.errstate(all="ignore"): return np.remainder(a, b)

def windows(x: np.ndarray, kh: int, kw: int, stride: int = 1, dilation: int = 1) -> np.ndarray:
  """(N, C, H, W) -> (N, C, OH, OW, kh, kw) views of the sliding windows."""
  eh, ew = dilation * (kh - 1) + 1, dilation * (kw - 1) + 1
  v = sliding_window_view(x, (eh, ew), axis=(2, 3))[:, :, ::stride, ::stride, ::dilation, ::dilation]
  return v

def conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, stride: int = 1, padding: int = 0, dilation: int = 1,
           groups: int = 1) -> np.ndarray:
  """Cross-correlation as torch.nn.functional.conv2d, computed in float64."""
  x, w = x.astype(np.float64), w.astype(np.float64)
  if padding: x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
  n, cin = x.shape[:2]
  cout, cg, kh, kw = w.shape
  outs = []
  for g in range(groups):
    xs = windows(x[:, g * cg:(g + 1) * cg], kh, kw, stride, dilation)
    ws = w[g * (cout // groups):(g + 1) * (cout // groups)]
    outs.append(np.einsum("ncyxij,ocij->noyx", xs, ws))
  out = np.concatenate(outs, axis=1)
  return out + b.astype(np.float64).reshape(1, -1, 1, 1) if b is not None else out

def conv2d_grads(x: np.ndarray, w: np.ndarray, dout: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """d/dx and d/dw of sum(dout * conv2d(x, w)) (stride 1, no padding, one group)."""
  x, w, dout = x.astype(np.float64), w.astype(np.float64), dout.astype(np.float64)
  _, _, kh, kw = w.shape
  dw = np.einsum("noyx,ncyxij->ocij", dout, windows(x, kh, kw))
  dx = np.zeros_like(x)
  oh, ow = dout.shape[2:]
  for i in range(kh):
    for j in range(kw): dx[:, :, i:i + oh, j:j + ow] += np.einsum("noyx,oc->ncyx", dout, w[:, :, i, j])
  return dx, dw

def max_pool2d(x: np.ndarray, k: int = 2, stride: int | None = None) -> np.ndarray:
  return windows(x.astype(np.float64), k, k, stride or k).max(axis=(4, 5))

def avg_pool2d(x: np.ndarray, k: int = 2, stride: int | None = None) -> np.ndarray:
  return windows(x.astype(np.float64), k, k, stride or k).mean(axis=(4, 5))

def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
  e = np.exp(x.astype(np.float64) - x.max(axis=axis, keepdims=True))
  return e / e.sum(axis=axis, keepdims=True)

def log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
  m = x.astype(np.float64) - x.max(axis=axis, keepdims=True)
  return m - np.log(np.exp(m).sum(axis=axis, keepdims=True))

def logsumexp(x: np.ndarray, axis: int = -1) -> np.ndarray:
  m = x.astype(np.float64).max(axis=axis, keepdims=True)
  return (np.log(np.exp(x - m).sum(axis=axis, keepdims=True)) + m).squeeze(axis)

def sigmoid(x: np.ndarray) -> np.ndarray: return 1 / (1 + np.exp(-x.astype(np.float64)))

def relu(x: np.ndarray) -> np.ndarray: return np.maximum(x, 0)

def pow_grads(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """d(a ** b)/da and d(a ** b)/db as torch defines them where they are not: 0 for b == 0, and for a == 0 with b >= 0."""
  return np.where(b == 0, 0, b * a ** (b - 1)), np.where((a == 0) & (b >= 0), 0, a ** b * np.log(a))

# *** a small CNN: conv(1->4, 3x3) -> relu -> maxpool 2 -> flatten -> linear(36->10) -> log_softmax -> NLL ***

def cnn_forward(x, w1, b1, w2, b2, y1h):
  """Forward pass and what backward needs."""
  h = conv2d(x, w1, b1)
  r = relu(h)
  p = max_pool2d(r, 2)
  f = p.reshape(p.shape[0], -1)
  z = f @ w2.astype(np.float64) + b2
  lp = log_softmax(z)
  loss = -(lp * y1h).sum() / x.shape[0]
  return loss, dict(h=h, r=r, p=p, f=f, z=z, lp=lp)

def cnn_grads(x, w1, b1, w2, b2, y1h):
  loss, c = cnn_forward(x, w1, b1, w2, b2, y1h)
  n = x.shape[0]
  dz = (softmax(c["z"]) - y1h) / n
  dw2, db2 = c["f"].T @ dz, dz.sum(0)
  dp = (dz @ w2.astype(np.float64).T).reshape(c["p"].shape)
  # max-pool backward: the gradient goes to the max of each 2x2 window (inputs are continuous: no ties)
  r = c["r"]
  dr = np.zeros_like(r)
  N, C, H, W = r.shape
  rw = r[:, :, :H // 2 * 2, :W // 2 * 2].reshape(N, C, H // 2, 2, W // 2, 2)
  mask = rw == rw.max(axis=(3, 5), keepdims=True)
  dr[:, :, :H // 2 * 2, :W // 2 * 2] = (mask * dp[:, :, :, None, :, None]).reshape(N, C, H // 2 * 2, W // 2 * 2)
  dh = dr * (c["h"] > 0)
  _, dw1 = conv2d_grads(x, w1, dh)
  db1 = dh.sum(axis=(0, 2, 3))
  return loss, (dw1, db1, dw2, db2)

def scatter_add(shape: tuple[int, ...], idx: np.ndarray, src: np.ndarray) -> np.ndarray:
  """zeros(shape) with the rows of src added at idx along axis 0 (negative indices from the end), in index order."""
  out = np.zeros(shape, src.dtype)
  for i, row in zip(idx.reshape(-1), src.reshape(-1, *shape[1:])): out[i] = out[i] + row
  return out

def scatter_prod(x: np.ndarray, idx: np.ndarray, src: np.ndarray) -> np.ndarray:
  """x with src multiplied in at idx along axis 0 (as torch.scatter_reduce 'prod'; negative indices from the end), one
  product per element in index order, in x's dtype."""
  out = x.copy()
  for k, j in np.ndindex(*idx.shape): out[idx[k, j], j] = out[idx[k, j], j] * src[k, j]
  return out
