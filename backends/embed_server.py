"""The embeddings worker's OpenAI-compatible HTTP API (`--task embed`): /v1/embeddings.

Inputs of concurrent requests are batched together (embed_batcher.py). `dimensions` is
accepted only at the model's native size: MiniLM was not trained for shortened
(Matryoshka) vectors, so truncating them would silently degrade quality.
"""
from __future__ import annotations

import time

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

from wire.embeddings import encode_vector, parse_embeddings
from webwire.errors import error_middleware, read_json_object
from webwire.internal_key import key_middlewares
from webwire.worker_api import EMBED, add_routes
from wire.errors import OpenAIError, bad_request

from .embed_batcher import EmbedBatcher, QueueFullError
from .embedder import Embedder

MAX_BODY_BYTES = 8 << 20


class EmbedWorkerAPI:
    def __init__(self, embedder: Embedder, model_name: str, batcher: EmbedBatcher):
        self.embedder, self.model_name, self.batcher = embedder, model_name, batcher
        self.started = int(time.time())
        self.registry = CollectorRegistry()
        self.requests = Counter("tiergate_worker_embedding_requests_total", "Embedding requests by outcome",
                                ["model", "outcome"], registry=self.registry)
        self.tokens = Counter("tiergate_worker_embedding_tokens_total", "Tokens embedded", ["model"],
                              registry=self.registry)
        self.latency = Histogram("tiergate_worker_embedding_seconds", "Embedding request latency", ["model"],
                                 registry=self.registry)

    def app(self, internal_key: str | None = None) -> web.Application:
        """With `internal_key`, every route but /health answers only a caller that sends it."""
        app = web.Application(middlewares=[error_middleware, *key_middlewares(internal_key)],
                              client_max_size=MAX_BODY_BYTES)
        add_routes(app, self, {EMBED})

        async def lifecycle(_app):
            self.batcher.start()
            yield
            await self.batcher.stop()

        app.cleanup_ctx.append(lifecycle)
        return app

    async def models(self, request: web.Request) -> web.Response:
        card = {"id": self.model_name, "object": "model", "created": self.started, "owned_by": "tiergate",
                "capabilities": {"embeddings": True, "chat": False, "completions": False, "tools": False,
                                 "structured_outputs": False, "logprobs": False, "n": False,
                                 "max_context_tokens": self.embedder.max_tokens,
                                 "dimensions": self.embedder.dimensions}}
        return web.json_response({"object": "list", "data": [card]})

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "model": self.model_name, "task": "embed",
                                  "queued": self.batcher.queued(), "batches": self.batcher.batches,
                                  "largest_batch": self.batcher.largest_batch})

    async def metrics_page(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def embeddings(self, request: web.Request) -> web.Response:
        started = time.monotonic()
        req = parse_embeddings(await read_json_object(request))
        if req.model != self.model_name:
            raise OpenAIError(404, f"model {req.model!r} is not served here (this worker serves "
                              f"{self.model_name!r})", param="model", code="model_not_found")
        if req.dimensions is not None and req.dimensions != self.embedder.dimensions:
            raise bad_request(f"'dimensions' must be {self.embedder.dimensions} for {self.model_name!r}: "
                              "the model does not support shortened embeddings", param="dimensions",
                              code="unsupported_value")
        id_lists = [self._ids(i, item) for i, item in enumerate(req.inputs)]
        try:
            vectors = await self.batcher.submit(id_lists)
        except QueueFullError as exc:
            self.requests.labels(self.model_name, "overloaded").inc()
            raise OpenAIError(503, str(exc), code="overloaded", headers={"Retry-After": "1"}) from None
        tokens = sum(len(ids) for ids in id_lists)
        self.requests.labels(self.model_name, "ok").inc()
        self.tokens.labels(self.model_name).inc(tokens)
        self.latency.labels(self.model_name).observe(time.monotonic() - started)
        data = [{"object": "embedding", "index": i, "embedding": encode_vector(v, req.encoding_format)}
                for i, v in enumerate(vectors)]
        return web.json_response({"object": "list", "data": data, "model": self.model_name,
                                  "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def _ids(self, index: int, item) -> list[int]:
        if isinstance(item, list) and any(t >= self.embedder.vocab_size for t in item):
            raise bad_request(f"input[{index}] token ids must be below the vocabulary size "
                              f"{self.embedder.vocab_size}", param="input")
        ids = self.embedder.token_ids(item)
        if len(ids) > self.embedder.max_tokens:
            raise bad_request(f"input[{index}] is {len(ids)} tokens; {self.model_name!r} takes at most "
                              f"{self.embedder.max_tokens}", param="input", code="context_length_exceeded")
        return ids


def build_embed_app(model: str, served_name: str | None = None, max_batch: int = 64,
                    max_queued: int = 4096, internal_key: str | None = None) -> web.Application:
    embedder = Embedder(model)
    batcher = EmbedBatcher(embedder.embed, max_batch=max_batch, max_queued=max_queued)
    return EmbedWorkerAPI(embedder, served_name or model, batcher).app(internal_key)
