import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _triton_mode() -> None:
    """Triton reads TRITON_INTERPRET once, when it is first imported, and torch's dynamo imports
    it as soon as a transformers model is built; so it is settled here, before any test module.
    Without a GPU the Triton kernels run in Triton's interpreter on CPU tensors (tests/kernels);
    with one they compile for it. Nothing else in the suite runs Triton code."""
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")


_triton_mode()


def _share_cores() -> None:
    """Under pytest-xdist each process gets its share of the cores for torch, so that two test
    processes do not each spin a thread per core against the other."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


_share_cores()


import uuid

import aiohttp
import pytest
import redis.asyncio as aioredis
import yaml

from tests.support import SHARED_REDIS, delete_prefix_async, free_port, start_fake, start_persistent_redis
from tests.support.kinds import assign, starts_processes
from tests.support.kinds import pytest_fixture_setup  # noqa: F401 (the hook: undeclared process-starting fixtures fail)
from tests.support.workers import running_worker


def pytest_collection_modifyitems(config, items):
    """Every test gets its kind (unit, slow, live, chaos, browser: tests/support/kinds.py); gpu
    tests are skipped without CUDA."""
    import torch

    assign(items, cuda=torch.cuda.is_available())


@pytest.fixture
async def redis_prefix(monkeypatch):
    """A key prefix of this test's own on the shared Redis; its keys are deleted afterwards."""
    monkeypatch.delenv("TIERGATE_REDIS_URL", raising=False)
    prefix = f"tgtest:{uuid.uuid4().hex[:10]}:"
    yield prefix
    client = aioredis.from_url(SHARED_REDIS)
    await delete_prefix_async(client, prefix)
    await client.aclose()


@pytest.fixture
async def fakes():
    """fakes(n, **kw) -> list of (FakeUpstream, url): fake OpenAI upstreams in this loop."""
    runners = []

    async def make(n: int = 1, **kwargs):
        started = []
        for _ in range(n):
            fake, runner, url = await start_fake(name=f"fake{len(runners)}", **kwargs)
            runners.append(runner)
            started.append((fake, url))
        return started

    yield make
    for runner in runners:
        await runner.cleanup()


class RunningGateway:
    def __init__(self, state, runner, url, path):
        self.state, self.runner, self.url, self.path = state, runner, url, path

    def rewrite(self, doc: dict) -> None:
        self.path.write_text(yaml.safe_dump(doc))


@pytest.fixture
def default_classifier():
    """The classifier an in-process gateway gets unless a test passes one; None = the real ONNX one."""
    return None


@pytest.fixture
async def gateway(tmp_path, default_classifier):
    """gateway(config_dict, classifier=None, policy_factory=None, transport=None) -> RunningGateway on a free
    loopback port; with a `transport` (tests/support/scripted_transport.py) no worker is reached over a socket."""
    from gateway.app import build_app, start_site
    from gateway.config import load_config
    from gateway.state import GatewayState

    running = []

    async def make(doc: dict, classifier=None, policy_factory=None, transport=None) -> RunningGateway:
        path = tmp_path / f"tiergate-{len(running)}.yaml"
        path.write_text(yaml.safe_dump(doc))
        state = GatewayState(load_config(path), str(path), classifier=classifier or default_classifier,
                             transport=transport, **({"policy_factory": policy_factory} if policy_factory else {}))
        runner = await start_site(build_app(state), "127.0.0.1", 0)
        gw = RunningGateway(state, runner, f"http://127.0.0.1:{runner.addresses[0][1]}", path)
        running.append(gw)
        return gw

    yield make
    for gw in running:
        await gw.runner.cleanup()


@pytest.fixture
async def http():
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
@starts_processes
def own_redis(tmp_path):
    """(port, data dir, procs): a persistent redis-server of this test's own, free to kill
    and restart; the shared server is never touched. Whatever is left running is killed."""
    port, data = free_port(), tmp_path / "redis"
    data.mkdir()
    procs = [start_persistent_redis(port, data)]
    yield port, data, procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
@starts_processes
def shared_worker():
    """The URL of one smollm2-135m worker with the default flags, started once for the whole session
    and shared by the stacks that only send it requests (tests/gateway/e2e_stack.py `running_workers`).
    A test that stops, slows or reconfigures a worker starts its own."""
    with running_worker("smollm2-135m") as worker:
        yield worker.base


@pytest.fixture(scope="session")
@starts_processes
def shared_embed_worker():
    """The URL of one MiniLM embeddings worker, started once for the whole session and shared by
    the stacks that only send it requests (tests/gateway/dropin_stack.py)."""
    with running_worker("minilm", "--task", "embed") as worker:
        yield worker.base
