"""The ``ctxwise`` command line. It uses only the public API.

One module per command group: :mod:`~ctxwise.cli.assemble` (``assemble``,
``inspect``), :mod:`~ctxwise.cli.clear`, :mod:`~ctxwise.cli.compact`,
:mod:`~ctxwise.cli.routing` (``route``, ``router``, ``eval routing``, ``data``),
:mod:`~ctxwise.cli.evals` (the ``eval`` group, ``eval memory``),
:mod:`~ctxwise.cli.simulate`, :mod:`~ctxwise.cli.tools` (``tools search``,
``tools budget``, ``eval tools``), :mod:`~ctxwise.cli.handoff` (``handoff
select``, ``eval handoff``), :mod:`~ctxwise.cli.relay` (``relay run``, ``relay
resume``, ``eval relay``, ``data relay``: long jobs over fresh calls),
:mod:`~ctxwise.cli.hook` (``hook subagent-context``, ``hook subagent-start``,
``hook pre-compact``, ``hook session-start``, ``hook install``: Claude Code
hooks), :mod:`~ctxwise.cli.mcp` (``mcp``: the MCP server over stdio) and
:mod:`~ctxwise.cli.engine` (``replay``, ``trace``),
:mod:`~ctxwise.cli.explain` (``explain``); ``demo`` is registered from
``ctxwise.cli.demo``.

Every error ctxwise raises on purpose (bad spec, unknown format, truncated
JSONL, budget of 0, binary file, …) prints one line on stderr and exits with
code 2; nothing is printed on stdout in that case. The exception is a hook
event run by Claude Code (``ctxwise hook subagent-context`` …): it never blocks
Claude Code, so even a bad option on its command line is logged and exits 0.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from ctxwise import __version__
from ctxwise.cli.assemble import assemble_cmd, inspect_cmd
from ctxwise.cli.clear import clear_cmd
from ctxwise.cli.compact import compact_cmd
from ctxwise.cli.demo import demo_cmd
from ctxwise.cli.engine import replay_cmd, trace_cmd
from ctxwise.cli.evals import eval_app
from ctxwise.cli.explain import explain_cmd
from ctxwise.cli.handoff import eval_handoff_cmd, handoff_app
from ctxwise.cli.hook import hook_app, is_hook_run, log_bad_command_line
from ctxwise.cli.inspect_ui import inspect_ui_cmd
from ctxwise.cli.mcp import mcp_cmd
from ctxwise.cli.relay import data_relay_cmd, eval_relay_cmd, relay_app
from ctxwise.cli.routing import data_app, eval_routing_cmd, route_cmd, router_app
from ctxwise.cli.serve import keys_app, serve_cmd
from ctxwise.cli.simulate import simulate_app
from ctxwise.cli.tools import eval_tools_cmd, tools_app

__all__ = ["app", "main"]


def _show_flags_as_flags(command: Any) -> None:
    """Give every flag of ``command`` and of the commands under it (``--json``,
    ``--repair``, ``--help``, ``--project/--user``) an empty metavar, so ``--help``
    lists it as a flag. typer 0.29 prints the parameter's type beside every option,
    a flag too (``--json <bool>``), which reads as if it took a value."""
    params = list(command.params)
    help_option = command.get_help_option(command.context_class(command))
    if help_option is not None:
        params.append(help_option)
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _show_flags_as_flags(sub)


class _Root(TyperGroup):
    """The ``ctxwise`` group: typer builds it, commands and all, on every run."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _show_flags_as_flags(self)


app = typer.Typer(
    name="ctxwise",
    cls=_Root,
    help="Decide what enters an LLM's context window, and show why.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"ctxwise {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the ctxwise version and exit.",
        ),
    ] = False,
) -> None:
    pass


app.command("assemble")(assemble_cmd)
app.command("inspect")(inspect_cmd)
app.command("demo")(demo_cmd)
app.command("clear")(clear_cmd)
app.command("compact")(compact_cmd)
app.command("route")(route_cmd)
app.command("replay")(replay_cmd)
app.command("trace")(trace_cmd)
app.command("explain")(explain_cmd)
app.command("mcp")(mcp_cmd)
app.command("serve")(serve_cmd)
app.command("inspect-ui")(inspect_ui_cmd)
app.add_typer(router_app, name="router")
app.add_typer(eval_app, name="eval")
app.add_typer(data_app, name="data")
app.add_typer(simulate_app, name="simulate")
app.add_typer(tools_app, name="tools")
app.add_typer(handoff_app, name="handoff")
app.add_typer(relay_app, name="relay")
app.add_typer(hook_app, name="hook")
app.add_typer(keys_app, name="keys")
eval_app.command("routing")(eval_routing_cmd)
eval_app.command("tools")(eval_tools_cmd)
eval_app.command("handoff")(eval_handoff_cmd)
eval_app.command("relay")(eval_relay_cmd)
data_app.command("relay")(data_relay_cmd)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the app, mapping usage errors to one line and exit code 2."""
    # Transcripts can hold lone surrogates (a truncated emoji); print them escaped
    # rather than fail half-way through a report.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    args = list(argv) if argv is not None else sys.argv[1:]
    if not args:
        args = ["--help"]
    try:
        rv = app(args=args, prog_name="ctxwise", standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("ctxwise: aborted", err=True)
        sys.exit(1)
    except Exception as exc:
        # Usage errors of the CLI parser (an unknown option, a missing argument, a
        # value of the wrong type). Typer has shipped these as click's exceptions
        # and, since 0.29, as its own vendored copies: match on their shape.
        format_message = getattr(exc, "format_message", None)
        if callable(format_message) and hasattr(exc, "exit_code"):
            if is_hook_run(args):
                log_bad_command_line(args, format_message())
                sys.exit(0)
            typer.echo(f"ctxwise: error: {format_message()}", err=True)
            sys.exit(2)
        raise
    if isinstance(rv, int) and rv:
        sys.exit(rv)
