"""/v1/files and /v1/batches in OpenAI's shapes, scoped to the calling tenant."""
from __future__ import annotations

import asyncio
import functools
import logging
import re
import time

from aiohttp import web

from wire.errors import OpenAIError, bad_request

from policies.redis_errors import REDIS_DOWN

from ..core.body import body_deadline, read_body
from ..core.authenticated import authenticated
from ..core.context import CTX
from ..core.services import SERVICES
from .storage_quota import files_quota
from .files import PURPOSE_INPUT, FileStore
from .jsonl import ENDPOINTS, check_endpoint, read_lines
from .runner import stores
from .store import BatchStore, new_batch_id

log = logging.getLogger(__name__)
WINDOW = re.compile(r"^([1-9][0-9]{0,3})h$")
BATCH_FIELDS = {"input_file_id", "endpoint", "completion_window", "metadata"}
MAX_METADATA = (16, 64, 512)  # pairs, key length, value length (OpenAI's limits)


async def _open(request: web.Request) -> tuple[object, object, FileStore, BatchStore]:
    """The services, the calling tenant and the stores; a 404 where this gateway has no Batch API.
    Every call is a request: the tenant's rate limits hold before anything is read or listed."""
    services = request[SERVICES]
    tenant = authenticated(request, services.sinks.policy, bearer_only=True)
    if not services.config.batches.enabled:
        raise OpenAIError(404, "the Batch API is turned off in this gateway's config (batches.enabled)",
                          code="not_found")
    if services.redis is None:
        raise OpenAIError(404, "the Batch API needs the gateway's Redis, which is not configured", code="not_found")
    await services.sinks.policy.count_request(tenant, request[CTX].request_id)
    files, batches = stores(services)
    return services, tenant, files, batches


