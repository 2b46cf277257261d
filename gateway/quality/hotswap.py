"""Hot-swapping the complexity classifier while the gateway serves.

The new model is loaded and tried off the event loop, then the `ClassifierSlot`'s current
classifier is replaced in one assignment: a request that already classified keeps its result, the next one uses the
new model, nothing is dropped. A model that fails to load is rejected and the old one kept.
Triggers: a change of the files in `quality.classifier_model_dir` (seen twice in a row with
the same size and mtime, so a half-written file is never loaded) or
`POST /admin/classifier/reload`.
"""
from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Callable

from ..core.classify import Classifier, ClassifierSlot, OnnxComplexityClassifier
from . import metrics

log = logging.getLogger(__name__)
FILES = ("complexity.onnx", "metadata.json")


def version_of(classifier: Classifier) -> str:
    return classifier.version or classifier.name


def _signature(folder: Path) -> tuple | None:
    try:
        return tuple((s.st_mtime_ns, s.st_size) for s in ((folder / name).stat() for name in FILES))
    except OSError:
        return None


def _load(folder: Path) -> OnnxComplexityClassifier:
    from classifier.runtime import ComplexityClassifier

    classifier = OnnxComplexityClassifier(ComplexityClassifier.load(folder))
    classifier.classify([{"role": "user", "content": "hello"}], None)  # fail here, not on a request
    return classifier


class ClassifierSwapper:
    """`model_dir` reads the configured folder (None: the packaged model, not watched);
    `swapped` runs after each swap (the monitor re-reads the new model's thresholds)."""

    def __init__(self, slot: ClassifierSlot, model_dir: Callable[[], str | None], swapped: Callable[[], None]):
        self.slot, self.model_dir, self.swapped = slot, model_dir, swapped
        self.history: list[dict] = []  # this replica's swaps, newest last (bounded)
        self._lock = asyncio.Lock()
        self._seen: tuple | None = None
        self._candidate: tuple | None = None

    def folder(self) -> Path:
        configured = self.model_dir()
        if configured:
            return Path(configured)
        from classifier.runtime import PACKAGED_MODEL_DIR
        return PACKAGED_MODEL_DIR

    async def reload(self, reason: str) -> dict:
        async with self._lock:
            folder = self.folder()
            signature = _signature(folder)
            previous = version_of(self.slot.current)
            try:
                loaded = await asyncio.get_running_loop().run_in_executor(None, _load, folder)
            except Exception as exc:
                metrics.SWAPS.labels("rejected").inc()
                log.error("classifier reload from %s rejected, keeping %s: %s: %s", folder, previous,
                          type(exc).__name__, exc)
                raise
            self.slot.current = loaded
            self._seen = self._candidate = signature
            self.swapped()
            metrics.SWAPS.labels("applied").inc()
            event = {"previous": previous, "current": loaded.version, "model_dir": str(folder), "reason": reason,
                     "at_ms": int(time.time() * 1000)}
            self.history = (self.history + [event])[-20:]
            log.warning("classifier hot-swapped (%s): %s -> %s from %s", reason, previous, loaded.version, folder)
            return event

    async def poll(self) -> None:
        """Reload when the watched folder's files changed and then stayed the same for one poll."""
        if not self.model_dir():
            return
        signature = _signature(self.folder())
        if signature is None or signature == self._seen:
            return
        if signature != self._candidate:
            self._candidate = signature  # changed: wait one poll for the writer to finish
            return
        try:
            await self.reload("model files changed")
        except Exception:
            self._seen = signature  # do not retry a broken model every poll; the next write retries
