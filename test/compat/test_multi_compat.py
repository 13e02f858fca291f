"""Sharded tensors side by side with tinygrad 0.14 on its CPU devices: the same calls on ("CPU:0", "CPU:1") in both
libraries must give the same result `.device` (tinycore's CPU is an alias of CLANG: compared by position), `.shape`,
sharding axis (tinygrad's `uop.axis`, tinycore's `lazydata.axis`; "one" for a tensor on one device) and values, and
raise where tinygrad raises. The rules themselves are stated in tinycore/multi.py; where tinycore does more than
tinygrad (pad, shrink or flip of the sharded dim, which tinygrad refuses; reshapes across shards) it is tested against
one device in test/test_multi.py instead."""
from __future__ import annotations
from typing import Any, Callable
import numpy as np
import pytest
from test.compat.harness import TG, TC, Lib

DEVS = ("CPU:0", "CPU:1")
rng = np.random.default_rng(16)
A, B, W, K = (rng.standard_normal(s).astype(np.float32) for s in ((4, 6), (4, 6), (6, 8), (4, 4)))
X, CW = rng.standard_normal((4, 2, 5, 5)).astype(np.float32), rng.standard_normal((3, 2, 3, 3)).astype(np.float32)

def _axis(lib: Lib, t: Any) -> Any:
  if isinstance(t.device, str): return "one"
  return t.uop.axis if lib is TG else t.lazydata.axis

def observe(lib: Lib, t: Any) -> tuple:
  # devices by their index (tinygrad's CPU is tinycore's CLANG): ("CPU", "CPU:1") and ("CLANG", "CLANG:1") are (0, 1)
  dev = "one device" if isinstance(t.device, str) else tuple(int(d.partition(":")[2] or 0) for d in t.device)
  return (dev, tuple(t.shape), _axis(lib, t), np.asarray(t.numpy()))

def T(lib: Lib, a: np.ndarray) -> Any: return lib.Tensor(a, device="CPU")

CASES: dict[str, Callable[[Lib], Any]] = {
  "shard0": lambda L: T(L, A).shard(DEVS, axis=0), "shard1": lambda L: T(L, A).shard(DEVS, axis=1), "replicate": lambda L: T(L, A).shard(DEVS),
  "sum_sharded_axis": lambda L: T(L, A).shard(DEVS, 0).sum(0), "sum_other_axis": lambda L: T(L, A).shard(DEVS, 0).sum(1),
  "sum_all": lambda L: T(L, A).shard(DEVS, 1).sum(), "sum_keepdim": lambda L: T(L, A).shard(DEVS, 0).sum(0, keepdim=True),
  "max_sharded_axis": lambda L: T(L, A).shard(DEVS, 0).max(0), "max_other_axis": lambda L: T(L, A).shard(DEVS, 0).max(1),
  "mean": lambda L: T(L, A).shard(DEVS, 0).mean(),
  "reshape_split": lambda L: T(L, A).shard(DEVS, 0).reshape(2, 2, 6), "reshape_flat": lambda L: T(L, A).shard(DEVS, 0).reshape(24),
  "reshape_inner": lambda L: T(L, A).shard(DEVS, 1).reshape(4, 2, 3), "permute": lambda L: T(L, A).shard(DEVS, 0).permute(1, 0),
  "transpose_contiguous": lambda L: T(L, A).shard(DEVS, 1).T.contiguous(),
  "expand": lambda L: T(L, A).shard(DEVS, 0).reshape(4, 1, 6).expand(4, 3, 6), "pad_other": lambda L: T(L, A).shard(DEVS, 0).pad(((0, 0), (1, 1))),
  "cast": lambda L: T(L, A).shard(DEVS, 0).cast(L.dtypes.int32),
  "add_replicated": lambda L: T(L, A).shard(DEVS, 0) + T(L, B).shard(DEVS),
  "add_replicated_first": lambda L: T(L, A).shard(DEVS) * T(L, B).shard(DEVS, 1),
  "add_axes_0_1": lambda L: T(L, K).shard(DEVS, 0) + T(L, K).shard(DEVS, 1),
  "add_axes_1_0": lambda L: T(L, K).shard(DEVS, 1) + T(L, K).shard(DEVS, 0),
  "add_const": lambda L: T(L, A).shard(DEVS, 0) + 1.5, "relu_exp": lambda L: T(L, A).shard(DEVS, 1).relu().exp(),
  "matmul_batch": lambda L: T(L, A).shard(DEVS, 0) @ T(L, W).shard(DEVS), "matmul_k": lambda L: T(L, A).shard(DEVS, 1) @ T(L, W).shard(DEVS, 0),
  "matmul_cols": lambda L: T(L, A).shard(DEVS) @ T(L, W).shard(DEVS, 1),
  "conv2d": lambda L: T(L, X).shard(DEVS, 0).conv2d(T(L, CW).shard(DEVS), padding=1),
  "softmax": lambda L: T(L, A).shard(DEVS, 0).softmax(-1),
  "to_one": lambda L: T(L, A).shard(DEVS, 0).to("CPU"), "to_tuple": lambda L: T(L, A).to(DEVS),
  "shard_in_place": lambda L: (lambda t: (t.shard_(DEVS, 1), t)[1])(T(L, K)),
  "zeros_on_tuple": lambda L: L.Tensor.zeros(4, 6, device=DEVS), "data_on_tuple": lambda L: L.Tensor(A, device=DEVS),
  "one_device_tuple": lambda L: T(L, A).shard(("CPU",)),
  "grad_of_replicated_weight": lambda L: (lambda x, w: ((x @ w).sum().backward(), w.grad)[1])(T(L, A).shard(DEVS, 0), T(L, W).shard(DEVS)),
  "grad_of_sharded_input": lambda L: (lambda x, w: ((x @ w).relu().sum().backward(), x.grad)[1])(T(L, A).shard(DEVS, 0), T(L, W).shard(DEVS)),
}

@pytest.mark.parametrize("name", sorted(CASES))
def test_same_sharding_as_tinygrad(name: str):
  ref, got = observe(TG, CASES[name](TG)), observe(TC, CASES[name](TC))
  assert got[:3] == ref[:3], f"{name}: tinycore (devices, shape, axis) {got[:3]} != tinygrad {ref[:3]}"
  np.testing.assert_allclose(got[3], ref[3], rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("name,fn", [("uneven", lambda L: T(L, A[:3]).shard(DEVS, 0)),
                                     ("shard_twice", lambda L: T(L, A).shard(DEVS, 0).shard(DEVS, 1))])
def test_same_errors_as_tinygrad(name: str, fn: Callable[[Lib], Any]):
  with pytest.raises(Exception) as ref: fn(TG).realize()
  with pytest.raises(type(ref.value)): fn(TC).realize()
