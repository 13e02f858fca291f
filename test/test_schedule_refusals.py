"""A cold schedule retries after each refused fusion; the assign groups are worked out again only when the refused base
is one the grouping looked at (engine/schedule.py `_assign_groups`' `touched`). The schedule must be the one that
working them out on every retry gives, and its values numpy's."""
import numpy as np
from tinycore import Tensor
from tinycore.engine import schedule as S

RNG = np.random.default_rng(3)
X, M, P = (RNG.standard_normal(s).astype(np.float32) for s in ((4, 16), (16,), (16,)))

def _step() -> tuple[Tensor, Tensor, list]:
  """A momentum update of p (two assigns, p reading m's new value: one group) from a softmax's column sums (its max and
  sum are reached through broadcasts: refused fusions)."""
  x, m, p = Tensor(X).realize(), Tensor(M).contiguous().realize(), Tensor(P).contiguous().realize()
  g = x.softmax(-1).sum(0).contiguous()
  m.assign(m * 0.9 + g * 0.1)
  p.assign(p - m * 0.5)
  S._sched_cache.clear()
  return m, p, S.create_schedule([m.lazydata, p.lazydata])

def test_groups_kept_across_refusals_are_those_recomputed(monkeypatch):
  calls, orig = [], S._assign_groups
  def counted(graph, realizes, touched=None):
    calls.append(1)
    return orig(graph, realizes, touched)
  monkeypatch.setattr(S, "_assign_groups", counted)
  _, _, kept = _step()
  n_kept = len(calls)
  def every_time(graph, realizes, touched=None):  # (the grouping before: worked out again after every refusal)
    calls.append(1)
    out = orig(graph, realizes, touched)
    if touched is not None: touched.update(graph)
    return out
  monkeypatch.setattr(S, "_assign_groups", every_time)
  calls.clear()
  m, p, again = _step()
  assert len(calls) > n_kept >= 1, "the refusals did not reach the grouping, or every one recomputed it"
  assert [si.ast for si in kept] == [si.ast for si in again] and any(len(si.outputs) == 2 for si in kept)
  from tinycore.engine.realize import run_schedule
  run_schedule(again)
  e = np.exp(X - X.max(-1, keepdims=True))
  m_ref = M * np.float32(0.9) + (e / e.sum(-1, keepdims=True)).sum(0) * np.float32(0.1)
  np.testing.assert_allclose(m.numpy(), m_ref, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(p.numpy(), P - m_ref * np.float32(0.5), rtol=1e-5, atol=1e-6)
