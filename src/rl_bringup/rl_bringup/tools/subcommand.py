"""What ``rl-bringup`` and each of its subcommands share: errors, exit codes, ``key:=value``
parsing, the handler type, and :func:`add_tool`, the one way a tool registers itself.

This module is a leaf of the command line: it imports neither :mod:`rl_bringup.cli` nor any
tool, so ``cli`` and the tools both import it at their top and there is no import cycle
(``tests/unit/test_cli_imports.py`` checks that).

A subcommand is an argparse subparser whose ``handler`` default takes the parsed namespace and
the leftover ``key:=value`` tokens and returns the exit code. :func:`dispatch` calls it and turns
a :class:`ToolError` (or a :class:`rl_bringup.plan.deployment.PlanError`) into one
``rl-bringup COMMAND: error: ...`` line on stderr and the error's exit code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rl_bringup.plan.deployment import PlanError

PROGRAM = "rl-bringup"
#: The input exists but cannot be used: a corrupt checkpoint, a failed export, an unwritable file,
#: executables that are not installed.
EXIT_FAILURE = 1
#: Bad input: unknown keys, malformed values, paths that do not exist.
EXIT_USAGE = 2

#: ``handler(parsed namespace, leftover key:=value tokens) -> exit code``.
Handler = Callable[[argparse.Namespace, list[str]], int]
#: ``run(values by key) -> exit code``: a tool's body, called by the handler :func:`add_tool` makes.
ToolRun = Callable[[dict[str, str]], int]
SubparsersAction = Any  # argparse._SubParsersAction is private; typed loosely on purpose


class ToolError(Exception):
    """A subcommand cannot do its job; the message says why, ``exit_code`` what the shell sees."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class CliError(ToolError):
    """Bad command-line input (exit code 2); the message names the valid choices."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_USAGE)


# --- key:=value arguments -------------------------------------------------------------------


def parse_key_values(
    tokens: Sequence[str], valid_keys: Sequence[str], *, positional_mode: bool
) -> tuple[str | None, dict[str, str]]:
    """Split ``[MODE] key:=value ...`` tokens.

    :param tokens: the tokens after the subcommand.
    :param valid_keys: keys accepted on the left of ``:=``.
    :param positional_mode: accept one bare token (or ``mode:=X``) as the mode.
    :return: the mode (``None`` when not given) and the values by key.
    :raises CliError: on unknown keys, repeated keys, options or extra bare tokens.
    """
    mode: str | None = None
    values: dict[str, str] = {}
    keys_text = ", ".join(valid_keys)
    for token in tokens:
        if token.startswith("-"):
            raise CliError(
                f"unknown option {token!r}; arguments are key:=value with keys {keys_text}"
            )
        if ":=" not in token:
            if positional_mode and mode is None:
                mode = token
                continue
            raise CliError(
                f"unexpected argument {token!r}; arguments are key:=value with keys {keys_text}"
            )
        key, value = token.split(":=", 1)
        if positional_mode and key == "mode":
            if mode is not None:
                raise CliError(f"the mode is given twice ({mode!r} and {value!r})")
            mode = value
            continue
        if key not in valid_keys:
            raise CliError(f"unknown argument {key!r} (in {token!r}); valid keys: {keys_text}")
        if key in values:
            raise CliError(f"argument {key!r} is given twice")
        values[key] = value
    return mode, values


def parse_tokens(tokens: Sequence[str], keys: Sequence[str]) -> dict[str, str]:
    """``key:=value`` tokens of a tool (no positional mode).

    :raises CliError: on unknown or repeated keys and bare tokens.
    """
    _, values = parse_key_values(tokens, keys, positional_mode=False)
    return values


def int_value(values: Mapping[str, str], key: str, default: int, low: int,
              high: int | None = None) -> int:
    """The integer ``key:=N`` (``default`` when absent), checked against ``[low, high]``.

    :raises ToolError: (exit 2) when the value is not an integer in range.
    """
    text = values.get(key)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ToolError(f"{key}:= must be an integer, got {text!r}") from None
    if value < low or (high is not None and value > high):
        bounds = f"{low}..{high}" if high is not None else f">= {low}"
        raise ToolError(f"{key}:= must be {bounds}, got {value}")
    return value


def bool_value(values: Mapping[str, str], key: str, default: bool) -> bool:
    """The boolean ``key:=true|false`` (also 1/0, yes/no, on/off).

    :raises ToolError: (exit 2) for any other text.
    """
    text = values.get(key)
    if text is None:
        return default
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ToolError(f"{key}:= must be true or false, got {text!r}")


def parse_seconds(key: str, text: str, *, minimum: float = 0.0, allow_equal: bool = False) -> float:
    """A duration in seconds, greater than ``minimum`` (or equal, with ``allow_equal``).

    :raises ToolError: (exit 2) when it is not a number in range.
    """
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    in_range = value >= minimum if allow_equal else value > minimum
    if value != value or value == float("inf") or not in_range:  # NaN, inf, out of range
        bound = f">= {minimum:g}" if allow_equal else f"> {minimum:g}"
        raise ToolError(f"{key}:= must be a number of seconds {bound}, got {text!r}")
    return value


# --- registering and running subcommands ----------------------------------------------------


def add_subcommand(subparsers: SubparsersAction, name: str, handler: Handler, *, help: str,
                   description: str, metavar: str = "key:=value") -> argparse.ArgumentParser:
    """Add subcommand ``name`` whose positional tokens (``metavar``) go to ``handler``.

    :return: the subparser, for options of its own (``--format``).
    """
    parser = subparsers.add_parser(name, help=help, description=description)
    parser.add_argument("arguments", nargs="*", metavar=metavar)
    parser.set_defaults(handler=handler)
    return parser


def add_tool(subparsers: SubparsersAction, name: str, run: ToolRun, *, keys: Sequence[str],
             help: str, description: str, takes_mode: bool = False) -> argparse.ArgumentParser:
    """Add the ``key:=value`` tool ``name``: ``run`` gets the values of ``keys`` by key.

    :param run: the tool's body; it raises :class:`ToolError` for what the user must fix.
    :param takes_mode: accept a deployment MODE as a bare first token (or ``mode:=X``), as
        ``launch`` does; ``run`` finds it under ``"mode"``.
    :return: the subparser.
    """

    def handler(arguments: argparse.Namespace, tokens: list[str]) -> int:
        if not takes_mode:
            return run(parse_tokens(tokens, keys))
        mode, values = parse_key_values(tokens, keys, positional_mode=True)
        return run({**values, "mode": mode} if mode is not None else values)

    return add_subcommand(subparsers, name, handler, help=help, description=description,
                          metavar="MODE|key:=value" if takes_mode else "key:=value")


def dispatch(arguments: argparse.Namespace, tokens: list[str]) -> int:
    """Run the chosen subcommand's handler; errors become a line on stderr and an exit code."""
    handler: Handler = arguments.handler
    try:
        return handler(arguments, tokens)
    except (ToolError, PlanError) as error:
        print(f"{PROGRAM} {arguments.command}: error: {error}", file=sys.stderr)
        return error.exit_code if isinstance(error, ToolError) else EXIT_USAGE


