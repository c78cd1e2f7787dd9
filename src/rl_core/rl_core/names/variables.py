"""Every environment variable of rl_ros2's own (``RL_ROS2_*``), defined once.

``rl-bringup`` sets most of them for the processes it starts; a user may set the weights and
action key ones and the CPU ones by hand. Modules that read or set one import its name from here.
"""

from __future__ import annotations

#: CPU set every thread of a node process is pinned to (``0-3,6``; unset: no pinning).
CPUS = "RL_ROS2_CPUS"
#: ``torch.set_num_threads`` of a node process (unset: 1).
TORCH_THREADS = "RL_ROS2_TORCH_THREADS"
#: CPUs of the trainer's learner thread, a subset of :data:`CPUS`.
LEARNER_CPUS = "RL_ROS2_LEARNER_CPUS"
#: The learner's Ed25519 private key, as hex (learner hosts only; rl_core.security.weights_auth).
WEIGHTS_KEY = "RL_ROS2_WEIGHTS_KEY"
#: A file holding that private key (rl-bringup writes one per run: weights.key).
WEIGHTS_KEY_FILE = "RL_ROS2_WEIGHTS_KEY_FILE"
#: The learner's public key, as hex: what robots check weights and replay status with.
WEIGHTS_PUBLIC_KEY = "RL_ROS2_WEIGHTS_PUBLIC_KEY"
#: A file holding that public key (weights.pub beside weights.key).
WEIGHTS_PUBLIC_KEY_FILE = "RL_ROS2_WEIGHTS_PUBLIC_KEY_FILE"
#: The run identity every weights and status signature binds (rl_core.security.weights_auth): rl-bringup
#: and the launch files give all processes of a deployment the same one (rl_bringup.plan.run_key); a
#: process without it signs and checks for the unnamed run, as before run identities.
RUN_ID = "RL_ROS2_RUN_ID"
#: The run's action key, as hex: the key of every robot's actions derives from it
#: (rl_core.security.action_auth; a central policy, a process serving several robots, a hand-started run).
ACTION_KEY = "RL_ROS2_ACTION_KEY"
#: A file holding that key.
ACTION_KEY_FILE = "RL_ROS2_ACTION_KEY_FILE"
#: The action keys of single robots, ``k=HEX[,k=HEX...]``: what rl-bringup gives the processes of
#: robot k (its simulator and policy), so that a robot taken over can drive no other robot.
ROBOT_ACTION_KEYS = "RL_ROS2_ROBOT_ACTION_KEYS"
#: The pid of the rl-bringup supervisor that started this process: a node process ends with it.
SUPERVISOR_PID = "RL_ROS2_SUPERVISOR_PID"
#: The file a node process touches from its dispatch thread every second (rl_core.monitoring.heartbeat).
HEARTBEAT_FILE = "RL_ROS2_HEARTBEAT_FILE"
#: How often the supervisor has restarted this process (a respawned simulator reseeds from it).
RESTART_COUNT = "RL_ROS2_RESTART_COUNT"
#: Name of the variable that holds a Kubernetes replica's pod name (its robot index).
REPLICA_NAME = "RL_ROS2_REPLICA_NAME"
#: The robot index a replica resolved from its pod name.
ROBOT_INDEX = "RL_ROS2_ROBOT_INDEX"
