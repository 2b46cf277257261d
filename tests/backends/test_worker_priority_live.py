"""A real worker saturated by batch requests serves an interactive one ahead of them: a real
SmolLM2 worker process with two sequence slots, driven with the real `openai` client."""
import threading
import time

import pytest

from tests.support import wait_until
from tests.support.metrics import metric as read
from tests.support.metrics import scrape
from tests.support.workers import running_worker
from tests.support.kinds import starts_processes

openai = pytest.importorskip("openai", reason="the openai client is a test dependency (docs/gpu.md lists the wheels)")

MODEL = "smollm2-135m"
SLOTS = 2
BATCH = {"x-tiergate-priority": "batch"}
LONG = 400  # batch answers far longer than the few steps the interactive request needs


def _metric(worker: str, name: str, **labels) -> float:
    return read(scrape(worker), name, default=0.0, **labels)


@pytest.fixture(scope="module")
@starts_processes
def worker():
    flags = ("--kv-cache-gb", "0.25", "--max-model-len", "2048", "--max-num-seqs", str(SLOTS))
    with running_worker(MODEL, *flags) as running:
        yield running.base


class _Stream(threading.Thread):
    """One streamed chat request on its own thread: when its first token came and when it
    ended; it hangs up (aborting the request) once `stop` is set."""

    def __init__(self, client: openai.OpenAI, content: str, max_tokens: int, headers: dict, stop: threading.Event):
        super().__init__(daemon=True)
        self.client, self.content, self.max_tokens, self.headers, self.stop = client, content, max_tokens, headers, stop
        self.first_token = self.ended = None
        self.start()

    def run(self) -> None:
        stream = self.client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": self.content}], max_tokens=self.max_tokens,
            temperature=0, stream=True, extra_headers=self.headers, extra_body={"ignore_eos": True})
        with stream:
            for _ in stream:
                self.first_token = self.first_token or time.monotonic()
                if self.stop.is_set():
                    break
        self.ended = time.monotonic()


def test_an_interactive_request_is_served_ahead_of_queued_and_running_batch_work(worker):
    client = openai.OpenAI(base_url=worker + "/v1", api_key="unused", max_retries=0, timeout=120)
    stop = threading.Event()
    streams = []
    try:
        running = [_Stream(client, f"Count to a thousand, run {i}.", LONG, BATCH, stop) for i in range(SLOTS)]
        streams += running
        wait_until(lambda: _metric(worker, "tiergate_worker_num_requests_running") == SLOTS, 60,
                   what="the batch requests filling every slot")
        queued = [_Stream(client, f"List every city you know, run {i}.", LONG, BATCH, stop) for i in range(2)]
        streams += queued
        wait_until(lambda: _metric(worker, "tiergate_worker_priority_waiting", priority="batch") == len(queued), 30,
                   what="batch requests queued behind the full slots")
        preempted = _metric(worker, "tiergate_worker_priority_preemptions_total", priority="batch")

        user = _Stream(client, "What is the capital of France?", 8, {}, threading.Event())
        user.join(timeout=60)

        assert user.ended is not None, "the interactive request never finished"
        # Admitted ahead of the queued batch requests: none of them had a token yet...
        assert all(s.first_token is None or s.first_token > user.first_token for s in queued)
        # ...and without waiting for a running one to end: it took a slot from one of them.
        assert all(s.ended is None or s.ended > user.first_token for s in running)
        assert _metric(worker, "tiergate_worker_priority_preemptions_total", priority="batch") == preempted + 1
        assert _metric(worker, "tiergate_worker_priority_waiting", priority="interactive") == 0
    finally:
        stop.set()
        for stream in streams:
            stream.join(timeout=60)
    wait_until(lambda: _metric(worker, "tiergate_worker_num_requests_running") == 0, 30,
               what="the worker back to idle")
