"""Which tokens of which sequences go into the next forward pass.

There are no separate prefill and decode phases: each step has one token budget.
Running sequences come first, interactive before batch, oldest first, each with its next
token or its next prompt chunk; then waiting sequences are admitted while budget, sequence
slots and blocks allow: interactive ones first (FCFS), batch ones only with what they leave,
and a batch sequence that has waited `batch_max_wait_s` counts as interactive, so it never
starves. When blocks run out, the newest running sequence is preempted, batch ones first:
its blocks are freed and it goes back to the front of the queue, to be recomputed later
(mostly from the prefix cache).

Three rules keep interactive time to first token low beside batch work (docs/priorities.md):
- a step that computes an interactive prompt carries no batch prompt work: running batch
  sequences keep decoding (a token each; the gateway's pacer bounds how many there are), but
  their prompt chunks sit that step out and no batch sequence is admitted;
- an interactive request that finds every sequence slot or too few blocks taken preempts the
  newest running batch sequences, instead of waiting for one to finish;
- while interactive work runs, batch prompts get at most `batch_prefill_chunk` tokens of a
  step, so the step a new interactive request waits for stays short.
All act only while interactive-priority work is there (an aged batch request is served
first but holds no batch work back): batch work alone runs with the whole budget.
"""
from __future__ import annotations

import time
from collections import Counter, deque

from .block_manager import BlockManager
from ..config import EngineConfig
from .sequence import BATCH, PRIORITIES, Sequence, SequenceStatus


class QueueFullError(Exception):
    """The waiting queue is at its bound; the server answers 503."""


class _Step:
    """What is left of one step: its token budget, and the share of it batch prompts may
    still take (beside interactive work, a small one: the step a new interactive request
    arrives during stays short)."""

    def __init__(self, budget: int, batch_prompt_tokens: int, urgent):
        self.budget, self.batch_prompt_left, self.urgent = budget, batch_prompt_tokens, urgent

    def _batch_prompt(self, seq: Sequence, num_tokens: int) -> bool:
        return num_tokens > 1 and not self.urgent(seq)

    def tokens_for(self, seq: Sequence) -> int:
        """All that seq has left within the budget; a batch prompt within its share (0: none left)."""
        left = min(seq.num_tokens - seq.num_computed_tokens, self.budget)
        return min(left, self.batch_prompt_left) if self._batch_prompt(seq, left) else left

    def take(self, seq: Sequence, num_tokens: int) -> None:
        self.budget -= num_tokens
        if self._batch_prompt(seq, num_tokens):
            self.batch_prompt_left -= num_tokens


