"""The real-model benches (bench/models/) at tiny sizes, not timed: tinycore's ResNet, GPT (training and KV-cache
decoding) and digits CNN against the same networks in torch from the same weights, for two steps."""
import os, sys
import pytest
torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.models import resnet, gpt, digits  # noqa: E402
from bench.models.common import copy_into_torch  # noqa: E402

def two_steps(tiny, ref) -> None:
  """The losses of two steps agree (the second one shows that both applied the same update)."""
  for rtol in (1e-4, 1e-3):
    a, b = tiny(), ref()
    assert a == pytest.approx(b, rel=rtol)

def test_resnet():
  cfg = {**resnet.CFG, "bs": 2, "hw": 32, "classes": 10}
  tm, m = resnet.tiny_model(cfg, widths=(8, 8, 16, 16)), resnet.torch_model(cfg, widths=(8, 8, 16, 16))
  copy_into_torch(tm, m)
  two_steps(resnet.tiny_step(tm, cfg), resnet.torch_step(m, cfg))

GPT_CFG = {**gpt.CFG, "layers": 2, "d": 32, "heads": 2, "T": 16, "vocab": 64, "bs": 2, "decode": 12}

def test_gpt_train():
  tm, m = gpt.paired(GPT_CFG)
  two_steps(gpt.tiny_step(tm, GPT_CFG), gpt.torch_step(m, GPT_CFG))

def test_gpt_kv_cache_decode():
  """The jitted decoder (one capture, the position a Variable) gives torch's greedy tokens, twice over (the second run
  replays the jit and overwrites the caches), without compiling anything new after the capture."""
  from tinycore.engine.realize import method_cache
  tm, m = gpt.paired(GPT_CFG)
  dec, ref = gpt.tiny_decoder(tm, GPT_CFG["decode"]), gpt.torch_decoder(m.eval(), GPT_CFG, GPT_CFG["decode"])()
  assert dec() == ref
  compiled = len(method_cache)
  assert dec() == ref
  assert len(method_cache) == compiled

def test_digits():
  cfg = {**digits.CFG, "bs": 16, "dropout": 0.0}
  tm, m = digits.paired(cfg)
  a, b = digits.eval_losses(tm, m, cfg)
  assert a == pytest.approx(b, rel=1e-4)
  two_steps(digits.tiny_step(tm, cfg), digits.torch_step(m, cfg))
