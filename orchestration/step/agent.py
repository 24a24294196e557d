"""An agent is frozen configuration: which model, which tools, what it is told, its limits."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from teams.vocabulary import ConfirmationMode, ConfirmationModeName, RiskLevel, RiskName

DEFAULT_TOOLS: tuple[str, ...] = (
    "terminal", "file_editor", "think", "finish", "task", "delegate", "workflow", "invoke_skill",
)  # fmt: skip

SYSTEM_PROMPT = """\
You are a software agent working for a team through a control plane. You act only through \
the tools you are given, inside the conversation's workspace directory.

How to work:
- Explore before you change things: list files, read what is relevant.
- Make small, verifiable steps. After editing code, run it or its tests.
- The terminal keeps its current directory and exported variables between commands.
- If a tool returns an error, read it carefully and correct your call instead of repeating it.
- Tools that change things take a `security_risk` of LOW, MEDIUM or HIGH. Estimate it honestly:
  LOW for reads and small reversible edits in the workspace, MEDIUM for changes that are hard to
  undo, HIGH for anything destructive, privileged (sudo), or that sends data or runs code from
  the network. Risky actions may wait for a person's approval; if one is rejected, follow the
  reason you are given and choose a safer way.
- When the task is done, call `finish` with a short summary of what you did and what you found.
  If you cannot do it, call `finish` and explain why.
"""


class AgentConfig(BaseModel):
    """Stored as JSON on the conversation row (`agent_config`): every field needs a default so
    rows written before it existed still load, and must stay JSON-serialisable."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    """Model profile name."""
    tools: tuple[str, ...] = DEFAULT_TOOLS
    """Already filtered by the team policy at creation; the runner re-checks every slice."""
    max_iterations: int = Field(default=100, ge=1, le=10_000)
    system_prompt: str = SYSTEM_PROMPT
    confirmation_mode: ConfirmationModeName = ConfirmationMode.RISKY.value
    risk_threshold: RiskName = RiskLevel.HIGH.name
    max_cost_usd: float | None = Field(default=None, ge=0)
    """Per-run model spend limit in dollars; None: only the team policy's, if any."""
    depth: int = Field(default=0, ge=0)
    """0 for a conversation people started; a sub-agent's is its parent's plus one."""
    mcp_tools: tuple[str, ...] | None = None
    """The team's MCP tools (mcp__SERVER__TOOL) it may have; None: all the team offers it.
    A sub-agent's: those its parent had when it spawned it, narrowed by its definition."""