def store_call(handler):
    """Redis down or full (out of memory), or the files directory failing: a 503 with
    Retry-After, as for every other store the gateway keeps."""
    @functools.wraps(handler)
    async def answer(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except REDIS_DOWN as exc:  # OSError: the files directory (full disk, lost volume)
            log.warning("batch store unavailable: %s", exc)
            raise OpenAIError(503, "the file and batch store is unavailable; try again shortly",
                              code="service_unavailable", headers={"Retry-After": "1"}) from None
    return answer


def _page_args(request: web.Request, default: int, most: int) -> tuple[int, str | None]:
    raw = request.query.get("limit", str(default))
    if not raw.isdigit() or not 1 <= int(raw) <= most:
        raise bad_request(f"'limit' must be an integer from 1 to {most}", param="limit")
    return int(raw), request.query.get("after")


async def _read_part(part, limit: int) -> bytes:
    data = bytearray()
    while chunk := await part.read_chunk(1 << 16):
        data += chunk
        if len(data) > limit:
            raise bad_request(f"the form field '{part.name}' is longer than {limit} bytes", param=part.name)
    return bytes(data)


def _too_large(limit: int, setting: str):
    def refusal() -> OpenAIError:
        return OpenAIError(413, f"the file is larger than {limit} bytes ({setting})", param="file",
                           code="file_too_large")
    return refusal


def _check_file(path, limits) -> None:
    """Parsing a file of up to max_file_bytes takes a while: done in a thread."""
    read_lines(path.read_bytes(), max_lines=limits.max_lines, max_line_bytes=limits.max_line_bytes)


@store_call
async def upload_file(request: web.Request) -> web.Response:
    services, tenant, files, _ = await _open(request)
    limits, quota = services.config.batches, files_quota(services.config, tenant)
    if not request.content_type.startswith("multipart/"):
        raise bad_request("upload a file as multipart/form-data with fields 'purpose' and 'file'", code="invalid_request")
    room = await files.quota.room(tenant.name, quota)
    too_large = (_too_large(limits.max_file_bytes, "batches.max_file_bytes") if room >= limits.max_file_bytes
                 else _too_large(room, f"what is left of the tenant's {quota.bytes_field}: {quota.bytes}"))
    purpose, received = None, None
    try:
        async with body_deadline(request):
            async for part in await request.multipart():
                if part.name == "file" and received is None:
                    temp, size = await files.bodies.receive(tenant.name, part, min(room, limits.max_file_bytes),
                                                            too_large)
                    received = (part.filename or "upload.jsonl", temp, size)
                elif part.name == "purpose":
                    purpose = (await _read_part(part, 64)).decode("utf-8", "replace")
                else:
                    raise bad_request(f"form field '{part.name}' is not supported (or given twice)",
                                      param=part.name, code="unsupported_parameter")
        if purpose != PURPOSE_INPUT:
            raise bad_request("'purpose' must be 'batch': this gateway keeps files for the Batch API only",
                              param="purpose")
        if received is None:
            raise bad_request("the form has no 'file'", param="file")
        filename, temp, size = received
        await asyncio.to_thread(_check_file, temp, limits)
        meta = await files.put(tenant.name, temp, size, filename, PURPOSE_INPUT, quota)
        received = None  # kept: its body is no longer a temporary file
        return web.json_response(meta)
    finally:
        if received is not None:
            await files.bodies.discard(received[1])


@store_call
async def list_files(request: web.Request) -> web.Response:
    _, tenant, files, _ = await _open(request)
    limit, after = _page_args(request, 10000, 10000)
    return web.json_response(await files.listing(tenant.name, limit, after, request.query.get("purpose")))


@store_call
async def get_file(request: web.Request) -> web.Response:
    _, tenant, files, _ = await _open(request)
    return web.json_response(await files.meta(tenant.name, request.match_info["file_id"]))


@store_call
async def file_content(request: web.Request) -> web.Response:
    _, tenant, files, _ = await _open(request)
    path = await files.body(tenant.name, request.match_info["file_id"])
    return web.FileResponse(path, headers={"Content-Type": "application/jsonl"})


@store_call
async def delete_file(request: web.Request) -> web.Response:
    _, tenant, files, _ = await _open(request)
    file_id = request.match_info["file_id"]
    await files.delete(tenant.name, file_id)
    return web.json_response({"id": file_id, "object": "file", "deleted": True})


def _check_metadata(metadata) -> dict | None:
    pairs, key_len, value_len = MAX_METADATA
    if metadata is None:
        return None
    if not isinstance(metadata, dict) or len(metadata) > pairs or not all(
            isinstance(k, str) and isinstance(v, str) and len(k) <= key_len and len(v) <= value_len
            for k, v in metadata.items()):
        raise bad_request(f"'metadata' must map at most {pairs} strings of up to {key_len} characters to strings "
                          f"of up to {value_len}", param="metadata")
    return metadata


def _window_s(window, most_h: int) -> int:
    match = WINDOW.match(window) if isinstance(window, str) else None
    if match is None or int(match.group(1)) > most_h:
        raise bad_request(f"'completion_window' must be a number of hours up to {most_h}h, such as '24h'",
                          param="completion_window")
    return int(match.group(1)) * 3600


@store_call
async def create_batch(request: web.Request) -> web.Response:
    services, tenant, files, batches = await _open(request)
    limits = services.config.batches
    body = await read_body(request, services.config.limits.max_body_bytes)
    unknown = sorted(set(body) - BATCH_FIELDS)
    if unknown:
        raise bad_request(f"unsupported parameter(s) {unknown}", param=unknown[0], code="unsupported_parameter")
    endpoint, file_id = body.get("endpoint"), body.get("input_file_id")
    if endpoint not in ENDPOINTS:
        raise bad_request(f"'endpoint' must be one of {sorted(ENDPOINTS)}", param="endpoint")
    if not isinstance(file_id, str):
        raise bad_request("'input_file_id' must be a file id", param="input_file_id")
    window_s = _window_s(body.get("completion_window"), limits.max_completion_window_h)
    metadata = _check_metadata(body.get("metadata"))
    if await batches.count_active(tenant.name) >= limits.max_active_per_tenant:  # before the input is read
        raise OpenAIError(429, f"tenant {tenant.name!r} has {limits.max_active_per_tenant} unfinished batches "
                               "(batches.max_active_per_tenant); wait for one to end", code="too_many_batches")
    if (await files.meta(tenant.name, file_id))["purpose"] != PURPOSE_INPUT:
        raise bad_request(f"file '{file_id}' was not uploaded with purpose 'batch'", param="input_file_id")
    content = await files.content(tenant.name, file_id)
    lines = await asyncio.to_thread(read_lines, content, max_lines=limits.max_lines,
                                    max_line_bytes=limits.max_line_bytes)
    check_endpoint(lines, endpoint)
    now = int(time.time())
    meta = {"id": new_batch_id(), "endpoint": endpoint, "input_file_id": file_id,
            "completion_window": body["completion_window"], "created_at": now, "expires_at": now + window_s,
            "metadata": metadata, "total": len(lines), "key_id": getattr(tenant, "key_id", None)}
    await batches.create(tenant.name, meta)
    return web.json_response(await batches.get(tenant.name, meta["id"]))


@store_call
async def get_batch(request: web.Request) -> web.Response:
    _, tenant, _, batches = await _open(request)
    return web.json_response(await batches.get(tenant.name, request.match_info["batch_id"]))


@store_call
async def list_batches(request: web.Request) -> web.Response:
    _, tenant, _, batches = await _open(request)
    limit, after = _page_args(request, 20, 100)
    return web.json_response(await batches.listing(tenant.name, limit, after))


@store_call
async def cancel_batch(request: web.Request) -> web.Response:
    """Stop dispatching; the runner waits for the lines in flight and then reports the batch
    `cancelled` with what finished."""
    _, tenant, _, batches = await _open(request)
    batch_id = request.match_info["batch_id"]
    batch = await batches.get(tenant.name, batch_id)
    if batch["status"] in ("validating", "in_progress"):
        await batches.move(tenant.name, batch_id, ("validating", "in_progress"), "cancelling")
        batch = await batches.get(tenant.name, batch_id)
    if batch["status"] not in ("cancelling", "cancelled"):
        raise bad_request(f"batch '{batch_id}' is {batch['status']} and can no longer be cancelled",
                          code="invalid_state")
    return web.json_response(batch)


def add_routes(app: web.Application) -> None:
    app.router.add_post("/v1/files", upload_file)
    app.router.add_get("/v1/files", list_files)
    app.router.add_get("/v1/files/{file_id}", get_file)
    app.router.add_get("/v1/files/{file_id}/content", file_content)
    app.router.add_delete("/v1/files/{file_id}", delete_file)
    app.router.add_post("/v1/batches", create_batch)
    app.router.add_get("/v1/batches", list_batches)
    app.router.add_get("/v1/batches/{batch_id}", get_batch)
    app.router.add_post("/v1/batches/{batch_id}/cancel", cancel_batch)
