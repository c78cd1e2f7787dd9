"""A hybrid deployment's live graph (nodes, topics, services with types) equals the graph of
``rl_nodes.graph`` (which docs/graph.md documents; tests/unit/test_doctor.py checks the two).

Colocated and decoupled are checked on the running deployments that the tool tests share
(``tests/integration/test_record.py`` and ``test_status_doctor.py``); hybrid has no tool test,
so it starts its own: one light launch of 2 robots, about 20 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.deployments import assert_graph_is_documented, deployment

pytestmark = pytest.mark.system
ROBOTS = 2


def test_live_hybrid_graph_matches_the_graph_module(ros_env, tmp_path: Path) -> None:
    with deployment("hybrid", ROBOTS, ros_env, tmp_path / "run") as run:
        assert_graph_is_documented("hybrid", ROBOTS, int(ros_env["ROS_DOMAIN_ID"]), run)
    assert run.process.returncode in (0, 130), run.output()[-3000:]  # SIGINT ends it cleanly
