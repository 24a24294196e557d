"""How to run the real third-party ACP agent `make acp-agents` installs into .acp-agents/: the
Claude Code ACP adapter (@agentclientprotocol/claude-agent-acp, pinned in
tests/acp_bridge/npm/package-lock.json), which drives Claude Code's native CLI (the platform
package @anthropic-ai/claude-agent-sdk-linux-x64 of the same lock) against whatever
ANTHROPIC_BASE_URL names: in the tests, tests/acp_bridge/fake_anthropic.py on 127.0.0.1.

`claude_agent(base_url)` gives the command line, the environment and the paths the sandbox must
show read-only for it. A missing install raises AgentNotInstalled, naming the make target, so a
test fails loudly instead of skipping.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INSTALL_DIR = REPO / ".acp-agents"
ADAPTER_PACKAGE = "@agentclientprotocol/claude-agent-acp"
ADAPTER_ENTRY = INSTALL_DIR / "node_modules" / ADAPTER_PACKAGE / "dist" / "index.js"
NATIVE_CLI = (
    INSTALL_DIR / "node_modules" / "@anthropic-ai" / "claude-agent-sdk-linux-x64" / "claude"
)
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
ALREADY_VISIBLE = (Path("/usr"), Path("/bin"), Path("/lib"), Path("/lib64"))
"""Mounted by the sandbox anyway (workspaces/sandbox.py): no need to name them again."""


class AgentNotInstalled(RuntimeError):
    pass


@dataclass(frozen=True)
class AgentCommand:
    command: str
    args: tuple[str, ...]
    env: dict[str, str]
    readonly: tuple[Path, ...]


def node_binary() -> Path:
    found = shutil.which("node", path=SYSTEM_PATH) or shutil.which("node")
    if not found:
        raise AgentNotInstalled("no node on PATH: run `make acp-agents` (installs nodejs)")
    return Path(os.path.realpath(found))


def _visible_anyway(path: Path) -> bool:
    return any(path == root or root in path.parents for root in ALREADY_VISIBLE)


def claude_agent(base_url: str) -> AgentCommand:
    """The Claude Code ACP adapter run by node, talking to the model server at `base_url`."""
    for path in (ADAPTER_ENTRY, NATIVE_CLI):
        if not path.exists():
            raise AgentNotInstalled(f"{path} is missing: run `make acp-agents` first")
    node = node_binary()
    install = Path(os.path.realpath(INSTALL_DIR))
    readonly = [install]
    # Node's own installation (its binary and whatever lies next to it), unless under /usr.
    node_home = node.parent.parent
    if not _visible_anyway(node):
        readonly.append(node_home)
    env = {
        "PATH": SYSTEM_PATH if _visible_anyway(node) else f"{node.parent}:{SYSTEM_PATH}",
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "dummy",
        # The adapter finds the CLI itself; named here so nothing is resolved elsewhere.
        "CLAUDE_CODE_EXECUTABLE": str(Path(os.path.realpath(NATIVE_CLI))),
        # No calls beyond the model's: no telemetry, error reports, update checks, feedback.
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
        "NO_BROWSER": "1",
    }
    return AgentCommand(
        command=str(node),
        args=(str(Path(os.path.realpath(ADAPTER_ENTRY))),),
        env=env,
        readonly=tuple(readonly),
    )


def site_profile(agent: AgentCommand, **extra: object) -> dict[str, object]:
    """A CANVAS_ACP_AGENTS entry running `agent` with the host's network (its fake model
    listens on the host's loopback), which the site and the team's policy must allow."""
    return {
        "command": agent.command,
        "args": list(agent.args),
        "env": agent.env,
        "readonly": [str(path) for path in agent.readonly],
        "network": "host",
        "turn_timeout_seconds": 90,
        **extra,
    }
