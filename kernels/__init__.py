"""Tensor operations the engine needs, in pure torch (the reference everywhere)."""
