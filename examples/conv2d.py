"""The seed's conv2d on the default device, checked against numpy. Run with DEBUG=2 to see the kernels."""
import numpy as np
from tinycore import Tensor, Device

def conv2d_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
  bs, cin, h, wd = x.shape
  cout, _, kh, kw = w.shape
  out = np.zeros((bs, cout, h - kh + 1, wd - kw + 1))
  for i in range(kh):
    for j in range(kw):
      out += np.einsum("bchw,oc->bohw", x[:, :, i:i + h - kh + 1, j:j + wd - kw + 1], w[:, :, i, j])
  return out

if __name__ == "__main__":
  x, w = Tensor.rand(16, 3, 64, 64).realize(), Tensor.rand(16, 3, 3, 3).realize()
  out = x.conv2d(w).numpy()
  err = np.abs(out - conv2d_reference(x.numpy().astype(np.float64), w.numpy().astype(np.float64))).max()
  print(f"conv2d {x.shape} * {w.shape} -> {out.shape} on {Device.DEFAULT}: max abs error vs numpy {err:.2e}")
  if err > 1e-3: raise SystemExit("conv2d does not match numpy")
