"""The terminal tool: one shell command in the conversation's workspace."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from orchestration.tools.base import ToolArgs, ToolContext, ToolResult

DEFAULT_TIMEOUT_SECONDS = 120.0
MAX_TIMEOUT_SECONDS = 1800.0


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
        "- Long output is cut in the middle; pipe through `head`, `tail` or `grep` to see what "
        "matters.\n"
        "- A command that outlives its timeout is killed with all its child processes and only "
        "the output so far is returned. To keep a server running, start it in the background "
        "with its output sent to a file: `python -m http.server 8000 > server.log 2>&1 &`."
    )
    args_model: ClassVar[type[ToolArgs]] = TerminalArgs
    read_only: ClassVar[bool] = False

    def run(self, args: TerminalArgs, ctx: ToolContext) -> ToolResult:
        if not args.command.strip():
            return ToolResult(content="The command is empty; nothing was run.", is_error=True)
        timeout = args.timeout if args.timeout is not None else DEFAULT_TIMEOUT_SECONDS
        timeout = min(timeout, MAX_TIMEOUT_SECONDS)
        result = ctx.workspace.run(args.command, timeout=timeout)
        output = result.output
        if output and not output.endswith("\n"):
            output += "\n"
        if result.timed_out:
            footer = f"[command timed out after {timeout:g}s; output above is partial]"
            return ToolResult(content=output + footer, is_error=True, exit_code=None)
        footer = f"[exit code: {result.exit_code}]"
        return ToolResult(content=output + footer, exit_code=result.exit_code)
