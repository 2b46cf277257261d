"""Tiergate inference workers: a continuous-batching engine on transformers + torch."""
