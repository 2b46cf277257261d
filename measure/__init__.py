"""Measurements that benchmarks and tests share: latency statistics, open-loop load, memory
sampling, load scale knobs and model agreement. Imports neither benchmarks nor tests."""
