"""`python -m backends.worker --model smollm2-135m --port 8101`: one inference worker."""
from __future__ import annotations

import argparse
import logging
import os
import threading

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# The engine loop runs its kernels on its own thread, after the main thread loaded the model,
# so libgomp keeps two thread teams. Once it manages more threads than there are CPUs it
# cuts its spin-wait to almost nothing, and every parallel region then pays futex wake-ups
# (nearly doubling a 2-core decode step: docs/engine-cpu.md). ACTIVE keeps libgomp's usual spin
# (GOMP_SPINCOUNT: its own default, a few ms) even then; idle teams still go to sleep.
# Read by libgomp when torch loads, so set before the import below.
os.environ.setdefault("OMP_WAIT_POLICY", "ACTIVE")
os.environ.setdefault("GOMP_SPINCOUNT", "300000")

import torch  # noqa: E402
from aiohttp import web  # noqa: E402
from torch._inductor.runtime.cache_dir_utils import default_cache_dir  # noqa: E402

from .engine.core.async_engine import AsyncEngine  # noqa: E402
from .engine.config import EngineConfig  # noqa: E402
from .engine.model.device import KV_CACHE_DTYPES, resolve_device  # noqa: E402
from .engine.core.llm_engine import LLMEngine  # noqa: E402
from .engine.model.models import cache_root  # noqa: E402
from .engine.device_defaults import plan_defaults  # noqa: E402
from .openai_server import WorkerAPI  # noqa: E402
from .serving.generation_defaults import parse_overrides  # noqa: E402
from webwire import trace_flags, tracing  # noqa: E402
from webwire.internal_key import WORKER_KEY_ENV, bind_refusal, key_from_env  # noqa: E402

log = logging.getLogger("tiergate.worker")


