"""The model on its device: loading, the runner, fused kernels, plans, CUDA graphs."""
