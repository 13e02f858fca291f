"""Level 3, compiler: real kernels (from the Tensor API, rendered by the device's renderer) compile to a non-empty binary
that the device's Program loads; broken source raises CompileError carrying the compiler's own message; rendering and
the compile cache key are stable, so binaries cached on disk are found again."""
from __future__ import annotations
import numpy as np
import pytest
from tinycore import Tensor
from tinycore.backend import CompileError
from tinycore.dtype import dtypes
from tinycore_conformance.tensorutil import programs_for

LAYER = 3

def _kernels(dev: str, which: str) -> list:
  e = lambda *s: Tensor.empty(*s, device=dev, dtype=dtypes.float32)  # noqa: E731
  if which == "elementwise": return [(e(4, 33) * 2 + e(4, 33)).exp2()]
  if which == "reduce": return [e(17, 64).sum(axis=1)]
  if which == "matmul": return [e(16, 24) @ e(24, 8)]
  if which == "conv2d": return [e(1, 3, 8, 8).conv2d(e(4, 3, 3, 3), padding=1).relu()]
  if which == "int64": return [(Tensor.empty(50, device=dev, dtype=dtypes.int64) * 3) // 7]
  raise ValueError(which)

@pytest.mark.cap("real kernels compile")
@pytest.mark.parametrize("which", ["elementwise", "reduce", "matmul", "conv2d", "int64"])
def test_real_kernel_compiles(target, which, repro):
  if which == "int64": target.require_dtype(dtypes.int64)
  specs = programs_for(target, _kernels(target.device, which))
  assert specs, "no kernels were scheduled"
  for p in specs:
    repro.add(lambda p=p: f"# kernel {p.name} as the renderer of {target.device} renders it:\n{p.src}")
    lib = target.compiler.compile(p.src)
    assert isinstance(lib, (bytes, bytearray)) and len(lib) > 0, \
      f"compile() must return the binary as non-empty bytes, got {type(lib).__name__} {lib!r:.60}"
    if not target.compile_only: target.program(target.device, p.name, bytes(lib))

def _broken(target) -> str:
  src = programs_for(target, _kernels(target.device, "elementwise"))[0].src
  # cut the kernel in half and add a line no language accepts
  return src[:len(src) // 2] + "\n@@@ }}} this line is not valid in any kernel language ((( @@@\n"

@pytest.mark.cap("CompileError on broken source")
def test_compile_error(target, repro, request):
  """compile() raises CompileError whose message carries what the compiler said (it contains 'error'). A backend that
  compiles at load time instead must raise CompileError from its Program when it loads the broken source."""
  bad = _broken(target)
  repro.add(lambda: f"# the broken source:\n{bad}")
  try: lib = target.compiler.compile(bad)
  except CompileError as e:
    msg = str(e)
    assert "error" in msg.lower() and len(msg) > 20, f"CompileError must carry the compiler's message (with its 'error' lines), got {msg!r:.300}"
    return
  except Exception as e:
    raise AssertionError(f"broken source must raise tinycore.backend.CompileError, compile() raised {type(e).__name__}: {e}") from e
  target.require_runtime()  # compile() accepted it: then loading it must fail
  try: target.program(target.device, "test", lib)
  except CompileError as e:
    assert str(e).strip(), "CompileError must carry the compiler's message"
    return
  except Exception as e:
    raise AssertionError(f"broken source compiled without error, and loading it raised {type(e).__name__}: {str(e)[:200]} "
                         "instead of tinycore.backend.CompileError") from e
  raise AssertionError("broken source compiled and loaded without a CompileError")

@pytest.mark.cap("render is deterministic")
def test_render_deterministic(target):
  """The disk cache is keyed by the source: rendering the same kernel twice must give the same text."""
  a = [p.src for p in programs_for(target, _kernels(target.device, "conv2d"))]
  b = [p.src for p in programs_for(target, _kernels(target.device, "conv2d"))]
  assert a == b, "rendering the same kernels twice gave different sources"

@pytest.mark.cap("cache key is stable")
def test_cachekey_stable(target):
  key = target.compiler.cachekey
  target.require(key is not None, "a compile cache key (Compiler.cachekey is None: binaries are never cached)")
  from tinycore.plugin import registry
  registry.load()
  again = registry.pm.hook.tinycore_compiler(device=target.device)
  assert again is not None and again.cachekey == key, \
    f"a second compiler for {target.device} has cache key {getattr(again, 'cachekey', None)!r}, the first {key!r}"
  src = programs_for(target, _kernels(target.device, "reduce"))[0].src
  one, two = target.compiler.compile_cached(src), target.compiler.compile_cached(src)
  assert one == two, "compile_cached returned different binaries for the same source"
  assert np.frombuffer(bytes(one), np.uint8).size > 0
