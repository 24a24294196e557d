"""How to run Codex's ACP adapter as `make acp-agents` installs it into .acp-agents/:
@zed-industries/codex-acp (pinned in tests/acp_bridge/npm/package-lock.json), whose native
binary comes in the platform package @zed-industries/codex-acp-linux-x64 of the same lock. We
run that binary directly (the package's bin is a node script that only finds and execs it).

Its model is whatever `-c` config overrides name, no config file needed: a provider "fake" at
`base_url` (tests/acp_bridge/fake_openai_responses.py on 127.0.0.1) speaking the Responses API
over plain HTTP streams, with no retries (a failing fake fails the turn at once). It asks before
every command that is not known to be harmless (approval "untrusted") and runs commands
without a sandbox of its own: ours (bwrap) is the sandbox, and Codex's would need namespaces
ours does not give it. The provider's key (its env_key, OPENAI_API_KEY) is a dummy: the fake
checks none, and with a key there is no login to do.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.acp_bridge.fake_openai_responses import MODEL
from tests.acp_bridge.real_agent import (
    INSTALL_DIR,
    AgentCommand,
    AgentNotInstalled,
    site_profile,
)

NATIVE = INSTALL_DIR / "node_modules" / "@zed-industries" / "codex-acp-linux-x64" / "bin"
NATIVE_BINARY = NATIVE / "codex-acp"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def _toml(value: object) -> str:
    """A TOML value for a `-c key=value` override (JSON's strings, numbers and booleans are
    TOML's)."""
    return json.dumps(value)


def codex_config(base_url: str) -> dict[str, object]:
    return {
        "model": MODEL,
        "model_provider": "fake",
        "model_providers.fake.name": "fake",
        "model_providers.fake.base_url": base_url,
        "model_providers.fake.env_key": "OPENAI_API_KEY",
        "model_providers.fake.wire_api": "responses",
        "model_providers.fake.request_max_retries": 0,
        "model_providers.fake.stream_max_retries": 0,
        "model_providers.fake.supports_websockets": False,
        "approval_policy": "untrusted",
        "sandbox_mode": "danger-full-access",
        "check_for_update_on_startup": False,
        "analytics.enabled": False,
        "feedback.enabled": False,
    }


def codex_agent(base_url: str) -> AgentCommand:
    """Codex's ACP adapter talking to the Responses API at `base_url` (ending in /v1)."""
    if not NATIVE_BINARY.exists():
        raise AgentNotInstalled(f"{NATIVE_BINARY} is missing: run `make acp-agents` first")
    args: list[str] = []
    for key, value in codex_config(base_url).items():
        args += ["-c", f"{key}={_toml(value)}"]
    env = {"PATH": SYSTEM_PATH, "OPENAI_API_KEY": "dummy", "NO_BROWSER": "1"}
    return AgentCommand(
        command=str(Path(os.path.realpath(NATIVE_BINARY))),
        args=tuple(args),
        env=env,
        readonly=(Path(os.path.realpath(NATIVE)),),
    )


def codex_profile(base_url: str, **extra: object) -> dict[str, object]:
    return site_profile(codex_agent(base_url), **extra)
