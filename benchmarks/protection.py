"""What the fault and security protections cost on the happy path: per-batch checks as a share of
each mode's acting time, periodic work (signing, snapshots) as a share of one core.

Called by ``benchmarks/throughput.py --protection`` with the env steps/s of every mode measured
in the same run. Each protection is timed in this process (median of many repeats); per-step
costs are shown as a share of each mode's time per batch, the others as a share of one core at
their configured period:

* per experience batch (``width`` rows), every mode: the replay buffer's admission checks (finite,
  within ``value_bound``, flags 0/1; the bare loop's buffer runs them too);
* per action batch, every mode (zero-copy hand-offs too): its HMAC-SHA256 made by the policy and
  checked by the simulator (rl_core.security.action_auth);
* per observation and action batch that crossed DDS (decoupled only: a zero-copy hand-off inside
  one process is not decoded and not checked): the finiteness checks at decode;
* per weights publication (``weights_period``): HMAC-SHA256 signing by the trainer; verifying
  plus the NaN/inf scan of the tensors by each policy;
* per replay snapshot (``snapshot_period``): copying a full buffer under the lock (the time
  inserts wait) and writing it (on a background thread);
* the insert log between snapshots: each stored batch copied, framed and written into the page
  cache on the insert path (every mode; issue 41: a kill loses nothing stored), and the log
  thread's ``fdatasync`` every 0.5 s.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.tables import LEFT, RIGHT, bold, duration, markdown_table, percent


@dataclass
class Cost:
    name: str
    where: str
    seconds: float  # one event
    per_second: float  # events per second
    basis: str  # what per_second comes from
    decoupled_only: bool = False  # a per-batch cost paid only where batches cross DDS
    nodes_only: bool = False  # paid by the ROS nodes, not by the bare loop

    @property
    def share(self) -> float:
        """Fraction of one core."""
        return self.seconds * self.per_second


def _median_time(function: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(env_id: str, width: int, hidden: tuple[int, ...], repeats: int = 200
            ) -> list[Cost]:
    """Time each protection once; ``Cost.per_second`` of the per-batch ones is left 0 (it
    depends on the mode, see :func:`report`)."""
    import numpy as np
    import torch

    from rl_core.algorithms.networks import SquashedGaussianActor
    from rl_core.config import ReplayConfig, TrainerConfig
    from rl_core.envs import make_env
    from rl_core.replay import ReplayBuffer
    from rl_core.replay.admission import ExperienceAdmission
    from rl_core.security import action_auth, weights_auth
    from rl_core.wire.messages import tensors_to_bytes

    torch.set_num_threads(1)  # as the nodes run (torch_threads: 1 in the shipped configs)
    env = make_env(env_id)
    obs_shape, action_shape = env.observation_space.shape, env.action_space.shape
    env.close()
    replay, trainer = ReplayConfig(), TrainerConfig()
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((width, *obs_shape)).astype(np.float32)
    actions = rng.uniform(-1, 1, (width, *action_shape)).astype(np.float32)
    rewards = rng.standard_normal(width).astype(np.float32)
    costs = []

    buffer = ReplayBuffer(obs_shape, action_shape, replay.capacity, value_bound=replay.value_bound)
    # One batch as add() lays it out before its checks: the value columns, then the two flags.
    block = np.zeros((width, buffer._flags_start + 2), np.float32)
    block[:, : buffer._flags_start] = rng.standard_normal((width, buffer._flags_start))
    costs.append(Cost("admission checks", "replay buffer",
                      _median_time(lambda: buffer._check_block(block), repeats), 0.0,
                      f"{width} rows per batch, every mode"))
    policy_keys = action_auth.ActionKeys(bytes(action_auth.KEY_BYTES))
    simulator_check = action_auth.ActionCheck(
        action_auth.ActionKeys(robot_keys={0: policy_keys.key(0)}))

    def authenticate() -> None:
        # Both sides digest the observations (issue 41): the simulator what it published, the
        # policy what it received; the MAC binds the digest.
        simulator_check.expect(0, 12_345, [action_auth.observation_digest(obs)])
        mac = policy_keys.mac(0, 12_345, actions, 7, action_auth.observation_digest(obs))
        assert simulator_check.refusal(0, 12_345, actions, 7, mac) is None

    costs.append(Cost("observation digests + action MAC + verify (SHA-256, HMAC-SHA256)",
                      "policy + simulator", _median_time(authenticate, repeats), 0.0,
                      "one action batch, every mode", nodes_only=True))
    admission = ExperienceAdmission(2)
    sequence = iter(range(10**9))

    def admit() -> None:
        number = next(sequence)
        assert admission.refusal(0, 1, number) is None
        admission.stored(0, 1, number)

    costs.append(Cost("admission: stream and sequence (issue 41)", "replay buffer",
                      _median_time(admit, repeats), 0.0, "one experience batch, every mode",
                      nodes_only=True))
    costs.append(_insert_log_cost(obs, actions, rewards, repeats))
    costs.append(Cost("finite observations and actions at decode", "policy + simulator",
                      _median_time(lambda: (np.all(np.isfinite(obs)),
                                            np.all(np.isfinite(actions))), repeats),
                      0.0, "one batch each that crossed DDS", decoupled_only=True))
    actor = SquashedGaussianActor(int(np.prod(obs_shape)), int(np.prod(action_shape)), hidden)
    state = {name: tensor.detach().clone() for name, tensor in actor.state_dict().items()}
    data, _ = tensors_to_bytes(state)
    key = weights_auth.SigningKey(bytes(weights_auth.KEY_BYTES))
    architecture = '{"hidden_sizes": %s}' % list(hidden)
    digest = weights_auth.signature(key, 1, 1, 1, architecture, data)
    publications = 1.0 / trainer.weights_period
    costs.append(Cost("sign weights (Ed25519)", "trainer",
                      _median_time(lambda: weights_auth.signature(key, 1, 1, 1, architecture,
                                                                  data), repeats),
                      publications, f"every {trainer.weights_period:g} s"))
    costs.append(Cost("verify weights + NaN/inf scan", "each policy",
                      _median_time(lambda: (weights_auth.verify(key.public, digest, 1, 1, 1,
                                                                architecture, data),
                                            all(bool(torch.isfinite(t).all())
                                                for t in state.values())), repeats),
                      publications, f"every {trainer.weights_period:g} s"))
    # The replay status: signed by the buffer, checked by every robot (rl_core.security.signed_status),
    # serialised with rclpy as the nodes do.
    from rl_core.security.signed_status import StatusCheck, StatusSigner, sign_status, status_refusal
    from rl_interfaces.msg import ReplayStatus
    from rl_nodes.replay_buffer import STATUS_PERIOD_S

    signer, status = StatusSigner(key), ReplayStatus(rate_limited=True)
    sign_status(status, signer)
    statuses = 1.0 / STATUS_PERIOD_S
    costs.append(Cost("sign replay status (Ed25519)", "replay buffer",
                      _median_time(lambda: sign_status(status, signer), repeats), statuses,
                      f"every {STATUS_PERIOD_S:g} s"))

    def check() -> None:
        receiver = StatusCheck(key.public)
        assert status_refusal(status, receiver) is None

    costs.append(Cost("check replay status", "each simulator", _median_time(check, repeats),
                      statuses, f"every {STATUS_PERIOD_S:g} s"))

    costs.append(_boundary_cost(repeats))

    rows = replay.capacity
    full = ReplayBuffer(obs_shape, action_shape, rows)
    chunk = 10_000
    for _ in range(rows // chunk):
        full.add(np.repeat(obs[:1], chunk, 0), np.repeat(actions[:1], chunk, 0),
                 np.repeat(rewards[:1], chunk), np.repeat(obs[:1], chunk, 0),
                 np.zeros(chunk, bool), np.zeros(chunk, bool))
    hold = _median_time(full.state_dict, 5)
    with tempfile.TemporaryDirectory() as folder:
        snapshot = full.state_dict()
        write = _median_time(lambda: ReplayBuffer.write_state(snapshot, Path(folder) / "s.npz"),
                             3)
    period = replay.snapshot_period
    costs.append(Cost(f"snapshot: copy {rows:,} transitions (inserts wait)", "replay buffer",
                      hold, 1.0 / period, f"every {period:g} s"))
    costs.append(Cost("snapshot: write (background thread)", "replay buffer", write, 1.0 / period,
                      f"every {period:g} s"))
    return costs


def _boundary_cost(repeats: int, rate_hz: float = 50.0) -> Cost:
    """A ros2_control robot's joint state (issue 41): the one-publisher check, the plausibility
    check and the safety layer's filter of the command for it (ramp, change limit, range,
    position limits), for KukaReach (7 joints, workspace box over the command deadline)."""
    import numpy as np

    from rl_core.config import BoundaryConfig
    from rl_core.robot import JointSample
    from rl_core.robot.joint_io import StateCheck, StateSource, command_limits, task_limits
    from rl_core.robot.safety import SafetyLayer
    from rl_core.robot.tasks import KukaReachTask

    task, config = KukaReachTask(), BoundaryConfig()
    indices = np.asarray([task.joint_names.index(name) for name in task.commanded])
    layer = SafetyLayer(task.command_interface, command_limits(task), indices,
                        task.control_period, config.max_command_change * task.action_scale,
                        task.end_effector, task.workspace, standing_time=config.command_timeout,
                        ramp_periods=2)
    source, check = StateSource(lambda gid: True), StateCheck(task_limits(task))
    position = np.full(len(task.joint_names), 0.1)
    stamps = iter(range(1, 10**9))

    def one_state() -> None:
        sample = JointSample(next(stamps) * task.control_period, position, position * 0,
                             position * 0)
        assert source.accepts(b"robot")
        assert check.problem(sample, float("inf")) is None
        layer.filter(np.full(len(indices), 0.01), sample)

    return Cost("joint-state checks + safety filter (ros2_control only)", "simulator",
                _median_time(one_state, repeats), rate_hz, f"per joint state at {rate_hz:g} Hz")


def _insert_log_cost(obs: object, actions: object, rewards: object, repeats: int) -> Cost:
    """The insert log on the insert path (issue 41): a stored batch's rows copied from the
    buffer, framed with its sender and written into the page cache, as
    ``ReplayService.insert`` does before it returns."""
    import numpy as np

    from rl_core.replay import ReplayBuffer
    from rl_core.replay.insert_log import SENDER, Chunk, InsertLog

    assert isinstance(obs, np.ndarray) and isinstance(actions, np.ndarray)
    width = len(obs)
    buffer = ReplayBuffer(obs.shape[1:], actions.shape[1:], 10_000)
    flags = np.zeros(width, bool)
    buffer.add(obs, actions, rewards, obs, flags, flags)
    with tempfile.TemporaryDirectory() as folder:
        def collect() -> Chunk:
            rows, _, inserted = buffer.rows_since(buffer.total_inserted - width)
            return Chunk(0, 0, inserted, 0, np.array([(0, 1, 2, 7, width)], dtype=SENDER),
                         rows, {})

        log = InsertLog(Path(folder), 0, collect, flush_period_s=3600.0)
        seconds = _median_time(lambda: log.flush(sync=False), repeats)
        log.close()
    return Cost("insert log: write the batch (page cache, issue 41)", "replay buffer", seconds,
                0.0, "one experience batch, every mode", nodes_only=True)


PER_BATCH = 5  # the first costs of measure() are per batch


def _applies(cost: Cost, mode: str) -> bool:
    """Whether ``mode`` pays ``cost`` (the bare loop runs no nodes, only its buffer's checks)."""
    return not ((cost.decoupled_only and mode != "decoupled") or
                (cost.nodes_only and mode == "bare"))


def acting_share(costs: Sequence[Cost], mode: str, rate: float, width: int) -> float:
    """The share of ``mode``'s acting time (``rate`` env steps/s at ``width``) that its per-batch
    protections among ``costs`` take."""
    return sum(cost.seconds for cost in costs[:PER_BATCH] if _applies(cost, mode)) * rate / width


def _deployment_shares(shares: Mapping[int, Mapping[str, float]]) -> str:
    """``width 1: 4.0 % of colocated, 1.1 % of decoupled; width 64: ...`` from ``{width: {mode:
    share}}``; the bare loop left out (it runs no nodes: the page asks what deployments pay)."""
    parts = []
    for width, by_mode in shares.items():
        text = ", ".join(f"{percent(share)} of {mode}" for mode, share in by_mode.items()
                         if mode != "bare")
        if text:
            parts.append(f"width {width}: {text}")
    return "; ".join(parts)


def _periodic_groups(costs: Sequence[Cost]) -> list[list[Cost]]:
    """Consecutive periodic costs of one period (sign and verify, copy and write) together."""
    groups: list[list[Cost]] = []
    for cost in costs:
        if groups and groups[-1][-1].basis == cost.basis:
            groups[-1].append(cost)
        else:
            groups.append([cost])
    return groups


def results_table(costs: Mapping[int, Sequence[Cost]], rates: Mapping[int, Mapping[str, float]],
                  date: str) -> str:
    """docs/results.md's "Protection costs" table: ``costs`` as :func:`measure` returns them per
    width, ``rates`` the env steps/s of each mode per width (as :func:`report` takes them),
    measured on ``date``. Per-batch costs get a column per width and their share of each
    deployment's acting time; periodic ones (measured alike at every width: the first width's)
    a share of one core, those of one period in one row; the last row sums the acting path."""
    widths = list(costs)
    first = costs[widths[0]]
    blank = [""] * (len(widths) - 1)
    columns = [("protection", LEFT), ("where", LEFT), *((f"width {w}", RIGHT) for w in widths),
               ("share", LEFT), ("date", LEFT)]
    cells = []
    for index, cost in enumerate(first[:PER_BATCH]):
        shares = {width: {mode: costs[width][index].seconds * rate / width
                          for mode, rate in rates.get(width, {}).items() if _applies(cost, mode)}
                  for width in widths}
        cells.append([cost.name, cost.where,
                      *(duration(costs[width][index].seconds) for width in widths),
                      _deployment_shares(shares), date])
    for group in _periodic_groups(first[PER_BATCH:]):
        where = " / ".join(dict.fromkeys(cost.where for cost in group))
        cells.append([" / ".join(cost.name for cost in group), f"{where}, {group[0].basis}",
                      " / ".join(duration(cost.seconds) for cost in group), *blank,
                      " / ".join(percent(cost.share) for cost in group) + " of a core", date])
    total = {width: {mode: acting_share(costs[width], mode, rate, width)
                     for mode, rate in rates.get(width, {}).items()} for width in widths}
    cells.append([bold("acting path in total"), "", *[""] * len(widths),
                  _deployment_shares(total), date])
    return markdown_table(columns, cells)


def report(costs: list[Cost], width: int, rates: dict[str, float]) -> list[dict[str, object]]:
    """Print the table; ``rates``: env steps/s of each measured mode at ``width``."""
    print(f"\nprotections at width {width}:")
    print(f"  {'protection':<50} {'where':<19} {'per event':>11}  share")
    rows = []
    for index, cost in enumerate(costs):
        if index < PER_BATCH:
            shares = {mode: cost.seconds * rate / width for mode, rate in rates.items()
                      if _applies(cost, mode)}
            text = ", ".join(f"{100 * share:.2f} % of {mode}" for mode, share in shares.items())
        else:
            shares = {"one core": cost.share}
            text = f"{100 * cost.share:.3f} % of a core ({cost.basis})"
        print(f"  {cost.name:<50} {cost.where:<19} {cost.seconds * 1e6:>9.1f} us  {text}")
        rows.append({"name": cost.name, "where": cost.where, "seconds": cost.seconds,
                     "shares": shares, "basis": cost.basis})
    for mode, rate in rates.items():
        acting = acting_share(costs, mode, rate, width)
        print(f"  acting path in {mode}: {100 * acting:.2f} % of its time (target <= 5 %)")
    return rows
