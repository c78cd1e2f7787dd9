"""The kinds of node a deployment is made of, named once (plain strings, no ROS).

``rl_core.config`` maps each kind to its parameter blocks, ``rl_nodes.graph`` to its topics,
``rl_nodes.runtime`` to its class, and ``rl_bringup.plan.layouts`` places them in processes.
"""

from __future__ import annotations

SIMULATOR, POLICY, REPLAY_BUFFER, TRAINER = "simulator", "policy", "replay_buffer", "trainer"
#: Every kind, in the order a deployment lists them.
NODE_KINDS: tuple[str, ...] = (SIMULATOR, POLICY, REPLAY_BUFFER, TRAINER)
#: Kinds that run once per robot, in the robot's namespace (the acting side).
PER_ROBOT_KINDS: tuple[str, ...] = (SIMULATOR, POLICY)
#: Kinds that run once per deployment (the learning side).
LEARNING_KINDS: tuple[str, ...] = (REPLAY_BUFFER, TRAINER)
#: /diagnostics grouped for rqt_robot_monitor, one per deployment beside the learning kinds (a
#: ROS tool node, not a learning one: it has no parameter block of rl_core.config).
DIAGNOSTICS_AGGREGATOR = "diagnostics_aggregator"
#: Each kind's node class in rl_nodes, as ``module:Class`` (imported only where it runs).
NODE_CLASSES: dict[str, str] = {
    SIMULATOR: "rl_nodes.simulator:SimulatorNode",
    POLICY: "rl_nodes.policy:PolicyNode",
    REPLAY_BUFFER: "rl_nodes.replay_buffer:ReplayBufferNode",
    TRAINER: "rl_nodes.trainer:TrainerNode",
    DIAGNOSTICS_AGGREGATOR: "rl_nodes.diagnostics_aggregator:DiagnosticsAggregatorNode",
}
