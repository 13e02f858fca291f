"""The error classes of the Tensor API. tinygrad 0.14 and torch raise RuntimeError for a bad shape or argument where
tinycore raised ValueError or TypeError: each class here derives from both, so `except RuntimeError` (tinygrad and torch
habits) and `except ValueError` / `except TypeError` (tinycore callers) both catch it. The messages stay tinycore's,
naming both sides of a mismatch."""

class ShapeError(RuntimeError, ValueError):
  """Shapes or dims that do not fit the op: matmul, reshape, permute, flip, roll, gather, scatter, conv, einsum, unfold,
  cross_entropy targets, attention."""

class ArgumentError(RuntimeError, ValueError):
  """An argument value the op does not take: a rounding_mode or reduce name, attn_mask together with is_causal, a
  negative integer power of an integer tensor, one_hot's num_classes, linspace to bool."""

class DTypeError(RuntimeError, TypeError):
  """A dtype the op does not take: shifting floats, gathering with a float index."""

class DataError(ValueError, TypeError):
  """Data a Tensor cannot be made from: ragged nesting (ValueError in tinygrad, numpy and torch) or non-numeric items."""

class ArgumentTypeError(ArgumentError, TypeError):
  """An argument value tinygrad 0.14 answers with TypeError (scatter's reduce name): caught as RuntimeError, ValueError or TypeError."""

class DimError(ShapeError, IndexError):
  """A dim the tensor does not have (tril of a 1-D tensor, bitcast's last dim of a 0-d one): IndexError as tinygrad 0.14, and still a ShapeError."""

class UnsupportedError(ArgumentError, NotImplementedError):
  """An option value tinygrad 0.14 and torch answer with NotImplementedError (an unknown pad mode): caught as RuntimeError,
  ValueError or NotImplementedError."""

class DTypeNameError(TypeError, AttributeError):
  """A string that names no dtype: TypeError in tinycore, AttributeError in tinygrad 0.14 (it looks the name up on dtypes)."""
