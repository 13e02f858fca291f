"""Renderers the core ships for backends to subclass (cstyle.CStyleLanguage). The Renderer base class is part of the
contract and lives in tinycore.backend; it is re-exported here for plugins published against API 1.0/1.1."""
from tinycore.backend import Renderer, TensorCore  # noqa: F401
