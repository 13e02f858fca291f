"""Backends that ship with the core. Only PYTHON: a reference interpreter that needs nothing but numpy."""
