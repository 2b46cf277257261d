"""Where the Triton kernel tests run: compiled on a GPU when there is one, else in Triton's
interpreter on CPU tensors (tests/conftest.py sets TRITON_INTERPRET before triton loads)."""
import torch

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
