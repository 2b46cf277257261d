"""Deterministic generator of the labelled prompt dataset (see classifier/RUBRIC.md)."""
