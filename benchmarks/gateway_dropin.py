"""Added latency of the drop-in endpoints, for `python -m benchmarks.gateway`.

Against the same fake upstream, alternating direct and through-the-gateway calls:
- /v1/embeddings: whole answer, gateway minus upstream's own /v1/embeddings;
- streamed /v1/messages: time to the first event through the gateway (Anthropic events,
  translated from the chat stream) minus time to the first chunk of the upstream's own chat stream.
"""
from __future__ import annotations

import time

from measure.stats import percentile

EMBED_BODY = {"model": "bench-embed", "input": ["What is the capital of France?", "Paris is in France."]}
MESSAGES_BODY = {"model": "bench", "max_tokens": 8,
                 "messages": [{"role": "user", "content": "What is the capital of France? Answer in one word."}]}


async def _whole(session, url: str, body: dict, headers: dict) -> float:
    """Seconds to the whole answer (the body as given: /v1/embeddings has no `stream`)."""
    started = time.perf_counter()
    async with session.post(url, json=body, headers=headers) as response:
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}: {(await response.text())[:200]}")
        await response.read()
    return time.perf_counter() - started


async def _series(call, session, direct: tuple, via: tuple, n: int) -> dict:
    direct_s, via_s = [], []
    for i in range(n + min(20, n)):  # the first calls warm both paths and are not counted
        d = await call(session, direct[0], direct[1], {})
        v = await call(session, via[0], via[1], via[2])
        if i >= min(20, n):
            direct_s.append(d)
            via_s.append(v)
    direct_s.sort()
    via_s.sort()
    return {f"added_ms_p{q}": round((percentile(via_s, q) - percentile(direct_s, q)) * 1000, 3) for q in (50, 99)} | {
        "direct_p50_ms": round(percentile(direct_s, 50) * 1000, 3), "via_p50_ms": round(percentile(via_s, 50) * 1000, 3)}


async def dropin_latency(one_call, session, upstream: str, base: str, headers: dict, n: int,
                         chat_body: dict) -> dict:
    async def first_event(session, url, body, call_headers):
        return await one_call(session, url, body, call_headers, True)

    embeddings = await _series(_whole, session, (upstream + "/v1/embeddings", dict(EMBED_BODY, model="bench-embed-model")),
                               (base + "/v1/embeddings", EMBED_BODY, headers), n)
    messages = await _series(first_event, session, (upstream + "/v1/chat/completions",
                                                    dict(chat_body, model="bench-model")),
                             (base + "/v1/messages", MESSAGES_BODY, headers), n)
    return {"embeddings": embeddings, "messages_stream_first_event": messages}
