"""Constrained output: grammars, JSON shapes, finishing within max_tokens."""
