"""benchmarks.priority's Batch API path, with the real `openai` SDK, against a stand-in
gateway that answers in OpenAI's shapes: upload, create, poll, download, and the tokens and
drain time read from the output."""
import json

from aiohttp import web

from benchmarks.priority_batch import drain_via_api
from tests.support import free_port

LINES = 5


class FakeBatches:
    """Files and one batch; the batch reports in_progress once, then completed."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.polls = 0
        self.batch: dict = {}

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/files", self.upload)
        app.router.add_get("/v1/files/{id}/content", self.content)
        app.router.add_post("/v1/batches", self.create)
        app.router.add_get("/v1/batches/{id}", self.retrieve)
        return app

    async def upload(self, request):
        form = await request.post()
        assert form["purpose"] == "batch"
        file_id = f"file-{len(self.files)}"
        self.files[file_id] = form["file"].file.read()
        return web.json_response({"id": file_id, "object": "file", "bytes": len(self.files[file_id]),
                                  "created_at": 1, "filename": form["file"].filename, "purpose": "batch"})

    async def content(self, request):
        return web.Response(body=self.files[request.match_info["id"]])

    async def create(self, request):
        body = await request.json()
        lines = [json.loads(line) for line in self.files[body["input_file_id"]].decode().splitlines()]
        answers = [{"id": f"r{i}", "custom_id": line["custom_id"], "error": None,
                    "response": {"status_code": 200, "body": {
                        "object": "chat.completion", "usage": {"completion_tokens": line["body"]["max_tokens"]}}}}
                   for i, line in enumerate(lines)]
        self.files["file-out"] = "".join(json.dumps(a) + "\n" for a in answers).encode()
        self.batch = {"id": "batch_1", "object": "batch", "endpoint": body["endpoint"], "created_at": 100,
                      "input_file_id": body["input_file_id"], "completion_window": body["completion_window"],
                      "status": "validating", "request_counts": {"total": len(lines), "completed": 0, "failed": 0}}
        return web.json_response(self.batch)

    async def retrieve(self, request):
        self.polls += 1
        if self.polls == 1:
            self.batch.update(status="in_progress", in_progress_at=100)
        else:
            self.batch.update(status="completed", completed_at=104, output_file_id="file-out",
                              request_counts={"total": LINES, "completed": LINES, "failed": 0})
        return web.json_response(self.batch)


async def test_a_batch_drains_through_the_batch_api_with_the_openai_sdk():
    fake = FakeBatches()
    runner = web.AppRunner(fake.app())
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        out = await drain_via_api(f"http://127.0.0.1:{port}", "key", "medium", LINES, 16, timeout_s=30)
    finally:
        await runner.cleanup()
    assert out == {"via": "api", "status": "completed", "lines": LINES, "answered": LINES, "errors": 0,
                   "completion_tokens": 16 * LINES, "drain_s": 4}
    sent = [json.loads(line) for line in fake.files["file-0"].decode().splitlines()]
    assert [line["body"]["model"] for line in sent] == ["medium"] * LINES
