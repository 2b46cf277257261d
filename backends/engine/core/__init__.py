"""The loop: sequences, KV blocks, the scheduler, the engine and its sampler."""
