"""The synchronous engine: add sequences, step, abort. One step = schedule + one forward.

A step is launched (forward and sampling on the device, the ids' read back started), then
finished (the host waits for the ids, appends them, checks stops). With async scheduling, a pure
decode step that the next one will continue unchanged has that next step launched from the ids
still on the device before it is finished, so the GPU runs step N+1 while the host handles N."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from kernels.sampling import select_rows

from ..model.models import load_tokenizer, model_dir
from .block_manager import BlockManager
from ..config import EngineConfig
from ..model.device import resolve_device, resolve_dtype
from ..structured.grammar import GrammarCompiler
from ..structured.length_guard import LengthGuard
from ..model.gpu_fit import load_fitting
from ..quant.int4_checkpoints import checkpoint_int4_layers
from ..model.model_runner import ModelRunner, load_model
from ..model.plans import Decode, ExecutionPlan
from ..quant.quantize import quantize_model
from ..speculative.proposers import Draft, DraftModelProposer, NgramProposer
from .sampler import Sampled, launch_sample, verify
from .scheduler import Scheduler
from ..speculative.spec_stats import SpecStats
from .sequence import SamplingParams, Sequence

DEFAULT_MAX_MODEL_LEN = 8192


class RequestTooLargeError(ValueError):
    """A prompt (plus its max_tokens) that can never fit: the server answers 400."""


class StepFailedError(RuntimeError):
    """A step's forward or sampling raised: its sequences are ended ("error") and their blocks
    freed; every other sequence goes on. `out_of_memory`: the device ran out of memory."""

    def __init__(self, seqs: list[Sequence], cause: BaseException):
        self.seqs = seqs
        self.out_of_memory = isinstance(cause, torch.OutOfMemoryError)
        kind = "ran out of device memory" if self.out_of_memory else f"failed ({type(cause).__name__}: {cause})"
        super().__init__(f"the engine step running this request {kind}")


@dataclass
class _Launched:
    """A step on the device: what it runs, its sampled tokens on their way back, or its failure."""
    scheduled: list[tuple[Sequence, int]]
    drafts: dict[int, Draft] = field(default_factory=dict)
    sampled: Sampled | None = None  # the plain rows' tokens
    verified: dict[int, list[int]] = field(default_factory=dict)  # accepted tokens where drafts ran
    ahead: bool = False  # launched before the previous step's tokens reached the host
    continues: bool = False  # a pure decode step on the persistent batch: the next may run ahead
    error: Exception | None = None

    def tokens(self) -> dict[int, list[int]]:
        chosen = dict(self.verified)
        if self.sampled is not None:
            chosen.update((seq.seq_id, [t]) for seq, t in zip(self.sampled.seqs, self.sampled.tokens()))
        return chosen


class LLMEngine:
    def __init__(self, config: EngineConfig, model=None, tokenizer=None, draft_model=None,
                 plan: ExecutionPlan | None = None):
        """`plan`: how to run on the device (engine/model/plans.py); by default the device's own."""
        self.config = config
        device = resolve_device(config.device)
        if model is None:  # a bundled or prepared model; tests pass a model (and maybe no tokenizer)
            path = model_dir(config.model)
            tokenizer = tokenizer or load_tokenizer(path)
            model = load_fitting(path, resolve_dtype(config.dtype, device), device, config.quantization,
                                 config.quant_group_size, config.gpu_memory_utilization)
        elif model.device != device:
            model.to(device)
        from_checkpoint = checkpoint_int4_layers(model, config.quantization)  # refuses int8 on such a model
        quantize_model(model, config, from_checkpoint)  # in place, once; a no-op without config.quantization
        self.model = model
        self.tokenizer = tokenizer
        model_limit = getattr(model.config.get_text_config(), "max_position_embeddings", DEFAULT_MAX_MODEL_LEN)
        self.max_model_len = config.max_model_len or min(model_limit, DEFAULT_MAX_MODEL_LEN)
        self.runner = ModelRunner(model, config, self.max_model_len, plan)
        self.block_manager = BlockManager(self.runner.num_blocks, config.block_size, config.enable_prefix_caching)
        self.scheduler = Scheduler(config, self.block_manager)
        self.eos_token_ids = self._eos_ids()
        self.grammars = GrammarCompiler(tokenizer, model.config.get_text_config().vocab_size, self.eos_token_ids) \
            if tokenizer is not None else None
        self.proposer = self._make_proposer(draft_model)
        self.spec_stats = SpecStats(config.num_speculative_tokens)
        self.async_scheduling = self._async_scheduling()
        self._ahead: _Launched | None = None  # a step launched before the last one's tokens were read
        self.num_steps_ahead = 0  # steps launched that way (logs and tests)
        self.num_generated_tokens = 0
        self.num_computed_tokens = 0  # all tokens through the model (prefill + decode), for FLOP/s

    def _async_scheduling(self) -> bool:
        """Overlap needs the persistent decode batch (decode graphs) and no speculation; by
        default on where graphs are captured (CUDA), off elsewhere."""
        wanted = self.config.async_scheduling
        if wanted is None:
            return self.runner.plan.decode == Decode.GRAPHS and self.runner.decode_graphs is not None \
                and self.proposer is None
        if wanted and self.runner.decode_graphs is None:
            raise ValueError("async_scheduling needs the decode graphs' persistent batch: cuda_graphs "
                             "(on CPU, padded_decode), not compile_decode or eager decode")
        if wanted and self.proposer is not None:
            raise ValueError("async_scheduling and speculative decoding cannot be combined: a step's drafts "
                             "need the previous step's tokens on the host")
        return wanted

    def _make_proposer(self, draft_model):
        k = self.config.num_speculative_tokens
        if self.config.speculative is None:
            return None
        if self.config.speculative == "ngram":
            return NgramProposer(k)
        if self.config.speculative == "draft":
            if draft_model is None:
                if not self.config.draft_model:
                    raise ValueError("speculative='draft' needs draft_model")
                draft_model = load_model(model_dir(self.config.draft_model), self.model.dtype, self.model.device)
            return DraftModelProposer(draft_model, k, self.config)
        raise ValueError(f"unknown speculative method {self.config.speculative!r} (use 'ngram' or 'draft')")

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (getattr(self.model, "generation_config", None), self.model.config):
            value = getattr(source, "eos_token_id", None)
            ids.update(value if isinstance(value, (list, tuple)) else [value] if value is not None else [])
        if self.tokenizer is not None and self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        return ids

    def check_fits(self, num_prompt_tokens: int, max_tokens: int) -> None:
        total = num_prompt_tokens + max_tokens
        if total > self.max_model_len:
            raise RequestTooLargeError(
                f"prompt ({num_prompt_tokens} tokens) plus max_tokens ({max_tokens}) exceeds the context window "
                f"of {self.max_model_len} tokens")
        usable = (self.block_manager.num_blocks - self.scheduler.watermark_blocks) * self.config.block_size
        if total > usable:
            raise RequestTooLargeError(f"prompt plus max_tokens ({total} tokens) exceeds the KV cache ({usable} tokens)")

    def make_sequence(self, prompt_ids: list[int], params: SamplingParams) -> Sequence:
        self.check_fits(len(prompt_ids), params.max_tokens)
        seq = Sequence(prompt_ids, params, self.eos_token_ids, self.runner.device)
        if params.grammar is not None:
            if self.grammars is None:
                raise ValueError("constrained decoding needs the engine's tokenizer")
            seq.matcher = self.grammars.matcher(params.grammar)  # raises GrammarError (a ValueError)
            if params.shape is not None and params.close_in_budget:  # raises FormatNeedsMoreTokens
                seq.guard = LengthGuard(params.shape, self.grammars.ll_tokenizer(), seq.matcher, params.max_tokens)
        return seq

    def add(self, seq: Sequence) -> Sequence:
        self.scheduler.add(seq)
        return seq

    def add_request(self, prompt_ids: list[int], params: SamplingParams) -> Sequence:
        return self.add(self.make_sequence(prompt_ids, params))

    def has_work(self) -> bool:
        return self.scheduler.has_work()

    def step(self) -> list[tuple[Sequence, int]]:
        """Run one step; returns (sequence, new token) for every token produced. With
        speculation, a decoding sequence can produce several tokens in one step. With async
        scheduling the next step may be launched before this one's tokens are read
        (`_launch_ahead`); it is then finished by the next call."""
        launched = self._ahead or self._launch_scheduled()
        self._ahead = None
        if launched is None:
            return []
        ahead = self.scheduler.schedule_ahead(launched.scheduled) if self.async_scheduling and launched.continues else None
        if ahead:
            self._ahead = self._launch_ahead(ahead)
        new_tokens = self._read_tokens(launched)
        outputs = self.scheduler.postprocess(launched.scheduled, new_tokens, launched.ahead)
        self.num_generated_tokens += len(outputs)
        self._release_drafts(outputs)
        return outputs

    def _launch_scheduled(self) -> _Launched | None:
        """Schedule a step and launch it: forward and sampling on the device, the read back started."""
        lookahead = self.proposer.num_tokens if self.proposer else 0
        scheduled = self.scheduler.schedule(lookahead)
        if not scheduled:
            return None
        try:
            drafts = self._propose(scheduled) if self.proposer else {}
            logits, rows = self.runner.forward(scheduled, {sid: d.tokens for sid, d in drafts.items()})
            return self._launch_sampling(scheduled, rows, logits, drafts)
        except Exception as exc:
            raise self._fail_step([seq for seq, _ in scheduled], exc) from exc

    def _launch_ahead(self, scheduled: list[tuple[Sequence, int]]) -> _Launched:
        """The next decode step of the same batch, from the ids still on the device. Its failure
        is kept for `_read_tokens`, so only that step's sequences fail, one call later, as without it."""
        self.num_steps_ahead += 1
        try:
            logits, rows = self.runner.forward(scheduled, None, ahead=True)
            return self._launch_sampling(scheduled, rows, logits, {}, ahead=True)
        except Exception as exc:
            return _Launched(scheduled, ahead=True, error=exc)

    def _read_tokens(self, launched: _Launched) -> dict[int, list[int]]:
        """Wait for a launched step's tokens (seq_id -> tokens) and count what it computed; a failed
        step ends its live sequences. A step run ahead computed nothing for a sequence that ended meanwhile."""
        live = [seq for seq, _ in launched.scheduled if not seq.is_finished]
        try:
            if launched.error is not None:
                raise launched.error
            new_tokens = launched.tokens()
        except Exception as exc:
            raise self._fail_step(live, exc) from exc
        for seq, n in launched.scheduled:
            if not seq.is_finished:
                draft = launched.drafts.get(seq.seq_id)
                self.num_computed_tokens += n + (len(draft.tokens) if draft else 0)
        return new_tokens

    def _release_drafts(self, outputs: list[tuple[Sequence, int]]) -> None:
        """The proposer's state of the sequences that finished in this step (the scheduler released their blocks)."""
        if self.proposer:
            for seq in dict.fromkeys(seq for seq, _ in outputs if seq.is_finished):
                self.proposer.release(seq)

    def _fail_step(self, seqs: list[Sequence], cause: Exception) -> StepFailedError:
        for seq in seqs:
            self.complete(seq, "error")
        if isinstance(cause, torch.OutOfMemoryError) and torch.cuda.is_available():
            torch.cuda.empty_cache()  # what the failed step held goes back to the pool for the next
        return StepFailedError(seqs, cause)

    def _launch_sampling(self, scheduled, rows, logits, drafts, ahead: bool = False) -> _Launched:
        """Plain rows sampled on the device, read back later; drafts verified now (never run ahead).
        A pure decode step's ids stay on the device as the next step's input, unless a length
        guard may replace one on the host."""
        plain = [(seq, row) for (seq, _), row in zip(scheduled, rows) if row is not None and seq.seq_id not in drafts]
        launched = _Launched(scheduled, drafts, ahead=ahead)
        if plain:
            seqs = [seq for seq, _ in plain]
            # rows taken without a host wait: indexing with a Python list would copy the index from
            # pageable memory, which waits for the whole forward before sampling is even queued
            launched.sampled = launch_sample(seqs, select_rows(logits, [row.start for _, row in plain]), self.grammars)
            if len(plain) == len(scheduled) and all(seq.guard is None for seq in seqs):
                launched.continues = self.runner.carry(launched.sampled.ids)
        for (seq, _), row in zip(scheduled, rows):
            draft = drafts.get(seq.seq_id)
            if draft is not None:
                accepted = verify(seq, logits[row], draft.tokens, draft.probs)
                self.spec_stats.record(len(draft.tokens), len(accepted) - 1)
                launched.verified[seq.seq_id] = accepted
        return launched

    def _propose(self, scheduled) -> dict[int, Draft]:
        """Drafts for sequences about to decode their next token, no longer than the KV
        slots reserved for them, their remaining max_tokens and the context window.
        Speculation is off for sequences with a grammar, penalties, logit_bias or logprobs:
        they decode one token per step, in the same batch as everyone else."""
        limits, seqs = {}, []
        for seq, n in scheduled:
            if n == 1 and seq.num_computed_tokens + 1 == seq.num_tokens and seq.params.is_plain:
                slots = len(seq.block_table) * self.config.block_size - seq.num_tokens
                room = min(slots, seq.params.max_tokens - seq.num_output_tokens - 1,
                           self.max_model_len - seq.num_tokens - 1)
                if room > 0:
                    limits[seq.seq_id] = room
                    seqs.append(seq)
        return self.proposer.propose(seqs, limits) if seqs else {}

    def complete(self, seq: Sequence, reason: str | None) -> None:
        """End a sequence (done, aborted, stop string) and free its blocks."""
        if not seq.is_finished:
            seq.mark_finished(reason)
        self.scheduler.release(seq)
        if self.proposer:
            self.proposer.release(seq)

    def generate(self, prompts: list[list[int]], params: SamplingParams | list[SamplingParams]) -> list[list[int]]:
        """Run prompts to completion (tests and offline use); returns output token ids."""
        params_list = params if isinstance(params, list) else [params] * len(prompts)
        seqs = [self.add_request(p, sp) for p, sp in zip(prompts, params_list)]
        while self.has_work():
            self.step()
        return [s.output_ids for s in seqs]
