"""``python -m rl_bringup.tools.operate.doctor key:=value ...``: the doctor without the CLI
wiring."""

import sys

from rl_bringup.tools.operate.doctor import register
from rl_bringup.tools.subcommand import standalone_main

sys.exit(standalone_main(register))
