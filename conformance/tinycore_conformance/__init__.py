"""tinycore-conformance: the shared suite that proves a tinycore backend plugin, layer by layer.

  python -m tinycore_conformance NAME [--compile-only] [--level N] [--report FILE] [--xfails FILE] [--repro]
  pytest --pyargs tinycore_conformance --device NAME [same options]

Layers: 1 contract, 2 allocator, 3 compiler, 4 renderer, 5 program, 6 tensor, 7 model. Values are checked against
numpy, UOp programs against the core's PYTHON device; what a backend does not declare is reported, never passed."""
from tinycore_conformance.report import LAYERS  # noqa: F401

__version__ = "0.1.0"
