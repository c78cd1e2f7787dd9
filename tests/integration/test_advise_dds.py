"""``rl-bringup advise``'s DDS round trip: rclpy ping-pong in this process, on loopback."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

import pytest

from rl_bringup.tools.deploy import advise

pytestmark = pytest.mark.integration

#: A loopback round trip takes well under a millisecond; this bound only catches nonsense.
MAX_ROUND_TRIP_S = 0.5


def test_the_round_trip_is_measured_and_the_discovery_range_restored() -> None:
    previous = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE")
    round_trip_s = advise.measure_dds_round_trip(samples=20)
    assert 0 < round_trip_s < MAX_ROUND_TRIP_S
    assert os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") == previous


def test_advise_reports_the_round_trip(run_cli: Callable[..., tuple[int, str, str]]) -> None:
    code, out, err = run_cli("advise", "samples:=5")
    assert code == 0, err
    line = re.search(r"^DDS round trip\s+([0-9.]+) (µs|ms) \(median of 5 ping-pongs", out,
                     re.MULTILINE)
    assert line, out
    value_s = float(line.group(1)) * {"µs": 1e-6, "ms": 1e-3}[line.group(2)]
    assert 0 < value_s < MAX_ROUND_TRIP_S
