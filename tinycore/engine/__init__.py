"""The engine: scheduling the lazy graph into kernels, running them, and capturing them with TinyJit."""
