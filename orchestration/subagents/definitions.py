"""Agent definitions: the kinds of sub-agent a parent may spawn (a child's `subagent_type`).

Three sources: the built-in `general`; the team's own (managed by its admins, passed in by the
caller); and Markdown files with YAML front matter in the workspace's `.agents/agents/*.md`:

    ---
    name: reviewer
    description: Reviews a diff and reports problems.
    tools: [terminal, think, finish]
    max_iterations: 20
    ---
    The body: instructions appended to the child's system prompt.

Workspace files are untrusted repository content: they are read through the same walk as the
Files panel (no symbolic link, no `..`), with size and count limits, and a malformed one is a
problem in words, never an exception. A definition can only narrow a child's tools: they are
the parent's, within the policy's, within the definition's (`resolve_child`), and a workspace
file cannot take the name of a built-in or team definition.

Repository files only narrow. A workspace file never chooses a model: its `model:` is ignored
(the child runs on its parent's), and a note saying so is appended to the description the
parent's model reads and kept in `notes` for the child's system prompt (spawn.py). Its
`max_iterations` is capped at the parent's run limit (spawn.py), its tools are narrowed as
above, and a file asking for secrets or environment is refused with the reason: a child has
exactly its parent's secrets. Only the team's own definitions (team_agents.py, written by its
admins) may choose a model. A workspace description is escaped (common.untrusted), so it
opens or closes no tag in the tool listing.

Pure: no ORM, so workers and tests use it directly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from common.untrusted import escape_untrusted
from workspaces import browse
from workspaces.base import DirEntry, WorkspacePathError

Source = Literal["builtin", "workspace", "team", "acp"]

DEFINITIONS_DIR = ".agents/agents"
MAX_FILE_BYTES = 64 * 1024
MAX_FILES = 50
MAX_DESCRIPTION_CHARS = 1000
MAX_MODEL_CHARS = 200
MAX_ITERATIONS = 10_000
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
"""Fits Conversation.subagent_type (64 characters)."""
TOOL_NAME = re.compile(r"^(?:[A-Za-z0-9_.-]{1,64}|mcp__[A-Za-z0-9_-]{1,50}__\*)$")
"""A tool's name, or mcp__SERVER__* for every tool of one of the team's MCP servers."""
MCP_PREFIX = "mcp__"
SPAWNING_TOOLS = frozenset({"task", "delegate", "workflow"})
"""Tools that spawn children: a child gets them only while the depth limit allows."""
FIELDS = frozenset({"name", "description", "tools", "model", "max_iterations"})
REFUSED_FIELDS = {
    "secrets": "a repository file cannot reach secrets (a sub-agent has its parent's)",
    "env": "a repository file cannot set a sub-agent's environment or reach secrets",
}
"""Fields other agents' files use for what a repository file may never have: the file is
refused with the reason rather than run without them."""


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    name: str
    description: str
    """What the model reads when choosing a type."""
    tools: tuple[str, ...] | None
    """At most these tools (still within the parent's and the policy's); None: the parent's."""
    model: str | None
    """A model profile name; None: the parent's. Always None for a workspace file's."""
    max_iterations: int | None
    """None: the child's share of the parent's budget decides."""
    instructions: str
    """Appended to the child's system prompt."""
    source: Source
    acp_agent: str | None = None
    """An external agent's ACP profile: the child is that agent's conversation (no model,
    tools or system prompt of ours), its last message the answer (acp_types.py)."""
    path: str = ""
    """A workspace definition's file, relative to the workspace root."""
    notes: tuple[str, ...] = ()
    """What of a workspace file was ignored (its `model`), escaped, for the parent's model
    (in the description), the child's system prompt and the person reading either."""


GENERAL = AgentDefinition(
    name="general",
    description="A general-purpose agent with the parent's tools and model, for any self-"
    "contained task: give it everything it needs to know in the prompt.",
    tools=None,
    model=None,
    max_iterations=None,
    instructions="",
    source="builtin",
)
BUILTINS: tuple[AgentDefinition, ...] = (GENERAL,)


@dataclass(frozen=True, slots=True)
class Catalog:
    """Definitions by name, in order, and what was wrong with the ones left out."""

    definitions: tuple[AgentDefinition, ...] = ()
    problems: tuple[str, ...] = ()

    def get(self, name: str) -> AgentDefinition | None:
        return next((d for d in self.definitions if d.name == name), None)

    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.definitions)


class DefinitionError(ValueError):
    """Why a definition file was refused, in words."""


# --- parsing one file -------------------------------------------------------------------------


