"""A GPT-style decoder (pre-norm blocks, causal scaled_dot_product_attention, tanh-GELU MLP, tied embedding): its
training step (4 layers, d_model 256, 4 heads, sequence 128, vocab 512, batch 8, AdamW) and its greedy decoding with a
KV cache (batch 1, tokens per second), written in tinycore's nn and the same in torch (same attribute names).

Decoding in tinycore, as tinygrad's examples: the caches are realized buffers (batch, heads, max_len, head_dim); q
attends to the first n positions of them, n a bound Variable, so that one TinyJit capture serves every position (no
recompile per token). Differences, tinycore's gaps: the new k and v are written through a one-hot mask of the position
(a (1,) int tensor input) over the whole cache, because an assign to a shrunk view (tinygrad's
`cache[:, :, pos:pos+1].assign(k)`) does not write through to the buffer and setitem takes no symbolic slice; and the
decoding runs under Tensor.test() (no_grad): without it each assign keeps the previous call's graph alive through the
cache's autograd context, and that graph's Variable binding then clashes with the next ("Variable tokens is bound to
both 2 and 1") from the second layer on. torch eager writes its preallocated caches by index and attends to the
filled part."""
from __future__ import annotations
import os, sys
from typing import Any, Callable
if __package__ in (None, ""): sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from bench.models.common import copy_into_torch, loss_check, median_cpu, memory_main, one_thread, spawn_memory, timed, torch_compile_timing

CFG = {"layers": 4, "d": 256, "heads": 4, "T": 128, "vocab": 512, "bs": 8, "lr": 1e-3, "decode": 128}

def data(cfg: dict) -> tuple[Any, Any]:
  import numpy as np
  tok = np.random.default_rng(0).integers(0, cfg["vocab"], (cfg["bs"], cfg["T"] + 1)).astype(np.int32)
  return tok[:, :-1], tok[:, 1:]

# *** tinycore ***

