# rl_ros2: the two commands of README.
#   make run   set up (idempotent), then train the default task (cart-pole, colocated mode)
#   make test  set up (idempotent), then run the test suite
# Everything ROS-related runs on the loopback only (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST).

PYTHON_VENV := .venv/bin/python
CONFIG ?= config/cartpole.yaml
PYTEST_ARGS ?=
# Two lanes (pytest-xdist), test by test: with no xdist_group marks, loadgroup keeps each worker
# at most about two tests ahead, so the long tests spread over both (docs/testing.md).
TEST_LANES ?= -n 2 --dist loadgroup

export ROS_AUTOMATIC_DISCOVERY_RANGE ?= LOCALHOST

.PHONY: setup run bare test bench clean

setup:
	@bash scripts/setup.sh

run: setup
	.venv/bin/rl-bringup train colocated config:=$(CONFIG)

bare: setup
	$(PYTHON_VENV) -m rl_core.learning.training --config $(CONFIG)

test: setup
	$(PYTHON_VENV) -m pytest tests $(TEST_LANES) $(PYTEST_ARGS)

bench: setup
	$(PYTHON_VENV) benchmarks/throughput.py

clean:
	rm -rf build .venv
