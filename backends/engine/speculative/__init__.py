"""Speculative decoding: proposers and their counters."""
