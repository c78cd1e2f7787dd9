"""Service calls of tests that must not fail on discovery: the first answer.

A server drops its answer to a client whose response reader it has not matched yet
(rmw_fastrtps logs "failed to send response (timeout)"); on a loaded machine that match can
take seconds after ``service_is_ready``. A test that times calls or asserts answers asks until
one came back first, then counts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def first_answer(client: Any, request: Any, spin: Callable[[Any, float], None],
                 timeout_s: float = 20.0, per_call_s: float = 1.0) -> Any:
    """The first answer of ``client`` to ``request``, asked again every ``per_call_s`` until
    ``timeout_s``; ``spin(future, seconds)`` turns the client's executor meanwhile."""
    deadline = time.monotonic() + timeout_s
    while True:
        future = client.call_async(request)
        spin(future, per_call_s)
        if future.done():
            return future.result()
        client.remove_pending_request(future)
        assert time.monotonic() < deadline, f"{client.srv_name} never answered"
