"""How to run the Gemini CLI as an ACP agent as `make acp-agents` installs it into .acp-agents/:
@google/gemini-cli (pinned in tests/acp_bridge/npm/package-lock.json), one bundled node script
run as `gemini.js --acp`.

Its model is the Gemini API at GOOGLE_GEMINI_BASE_URL (tests/acp_bridge/fake_gemini.py on
127.0.0.1), with a dummy GEMINI_API_KEY. What it would otherwise ask a person for or fetch on
its own comes from gemini_settings.json, named as the CLI's system settings (the file a site
puts at /etc/gemini-cli/settings.json): API-key auth, one model (no router), no usage
statistics, telemetry or update checks. GEMINI_CLI_NO_RELAUNCH keeps it one process (it
otherwise re-spawns itself to raise node's heap limit: a second node start per turn).
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.acp_bridge.real_agent import (
    INSTALL_DIR,
    SYSTEM_PATH,
    AgentCommand,
    AgentNotInstalled,
    _visible_anyway,
    node_binary,
    site_profile,
)

ENTRY = INSTALL_DIR / "node_modules" / "@google" / "gemini-cli" / "bundle" / "gemini.js"
SETTINGS = Path(__file__).with_name("gemini_settings.json")


def gemini_agent(base_url: str) -> AgentCommand:
    """The Gemini CLI in ACP mode, run by node, talking to the Gemini API at `base_url`."""
    if not ENTRY.exists():
        raise AgentNotInstalled(f"{ENTRY} is missing: run `make acp-agents` first")
    node = node_binary()
    readonly = [Path(os.path.realpath(INSTALL_DIR)), SETTINGS]
    if not _visible_anyway(node):
        readonly.append(node.parent.parent)
    env = {
        "PATH": SYSTEM_PATH if _visible_anyway(node) else f"{node.parent}:{SYSTEM_PATH}",
        "GOOGLE_GEMINI_BASE_URL": base_url,
        "GEMINI_API_KEY": "dummy",
        "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(SETTINGS),
        "GEMINI_CLI_NO_RELAUNCH": "1",
        "NO_BROWSER": "1",
    }
    return AgentCommand(
        command=str(node),
        args=(str(Path(os.path.realpath(ENTRY))), "--acp"),
        env=env,
        readonly=tuple(readonly),
    )


def gemini_profile(base_url: str, **extra: object) -> dict[str, object]:
    """A CANVAS_ACP_AGENTS entry for it (JSON-ready: a worker subprocess reads it from its
    environment)."""
    return site_profile(gemini_agent(base_url), **extra)
