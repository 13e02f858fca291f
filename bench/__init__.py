"""The benchmarks: bench.py (the driver and its case groups) and models/ (the real models)."""
