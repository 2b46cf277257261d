"""Draining batches: the process holding the lease runs every active batch's undone lines
through the request path, `max_in_flight` at a time and within each tier's share (pacer.py),
appends each result once to the batch's output or error file on disk, within the tenant's
storage quota (spool.py), and lists those files as the tenant's when the batch ends.

A batch ends when every line has a result (completed), when it was cancelled (after the lines
in flight finish: cancelled), or when its completion window closes (the undone lines fail
with batch_expired: expired), or when a result would pass the tenant's storage quota (no new
line starts; the batch fails, naming the quota, with the results kept so far). A restarted
gateway finds the active batches in Redis and runs only the lines that have no result yet.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from functools import partial
from typing import Callable


from policies.redis_errors import REDIS_DOWN
from wire.errors import OpenAIError

from ..core.metrics import METRICS
from ..core.services import Services
from .storage_quota import files_quota
from .bodies import FileBodies
from .files import FileStore
from .jsonl import BatchLine, read_lines
from .lease import Lease
from .lines import LineResult, Serve, ServeWith, TryLater, result_line, run_line
from .pacer import Pacer
from .spool import ResultSpool
from .store import BatchStore

log = logging.getLogger(__name__)
POLL_S = 0.5
PROGRESS_EVERY_S = 10.0
RECORD_TRIES = 5  # about 1.5 s of backoff before a result is given up (and its line run again)
SWEEP_EVERY_S = 600.0


def stores(services) -> tuple[FileStore, BatchStore]:
    config = services.config
    ttl_s = config.batches.file_ttl_days * 86400
    bodies = FileBodies(config.batches.files_dir)
    return (FileStore(services.redis, config.redis.key_prefix, ttl_s, bodies),
            BatchStore(services.redis, config.redis.key_prefix, ttl_s, bodies))


def _body_lifetime_s(config) -> float:
    """Longer than any body is needed: a file's TTL, plus a batch's window for an input shared
    on the file's last day, plus a day."""
    return (config.batches.file_ttl_days * 24 + config.batches.max_completion_window_h + 24) * 3600.0


def _quota_failure(index: int, refusal: OpenAIError) -> dict:
    return {"code": "storage_quota_exceeded", "line": index, "param": None,
            "message": f"the result of line {index} would pass the tenant's storage quota ({refusal.message}); "
                       "the batch stopped, and its output and error files hold the results kept before"}


def _is_ok(line: bytes) -> bool:
    response = json.loads(line).get("response")
    return bool(response) and response.get("status_code") == 200


class BatchRunner:
    def __init__(self, current: Callable[[], Services], serve: ServeWith):
        """`current()`: the process's services snapshot now; each line is served with the one
        current when it starts, and reads nothing of any other."""
        self.current, self.serve = current, serve
        self.pacer = Pacer(current)
        self.lease: Lease | None = None
        self.draining: dict[tuple[str, str], asyncio.Task] = {}
        self.slots: asyncio.Semaphore | None = None
        self.swept_at = 0.0
        self.loop: asyncio.Task | None = None

    def bound(self, tenant_name: str, key_id: str | None) -> tuple[Services, object, Serve]:
        """One try of a line: the services current now, the batch's tenant as that snapshot's policy
        knows it (None: its key is gone), and the request path with that same snapshot bound."""
        services = self.current()
        return services, services.sinks.policy.holder(tenant_name, key_id), partial(self.serve, services)

    def start(self) -> None:
        """The loop below, in the background, where Redis keeps batches and the config turns them on."""
        services = self.current()
        if services.redis is not None and services.config.batches.enabled:
            self.loop = asyncio.create_task(self.run(), name="batch runner")

    async def run(self) -> None:
        """The background loop of every gateway process; only the lease holder drains."""
        services = self.current()
        config = services.config
        self.lease = Lease(services.redis, f"{config.redis.key_prefix}batches:runner", config.batches.lease_s)
        self.slots = asyncio.Semaphore(config.batches.max_in_flight)
        while True:
            try:
                if await self.lease.hold():
                    await self._start_new()
                    await self._sweep()
                else:
                    self._drop_all()
            except Exception as exc:  # Redis away: try again next round; the lease runs out meanwhile
                log.warning("batch runner: %s", exc)
                self._drop_all()
            self.draining = {k: t for k, t in self.draining.items() if not t.done()}
            if asyncio.current_task().cancelling():  # a Redis call swallowed stop()'s cancel: stop anyway
                raise asyncio.CancelledError
            await asyncio.sleep(POLL_S)

    async def stop(self) -> None:
        """Lines in flight are cut, and run again by whoever resumes the batch."""
        if self.loop is not None:
            self.loop.cancel()
            await asyncio.gather(self.loop, return_exceptions=True)
        self._drop_all()
        if self.draining:
            await asyncio.gather(*self.draining.values(), return_exceptions=True)
        if self.lease is not None:
            try:
                await self.lease.release()  # a restart resumes at once, not after the lease runs out
            except Exception:
                pass

    def _drop_all(self) -> None:
        for task in self.draining.values():
            task.cancel()

    async def _sweep(self) -> None:
        """Bodies whose metadata expired unseen (a tenant that never uploads again), now and then."""
        if time.monotonic() - self.swept_at < SWEEP_EVERY_S:
            return
        self.swept_at = time.monotonic()
        config = self.current().config
        removed = await FileBodies(config.batches.files_dir).sweep(_body_lifetime_s(config))
        if removed:
            log.info("batch runner: removed %d expired file bodies", removed)

    async def _start_new(self) -> None:
        _, batches = stores(self.current())
        for key in await batches.active():
            if key not in self.draining or self.draining[key].done():
                self.draining[key] = asyncio.create_task(self._drain(*key), name=f"batch {key[1]}")

    async def _drain(self, tenant_name: str, batch_id: str) -> None:
        try:
            await BatchDrain(self, tenant_name, batch_id).run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("batch %s: draining failed; retried next round", batch_id)


