"""One batch of chat requests drained two ways, for benchmarks.priority: through the gateway's
OpenAI Batch API with the real `openai` SDK (upload, create, poll, download), or straight to a
tier's workers at batch priority with a fixed number in flight (`direct`, for comparison
and for stacks without the Batch API). Either way: completion tokens, drain time, errors."""
from __future__ import annotations

import asyncio
import json
import time

import openai

from benchmarks.priority_traffic import BATCH_HEADERS, BatchLanes, chat_body

TERMINAL = {"completed", "failed", "expired", "cancelled"}
POLL_S = 0.5


def batch_jsonl(model: str, size: int, max_tokens: int) -> bytes:
    lines = ({"custom_id": f"line-{i}", "method": "POST", "url": "/v1/chat/completions",
              "body": chat_body(model, i, max_tokens, False)} for i in range(size))
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def _drain_via_api(gateway: str, key: str, model: str, size: int, max_tokens: int, timeout_s: float) -> dict:
    client = openai.OpenAI(base_url=gateway + "/v1", api_key=key, max_retries=2)
    upload = client.files.create(file=("batch.jsonl", batch_jsonl(model, size, max_tokens)), purpose="batch")
    started = time.time()
    batch = client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h")
    deadline, reported = time.monotonic() + timeout_s, -1
    while batch.status not in TERMINAL:
        if time.monotonic() > deadline:
            client.batches.cancel(batch.id)
            raise TimeoutError(f"batch {batch.id} still {batch.status} after {timeout_s:.0f}s")
        time.sleep(POLL_S)
        batch = client.batches.retrieve(batch.id)
        done = batch.request_counts.completed + batch.request_counts.failed if batch.request_counts else 0
        if done // 50 != reported // 50:
            reported = done
            print(f"batch {batch.id}: {done}/{size} lines answered", flush=True)
    ended = time.time()
    tokens = errors = 0
    lines = client.files.content(batch.output_file_id).text.splitlines() if batch.output_file_id else []
    for line in lines:
        result = json.loads(line)
        response = result.get("response") or {}
        if result.get("error") or response.get("status_code") != 200:
            errors += 1
            continue
        tokens += response["body"]["usage"]["completion_tokens"]
    # the server's own clock bounds the drain when it says; else what the client saw
    if batch.in_progress_at and batch.completed_at:
        started, ended = batch.in_progress_at, batch.completed_at
    return {"via": "api", "status": batch.status, "lines": size, "answered": len(lines),
            "errors": errors + size - len(lines), "completion_tokens": tokens, "drain_s": round(ended - started, 2)}


async def drain_via_api(gateway: str, key: str, model: str, size: int, max_tokens: int,
                        timeout_s: float = 3600) -> dict:
    return await asyncio.to_thread(_drain_via_api, gateway, key, model, size, max_tokens, timeout_s)


async def drain_direct(workers, model: str, size: int, max_tokens: int, concurrency: int) -> dict:
    """Straight to the tier's workers (its config entries), each with the key the gateway sends it."""
    keys = {w.api_key for w in workers}
    if len(keys) > 1:
        raise SystemExit("--batch-via direct: this tier's workers take different keys; use --batch-via api")
    key = keys.pop()
    headers = {**BATCH_HEADERS, **({"Authorization": f"Bearer {key}"} if key else {})}
    lanes = BatchLanes([w.url for w in workers], model, concurrency, max_tokens, jobs=size, headers=headers,
                       progress_every=50)
    started = time.perf_counter()
    lanes.start()
    await lanes.wait()
    drain = time.perf_counter() - started
    tokens = sum(r["tokens"] for r in lanes.results if r.get("status") == 200)
    return {"via": "direct", "concurrency": concurrency, "lines": size, "answered": len(lanes.results),
            "errors": lanes.errors(), "completion_tokens": tokens, "drain_s": round(drain, 2)}
