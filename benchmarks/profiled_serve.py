"""One gateway process (`gateway.process`, from whatever tree is on PYTHONPATH) profiled with
cProfile between SIGUSR1 (start) and SIGUSR2 (stop), so a profile covers the load alone, not the
start. On SIGUSR2 it writes the pstats to argv[1] and, beside it (argv[1] + ".gc.json"), how long
the cyclic garbage collector ran meanwhile per generation (GC time lands on whichever function
allocated when it started, so cProfile alone hides it). Used by benchmarks.gateway_profile."""
from __future__ import annotations

import cProfile
import gc
import json
import os
import signal
import sys
import time
from pathlib import Path


class GcTimer:
    """CPU seconds and runs of the cyclic garbage collector per generation, while `on` (gc.callbacks)."""

    def __init__(self):
        self.seconds = [0.0, 0.0, 0.0]
        self.runs = [0, 0, 0]
        self.on = False
        self._started = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if not self.on:
            return
        if phase == "start":
            self._started = time.thread_time()
        else:
            self.seconds[info["generation"]] += time.thread_time() - self._started
            self.runs[info["generation"]] += 1


def _write(path: str, write) -> None:
    write(path + ".part")
    os.replace(path + ".part", path)  # whole, or not there yet


def main() -> int:
    out, argv = sys.argv[1], sys.argv[2:]
    # the main thread's CPU time, not wall time: on a shared machine, time the process spends
    # preempted would otherwise land on whatever function was running
    profiler, collector = cProfile.Profile(time.thread_time), GcTimer()
    gc.callbacks.append(collector)

    def start(_signum, _frame):
        collector.on = True
        profiler.enable()

    def stop(_signum, _frame):
        profiler.disable()
        collector.on = False
        _write(out + ".gc.json", lambda p: Path(p).write_text(json.dumps(
            {"seconds": collector.seconds, "runs": collector.runs})))
        _write(out, profiler.dump_stats)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.path.remove(str(Path(__file__).parent))  # run as a script: its folder would shadow gateway/
    from gateway.process import main as serve
    return serve(argv)


if __name__ == "__main__":
    sys.exit(main())
