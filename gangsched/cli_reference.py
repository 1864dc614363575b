"""The configuration reference (docs/configuration.md), written from the CLI's own options.

Generated rather than written by hand so that a flag, its environment
variable, its default and its help cannot say one thing in ``--help`` and
another in the docs; ``make docs`` writes the file and a unit test fails
when the committed copy is stale.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

import click

from gangsched.cli import main

HEADER = """\
# Configuration reference

Generated from the CLI's own options by `make docs` (`python -m
gangsched.cli_reference`); do not edit by hand. `gangsched COMMAND --help`
says the same. The chart sets `gangsched run`'s flags from its values (see
[install.md](install.md)).

Every flag of `run` can also be set by its environment variable; flags that
may be repeated take several values separated by spaces there
(`GANGSCHED_SCHEDULER_NAME="gang volcano"`).

Exit codes of every command: 0 done (for `explain`: bound or running), 1 an
error, 2 a usage error, 3 `explain` found the pod or PodGroup still waiting.
"""


def _metavar(kind: click.ParamType[Any]) -> str:
    if isinstance(kind, click.Choice):
        return "|".join(map(str, kind.choices))
    if isinstance(kind, (click.IntRange, click.FloatRange)):
        low = "" if kind.min is None else f"{kind.min}{'<' if kind.min_open else '<='}"
        high = "" if kind.max is None else f"{'<' if kind.max_open else '<='}{kind.max}"
        return f"{kind.name.upper().removesuffix(' RANGE')} {low}x{high}"
    return kind.name.upper()


def _flags(option: click.Option) -> str:
    names = ", ".join(f"`{o}`" for o in option.opts)
    if option.secondary_opts:
        names += " / " + ", ".join(f"`{o}`" for o in option.secondary_opts)
    if not option.is_flag:
        names += f" `{_metavar(option.type)}`"
    return names


def _envvars(option: click.Option) -> str:
    names = option.envvar
    if not names:
        return "-"
    listed = [names] if isinstance(names, str) else list(names)
    return ", ".join(f"`{n}`" for n in listed)


def _default(option: click.Option, context: click.Context) -> str:
    default = option.get_default(context, call=False)
    if option.is_flag and option.secondary_opts:
        return f"`{option.opts[0] if default else option.secondary_opts[0]}`"
    if option.is_flag:
        return "on" if default else "off"
    # click marks "no default" with a sentinel of its own, neither None nor a value.
    if default in (None, ()) or not isinstance(default, (str, int, float, tuple, list)):
        return "-"
    if isinstance(default, (tuple, list)):
        return ", ".join(f"`{d}`" for d in default)
    return f"`{default}`"


def _cell(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def command_reference(name: str, command: click.Command) -> str:
    context = click.Context(command, info_name=name)
    usage = " ".join(command.collect_usage_pieces(context))
    lines = [f"## `gangsched {name}`", "", f"```\ngangsched {name} {usage}\n```", ""]
    lines += [inspect.cleandoc(command.help or ""), ""]
    lines += ["| flag | environment | default | meaning |", "| --- | --- | --- | --- |"]
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden and param.name != "help":
            cells = (_flags(param), _envvars(param), _default(param, context), param.help)
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def reference() -> str:
    assert isinstance(main, click.Group)
    parts = [HEADER]
    parts += [command_reference(name, command) for name, command in main.commands.items()]
    return "\n".join(parts)


if __name__ == "__main__":
    sys.stdout.write(reference())