class BatchDrain:
    """One batch, drained by the lease holder until it ends."""

    def __init__(self, runner: BatchRunner, tenant_name: str, batch_id: str):
        self.runner = runner
        self.files, self.batches = stores(runner.current())
        self.tenant_name, self.batch_id = tenant_name, batch_id
        self.spool: ResultSpool | None = None
        self.failure: dict | None = None
        self.status = "in_progress"
        self.started = time.monotonic()
        self.finished_here = 0

    async def run(self) -> None:
        try:
            fields = await self.batches.fields(self.tenant_name, self.batch_id)
        except OpenAIError:  # its record expired (not found): nothing left to drain; a Redis error is retried
            await self.batches.forget(self.tenant_name, self.batch_id)
            return
        meta, self.status = json.loads(fields["meta"]), fields["status"]
        self.failure = json.loads(fields["failure"]) if fields.get("failure") else None
        self.spool = self._spool(meta)
        content = await self.batches.input(self.tenant_name, self.batch_id)
        lines = await asyncio.to_thread(read_lines, content, max_lines=meta["total"], max_line_bytes=1 << 62)
        await self._move_legacy_results()
        if self.status in ("in_progress", "cancelling") and self.failure is None:
            await self._dispatch(meta, lines)
        await self._finalize(meta, lines)

    def _spool(self, meta: dict) -> ResultSpool:
        """The results' files, within the quota of the tenant as its key (or, that key gone, its
        config entry) has it now."""
        services = self.runner.current()
        tenant = (services.sinks.policy.holder(self.tenant_name, meta.get("key_id"))
                  or services.config.policies.tenants.get(self.tenant_name))
        return ResultSpool(self.files, self.batches, self.tenant_name, self.batch_id,
                           files_quota(services.config, tenant), services.config.batches.file_ttl_days * 86400)

    def _stopping(self, meta: dict) -> bool:
        return self.status != "in_progress" or self.failure is not None or time.time() >= meta["expires_at"]

    async def _move_legacy_results(self) -> None:
        """Results a gateway from before results moved to disk kept in Redis (counted already)."""
        legacy = await self.batches.legacy_results(self.tenant_name, self.batch_id)
        for index in sorted(legacy):
            await self._keep(index, legacy[index], _is_ok(legacy[index]), (0, 0), count=False)
            if self.failure:
                return
        if legacy:
            await self.batches.redis.delete(self.batches.results_key(self.tenant_name, self.batch_id))

    async def _watch(self, meta: dict) -> None:
        """The stored record is the truth: a cancel (from any process) or a changed window."""
        while True:
            await asyncio.sleep(POLL_S)
            try:
                fields = await self.batches.fields(self.tenant_name, self.batch_id)
            except REDIS_DOWN:  # a failover or a blip: the last status holds until the next look
                continue
            self.status, meta["expires_at"] = fields["status"], json.loads(fields["meta"])["expires_at"]

    async def _dispatch(self, meta: dict, lines: list[BatchLine]) -> None:
        done = await self.batches.done(self.tenant_name, self.batch_id)
        pending = [i for i in range(len(lines)) if i not in done]
        log.info("batch %s: %d of %d lines to run", self.batch_id, len(pending), len(lines))
        watcher = asyncio.create_task(self._watch(meta))
        in_flight: set[asyncio.Task] = set()
        last_progress = time.monotonic()
        try:
            for index in pending:
                await self.runner.slots.acquire()
                if self._stopping(meta):
                    self.runner.slots.release()
                    break
                task = asyncio.create_task(self._line(index, lines[index], meta))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
                if time.monotonic() - last_progress >= PROGRESS_EVERY_S:
                    last_progress = time.monotonic()
                    self._progress(len(done), len(lines))
            if in_flight:
                await asyncio.gather(*in_flight)
        finally:
            watcher.cancel()
            for task in in_flight:
                task.cancel()
        self._progress(len(done), len(lines))

    def _progress(self, done_before: int, total: int) -> None:
        elapsed = time.monotonic() - self.started
        log.info("batch %s: %d/%d lines done (%.1f lines/s here)", self.batch_id, done_before + self.finished_here,
                 total, self.finished_here / elapsed if elapsed > 0 else 0.0)

    async def _line(self, index: int, line: BatchLine, meta: dict) -> None:
        try:
            while True:
                services, tenant, serve = self.runner.bound(self.tenant_name, meta.get("key_id"))
                if tenant is None:
                    result = LineResult(result_line(self.batch_id, index, line.custom_id, 401, {"error": {
                        "message": "the key that created this batch is no longer valid",
                        "type": "authentication_error", "param": None, "code": "invalid_api_key"}}), False, 0, 0)
                    break
                try:
                    result = await run_line(serve, tenant, self.batch_id, index, line, self.runner.pacer.slot)
                    break
                except TryLater as later:
                    METRICS.batch_lines.labels("put_off").inc()
                    await asyncio.sleep(later.after_s or services.config.batches.retry_after_s)
                    if self._stopping(meta):
                        return  # cancelled or expired meanwhile: finalize settles what is undone
            if await self._record(index, result):
                self.finished_here += 1
                METRICS.batch_lines.labels("completed" if result.ok else "failed").inc()
        finally:
            self.runner.slots.release()

    async def _record(self, index: int, result: LineResult) -> bool:
        return await self._keep(index, result.line, result.ok, (result.input_tokens, result.output_tokens))

    async def _keep(self, index: int, line: bytes, ok: bool, tokens: tuple[int, int], count: bool = True) -> bool:
        """Append the result, riding out a short Redis blip (an answer lost here is computed
        again); past the storage quota, the batch fails instead."""
        for attempt in range(RECORD_TRIES):
            try:
                return await self.spool.append(index, line, ok, tokens, count)
            except OpenAIError as refusal:  # the storage quota
                if self.failure is None:
                    self.failure = _quota_failure(index, refusal)
                    await self.batches.fail(self.tenant_name, self.batch_id, self.failure)
                return False
            except REDIS_DOWN:
                if attempt == RECORD_TRIES - 1:
                    raise
                await asyncio.sleep(0.1 * 2 ** attempt)
        return False

    async def _finalize(self, meta: dict, lines: list[BatchLine]) -> None:
        fields = await self.batches.fields(self.tenant_name, self.batch_id)
        status, meta = fields["status"], json.loads(fields["meta"])
        all_done = len(await self.batches.done(self.tenant_name, self.batch_id)) == len(lines)
        if status in ("in_progress", "cancelling") and (self.failure or fields.get("failure")):
            final = "failed"
        elif status == "cancelling":
            final = "cancelled"
        elif status in ("in_progress", "finalizing") and all_done:
            final = "completed"
            await self.batches.move(self.tenant_name, self.batch_id, ("in_progress",), "finalizing")
        elif status == "in_progress" and time.time() >= meta["expires_at"]:
            final = "expired"
            await self._expire_undone(lines)
            final = "failed" if self.failure else final
        else:
            return  # already final, or lines still undone (the lease changed hands): the next round runs them
        output, errors = await self.spool.publish(self.batch_id)
        moved = await self.batches.move(self.tenant_name, self.batch_id, ("in_progress", "finalizing", "cancelling"),
                                        final, output_file_id=output or "", error_file_id=errors or "")
        if moved:
            await self.batches.ended(self.tenant_name, self.batch_id)
            log.info("batch %s: %s", self.batch_id, final)

    async def _expire_undone(self, lines: list[BatchLine]) -> None:
        done = await self.batches.done(self.tenant_name, self.batch_id)
        error = {"code": "batch_expired", "message": "This request could not be executed before the completion "
                                                     "window expired."}
        for index in sorted(set(range(len(lines))) - done):
            line = result_line(self.batch_id, index, lines[index].custom_id, None, None, error)
            await self._keep(index, line, False, (0, 0))
            if self.failure:
                return
