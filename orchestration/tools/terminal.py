"""The terminal tool: one shell command in the conversation's workspace."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import ClassVar

from pydantic import Field

from orchestration.tools.base import ToolArgs, ToolContext, ToolResult

DEFAULT_TIMEOUT_SECONDS = 120.0
MAX_TIMEOUT_SECONDS = 1800.0

_REFERENCE = re.compile(r"\$\{?[#!]?([A-Z_][A-Z0-9_]*)")
# Names the shell, the dynamic loader or the clean base environment give a meaning: a secret
# called PATH or BASH_ENV must not change how commands run, so it is never injected.
_NEVER_INJECTED = re.compile(
    r"PATH|HOME|TERM|PAGER|GIT_PAGER|PYTHONUNBUFFERED|LANG|LC_.*|LD_.*|BASH.*|ENV|SHELLOPTS"
    r"|IFS|PS4|PWD|OLDPWD|SHLVL|CDPATH|GLOBIGNORE"
)


def referenced_secrets(command: str, secrets: Mapping[str, str]) -> dict[str, str]:
    """The secrets `command` names as `$NAME` or `${NAME...}`, and no others.

    Over-matching is harmless (a `$NAME` inside single quotes still gets the variable); the
    point is that a command which does not name a secret never has it in its environment.
    """
    names = {n for n in _REFERENCE.findall(command) if not _NEVER_INJECTED.fullmatch(n)}
    if not names:
        return {}  # without touching `secrets`: a lazy mapping stays unloaded
    return {name: secrets[name] for name in sorted(names) if name in secrets}


class TerminalArgs(ToolArgs):
    command: str = Field(
        description=(
            "The bash command to run, e.g. `ls -la` or `cd src && pytest -q`. May span several "
            "lines. Runs non-interactively with no stdin."
        )
    )
    timeout: float | None = Field(
        default=None,
        gt=0,
        le=MAX_TIMEOUT_SECONDS,
        description=(
            f"Seconds to wait before the command is killed (default {DEFAULT_TIMEOUT_SECONDS:g}, "
            f"at most {MAX_TIMEOUT_SECONDS:g}). Raise it for slow builds or test suites."
        ),
    )


class TerminalTool:
    name: ClassVar[str] = "terminal"
    description: ClassVar[str] = (
        "Run a bash command in the workspace and return its combined stdout and stderr, followed "
        "by its exit code.\n"
        "- The working directory and exported variables carry over to the next call (`cd dir`, "
        "`export NAME=value`); other shell state (aliases, functions, unexported variables) does "
        "not. The directory cannot leave the workspace; if it does, the next call starts at the "
        "workspace root.\n"
        "- Commands get no input: use non-interactive flags (`-y`, `--no-pager`, `git --no-pager`).\n"
        "- Long output is cut in the middle, and the whole of it saved in the workspace's "
        "`.agent-outputs/` (the cut names the file and its line count): read the middle from "
        "there, or pipe through `head`, `tail` or `grep` to see what matters.\n"
        "- A command that outlives its timeout is killed with all its child processes and only "
        "the output so far is returned. To keep a server running, start it in the background "
        "with its output sent to a file: `python -m http.server 8000 > server.log 2>&1 &`.\n"
        "- Team secrets are environment variables only in a command that names them (`$NAME` or "
        "`${NAME}`); their values show as <secret:NAME> in the output."
    )
    args_model: ClassVar[type[ToolArgs]] = TerminalArgs
    read_only: ClassVar[bool] = False

    def run(self, args: TerminalArgs, ctx: ToolContext) -> ToolResult:
        if not args.command.strip():
            return ToolResult(content="The command is empty; nothing was run.", is_error=True)
        timeout = args.timeout if args.timeout is not None else DEFAULT_TIMEOUT_SECONDS
        timeout = min(timeout, MAX_TIMEOUT_SECONDS)
        env = referenced_secrets(args.command, ctx.secrets)
        result = ctx.workspace.run(args.command, timeout=timeout, extra_env=env, cancel=ctx.cancel)
        output = result.output
        if output and not output.endswith("\n"):
            output += "\n"
        if result.interrupted:
            footer = "[interrupted by a person before it finished; output above is partial]"
            return ToolResult(content=output + footer, is_error=True, exit_code=None,
                              output_file=result.output_file)  # fmt: skip
        if result.timed_out:
            footer = f"[command timed out after {timeout:g}s; output above is partial]"
            return ToolResult(content=output + footer, is_error=True, exit_code=None,
                              output_file=result.output_file)  # fmt: skip
        footer = f"[exit code: {result.exit_code}]"
        return ToolResult(content=output + footer, exit_code=result.exit_code,
                          output_file=result.output_file)  # fmt: skip