def _overrides(text: str) -> dict:
    try:
        return parse_overrides(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_app(engine_config: EngineConfig, served_name: str | None = None, default_max_tokens: int = 1024,
              engine: LLMEngine | None = None, generation_overrides: dict | None = None,
              internal_key: str | None = None) -> tuple[web.Application, AsyncEngine]:
    engine = engine or LLMEngine(engine_config)
    async_engine = AsyncEngine(engine)
    if engine.grammars is not None:  # build the grammar tokenizer view now, off the event loop, not on a first request
        threading.Thread(target=engine.grammars.ll_tokenizer, name="grammar-warmup", daemon=True).start()
    api = WorkerAPI(async_engine, served_name or engine_config.model, default_max_tokens, generation_overrides)
    app = api.app(internal_key)

    async def stop_engine(_app):
        async_engine.shutdown()

    app.on_cleanup.append(stop_engine)
    return app, async_engine


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, help="bundled model name (see `python -m backends.prepare`) or folder")
    parser.add_argument("--task", choices=["generate", "embed"], default="generate",
                        help="generate (chat/completions) or embed (/v1/embeddings; --model minilm)")
    parser.add_argument("--max-queued-inputs", type=int, default=4096,
                        help="--task embed: inputs waiting beyond this get 503")
    parser.add_argument("--served-name", help="model name clients use (default: --model)")
    parser.add_argument("--host", default="127.0.0.1",
                        help=f"anything but a loopback address needs {WORKER_KEY_ENV} (the key the gateway sends)")
    parser.add_argument("--port", type=int, default=8101)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="where the engine runs; auto = CUDA when torch sees a GPU")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"],
                        help="weights and KV dtype (default: bfloat16 on CUDA, float32 on CPU)")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9,
                        help="CUDA: share of GPU memory for weights + KV pool; the pool gets what a profiled "
                             "forward leaves (--kv-cache-gb is then unused)")
    parser.add_argument("--cuda-graphs", action=argparse.BooleanOptionalAction, default=None,
                        help="CUDA: replay decode steps as CUDA graphs per batch-size bucket (default: on; "
                             "on the CPU the worker refuses it: see --padded-decode)")
    parser.add_argument("--padded-decode", action="store_true",
                        help="CPU: run pure decode steps on the CUDA graphs' static, padded buffers, eagerly "
                             "(nothing is captured): the graphs' path without a GPU, slower than --compile")
    parser.add_argument("--fuse-kernels", action=argparse.BooleanOptionalAction, default=None,
                        help="Llama/Qwen2/Qwen3: fused RMSNorm (with the residual add), rotary and SiLU-and-mul "
                             "kernels, merged q/k/v and gate/up projections (engine/model/fusion.py). Default: on for "
                             "CUDA, off on CPU; asked for on another family, the worker refuses to start")
    parser.add_argument("--async-scheduling", action=argparse.BooleanOptionalAction, default=None,
                        help="launch the next decode step while the host reads this one's tokens (default: on "
                             "with CUDA graphs, off otherwise; needs --cuda-graphs, on the CPU --padded-decode; not --speculative)")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                        help="CPU: decode steps run as one compiled graph of the whole model, built once per "
                             "model, code and machine and loaded on later starts (engine/model/compiled_decode.py; "
                             "times: docs/engine-cpu.md). Default: on for int4 on CPU (engine/device_defaults.py)")
    parser.add_argument("--int4-dense-prefill", action=argparse.BooleanOptionalAction, default=None,
                        help="CPU int4: keep a dense copy of the weights for prompt chunks (bf16 where the CPU "
                             "has AVX-512 BF16 or AMX, else fp32: 2 or 4 more bytes per weight); with --compile "
                             "and native bf16, also a bf16 copy of the int8 head's codes for batched decode steps. "
                             "Default: on for int4 on CPU, except where the kernels run their AVX2 build "
                             "(there int4 beats the dense GEMM at every row count)")
    parser.add_argument("--kv-cache-gb", type=float, default=1.0, help="CPU: memory budget of the KV block pool")
    parser.add_argument("--kv-cache-dtype", choices=KV_CACHE_DTYPES,
                        help="CPU: bfloat16 halves the KV bytes of an fp32 model (what each decode step reads), "
                             "as llama.cpp's f16 cache; greedy output may then differ from fp32 now and then. "
                             "Default: bfloat16 for int4 on CPU, else auto (the model's dtype)")
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--max-num-batched-tokens", type=int,
                        help="token budget per engine step (default: 512 on CPU, 4096 on CUDA)")
    parser.add_argument("--max-num-seqs", type=int,
                        help="running sequences at most; an embeddings batch at most (default: 64; 256 on CUDA)")
    parser.add_argument("--max-waiting", type=int, default=256, help="queued requests beyond this get 503")
    parser.add_argument("--batch-max-wait-s", type=float, default=30.0,
                        help="a batch-priority request waiting this long is admitted like an interactive one")
    parser.add_argument("--batch-prefill-chunk", type=int, default=64,
                        help="prompt tokens of batch requests per engine step while interactive work runs "
                             "(0: no cap; docs/priorities.md)")
    parser.add_argument("--max-model-len", type=int)
    parser.add_argument("--default-max-tokens", type=int, default=1024)
    parser.add_argument("--override-generation-config", type=_overrides, default=None, metavar="JSON",
                        help="sampling defaults for requests that leave them unset, over the model's "
                             "generation_config.json, e.g. '{\"temperature\": 0.3}' (temperature, top_p, top_k, "
                             "repetition_penalty, max_tokens)")
    parser.add_argument("--no-prefix-caching", action="store_true")
    parser.add_argument("--quantization", choices=["int8", "int4"], help="weight-only quantization (default: fp32)")
    parser.add_argument("--quant-group-size", type=int, choices=[32, 64], default=32, help="int4 group size")
    parser.add_argument("--speculative", choices=["ngram", "draft"], help="speculative decoding proposer")
    parser.add_argument("--num-speculative-tokens", type=int, default=4)
    parser.add_argument("--draft-model", help="draft model for --speculative draft (same tokenizer as --model)")
    trace_flags.add_flags(parser)
    return parser