def _split(text: str) -> tuple[str, str]:
    """The front matter and the body of a file that starts with a `---` line."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise DefinitionError("it must start with a '---' line opening the YAML front matter")
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    raise DefinitionError("its YAML front matter has no closing '---' line")


def _text(meta: dict[str, Any], key: str, top: int, *, required: bool) -> str | None:
    value = meta.get(key)
    if value is None:
        if required:
            raise DefinitionError(f"'{key}' is required")
        return None
    # Type names only in messages: a value may be a huge structure built from YAML aliases.
    if not isinstance(value, str):
        raise DefinitionError(f"'{key}' must be text, not {type(value).__name__}")
    value = value.strip()
    if required and not value:
        raise DefinitionError(f"'{key}' must not be empty")
    if len(value) > top:
        raise DefinitionError(f"'{key}' is longer than {top} characters")
    return value or None


def _tools(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):  # "terminal, think", as other agents' files write it
        value = [v for v in re.split(r"[\s,]+", value) if v]
    if not isinstance(value, list):
        raise DefinitionError(f"'tools' must be a list of tool names, not {type(value).__name__}")
    bad = [i for i, v in enumerate(value) if not isinstance(v, str) or not TOOL_NAME.fullmatch(v)]
    if bad:
        raise DefinitionError(f"'tools' entry {bad[0] + 1} is not a tool name")
    return tuple(dict.fromkeys(value))


def _iterations(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ITERATIONS:
        raise DefinitionError(f"'max_iterations' must be a whole number from 1 to {MAX_ITERATIONS}")
    return value


def parse_definition(text: str, *, source: Source = "workspace") -> AgentDefinition:
    """One definition from a Markdown file's text; DefinitionError says what is wrong."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise DefinitionError(f"it is larger than {MAX_FILE_BYTES // 1024} KB")
    head, body = _split(text)
    try:
        meta = yaml.safe_load(head)
    except yaml.YAMLError as exc:
        # The front matter starts on the file's second line.
        mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        why = f": {str(problem)[:100]}" if problem else ""
        raise DefinitionError(f"its front matter is not valid YAML{where}{why}") from None
    except RecursionError:  # deeply nested brackets
        raise DefinitionError("its front matter is nested too deeply") from None
    if not isinstance(meta, dict):
        raise DefinitionError("its front matter must be a mapping of fields (name: ...)")
    refused = next((k for k in REFUSED_FIELDS if k in meta), None)
    if source == "workspace" and refused is not None:
        raise DefinitionError(f"'{refused}' is not allowed: {REFUSED_FIELDS[refused]}")
    unknown = sorted(str(k)[:40] for k in meta if k not in FIELDS)
    if unknown:
        raise DefinitionError(
            f"unknown fields {', '.join(map(repr, unknown))} (known: {', '.join(sorted(FIELDS))})"
        )
    name = _text(meta, "name", 64, required=True)
    if not NAME.fullmatch(name or ""):
        raise DefinitionError(
            "'name' must be 1 to 64 lowercase letters, digits, '-' or '_', starting with a "
            "letter or digit"
        )
    definition = AgentDefinition(
        name=name,
        description=_text(meta, "description", MAX_DESCRIPTION_CHARS, required=True) or "",
        tools=_tools(meta.get("tools")),
        model=_text(meta, "model", MAX_MODEL_CHARS, required=False),
        max_iterations=_iterations(meta.get("max_iterations")),
        instructions=body.strip(),
        source=source,
    )
    return _narrowed(definition) if source == "workspace" else definition


def _narrowed(definition: AgentDefinition) -> AgentDefinition:
    """A workspace file's definition as it may take effect: no model of its own (a note says
    so) and a description that opens or closes no tag."""
    notes: tuple[str, ...] = ()
    if definition.model is not None:
        notes = (
            f"its model {escape_untrusted(repr(definition.model))} is ignored: a repository "
            "file cannot choose a model, so this sub-agent runs on its parent's",
        )
    description = escape_untrusted(definition.description)
    if notes:
        description += f" (Note: {'; '.join(notes)}.)"
    return replace(definition, model=None, description=description, notes=notes)


# --- a workspace's files ----------------------------------------------------------------------


