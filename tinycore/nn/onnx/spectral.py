"""ONNX's Fourier transforms, DFT and STFT, as matrix products with cosine and sine tables.

A complex value is a trailing dim of 2 (real, imaginary); a real input has a trailing dim of 1. The transform of length L
along one axis is x @ (C - iS) with C[n, k] = cos(2 pi n k / L), S = sin(...): the angle is taken from n k mod L (an
integer) so that the tables stay exact for long transforms, and everything is computed in float64 where the device has
it (ONNX's reference is numpy's fft in float64), then cast back. As numpy's fft:
- the input is zero-padded or cut to dft_length along the axis;
- onesided keeps the first L // 2 + 1 frequencies of a forward transform;
- inverse divides by L; inverse with onesided is numpy's irfft: the input holds the first L // 2 + 1 frequencies of a
  Hermitian spectrum (L = 2 (n - 1) by default), the output is real.
MelWeightMatrix's triangular filters have edges that depend only on its scalar inputs: they are computed on the host in
Python floats (as ONNX's reference does in numpy float64), the matrix from them with Tensor ops."""
from __future__ import annotations
import math
from tinycore.tensor import Tensor
from tinycore.dtype import DType, dtypes
from tinycore.device import is_dtype_supported
from tinycore.nn.onnx.registry import onnx_op
from tinycore.nn.onnx.tensors import ints, axis_of, dtype_of, scalar, DTYPES

def _tables(n: int, k: int, length: int, device: str) -> tuple[Tensor, Tensor]:
  """(C, S), each (n, k): cos and sin of 2 pi i j / length."""
  nk = (Tensor.arange(n, device=device).reshape(n, 1) * Tensor.arange(k, device=device).reshape(1, k)) % length
  angle = nk.cast(_work(device)) * (2 * math.pi / length)
  return angle.cos(), angle.sin()

def _work(device: str) -> DType:
  return dtypes.float64 if is_dtype_supported(dtypes.float64, device) else dtypes.float32

def _fit(t: Tensor, length: int) -> Tensor:
  """t zero-padded or cut to `length` along its last dim."""
  n = t.shape[-1]
  return t.pad([(0, 0)] * (t.ndim - 1) + [(0, length - n)]) if n < length else t[..., :length]

def _transform(x: Tensor, axis: int, length: int, inverse: bool, onesided: bool) -> Tensor:
  """The DFT of x (..., 1 or 2) along `axis` (a dim of x before the trailing one), as the trailing-dim-2 result."""
  wt, a = _work(x.device), axis_of(axis, x.ndim)
  re = x[..., 0].cast(wt).transpose(a, -1)
  im = x[..., 1].cast(wt).transpose(a, -1) if x.shape[-1] == 2 else None
  if inverse and onesided:  # irfft: the Hermitian spectrum's first length // 2 + 1 bins, each counted twice but DC and Nyquist
    k = length // 2 + 1
    re, im = _fit(re, k), _fit(im, k) if im is not None else None
    c, s = _tables(k, length, length, x.device)
    twice = Tensor.arange(k, device=x.device).reshape(k, 1)
    w = ((twice == 0) | ((twice * 2) == length)).where(1.0, 2.0).cast(wt) / length
    out = (re @ (c * w)) - (im @ (s * w) if im is not None else 0)
    return out.transpose(a, -1).unsqueeze(-1).cast(x.dtype)
  re, im = _fit(re, length), _fit(im, length) if im is not None else None
  k = length // 2 + 1 if onesided and not inverse else length
  c, s = _tables(length, k, length, x.device)
  if inverse:  # e^{+i theta} / L
    out_re = (re @ c - (im @ s if im is not None else 0)) / length
    out_im = ((im @ c if im is not None else 0) + re @ s) / length
  else:  # e^{-i theta}
    out_re = re @ c + (im @ s if im is not None else 0)
    out_im = (im @ c if im is not None else 0) - re @ s
  return Tensor.stack(out_re.transpose(a, -1), out_im.transpose(a, -1), dim=-1).cast(x.dtype)

@onnx_op(until=19, name="DFT")
def DFT17(x: Tensor, dft_length: Tensor | None = None, /, *, axis: int = 1, inverse: int = 0, onesided: int = 0) -> Tensor:
  return DFT(x, dft_length, None, axis=axis, inverse=inverse, onesided=onesided)

@onnx_op(since=20)
def DFT(x: Tensor, dft_length: Tensor | None = None, axis_input: Tensor | None = None, /, *, inverse: int = 0, onesided: int = 0,
        axis: int = -2) -> Tensor:
  """Version 20 takes the axis as an input (default -2: the last dim before the complex one); version 17 as an attribute."""
  a = axis_of(ints(axis_input, axis), x.ndim)
  n = x.shape[a]
  length = ints(dft_length) if dft_length is not None else 2 * (n - 1) if inverse and onesided else n
  return _transform(x, a, length, bool(inverse), bool(onesided))

@onnx_op()
def STFT(x: Tensor, frame_step: Tensor, window: Tensor | None = None, frame_length: Tensor | None = None, /, *, onesided: int = 1) -> Tensor:
  """Frames of frame_length every frame_step samples of signal (batch, samples, 1 or 2), each times the window, each
  transformed: (batch, frames, bins, 2)."""
  fl = ints(frame_length) if frame_length is not None else window.shape[0] if window is not None else x.shape[-2]
  step = ints(frame_step)
  nf = 1 + (x.shape[-2] - fl) // step
  starts = Tensor.arange(nf, device=x.device).reshape(nf, 1) * step + Tensor.arange(fl, device=x.device).reshape(1, fl)
  frames = x[:, starts.flatten()].reshape(x.shape[0], nf, fl, x.shape[-1])
  if window is not None: frames = frames * window.cast(x.dtype).reshape(1, 1, fl, 1)
  return _transform(frames, 2, fl, False, bool(onesided))

@onnx_op(values={"output_datatype": tuple(DTYPES)})
def MelWeightMatrix(num_mel_bins: Tensor, dft_length: Tensor, sample_rate: Tensor, lower_edge_hertz: Tensor, upper_edge_hertz: Tensor, /, *,
                    output_datatype: int = 1) -> Tensor:
  """(dft_length // 2 + 1, num_mel_bins): filter i rises linearly from edge i to edge i + 1 and falls to edge i + 2, the
  num_mel_bins + 2 edges evenly spaced on the mel scale between the two frequencies, as spectrogram bins."""
  m, n, rate = int(scalar(num_mel_bins)), int(scalar(dft_length)), scalar(sample_rate)
  def mel(hz: float) -> float: return 2595 * math.log1p(hz / 700) / math.log(10)
  lo_mel, hi_mel = mel(float(scalar(lower_edge_hertz))), mel(float(scalar(upper_edge_hertz)))
  step = (hi_mel - lo_mel) / (m + 2)
  edges = [int(((n + 1) * (700 * math.expm1((k * step + lo_mel) / 2595 * math.log(10)))) // rate) for k in range(m + 2)]
  j = Tensor.arange(n // 2 + 1).reshape(-1, 1).cast(_work(num_mel_bins.device))
  lo, mid, hi = (Tensor(e, dtype=j.dtype).reshape(1, m) for e in (edges[:-2], edges[1:-1], edges[2:]))
  rise = (mid == lo).where(1.0, (j - lo) / (mid - lo).maximum(1))
  fall = (hi - j) / (hi - mid).maximum(1)
  out = ((j >= mid) & (j < hi)).where(fall, ((j >= lo) & (j <= mid)).where(rise, 0.0))
  return out.cast(dtype_of(output_datatype, "MelWeightMatrix"))
