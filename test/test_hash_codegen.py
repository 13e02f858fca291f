"""Unsigned (wrapping) arithmetic, a hash's rounds, is not made linear by the simplifier: its C stays linear in the
rounds, and the numbers are the same as numpy's uint32 arithmetic."""
import re
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.engine.realize import get_program_for
from tinycore.helpers import Context
from tinycore.ops import Ops
from tinycore.uop.symbolic import simplify
from tinycore.uop.uop import UOp

def _chain(x: UOp, rounds: int) -> UOp:
  """x0 += x1; x1 = rotl(x1) ^ x0, threefry's mixing, on two uint32 values."""
  x0, x1 = x, x * 3
  for i in range(rounds):
    x0 = x0 + x1
    r = 13 + i % 7
    x1 = (x1.alu(Ops.SHL, x1.const_like(r)) | x1.alu(Ops.SHR, x1.const_like(32 - r))) ^ x0
  return x0 + x1

@pytest.mark.parametrize("rounds", [8, 20])
def test_a_hash_chain_does_not_grow(rounds):
  # flattened into linear sums, every x0 repeated the terms of the ones before it: the graph grew with rounds^2
  x = UOp(Ops.DEFINE_VAR, dtypes.uint32, arg=("x", 0, 2**32 - 1))
  c = _chain(x, rounds)
  assert len(simplify(c).toposort()) <= len(c.toposort())

def test_threefry_source_is_linear_in_lanes():
  # the random generator's kernel: ~30 statements a lane (the flattened sums made it 128 KB for 32 lanes)
  Tensor.manual_seed(0)
  t = Tensor.rand(65536, device="CLANG")
  (si,) = [si for si in t.schedule() if si.ast.op is Ops.SINK and len(si.bufs) > 3]
  src = get_program_for("CLANG", si.ast).src
  # lanes: scalar stores, and the widths of the uint32 vector stores (CLANG renders the hash rounds on vectors)
  lanes = max(1, src.count("data0[") + sum(int(w) for w in re.findall(r"\(tc_u32x(\d+)_u\*\)\(data0\+", src)))
  # (less ~1 KB of signature and launcher: with NOOPT there is one lane)
  assert (len(src) - 1000) / lanes < 2500, (len(src), lanes)

def test_hash_chain_values_match_numpy():
  v = np.random.default_rng(0).integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32)
  x0, x1 = Tensor(v, device="CLANG"), Tensor(v, device="CLANG") * 3
  r0, r1 = v.copy(), (v * np.uint32(3)).astype(np.uint32)
  with np.errstate(over="ignore"):
    for i in range(12):
      r = 13 + i % 7
      x0 = x0 + x1
      x1 = ((x1 << r) | (x1 >> (32 - r))) ^ x0
      r0 = (r0 + r1).astype(np.uint32)
      r1 = ((r1 << np.uint32(r)) | (r1 >> np.uint32(32 - r))).astype(np.uint32) ^ r0
  np.testing.assert_array_equal((x0 + x1).numpy(), (r0 + r1).astype(np.uint32))

def test_uint32_vector_ops_match_numpy():
  # every uint32 op CLANG renders on whole vectors (add, mul, neg, max, and, or, xor, shifts), against numpy
  rng = np.random.default_rng(1)
  a, b = (rng.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32) for _ in range(2))
  x, y = Tensor(a, device="CLANG"), Tensor(b, device="CLANG")
  out = x.maximum(y) + (x * y) - (x & y) + ((x | y) ^ (y >> 3)) + (x << 5)
  with Context(NOOPT=0):  # (CI's NOOPT=1 pass: without the heuristics there are no vector lanes)
    srcs = [get_program_for("CLANG", si.ast).src for si in out.schedule() if si.ast.op is Ops.SINK]
  assert any("tc_u32x" in s for s in srcs), "the uint32 kernel was rendered on vectors"
  got = out.numpy()
  with np.errstate(over="ignore"):
    want = np.maximum(a, b) + a * b - (a & b) + ((a | b) ^ (b >> np.uint32(3))) + (a << np.uint32(5))
  np.testing.assert_array_equal(got, want.astype(np.uint32))
