"""One gateway process: `python -m gateway.serve --config FILE --port P` (the launcher runs N)."""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys


async def _serve(config_path: str, host: str, port: int) -> None:
    from .app import build_app, start_site
    from .config import load_config
    from .state import GatewayState
    from .trace_spans import start as start_tracing

    state = GatewayState(load_config(config_path), config_path)
    start_tracing(state.config.tracing)  # before build_app: the aiohttp instrumentation wraps web.Application
    runner = await start_site(build_app(state), host, port)
    logging.getLogger("gateway").info("serving on http://%s:%d (classifier: %s)", host, port, state.classifier.name)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await runner.cleanup()  # stops accepting, lets in-flight requests finish (aiohttp's shutdown timeout)


def _run(coro) -> None:
    try:
        import uvloop  # a faster event loop: the gateway's own overhead is mostly loop work
    except ImportError:
        asyncio.run(coro)
        return
    uvloop.run(coro)


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(name)s %(levelname)s %(message)s")
    parser = argparse.ArgumentParser(prog="python -m gateway.serve")
    parser.add_argument("--config", required=True)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    from .config import ConfigError

    try:
        _run(_serve(args.config, args.host, args.port))
    except ConfigError as exc:
        print(f"invalid config: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