def tiny_model(cfg: dict) -> Any:
  from tinycore import nn, Tensor
  Tensor.manual_seed(0)
  d, h, T = cfg["d"], cfg["heads"], cfg["T"]
  class Block:
    def __init__(self) -> None:
      self.ln1, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
      self.ln2, self.fc, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
    def heads(self, x: Tensor) -> list[Tensor]:
      return [z.reshape(x.shape[0], x.shape[1], h, d // h).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(d, dim=-1)]
    def mlp(self, x: Tensor, a: Tensor) -> Tensor:
      x = x + self.proj(a.transpose(1, 2).reshape(x.shape[0], x.shape[1], d))
      return x + self.fc2(self.fc(self.ln2(x)).gelu())
    def __call__(self, x: Tensor) -> Tensor:
      q, k, v = self.heads(x)
      return self.mlp(x, q.scaled_dot_product_attention(k, v, is_causal=True))
    def decode(self, x: Tensor, at: Tensor, n: Any) -> Tensor:
      """x (B, 1, d) of the token at position `at` (a (1,) int tensor), n = at + 1 tokens so far (a bound Variable):
      k and v written into the caches at `at`, q attends to the first n positions."""
      q, k, v = self.heads(x)
      if not hasattr(self, "cache_k"):
        self.cache_k, self.cache_v = (Tensor.zeros(x.shape[0], h, T, d // h).contiguous().realize() for _ in range(2))
      hot = (Tensor.arange(T) == at).reshape(1, 1, T, 1)
      self.cache_k.assign(hot.where(k, self.cache_k))
      self.cache_v.assign(hot.where(v, self.cache_v))
      keys, values = (c.shrink((None, None, (0, n), None)) for c in (self.cache_k, self.cache_v))
      return self.mlp(x, q.scaled_dot_product_attention(keys, values))
  class GPT:
    def __init__(self) -> None:
      self.wte, self.wpe, self.lnf = nn.Embedding(cfg["vocab"], d), nn.Embedding(T, d), nn.LayerNorm(d)
      self.blocks = [Block() for _ in range(cfg["layers"])]
    def __call__(self, tok: Tensor) -> Tensor:
      x = self.wte(tok) + self.wpe.weight[:tok.shape[1]]
      for b in self.blocks: x = b(x)
      return self.lnf(x) @ self.wte.weight.T
    def decode(self, tok: Tensor, at: Tensor, n: Any) -> Tensor:
      """The next token after tok (B, 1) at position `at` (a (1,) int tensor), n = at + 1 (a bound Variable), greedy."""
      x = self.wte(tok) + self.wpe(at.reshape(1, 1))
      for b in self.blocks: x = b.decode(x, at, n)
      return (self.lnf(x) @ self.wte.weight.T).argmax(-1)
  return GPT()

def tiny_step(model: Any, cfg: dict) -> Callable[[], float]:
  from tinycore import nn, Tensor, TinyJit
  tok, tgt = (Tensor(a).realize() for a in data(cfg))
  opt = nn.optim.AdamW(nn.state.get_parameters(model), lr=cfg["lr"])
  @TinyJit
  def step(tok: Tensor, tgt: Tensor) -> Tensor:
    with Tensor.train():
      opt.zero_grad()
      loss = model(tok).reshape(-1, cfg["vocab"]).sparse_categorical_crossentropy(tgt.reshape(-1)).backward()
      opt.step()
      return loss.realize()
  return lambda: step(tok, tgt).item()

def tiny_decoder(model: Any, n: int) -> Callable[[], list[int]]:
  """Greedy decoding of n tokens from token 0 at position 0, under one TinyJit and no_grad (Tensor.test(), as torch's
  inference_mode); the position a tensor input, the number of tokens so far a bound Variable; each token is
  read back and fed in as a new input, as a sampler on the host does (the jit's output buffer is reused by its next call)."""
  from tinycore import Tensor, TinyJit, Variable
  tokens = Variable("tokens", 1, model.wpe.weight.shape[0])
  @TinyJit
  def next_token(tok: Tensor, at: Tensor, n: Any) -> Tensor:
    with Tensor.test(): return model.decode(tok, at, n).realize()
  def run() -> list[int]:
    out = [0]
    for i in range(n): out.append(int(next_token(Tensor([[out[-1]]]), Tensor([i]), tokens.bind(i + 1)).item()))
    return out[1:]
  return run

# *** torch ***

def torch_model(cfg: dict) -> Any:
  import torch
  tnn, F = torch.nn, torch.nn.functional
  d, h, T = cfg["d"], cfg["heads"], cfg["T"]
  class Block(tnn.Module):
    def __init__(self) -> None:
      super().__init__()
      self.ln1, self.qkv, self.proj = tnn.LayerNorm(d), tnn.Linear(d, 3 * d), tnn.Linear(d, d)
      self.ln2, self.fc, self.fc2 = tnn.LayerNorm(d), tnn.Linear(d, 4 * d), tnn.Linear(4 * d, d)
    def heads(self, x: Any) -> list[Any]:
      return [z.reshape(x.shape[0], x.shape[1], h, d // h).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(d, dim=-1)]
    def mlp(self, x: Any, a: Any) -> Any:
      x = x + self.proj(a.transpose(1, 2).reshape(x.shape[0], x.shape[1], d))
      return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
    def forward(self, x: Any) -> Any:
      q, k, v = self.heads(x)
      return self.mlp(x, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    def decode(self, x: Any, pos: int, cache: tuple[Any, Any]) -> Any:
      q, k, v = self.heads(x)
      cache[0][:, :, pos:pos + 1] = k
      cache[1][:, :, pos:pos + 1] = v
      return self.mlp(x, F.scaled_dot_product_attention(q, cache[0][:, :, :pos + 1], cache[1][:, :, :pos + 1]))
  class GPT(tnn.Module):
    def __init__(self) -> None:
      super().__init__()
      self.wte, self.wpe, self.lnf = tnn.Embedding(cfg["vocab"], d), tnn.Embedding(T, d), tnn.LayerNorm(d)
      self.blocks = tnn.ModuleList([Block() for _ in range(cfg["layers"])])
    def forward(self, tok: Any) -> Any:
      x = self.wte(tok) + self.wpe.weight[:tok.shape[1]]
      for b in self.blocks: x = b(x)
      return self.lnf(x) @ self.wte.weight.T
    def decode(self, tok: Any, pos: int, caches: list[tuple[Any, Any]]) -> Any:
      x = self.wte(tok) + self.wpe.weight[pos:pos + 1]
      for b, c in zip(self.blocks, caches): x = b.decode(x, pos, c)
      return (self.lnf(x) @ self.wte.weight.T).argmax(-1)
  return GPT().train()

def torch_step(model: Any, cfg: dict, compiled: bool = False) -> Callable[[], float]:
  import torch
  tok, tgt = (torch.from_numpy(a).long() for a in data(cfg))
  opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"])
  fwd = torch.compile(model) if compiled else model
  def step() -> float:
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(fwd(tok).reshape(-1, cfg["vocab"]), tgt.reshape(-1))
    loss.backward()
    opt.step()
    return loss.item()
  return step

def torch_decoder(model: Any, cfg: dict, n: int) -> Callable[[], list[int]]:
  import torch
  hd = cfg["d"] // cfg["heads"]
  caches = [(torch.zeros(1, cfg["heads"], cfg["T"], hd), torch.zeros(1, cfg["heads"], cfg["T"], hd)) for _ in model.blocks]
  def run() -> list[int]:
    with torch.inference_mode():
      tok, out = torch.zeros(1, 1, dtype=torch.long), []
      for i in range(n):
        tok = model.decode(tok, i, caches)
        out.append(int(tok.item()))
      return out
  return run

def make_step(lib: str, cfg: dict = CFG) -> Callable[[], float]:
  if lib == "tinycore": return tiny_step(tiny_model(cfg), cfg)
  import torch
  torch.manual_seed(0)
  return torch_step(torch_model(cfg), cfg)

def paired(cfg: dict) -> tuple[Any, Any]:
  """tinycore's model and a torch copy of its weights."""
  tm = tiny_model(cfg)
  m = torch_model(cfg)
  copy_into_torch(tm, m)
  return tm, m

def _name(cfg: dict) -> str: return f"L{cfg['layers']} d{cfg['d']} h{cfg['heads']} T{cfg['T']} v{cfg['vocab']}"
CASE, DECODE_CASE = f"GPT train step {_name(CFG)} bs{CFG['bs']} AdamW", f"GPT KV-cache decode {_name(CFG)} bs1, {CFG['decode']} tokens"

def bench(quick: bool, first_only: bool = False) -> dict[str, dict]:
  """The training step (tinycore's first step, steady medians of tinycore / torch eager / torch.compile, the loss check,
  memory) and the decoding (tokens/s of tinycore and torch eager, the generated tokens compared)."""
  one_thread()
  tm, m = paired(CFG)
  step = tiny_step(tm, CFG)
  c, w, loss = timed(step)
  first = {"first_step_cpu_s": c, "first_step_s": w}
  if first_only: return {CASE: {"t": None, **first, "loss_tinycore": loss}}
  reps = 3 if quick else 10
  out: dict[str, Any] = {**first, "unit": "ms", **loss_check(loss, torch_step(m, CFG)())}
  out.update(median_cpu(step, reps))
  tm, m = paired(CFG)
  out["torch"] = median_cpu(torch_step(m, CFG), reps)
  tm, mc = paired(CFG)
  out["torch.compile"] = torch_compile_timing(torch_step(mc, CFG, compiled=True), reps)
  n = 40 if quick else 200
  out["memory"] = {lib: spawn_memory("gpt", lib, n) for lib in ("tinycore", "torch")}
  res = {CASE: out}
  tm, m = paired(CFG)
  n = CFG["decode"]
  dec, tdec = tiny_decoder(tm, n), torch_decoder(m.eval(), CFG, n)
  c, w, toks = timed(dec)
  ref = tdec()
  d: dict[str, Any] = {"unit": "tok/s", "first_run_s": w, "tokens_equal": sum(a == b for a, b in zip(toks, ref)) / n}
  d.update(median_cpu(dec, reps))
  d["torch"] = median_cpu(tdec, reps)
  for r in (d, d["torch"]): r["metric"] = n / r["t"]
  res[DECODE_CASE] = d
  return res

if __name__ == "__main__": memory_main(make_step)
