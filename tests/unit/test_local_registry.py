"""The process-local registry of endpoints and services (rl_core.wire.local_registry)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rl_core.wire.local_registry import LocalRegistry

pytestmark = pytest.mark.unit


class Owner:
    def handle(self, request: object) -> object:
        return request


def test_entries_services_and_forgetting_one_owner() -> None:
    registry = LocalRegistry()
    kept, gone = Owner(), Owner()
    with registry.lock:
        entry = registry.entry("/experience")
        entry.publishers += [SimpleNamespace(node=gone), SimpleNamespace(node=kept)]
        entry.subscriptions.append(SimpleNamespace(node=gone))
    assert registry.entry("/experience") is entry and registry.find("/other") is None
    assert registry.has_publisher("/experience") and not registry.has_publisher("/other")
    registry.add_service("/replay_buffer/sample", gone.handle)
    registry.add_service("/robot_1/policy/get_action", kept.handle)

    dropped = entry.subscriptions[0]
    assert registry.forget(gone) == [dropped]  # its queued deliveries are dropped by the caller
    assert [item.node for item in entry.publishers] == [kept] and entry.subscriptions == []
    assert registry.service("/replay_buffer/sample") is None
    assert registry.service("/robot_1/policy/get_action") == kept.handle
    registry.forget(kept)
    assert not registry.has_publisher("/experience")
