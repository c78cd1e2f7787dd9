"""Demonstrations: recorded experience loaded into a buffer of its own (RLPD's demo buffer).

A demonstration is experience someone else chose the actions of: an operator, a scripted expert
(:mod:`rl_core.acting.experts`) or an earlier run. ``demos:=PATH`` (``ReplayConfig.demos``) names
MCAP files, or folders searched for ``*.mcap``, comma-separated, as ``rl-bringup record
topics:=/experience`` writes them: every ``rl_interfaces/msg/ExperienceBatch`` message is read
(decoded from the schema the file carries, so no ROS install is needed) and its rows become
transitions, kept apart from online data; every batch draws ``demo_ratio`` of its rows from them
(:class:`rl_core.replay.RateLimitedReplay`). Image tasks pair each message with its image
(:class:`rl_core.wire.image_join.HalfJoin`); a file without experience may hold a robot's joint
states and commands instead, turned into transitions by the run's task
(:mod:`rl_core.robot.recorded`). Files that are missing, not MCAP, or hold neither or another
task's data are refused with a :class:`ConfigError` that says which file and how to fix it.
What to record and how: docs/human_in_the_loop.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from rl_core.config import ConfigError
from rl_core.replay.buffer import ReplayBuffer
from rl_core.wire import encoding
from rl_core.wire.image_codecs import Camera, decode_raw_tall, decode_tall, format_codec, is_image_shape
from rl_core.wire.image_join import Frames, HalfJoin
from rl_core.wire.messages import AwaitingImages, Experience

__all__ = ["EXPERIENCE_SCHEMA", "Demonstrations", "demo_buffer", "demo_files",
           "load_demonstrations"]

#: The message type whose rows are transitions.
EXPERIENCE_SCHEMA = "rl_interfaces/msg/ExperienceBatch"
#: A robot's own topics: joint states and a forward command controller's commands.
JOINT_STATE_SCHEMA = "sensor_msgs/msg/JointState"
COMMAND_SCHEMA = "std_msgs/msg/Float64MultiArray"
#: The images of experience messages, on the experience topic's image side topics.
IMAGE_SCHEMAS = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")
#: How to record demonstrations, for error messages.
HOW_TO_RECORD = ("record them with `rl-bringup record topics:=/experience output:=FILE.mcap` "
                 "(an image task: topics:=/experience,/experience/image) while a run acts, or "
                 "`ros2 bag record -s mcap` a robot's joint_states and controller commands while "
                 "an operator drives it (docs/human_in_the_loop.md)")


@dataclass(frozen=True)
class Demonstrations:
    """Transitions read from demonstration files, row ``i`` of every array one transition."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    #: The files they came from.
    files: tuple[Path, ...]

    def __len__(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def episodes(self) -> int:
        """Episodes that ended within the recording (terminated or truncated)."""
        return int(np.count_nonzero(self.terminated | self.truncated))


def demo_files(paths: str) -> list[Path]:
    """The MCAP files ``paths`` names: comma-separated files and folders (searched recursively
    for ``*.mcap``), in order, without repeats.

    :raises ConfigError: for a path that does not exist or a folder without MCAP files.
    """
    files: list[Path] = []
    for text in filter(None, (part.strip() for part in paths.split(","))):
        path = Path(text).expanduser()
        if path.is_dir():
            found = sorted(path.rglob("*.mcap"))
            if not found:
                raise ConfigError(f"demos: the folder {str(path)!r} holds no .mcap file; "
                                  f"{HOW_TO_RECORD}")
        elif path.is_file():
            found = [path]
        else:
            raise ConfigError(f"demos: {str(path)!r} does not exist; give MCAP files or folders "
                              f"of them, comma-separated ({HOW_TO_RECORD})")
        files += [file for file in found if file not in files]
    return files


def load_demonstrations(paths: str, obs_shape: tuple[int, ...],
                        action_shape: tuple[int, ...], task_id: str = "") -> Demonstrations:
    """Read every experience message of the MCAP files ``paths`` names (:func:`demo_files`),
    and the joint states and commands of files without experience.

    :param obs_shape: the task's observation shape; experience of another shape is refused.
    :param action_shape: the task's action shape, likewise.
    :param task_id: the task (``env_id``) that turns joint states and commands into
        transitions ('' = experience only).
    :raises ConfigError: for missing, unreadable or foreign files, naming the file.
    """
    files = demo_files(paths)
    if not files:
        raise ConfigError(f"demos: no file given; {HOW_TO_RECORD}")
    columns: dict[str, list[np.ndarray]] = {name: [] for name in _ROW_FIELDS}
    for file in files:
        batches = _experience_batches(file, obs_shape, action_shape)
        parts = ([vars(batch) for batch in batches] if batches is not None
                 else [_robot_topics(file, task_id, obs_shape, action_shape)])
        for part in parts:
            for name in _ROW_FIELDS:
                columns[name].append(part[name])
    arrays = {name: np.concatenate(values) for name, values in columns.items()}
    return Demonstrations(**arrays, files=tuple(files))


def demo_buffer(demos: Demonstrations, like: ReplayBuffer, seed: int) -> ReplayBuffer:
    """A uniformly sampled buffer holding ``demos``, with the layout and value bound of ``like``
    (the online buffer), so their batches concatenate, and room for as many interventions as
    ``like`` holds transitions (an operator's steps join the demonstrations).

    :raises ConfigError: when a demonstration holds values the online buffer would refuse.
    """
    buffer = ReplayBuffer(like.obs_shape, like.action_shape, len(demos) + like.capacity,
                          seed=seed, value_bound=like.value_bound, obs_dtype=like.obs_dtype)
    try:
        buffer.add(demos.obs, demos.actions, demos.rewards, demos.next_obs,
                   demos.terminated, demos.truncated)
    except ValueError as error:
        raise ConfigError(f"demos: {', '.join(map(str, demos.files))}: {error}") from None
    return buffer


#: The arrays of a batch of transitions (the fields of :class:`Demonstrations` but ``files``).
_ROW_FIELDS = ("obs", "actions", "rewards", "next_obs", "terminated", "truncated")


def _experience_batches(file: Path, obs_shape: tuple[int, ...], action_shape: tuple[int, ...]
                        ) -> list[Experience] | None:
    """The experience of one MCAP file, in log order, an image task's joined with its images;
    None when the file holds no experience message."""
    def refuse_image(what: str, reason: str) -> None:
        if what.endswith("image"):  # not a half whose partner is missing: one that does not fit
            raise ConfigError(f"demos: {str(file)!r}: an image of its experience: {reason}")

    batches: list[Experience] = []
    join: HalfJoin[Experience] = HalfJoin(batches.append, refuse_image, "experience")
    camera = Camera.of(obs_shape) if is_image_shape(obs_shape) else None
    awaiting = 0
    messages = 0
    for schema, decoded in _experience_messages(file):
        if schema != EXPERIENCE_SCHEMA:
            if camera is not None:
                join.on_frames(_frames(schema, decoded, camera, file))
            continue
        messages += 1
        batch = _transitions(decoded, obs_shape, action_shape, file)
        if isinstance(batch, AwaitingImages):
            awaiting += 1
            join.on_batch(batch)
        else:
            batches.append(batch)
    if awaiting and not join.joined:
        raise ConfigError(f"demos: {str(file)!r} holds experience of an image task without its "
                          "images: record the experience topic's image side topic too "
                          "(rl-bringup record topics:=/experience,/experience/image)")
    return batches if messages else None


def _frames(schema: str, message, camera: Camera, file: Path) -> Frames:  # noqa: ANN001 - mcap_ros2's object
    """The pixels of an image message of the experience (raw or compressed)."""
    try:
        if schema == IMAGE_SCHEMAS[0]:
            pixels = decode_raw_tall(bytes(message.data), message.encoding, message.height,
                                     message.width, message.step, camera)
        else:
            pixels = decode_tall(bytes(message.data), format_codec(message.format), camera)
    except ValueError as error:
        raise ConfigError(f"demos: {str(file)!r}: an image of its experience: {error}") from None
    return Frames(message.header.frame_id, _stamp_ns(message), pixels)


def _stamp_ns(message) -> int:  # noqa: ANN001 - mcap_ros2's object
    return message.header.stamp.sec * 1_000_000_000 + message.header.stamp.nanosec


def _experience_messages(file: Path):  # noqa: ANN202 - mcap_ros2's decoded message objects
    """``(schema name, decoded message)`` of one MCAP file's experience messages and the
    images on their image side topics, in log order."""
    from mcap.exceptions import McapError
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    try:
        with open(file, "rb") as stream:
            reader = make_reader(stream, decoder_factories=[DecoderFactory()])
            summary = reader.get_summary()
            if summary is None:
                raise ValueError("the file has no summary section (was the recording cut short?)")
            topics = _topics_of(summary, EXPERIENCE_SCHEMA)
            topics += [image for schema in IMAGE_SCHEMAS for image in _topics_of(summary, schema)
                       if any(image.startswith(topic + "/") for topic in topics)]
            for schema, _, _, decoded in reader.iter_decoded_messages(log_time_order=True,
                                                                      topics=topics):
                if schema is not None:
                    yield schema.name, decoded
    except (McapError, ValueError, EOFError, OSError) as error:
        raise ConfigError(f"demos: {str(file)!r} is not a readable MCAP file ({error}); "
                          f"{HOW_TO_RECORD}") from None


def _topics_of(summary, schema: str) -> list[str]:  # noqa: ANN001 - an mcap Summary or None
    """The topics of ``schema`` messages in a recording's summary (none without a summary)."""
    if summary is None:
        return []
    return [channel.topic for channel in summary.channels.values()
            if summary.schemas.get(channel.schema_id) is not None
            and summary.schemas[channel.schema_id].name == schema]


def _transitions(message, obs_shape: tuple[int, ...], action_shape: tuple[int, ...],  # noqa: ANN001
                 file: Path) -> Experience | AwaitingImages[Experience]:
    """One message's rows as arrays, after checking they are of this task; an image task's
    whose observations travel on the image side topic awaits its image."""
    recorded = (tuple(message.obs_shape), tuple(message.action_shape))
    if recorded != (tuple(obs_shape), tuple(action_shape)):
        raise ConfigError(
            f"demos: {str(file)!r} holds experience with observations {list(recorded[0])} and "
            f"actions {list(recorded[1])}, but this task has {list(obs_shape)} and "
            f"{list(action_shape)}: record the demonstrations with the task you train")
    try:
        batch = encoding.decode_experience(message, _stamp_ns(message), images=True)
    except ValueError as error:
        raise ConfigError(f"demos: {str(file)!r} holds a malformed experience message "
                          f"(sequence {message.sequence} of robot {message.robot_id}): "
                          f"{error}") from None
    if isinstance(batch, AwaitingImages) or not is_image_shape(obs_shape):
        return batch
    return replace(batch, obs=batch.obs.astype(np.uint8), next_obs=batch.next_obs.astype(np.uint8))


def _robot_topics(file: Path, task_id: str, obs_shape: tuple[int, ...],
                  action_shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """The transitions of a recording of a robot's joint states and commands (one robot)."""
    from rl_core.robot.recorded import operator_transitions
    from rl_core.robot.tasks import load_task

    states, commands = _robot_messages(file)
    if not states or not commands:
        raise ConfigError(f"demos: {str(file)!r} holds no {EXPERIENCE_SCHEMA} message, nor "
                          f"{JOINT_STATE_SCHEMA} and {COMMAND_SCHEMA} of a robot; "
                          f"{HOW_TO_RECORD}")
    try:
        task = load_task(task_id)
    except ValueError as error:
        raise ConfigError(f"demos: {str(file)!r} holds a robot's joint states and commands, "
                          f"which need the task of the run to become transitions: {error}"
                          ) from None
    if (task.observation_space.shape, task.action_space.shape) != (tuple(obs_shape),
                                                                   tuple(action_shape)):
        raise ConfigError(f"demos: task {task_id!r} observes {task.observation_space.shape} "
                          f"and acts {task.action_space.shape}, this run {obs_shape} and "
                          f"{action_shape}")
    from rl_core.robot.joint_io import JointStateError, JointStateReader
    from rl_core.robot.recorded import TimedCommand, TimedState

    reader = JointStateReader(task.joint_names)
    try:
        timed_states = [TimedState(at, reader.read(stamp, *fields))
                        for at, stamp, fields in states]
        rows = operator_transitions(task, timed_states,
                                    [TimedCommand(at, np.asarray(data)) for at, data in commands])
    except (JointStateError, ValueError) as error:
        raise ConfigError(f"demos: {str(file)!r}: {error}") from None
    if not rows:
        raise ConfigError(f"demos: {str(file)!r}: no command was answered by a joint state")
    return rows


def _robot_messages(file: Path) -> tuple[list, list]:
    """A recording's joint states ``(received s, stamp s, (names, positions, velocities,
    efforts))`` and commands ``(sent s, values)`` of one robot, in log order.

    :raises ConfigError: when it holds several robots' joint states or several command topics
        of one robot.
    """
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    with open(file, "rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        summary = reader.get_summary()
        state_topics = _topics_of(summary, JOINT_STATE_SCHEMA)
        if len(state_topics) > 1:
            raise ConfigError(f"demos: {str(file)!r} holds joint states of several robots "
                              f"({', '.join(sorted(state_topics))}); record one robot per file")
        namespace = state_topics[0].rpartition("/")[0] + "/" if state_topics else ""
        command_topics = [topic for topic in _topics_of(summary, COMMAND_SCHEMA)
                          if topic.startswith(namespace) and topic.endswith("/commands")]
        if len(command_topics) > 1:
            raise ConfigError(f"demos: {str(file)!r} holds several command topics "
                              f"({', '.join(sorted(command_topics))}); record the one the "
                              "task's controller takes")
        states: list = []
        commands: list = []
        for _, channel, message, decoded in reader.iter_decoded_messages(
                topics=state_topics + command_topics, log_time_order=True):
            at = message.log_time * 1e-9
            if channel.topic in state_topics:
                stamp = decoded.header.stamp.sec + 1e-9 * decoded.header.stamp.nanosec
                states.append((at, stamp, (decoded.name, decoded.position, decoded.velocity,
                                           decoded.effort)))
            else:
                commands.append((at, decoded.data))
    return states, commands
