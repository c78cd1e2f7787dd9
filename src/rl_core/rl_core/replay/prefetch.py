"""Sample requests kept in flight while the learner updates (double buffering over a network)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

#: Back-off of the learner thread while the rate limiter grants nothing (learner ahead of data).
IDLE_WAIT_S = 0.002


class PrefetchingSampler:
    """Keeps one ``sample`` request in flight while the learner updates (double buffering).

    A background thread calls the remote service and hands each answer over through a queue of
    one: while the learner works on one answer, the next is on its way or waiting.

    :param call: one sample request; its answer has ``batches`` (empty: nothing granted now).
    :param on_error: told why a call failed with ``unavailable`` (the thread retries a second
        later); any other exception ends the thread.
    """

    def __init__(self, call: Callable[[], Any], on_error: Callable[[str], None],
                 unavailable: type[Exception] | tuple[type[Exception], ...] = ConnectionError
                 ) -> None:
        self._call = call
        self._on_error = on_error
        self._unavailable = unavailable
        self._results: queue.Queue[Any] = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sample-prefetch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                result = self._call()
            except self._unavailable as error:
                if not self._stop.is_set():  # a call cut short by the end of the run is no fault
                    self._on_error(str(error))
                self._stop.wait(1.0)
                continue
            while not self._stop.is_set():
                try:
                    self._results.put(result, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if not result.batches:
                self._stop.wait(IDLE_WAIT_S)

    def get(self, timeout_s: float) -> Any:
        """The next answer, or None when none came within ``timeout_s``."""
        try:
            return self._results.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def stop(self) -> None:
        """Ask the thread to end (it may be waiting for an answer the executor delivers)."""
        self._stop.set()

    def close(self) -> None:
        self.stop()
        self._thread.join(timeout=5.0)
