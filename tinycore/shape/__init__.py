"""ShapeTracker and View: zero-copy movement ops as index arithmetic."""
from tinycore.shape.view import View, strides_for_shape  # noqa: F401
from tinycore.shape.shapetracker import ShapeTracker  # noqa: F401
