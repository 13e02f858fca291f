"""Level 7, model: a small CNN (conv 1->4 3x3, relu, max-pool 2, linear 64->10, log-softmax, NLL) trained on the device.
One step's loss and gradients against numpy (hand-derived backward in float64), three SGD steps against the same steps on
the PYTHON reference device, and a TinyJit-captured Adam step (the way users train) against PYTHON.
In --compile-only mode every kernel of a training step is rendered and compiled, and nothing runs."""
from __future__ import annotations
import numpy as np
import pytest
from tinycore import Tensor
from tinycore_conformance import npref as R
from tinycore_conformance.tensorutil import compile_all
from tinycore_conformance.test_6_tensor import close

LAYER = 7
B, H, W, C, K, NCLS = 8, 10, 10, 4, 3, 10
FEAT = C * ((H - K + 1) // 2) * ((W - K + 1) // 2)
SEED = 1234

def data() -> dict[str, np.ndarray]:
  rng = np.random.default_rng(SEED)
  return {"x": rng.standard_normal((B, 1, H, W)).astype(np.float32),
          "y": np.eye(NCLS, dtype=np.float32)[rng.integers(0, NCLS, B)],
          "w1": (rng.standard_normal((C, 1, K, K)) / 3).astype(np.float32), "b1": (rng.standard_normal(C) * 0.1).astype(np.float32),
          "w2": (rng.standard_normal((FEAT, NCLS)) / 8).astype(np.float32), "b2": (rng.standard_normal(NCLS) * 0.1).astype(np.float32)}

PARAMS = ("w1", "b1", "w2", "b2")

def forward(x: Tensor, y: Tensor, p: dict[str, Tensor]) -> Tensor:
  h = x.conv2d(p["w1"], p["b1"]).relu().max_pool2d(2)
  z = h.reshape(x.shape[0], -1) @ p["w2"] + p["b2"]
  return -(z.log_softmax() * y).sum() / x.shape[0]

def tensors(d: dict[str, np.ndarray], device: str, empty: bool = False) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
  mk = (lambda a, **kw: Tensor.empty(*a.shape, device=device, **kw)) if empty else (lambda a, **kw: Tensor(a, device=device, **kw))
  return mk(d["x"]), mk(d["y"]), {k: mk(d[k], requires_grad=True) for k in PARAMS}

REPRO_HEAD = f"""import numpy as np
from tinycore import Tensor
from tinycore_conformance.test_7_model import data, forward, tensors, PARAMS
from tinycore_conformance import npref as R
d = data()  # seed {SEED}: x {(B, 1, H, W)}, one-hot y {(B, NCLS)}, w1 {(C, 1, K, K)}, b1 ({C},), w2 {(FEAT, NCLS)}, b2 ({NCLS},), all float32
"""

@pytest.mark.cap("CNN step vs numpy")
def test_cnn_step_vs_numpy(target, repro):
  repro.add(REPRO_HEAD + f"""x, y, p = tensors(d, {target.device!r})
loss = forward(x, y, p); loss.backward()
want_loss, want_grads = R.cnn_grads(d["x"], d["w1"], d["b1"], d["w2"], d["b2"], d["y"])
print(loss.item(), want_loss)
for k, g in zip(PARAMS, want_grads): print(k, np.abs(p[k].grad.numpy() - g).max())""")
  d = data()
  x, y, p = tensors(d, target.device, empty=target.compile_only)
  loss = forward(x, y, p)
  loss.backward()
  if target.compile_only:
    compile_all(target, [loss] + [p[k].grad for k in PARAMS])
    return
  want_loss, want_grads = R.cnn_grads(d["x"], d["w1"], d["b1"], d["w2"], d["b2"], d["y"])
  close(np.asarray(loss.numpy(), np.float64), np.asarray(want_loss), 1e-4, 1e-5, "loss")
  for k, g in zip(PARAMS, want_grads): close(p[k].grad.numpy().astype(np.float64), g, 1e-3, 1e-4, f"gradient of {k}")

def sgd_steps(device: str, steps: int, lr: float = 0.1, empty: bool = False) -> tuple[list, dict[str, Tensor], list]:
  d = data()
  x, y, p = tensors(d, device, empty)
  if not empty:
    for t in p.values(): t.realize()
  losses, outs = [], []
  for _ in range(steps):
    loss = forward(x, y, p)
    loss.backward()
    for k in PARAMS:
      p[k].assign(p[k].detach() - lr * p[k].grad)
      p[k].grad = None
    if empty:
      outs = [loss] + [p[k] for k in PARAMS]
      break
    Tensor.realize(loss, *p.values())
    losses.append(loss.item())
  return losses, p, outs

@pytest.mark.cap("CNN training vs PYTHON")
def test_cnn_sgd_vs_reference(target, repro):
  repro.add(REPRO_HEAD + f"""from tinycore_conformance.test_7_model import sgd_steps
la, pa, _ = sgd_steps({target.device!r}, 3)
lb, pb, _ = sgd_steps("PYTHON", 3)
print("losses", la, lb)
for k in PARAMS: print(k, np.abs(pa[k].numpy() - pb[k].numpy()).max())""")
  if target.compile_only:
    _, _, outs = sgd_steps(target.device, 1, empty=True)
    compile_all(target, outs)
    return
  la, pa, _ = sgd_steps(target.device, 3)
  lb, pb, _ = sgd_steps("PYTHON", 3)
  want0, _ = R.cnn_forward(*(data()[k] for k in ("x", "w1", "b1", "w2", "b2", "y")))
  close(np.array(la[:1]), np.array([want0]), 1e-4, 1e-5, "the first loss against numpy")
  close(np.array(la), np.array(lb), 1e-4, 1e-5, "losses of 3 SGD steps against the PYTHON device")
  assert la[-1] < la[0], f"training does not reduce the loss: {la}"
  for k in PARAMS: close(pa[k].numpy(), pb[k].numpy(), 1e-4, 1e-5, f"{k} after 3 SGD steps against the PYTHON device")

def adam_jit_run(device: str, steps: int) -> tuple[list[float], dict[str, np.ndarray]]:
  from tinycore import TinyJit
  from tinycore.nn.optim import Adam
  d = data()
  x, y, p = tensors(d, device)
  opt = Adam(list(p.values()), lr=0.01)
  @TinyJit
  def step(x: Tensor, y: Tensor) -> Tensor:
    opt.zero_grad()
    loss = forward(x, y, p)
    loss.backward()
    opt.step()
    return loss.realize()
  old, Tensor.training = Tensor.training, True
  try:
    losses = []
    for i in range(steps):
      # fresh input tensors every call: the captured kernels must read the new buffers
      xi, yi = Tensor(d["x"] * (1 + 0.01 * i), device=device), Tensor(d["y"], device=device)
      losses.append(step(xi, yi).item())
  finally: Tensor.training = old
  return losses, {k: p[k].numpy() for k in PARAMS}

@pytest.mark.cap("CNN Adam + TinyJit vs PYTHON")
def test_cnn_adam_jit_vs_reference(target, repro):
  repro.add(REPRO_HEAD + f"""from tinycore_conformance.test_7_model import adam_jit_run
la, pa = adam_jit_run({target.device!r}, 4)
lb, pb = adam_jit_run("PYTHON", 4)
print("losses", la, lb)
for k in PARAMS: print(k, np.abs(pa[k] - pb[k]).max())""")
  target.require_runtime()
  la, pa = adam_jit_run(target.device, 4)
  lb, pb = adam_jit_run("PYTHON", 4)
  close(np.array(la), np.array(lb), 1e-4, 1e-5, "losses of 4 jitted Adam steps against the PYTHON device")
  for k in PARAMS: close(pa[k], pb[k], 1e-3, 1e-5, f"{k} after 4 jitted Adam steps against the PYTHON device")
