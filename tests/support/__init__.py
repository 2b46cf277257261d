"""What every test directory shares, imported one way: `from tests.support import ...`.

Ports, processes, the shared Redis and our own redis-servers come from `launcher.processes`
and fake OpenAI upstreams from `launcher.fake_upstream` (benchmarks use them too); waiting on
state by polling with a deadline lives in `tests.support.polling`."""
from launcher.fake_upstream import FakeUpstream, start_fake
from launcher.processes import (SHARED_REDIS, delete_prefix, free_port, start_persistent_redis, stop_processes,
                                wait_for_port)
from tests.support.polling import Pending, wait_for, wait_until
from tests.support.redis_keys import delete_prefix_async

__all__ = ["FakeUpstream", "Pending", "SHARED_REDIS", "delete_prefix", "delete_prefix_async", "free_port",
           "start_fake", "start_persistent_redis", "stop_processes", "wait_for", "wait_for_port", "wait_until"]
