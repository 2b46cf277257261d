"""gateway/process.py: a started process settles its garbage collector (startup's objects frozen out
of every collection, young collections less often)."""
from __future__ import annotations

import gc

from gateway.process import YOUNG_COLLECTION_THRESHOLD, settle_collector


def test_settled_collector_skips_startup_objects_and_collects_young_ones_less_often():
    before = gc.get_threshold()
    kept = [[] for _ in range(1000)]  # startup's long-lived objects
    try:
        settle_collector()
        assert gc.get_freeze_count() >= len(kept)
        assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, *before[1:])
        cycle = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1  # garbage made after startup is still collected
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