class Scheduler:
    def __init__(self, config: EngineConfig, block_manager: BlockManager, clock=time.monotonic):
        self.config = config
        self.clock = clock  # what ages batch requests; benchmarks/priority_sim.py runs a virtual one
        self.blocks = block_manager
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preemptions = 0
        self.preemptions: Counter[str] = Counter({p: 0 for p in PRIORITIES})     # by priority
        self.scheduled_tokens: Counter[str] = Counter({p: 0 for p in PRIORITIES})  # by priority
        # Admission leaves a little room so running sequences can grow without thrashing.
        self.watermark_blocks = max(1, block_manager.num_blocks // 100)

    def add(self, seq: Sequence) -> None:
        if len(self.waiting) >= self.config.max_waiting:
            raise QueueFullError(f"waiting queue is full ({self.config.max_waiting} requests)")
        self.waiting.append(seq)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.blocks.free(seq)
        seq.status = SequenceStatus.WAITING
        self.waiting.appendleft(seq)
        self.num_preemptions += 1
        self.preemptions[seq.params.priority] += 1

    def waiting_by_priority(self) -> Counter[str]:
        counts = Counter({p: 0 for p in PRIORITIES})
        # over a copy made in one C call: /metrics reads this from its own thread while a step changes the queue
        counts.update(seq.params.priority for seq in tuple(self.waiting))
        return counts

    def _urgent(self, seq: Sequence, now: float) -> bool:
        """Interactive, or batch that has waited `batch_max_wait_s`: served as interactive."""
        return seq.params.priority != BATCH or now - seq.arrival_time >= self.config.batch_max_wait_s

    def _next_waiting(self, now: float) -> Sequence:
        """The first interactive (or aged batch) sequence; a batch one only when none waits."""
        return next((seq for seq in self.waiting if self._urgent(seq, now)), self.waiting[0])

    @staticmethod
    def _interactive(seq: Sequence) -> bool:
        """Interactive by priority: only such work holds batch work back (an aged batch
        request is served first but holds nothing back, so batch work alone keeps its speed)."""
        return seq.params.priority != BATCH

    def _interactive_prompt_due(self) -> bool:
        """Whether this step computes an interactive prompt: one waits, or one is running
        with more than its next token to compute (a chunked prompt)."""
        return (any(map(self._interactive, self.waiting))
                or any(seq.num_tokens - seq.num_computed_tokens > 1 and self._interactive(seq) for seq in self.running))

    def _preempt_batch(self, now: float, scheduled: list[tuple[Sequence, int]], step: _Step) -> bool:
        """Free a slot and blocks for an interactive admission: the newest running batch
        sequence goes back to the queue, and out of this step if its decode was in it (its
        tokens go back to the budget). False when none runs."""
        victim = next((seq for seq in reversed(self.running) if not self._urgent(seq, now)), None)
        if victim is None:
            return False
        self._preempt(victim)
        for i, (seq, num_tokens) in enumerate(scheduled):
            if seq is victim:
                del scheduled[i]
                step.budget += num_tokens
                break
        return True

    def _start_running(self, seq: Sequence) -> None:
        """Running order: interactive sequences ahead of batch ones (and preempted after them)."""
        seq.status = SequenceStatus.RUNNING
        if seq.params.priority == BATCH:
            self.running.append(seq)
            return
        first_batch = next((i for i, other in enumerate(self.running) if other.params.priority == BATCH),
                           len(self.running))
        self.running.insert(first_batch, seq)

    def schedule(self, lookahead: int = 0) -> list[tuple[Sequence, int]]:
        """`lookahead`: KV slots (and budget) to reserve after each decode's next token for
        speculative draft tokens, where the pool has them; speculation never preempts."""
        scheduled = self._pick(lookahead)
        for seq, num_tokens in scheduled:
            self.scheduled_tokens[seq.params.priority] += num_tokens
        return scheduled

    def _pick(self, lookahead: int) -> list[tuple[Sequence, int]]:
        scheduled: list[tuple[Sequence, int]] = []
        preempted = False
        now = self.clock()
        urgent = lambda seq: self._urgent(seq, now)  # noqa: E731
        prompt_step = self._interactive_prompt_due()  # batch prompt work (but aged) sits this step out
        budget = self.config.max_num_batched_tokens
        beside_interactive = prompt_step or any(map(self._interactive, self.running))
        step = _Step(budget, (self.config.batch_prefill_chunk or budget) if beside_interactive else budget, urgent)
        index = 0
        while index < len(self.running) and step.budget > 0:
            seq = self.running[index]
            sits_out = prompt_step and not urgent(seq) and seq.num_tokens - seq.num_computed_tokens > 1
            num_tokens = 0 if sits_out else step.tokens_for(seq)
            if num_tokens == 0:  # sits this step out
                index += 1
                continue
            decoding = num_tokens == seq.num_tokens - seq.num_computed_tokens == 1
            extra = min(lookahead, step.budget - 1) if decoding else 0
            if extra > 0 and self.blocks.allocate(seq, 1 + extra, keep_free=self.watermark_blocks):
                step.budget -= extra
            while not self.blocks.allocate(seq, num_tokens):
                victim = self.running[-1]
                self._preempt(victim)
                preempted = True
                if victim is seq:
                    break
            else:
                scheduled.append((seq, num_tokens))
                step.take(seq, num_tokens)
                index += 1
        if preempted:  # no admissions while memory is short
            return scheduled
        while self.waiting and step.budget > 0:
            seq = self._next_waiting(now)
            if prompt_step and not urgent(seq):
                break
            slots_full = len(self.running) >= self.config.max_num_seqs
            if slots_full and not (self._interactive(seq) and self._preempt_batch(now, scheduled, step)):
                break
            self.blocks.match_prefix(seq)
            num_tokens = step.tokens_for(seq)
            if num_tokens == 0 or not self.blocks.allocate(seq, num_tokens, keep_free=self.watermark_blocks):
                self.blocks.free(seq)
                if num_tokens and self._interactive(seq) and self._preempt_batch(now, scheduled, step):
                    continue
                if num_tokens and not self.running and not scheduled:
                    raise RuntimeError("KV pool too small for a single prompt chunk")
                break
            self.blocks.record_prefix_query(seq)
            self.waiting.remove(seq)
            seq.scheduled_time = seq.scheduled_time or now  # the first admission (a preempted one keeps it)
            self._start_running(seq)
            scheduled.append((seq, num_tokens))
            step.take(seq, num_tokens)
        return scheduled

    def schedule_ahead(self, scheduled: list[tuple[Sequence, int]]) -> list[tuple[Sequence, int]] | None:
        """The next step, scheduled before `scheduled`'s tokens reach the host, where it is certain to
        be the same pure decode batch again: nothing waits to be admitted, every running sequence
        decoded in it (in order), none can reach max_tokens with it, none needs its token on the
        host to sample the next (grammar, penalties). Reserves each sequence the KV slots of its
        next two positions (the pending token's and the next one's); None where it is not certain."""
        seqs = [seq for seq, _ in scheduled]
        if self.waiting or len(seqs) != len(self.running) or any(a is not b for a, b in zip(seqs, self.running)):
            return None
        if any(seq.matcher is not None or seq.params.has_penalties or seq.is_finished
               or seq.num_output_tokens + 1 >= seq.params.max_tokens for seq in seqs):
            return None
        if not all(self.blocks.allocate(seq, 2) for seq in seqs):
            return None
        return [(seq, 1) for seq in seqs]

    def postprocess(self, scheduled: list[tuple[Sequence, int]], new_tokens: dict[int, list[int]],
                    ran_ahead: bool = False) -> list[tuple[Sequence, int]]:
        """What a step did to its sequences: each appends its new tokens up to a stop, its computed
        count covers the scheduled tokens and every accepted draft token, its full blocks join the
        prefix cache, and a finished one is released. A sequence that ended meanwhile (a step run
        ahead of a stop or an abort) drops its token. Returns (sequence, token) for each appended."""
        outputs = []
        for seq, n in scheduled:
            if seq.is_finished:
                continue
            if ran_ahead:  # scheduled by schedule_ahead before its sequences were known to go on: counted now
                self.scheduled_tokens[seq.params.priority] += n
            accepted = new_tokens.get(seq.seq_id, [])
            for token in accepted:
                seq.append_token(token)
                outputs.append((seq, token))
                if seq.is_finished:
                    break
            seq.num_computed_tokens = min(seq.num_computed_tokens + n + max(0, len(accepted) - 1), seq.num_tokens)
            self.blocks.commit_full_blocks(seq)
            if seq.is_finished:
                self.release(seq)
        return outputs

    def release(self, seq: Sequence) -> None:
        """Drop a finished (or aborted) sequence wherever it is and free its blocks."""
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        self.blocks.free(seq)
