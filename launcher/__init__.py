"""Starts and supervises the local stack (embedded Redis, workers, gateway processes,
Prometheus, fake upstreams) for `make run`, benchmarks and tests. Only entry points import it."""
