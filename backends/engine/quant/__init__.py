"""Weight-only quantization: int4/int8 layers, int4 checkpoints, the kernel chooser."""
