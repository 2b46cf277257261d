"""End-to-end stacks (tests/support/stack.py): real inference workers (backends.worker) behind one
supervised gateway process (`python -m gateway`), on the shared Redis."""
from __future__ import annotations

from pathlib import Path

from tests.support.stack import Stack

MODEL = "smollm2-135m"


def e2e_stack(tmp: Path, tiers_for, n_workers: int = 2, worker_flags: tuple[str, ...] = (),
              running_workers: tuple[str, ...] = (), **sections) -> Stack:
    """`n_workers` started here behind a gateway whose tiers are `tiers_for(worker URLs)`; `running_workers`
    are URLs of workers started by someone else (the session's `shared_worker`): they come first in
    `worker_urls`, and are never stopped here."""
    stack = Stack(tmp, "e2e")
    stack.worker_urls = list(running_workers)
    if n_workers:
        stack.start_workers(MODEL, n_workers, *worker_flags)
    stack.start_gateways({"tiers": tiers_for(stack.worker_urls), "health": {"interval_s": 0.5, "timeout_s": 1.0},
                          "timeouts": {"connect_s": 1.0, "read_s": 60.0}, **sections}, supervised=True)
    return stack


def tier(name: str, level: int, urls: list[str]) -> dict:
    return {"name": name, "level": level, "model": MODEL, "price_per_mtok": {"input": 0.1, "output": 0.2},
            "workers": [{"url": u} for u in urls]}
