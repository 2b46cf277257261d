"""One gateway process: `python -m gateway.process --config FILE --port P` (the launcher runs N).
It listens on 127.0.0.1 unless told otherwise, and refuses a reachable address without
`tenants:` unless started with --insecure-open (exposure.py)."""
from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys


async def _serve(config, config_path: str, host: str, port: int) -> None:
    from .app import build_app, start_site
    from .server.exposure import is_loopback
    from .state import GatewayState
    from .core.trace_spans import start as start_tracing

    state = GatewayState(config, config_path)
    state.keys_required = not is_loopback(host) and config.policies.keyed  # a reload may not drop them
    start_tracing(state.services.config.tracing)  # before build_app: the aiohttp instrumentation wraps web.Application
    runner = await start_site(build_app(state), host, port)
    settle_collector()
    logging.getLogger("gateway").info("serving on http://%s:%d (classifier: %s)", host, port, state.classifiers.current.name)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await runner.cleanup()  # stops accepting, lets in-flight requests finish (aiohttp's shutdown timeout)


# Objects allocated (net) before a young-generation collection. Each collection walks every
# object of the requests in flight, and nearly all of them are freed by reference counting
# anyway: Python's 700 spent a large share of a busy process's CPU finding little garbage.
YOUNG_COLLECTION_THRESHOLD = 20_000


def settle_collector() -> None:
    """Startup's objects (config, classifier tables, modules) are kept for the whole run: frozen,
    no collection walks them again; and young collections run less often."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, old)


def _run(coro) -> None:
    try:
        import uvloop  # a faster event loop: the gateway's own overhead is mostly loop work
    except ImportError:
        asyncio.run(coro)
        return
    uvloop.run(coro)


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(name)s %(levelname)s %(message)s")
    parser = argparse.ArgumentParser(prog="python -m gateway.process")
    parser.add_argument("--config", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--insecure-open", action="store_true",
                        help="serve without tenants on a non-loopback address: every endpoint open to anyone")
    args = parser.parse_args(argv)
    from .config import ConfigError, load_config
    from .server.exposure import refusal

    try:
        config = load_config(args.config)
        if (refused := refusal(args.host, config, args.insecure_open)) is not None:
            print(refused, file=sys.stderr)
            return 2
        _run(_serve(config, args.config, args.host, args.port))
    except ConfigError as exc:
        print(f"invalid config: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
