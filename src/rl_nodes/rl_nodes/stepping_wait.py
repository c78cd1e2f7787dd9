"""A wait on the stepping topics alone, for the idle dispatch thread of a decoupled node.

A decoupled robot's simulator and policy pass every step to each other over DDS, and each waits
for the other's message with its dispatch thread idle. A turn of the rclpy executor costs a wait
set of every endpoint, timer and service of the process, far more than a wait set of one
subscription. So while a step's reply is due from another process, the dispatch thread waits on
the stepping subscriptions and a wake-up guard only, between two turns of the whole executor,
which still come whenever a timer is due and at least every
``rl_core.wire.dispatch.STEPPING_TURN_S`` (``StepReplies`` there keeps that schedule and the
reply's state; rl_nodes.dispatch_executor waits). Processes with no reply due (a paused
simulator, a robot that steps in-process) wait in the whole executor as before. The stepping
topics are those of rl_nodes.graph with ``stepping``. The costs: docs/architecture.md,
"Zero-copy inside one process".
"""

from __future__ import annotations

import weakref
from typing import Any

from rclpy.context import Context
from rclpy.exceptions import InvalidHandle
from rclpy.guard_condition import GuardCondition
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.subscription import Subscription

from rl_core.wire.dispatch import StepReplies


class SteppingTopics:
    """A process' stepping subscriptions, and whether a step's reply is due over DDS."""

    def __init__(self) -> None:
        #: The rclpy subscriptions of the stepping topics (a destroyed one drops out).
        self.subscriptions: weakref.WeakSet[Subscription[Any]] = weakref.WeakSet()
        self.replies = StepReplies()


class SteppingWait:
    """Waits on the stepping subscriptions of a process (and :attr:`guard`, which a post from
    another thread triggers) and runs the rclpy callback of each message that came.

    :param topics: the process' stepping subscriptions (their callbacks take ``(message,
        info)``) and whether a reply is due.
    :param context: the rclpy context of the process.
    """

    def __init__(self, topics: SteppingTopics, context: Context) -> None:
        self.topics = topics
        self.context = context
        #: Triggered to end a wait early: a call was posted to the dispatch queue.
        self.guard = GuardCondition(None, None, context=context)
        self._wait_set: Any = None
        self._wait_set_size = -1

    def __bool__(self) -> bool:
        """Whether to wait here: a step's reply is due and there is a subscription to wait on."""
        return self.topics.replies.due and bool(self.topics.subscriptions)

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` and run the callbacks of what came. True when a message
        came or the guard was triggered, False when the wait timed out (or the subscriptions
        are gone): then the whole executor should turn."""
        subscriptions = list(self.topics.subscriptions)
        wait_set = self._wait_set_for(len(subscriptions))
        wait_set.clear_entities()
        taken: list[tuple[Subscription[Any], tuple[Any, Any]]] = []
        try:
            with self.guard.handle:
                wait_set.add_guard_condition(self.guard.handle)
                for subscription in subscriptions:
                    with subscription.handle:
                        wait_set.add_subscription(subscription.handle)
                wait_set.wait(max(0, int(timeout_s * 1e9)))
                ready = wait_set.get_ready_entities("subscription")
                woken = bool(wait_set.get_ready_entities("guard_condition"))
                for subscription in subscriptions:
                    if subscription.handle.pointer in ready:
                        with subscription.handle:
                            message = subscription.handle.take_message(subscription.msg_type,
                                                                       subscription.raw)
                        if message is not None:
                            taken.append((subscription, message))
        except InvalidHandle:  # a subscription or the context went away: a whole turn sees it
            return False
        for subscription, message in taken:
            subscription.callback(*message)
        return bool(taken) or woken

    def _wait_set_for(self, subscriptions: int) -> Any:
        if subscriptions != self._wait_set_size:
            self._wait_set = _rclpy.WaitSet(subscriptions, 1, 0, 0, 0, 0, self.context.handle)
            self._wait_set_size = subscriptions
        return self._wait_set

    def destroy(self) -> None:
        self.guard.destroy()