def run_parser(parser: argparse.ArgumentParser, argv: Sequence[str]) -> int:
    """Parse ``argv`` with a parser of subcommands and :func:`dispatch`; returns the exit code."""
    # parse_known_args lets key:=value tokens and options interleave: argparse would otherwise
    # refuse positionals that follow an option; leftovers are checked by parse_key_values.
    arguments, leftovers = parser.parse_known_args(list(argv))
    return dispatch(arguments, list(getattr(arguments, "arguments", [])) + leftovers)


def new_parser(description: str | None = None) -> tuple[argparse.ArgumentParser, SubparsersAction]:
    """An ``rl-bringup`` parser and its (required) subcommand group."""
    parser = argparse.ArgumentParser(prog=PROGRAM, description=description)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    return parser, subparsers


def standalone_main(register: Callable[[SubparsersAction], object],
                    argv: Sequence[str] | None = None) -> int:
    """Run one tool outside ``rl-bringup``
    (``python -m rl_bringup.tools.operate.status once:=true``).

    The parser holds only that tool's subcommand and dispatches as ``rl-bringup`` does, so both
    paths accept the same arguments and give the same exit codes.
    """
    parser, subparsers = new_parser()
    register(subparsers)
    command = next(iter(subparsers.choices))
    return run_parser(parser, [command, *(sys.argv[1:] if argv is None else argv)])