def plan_settings(args: argparse.Namespace) -> dict:
    """--compile, --int4-dense-prefill and --kv-cache-dtype as given, else the device's fastest plan."""
    chosen = plan_defaults(resolve_device(args.device).type, args.quantization)
    if args.padded_decode:  # the decode path asked for replaces the default one
        chosen["compile_decode"] = False
    given = {"compile_decode": args.compile, "int4_dense_prefill": args.int4_dense_prefill,
             "kv_cache_dtype": args.kv_cache_dtype}
    settings = {name: chosen[name] if value is None else value for name, value in given.items()}
    # compiled kernels kept with our models, not in /tmp, so restarts reuse them; a directory the
    # operator chose stays (inductor itself fills the variable with its /tmp default once it runs)
    if settings["compile_decode"] and os.environ.get("TORCHINDUCTOR_CACHE_DIR") in (None, default_cache_dir()):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_root() / "inductor")
    log.info("plan settings: %s", ", ".join(f"{k}={v}{'' if given[k] is not None else ' (default)'}"
                                            for k, v in settings.items()))
    return settings


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    internal_key = key_from_env()
    if (refused := bind_refusal(args.host, internal_key)) is not None:
        raise SystemExit(f"tiergate worker: {refused}")  # before minutes of model loading
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    exporting = trace_flags.from_args(args)
    if exporting is not None:  # before any app is built: the aiohttp instrumentation wraps web.Application
        tracing.install(exporting)
    if args.task == "embed":
        from .embed_server import build_embed_app  # batches inputs of concurrent requests (max-num-seqs a batch)

        app = build_embed_app(args.model, args.served_name, args.max_num_seqs or 64, args.max_queued_inputs,
                              internal_key)
        log.info("embeddings worker for %s listening on http://%s:%d", args.served_name or args.model, args.host, args.port)
        web.run_app(app, host=args.host, port=args.port, handler_cancellation=True, print=None, access_log=None)
        return
    try:
        args.device = resolve_device(args.device).type  # "auto" resolved once, for the plan and the engine alike
        config = EngineConfig(model=args.model, block_size=args.block_size, kv_cache_bytes=int(args.kv_cache_gb * (1 << 30)),
                              max_num_batched_tokens=args.max_num_batched_tokens, max_num_seqs=args.max_num_seqs,
                              max_waiting=args.max_waiting, batch_max_wait_s=args.batch_max_wait_s,
                              batch_prefill_chunk=args.batch_prefill_chunk or None,
                              max_model_len=args.max_model_len,
                              enable_prefix_caching=not args.no_prefix_caching, quantization=args.quantization,
                              quant_group_size=args.quant_group_size, speculative=args.speculative,
                              num_speculative_tokens=args.num_speculative_tokens, draft_model=args.draft_model,
                              device=args.device, dtype=args.dtype, gpu_memory_utilization=args.gpu_memory_utilization,
                              cuda_graphs=args.cuda_graphs, padded_decode=args.padded_decode, fuse_kernels=args.fuse_kernels,
                              async_scheduling=args.async_scheduling, **plan_settings(args))
        app, _ = build_app(config, args.served_name, args.default_max_tokens,
                           generation_overrides=args.override_generation_config, internal_key=internal_key)
    except ValueError as error:  # a setting the engine refuses or a model too large: one line, no traceback
        raise SystemExit(f"tiergate worker: {error}") from None
    log.info("worker for %s listening on http://%s:%d", args.served_name or args.model, args.host, args.port)
    # handler_cancellation: a client that disconnects cancels its handler, which aborts the sequence.
    web.run_app(app, host=args.host, port=args.port, handler_cancellation=True, print=None, access_log=None)


if __name__ == "__main__":
    main()