def workspace_definitions(root: Path) -> Catalog:
    """The definitions in `root/.agents/agents/*.md`, by file name, and a problem for each file
    left out. Links are never followed (workspaces.browse), so a file cannot point outside."""
    try:
        entries = browse.list_files(root, DEFINITIONS_DIR)
    except (FileNotFoundError, NotADirectoryError):
        return Catalog()
    except (WorkspacePathError, OSError) as exc:
        return Catalog(problems=(f"{DEFINITIONS_DIR}: not read: {exc}",))
    files = sorted((e for e in entries if e.name.endswith(".md")), key=lambda e: e.name)
    problems: list[str] = []
    if len(files) > MAX_FILES:
        problems.append(
            f"{DEFINITIONS_DIR}: {len(files)} files; only the first {MAX_FILES} by name are read"
        )
        files = files[:MAX_FILES]
    found: dict[str, tuple[AgentDefinition, str]] = {}
    for entry in files:
        shown = f"{DEFINITIONS_DIR}/{entry.name}"
        try:
            definition = _read(root, shown, entry)
        except DefinitionError as exc:
            problems.append(f"{shown}: {exc}")
            continue
        if definition.name in found:
            problems.append(
                f"{shown}: defines {definition.name!r} again (already in "
                f"{found[definition.name][1]})"
            )
            continue
        found[definition.name] = (definition, shown)
    return Catalog(tuple(d for d, _ in found.values()), tuple(problems))


def _read(root: Path, shown: str, entry: DirEntry) -> AgentDefinition:
    if entry.kind == "symlink":
        raise DefinitionError("it is a symbolic link; links are not followed")
    if entry.kind != "file":
        raise DefinitionError("it is not a regular file")
    if entry.size is not None and entry.size > MAX_FILE_BYTES:
        raise DefinitionError(f"it is larger than {MAX_FILE_BYTES // 1024} KB")
    try:
        view = browse.read_file(root, shown)
    except (WorkspacePathError, OSError) as exc:
        raise DefinitionError(f"not read: {exc}") from None
    if view.text is None:  # binary, or grown past the browser's own limit since the listing
        raise DefinitionError(f"not read: {view.summary}")
    return replace(parse_definition(view.text, source="workspace"), path=shown)


# --- what a parent may spawn ------------------------------------------------------------------


def available_definitions(
    *, team: Iterable[AgentDefinition] = (), workspace_root: Path | None = None
) -> Catalog:
    """The built-in definitions, then the team's, then the workspace's. A later one never
    replaces an earlier one of the same name: a repository's file cannot redefine `general`
    or a definition its team's admins wrote."""
    merged: dict[str, AgentDefinition] = {d.name: d for d in BUILTINS}
    problems: list[str] = []
    workspace = workspace_definitions(workspace_root) if workspace_root is not None else Catalog()
    problems.extend(workspace.problems)
    for definition in (*team, *workspace.definitions):
        taken = merged.get(definition.name)
        if taken is not None:
            owner = "built-in" if taken.source == "builtin" else f"{taken.source}'s"
            problems.append(
                f"{definition.source} definition {definition.name!r} ignored: the {owner} "
                f"{definition.name!r} keeps the name"
            )
            continue
        merged[definition.name] = definition
    return Catalog(tuple(merged.values()), tuple(problems))


def mcp_allowed(definition: AgentDefinition, name: str) -> bool:
    """Whether a child of this definition may have the MCP tool `name` (mcp__SERVER__TOOL):
    every one when it lists no tools, else those it names, one by one or by server."""
    if definition.tools is None:
        return True
    server = name.removeprefix(MCP_PREFIX).partition("__")[0]  # a server name holds no "__"
    return name in definition.tools or f"{MCP_PREFIX}{server}__*" in definition.tools


def resolve_child(
    parent_tools: Iterable[str],
    policy_tools: Iterable[str] | None,
    definition: AgentDefinition,
    *,
    depth: int,
    max_depth: int | None,
) -> tuple[str, ...]:
    """A child's tools: the parent's, kept only where the policy (None: all) and the
    definition (None: all) allow them too, in the parent's order. `depth` is the child's own
    (1 for a top-level conversation's child); it gets the spawning tools (task, delegate,
    workflow) only while `depth < max_depth` (None: no limit; 0 forbids sub-agents), so its
    own children would still be within the limit."""
    if depth < 1:
        raise ValueError("a child's depth is at least 1")
    policy = None if policy_tools is None else frozenset(policy_tools)
    wanted = None if definition.tools is None else frozenset(definition.tools)
    may_spawn = max_depth is None or depth < max_depth
    return tuple(
        name
        for name in dict.fromkeys(parent_tools)
        if (policy is None or name in policy)
        and (wanted is None or name in wanted)
        and (may_spawn or name not in SPAWNING_TOOLS)
    )
