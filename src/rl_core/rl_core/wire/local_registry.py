"""Who in a process publishes, subscribes and serves what: the registry behind rl_nodes'
zero-copy hand-offs (plain Python, no ROS; rl_nodes.intra_process keeps one per rclpy context).

Endpoints are any objects with a ``node`` attribute (their owner); services are callables, owned
by the object they are bound to. :meth:`LocalRegistry.forget` drops everything of one owner (a
node unloaded from a container), so nothing is handed to it any more.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TopicEntry:
    """Local endpoints of one fully resolved topic name."""

    subscriptions: list[Any] = field(default_factory=list)
    publishers: list[Any] = field(default_factory=list)
    latest: Any = None  # last object of a transient-local topic, for late local subscribers
    has_latest: bool = False


class LocalRegistry:
    """Topic entries by name and local service handlers by name, under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._topics: dict[str, TopicEntry] = {}
        self._services: dict[str, Callable[[Any], Any]] = {}

    def entry(self, topic: str) -> TopicEntry:
        """The entry of ``topic``, created on first use (call with :attr:`lock` held)."""
        return self._topics.setdefault(topic, TopicEntry())

    def find(self, topic: str) -> TopicEntry | None:
        """The entry of ``topic``, if any endpoint of this process ever used it."""
        return self._topics.get(topic)

    def has_publisher(self, topic: str) -> bool:
        entry = self._topics.get(topic)
        return bool(entry and entry.publishers)

    def add_service(self, name: str, handler: Callable[[Any], Any]) -> None:
        with self.lock:
            self._services[name] = handler

    def service(self, name: str) -> Callable[[Any], Any] | None:
        return self._services.get(name)

    def forget(self, owner: object) -> list[Any]:
        """Drop ``owner``'s endpoints and the services bound to it; returns its subscriptions
        (deliveries already queued for them must be dropped too)."""
        dropped: list[Any] = []
        with self.lock:
            for entry in self._topics.values():
                entry.publishers[:] = [item for item in entry.publishers if item.node is not owner]
                dropped += [item for item in entry.subscriptions if item.node is owner]
                entry.subscriptions[:] = [item for item in entry.subscriptions
                                          if item.node is not owner]
            for name, handler in list(self._services.items()):
                if getattr(handler, "__self__", None) is owner:
                    del self._services[name]
        return dropped
