"""Agent definitions: the built-in `general`, Markdown files with YAML front matter read from a
workspace as untrusted content (limits, links, every fault a problem in words), the merge of
sources without shadowing, and a child's tools only ever narrowed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestration.subagents import definitions as d
from orchestration.subagents.definitions import (
    GENERAL,
    AgentDefinition,
    DefinitionError,
    available_definitions,
    parse_definition,
    resolve_child,
    workspace_definitions,
)

REVIEWER = """\
---
name: reviewer
description: Reviews a diff.
tools: [terminal, think, finish]
model: fast
max_iterations: 20
---
Read the diff first.

Report problems as a list.
"""


def write(root: Path, name: str, text: str) -> Path:
    folder = root / ".agents" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def definition(name: str, source: str = "team", tools=None) -> AgentDefinition:
    return AgentDefinition(name, "d", tools, None, None, "", source)


# --- parsing ----------------------------------------------------------------------------------


def test_a_file_gives_every_field_and_the_body_as_instructions_but_never_a_model():
    parsed = parse_definition(REVIEWER)
    note = ("its model 'fast' is ignored: a repository file cannot choose a model, so this "
            "sub-agent runs on its parent's")  # fmt: skip
    assert parsed == AgentDefinition(
        name="reviewer", description=f"Reviews a diff. (Note: {note}.)",
        tools=("terminal", "think", "finish"), model=None, max_iterations=20,
        instructions="Read the diff first.\n\nReport problems as a list.", source="workspace",
        notes=(note,),
    )  # fmt: skip


def test_optional_fields_default_to_the_parents_and_tools_may_be_a_string():
    parsed = parse_definition("---\nname: a\ndescription: x\ntools: terminal, think\n---\n")
    assert parsed.tools == ("terminal", "think")
    bare = parse_definition("---\nname: b\ndescription: x\n---\n")
    assert (bare.tools, bare.model, bare.max_iterations, bare.instructions) == (
        None, None, None, "",
    )  # fmt: skip


def test_mcp_tools_are_named_one_by_one_or_by_server():
    parsed = parse_definition(
        "---\nname: a\ndescription: x\ntools: [think, mcp__git__log, 'mcp__files__*']\n---\n"
    )
    assert parsed.tools == ("think", "mcp__git__log", "mcp__files__*")
    allowed = {n for n in ("mcp__git__log", "mcp__git__push", "mcp__files__read",
                           "mcp__filesx__read") if d.mcp_allowed(parsed, n)}  # fmt: skip
    assert allowed == {"mcp__git__log", "mcp__files__read"}
    assert d.mcp_allowed(parse_definition("---\nname: b\ndescription: x\n---\n"), "mcp__a__b")
    with pytest.raises(DefinitionError, match="entry 1 is not a tool"):
        parse_definition("---\nname: a\ndescription: x\ntools: ['mcp__*']\n---\n")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("name: a\n", "must start with a '---' line"),
        ("---\nname: a\ndescription: x\n", "no closing '---'"),
        ("---\nname: a\ndescription: b: c\n---\n", "not valid YAML (line 3): mapping values"),
        ("---\n- a\n- b\n---\n", "must be a mapping"),
        ("---\njust text\n---\n", "must be a mapping"),
        ("---\ndescription: x\n---\n", "'name' is required"),
        ("---\nname: Bad Name\ndescription: x\n---\n", "'name' must be 1 to 64 lowercase"),
        ("---\nname: a\n---\n", "'description' is required"),
        ("---\nname: a\ndescription: ''\n---\n", "'description' must not be empty"),
        ("---\nname: 12\ndescription: x\n---\n", "'name' must be text, not int"),
        ("---\nname: a\ndescription: x\ntools: {a: 1}\n---\n", "'tools' must be a list"),
        ("---\nname: a\ndescription: x\ntools: [ok, 'rm -rf']\n---\n", "entry 2 is not a tool"),
        ("---\nname: a\ndescription: x\ntools: ['mcp__a__b*']\n---\n", "entry 1 is not a tool"),
        ("---\nname: a\ndescription: x\nmax_iterations: 0\n---\n", "from 1 to 10000"),
        ("---\nname: a\ndescription: x\nmax_iterations: true\n---\n", "whole number"),
        ("---\nname: a\ndescription: x\ncolor: red\n---\n", "unknown fields 'color'"),
        ("---\nname: !!python/object/apply:os.system [id]\n---\n", "not valid YAML"),
        ("---\nx: " + "[" * 20_000 + "\n---\n", "front matter"),
        ("---\nname: a\ndescription: x\n---\n" + "x" * d.MAX_FILE_BYTES, "larger than 64 KB"),
    ],
)
def test_a_malformed_file_is_refused_in_words(text, says):
    with pytest.raises(DefinitionError, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse_definition(text)


def test_an_alias_bomb_is_refused_without_being_expanded():
    bomb = "---\nname: a\ndescription: x\ntools: &a [x, x]\n" + "".join(
        f"t{i}: &a{i} [*a, *a]\n" for i in range(40)
    )
    with pytest.raises(DefinitionError, match="unknown fields"):
        parse_definition(bomb + "---\n")
    nested = "---\nname: a\ndescription: x\nb: &b [q, q]\ntools: [*b, *b]\n---\n"
    with pytest.raises(DefinitionError):
        parse_definition(nested)


# --- reading a workspace ----------------------------------------------------------------------


def test_a_workspace_without_the_folder_has_none_and_no_problems(tmp_path):
    assert workspace_definitions(tmp_path) == d.Catalog()


def test_a_workspaces_files_are_read_and_each_bad_one_is_a_problem(tmp_path):
    write(tmp_path, "reviewer.md", REVIEWER)
    write(tmp_path, "broken.md", "no front matter")
    write(tmp_path, "again.md", REVIEWER)  # the same name as reviewer.md, read first by name
    write(tmp_path, "notes.txt", "not a definition")
    (tmp_path / ".agents" / "agents" / "folder.md").mkdir()
    catalog = workspace_definitions(tmp_path)
    assert catalog.names() == ("reviewer",)
    assert catalog.get("reviewer").source == "workspace"
    problems = "\n".join(catalog.problems)
    assert ".agents/agents/broken.md: it must start with a '---' line" in problems
    assert ".agents/agents/reviewer.md: defines 'reviewer' again (already in " in problems
    assert ".agents/agents/folder.md: it is not a regular file" in problems
    assert "notes.txt" not in problems


def test_links_are_never_followed(tmp_path):
    secret = tmp_path / "outside.md"
    secret.write_text(REVIEWER)
    root = tmp_path / "ws"
    root.mkdir()
    write(root, "ok.md", "---\nname: ok\ndescription: x\n---\n")
    os.symlink(secret, root / ".agents" / "agents" / "link.md")
    catalog = workspace_definitions(root)
    assert catalog.names() == ("ok",)
    assert catalog.problems == (".agents/agents/link.md: it is a symbolic link; links are not "
                                "followed",)  # fmt: skip

    other = tmp_path / "other"
    other.mkdir()
    (other / ".agents").symlink_to(root / ".agents")  # the folder itself is a link
    linked = workspace_definitions(other)
    assert linked.definitions == () and "symbolic link" in linked.problems[0]


def test_size_and_count_limits(tmp_path, monkeypatch):
    write(tmp_path, "big.md", "---\nname: big\ndescription: x\n---\n" + "x" * d.MAX_FILE_BYTES)
    monkeypatch.setattr(d, "MAX_FILES", 3)
    for i in range(4):
        write(tmp_path, f"a{i}.md", f"---\nname: a{i}\ndescription: x\n---\n")
    catalog = workspace_definitions(tmp_path)
    assert catalog.names() == ("a0", "a1", "a2")  # by name; big.md and a3.md are past the 3
    assert catalog.problems == (".agents/agents: 5 files; only the first 3 by name are read",)
    monkeypatch.setattr(d, "MAX_FILES", 50)
    problems = workspace_definitions(tmp_path).problems
    assert ".agents/agents/big.md: it is larger than 64 KB" in problems


# --- merging the sources ----------------------------------------------------------------------


def test_builtin_then_team_then_workspace_and_no_shadowing(tmp_path):
    write(tmp_path, "general.md", "---\nname: general\ndescription: evil\ntools: []\n---\n")
    write(tmp_path, "docs.md", "---\nname: docs\ndescription: repo's\n---\n")
    write(tmp_path, "mine.md", "---\nname: mine\ndescription: x\n---\n")
    catalog = available_definitions(
        team=[definition("docs"), definition("general")], workspace_root=tmp_path
    )
    assert catalog.names() == ("general", "docs", "mine")
    assert catalog.get("general") is GENERAL
    assert catalog.get("docs").source == "team"
    assert catalog.get("mine").source == "workspace"
    assert catalog.problems == (
        "team definition 'general' ignored: the built-in 'general' keeps the name",
        "workspace definition 'docs' ignored: the team's 'docs' keeps the name",
        "workspace definition 'general' ignored: the built-in 'general' keeps the name",
    )


def test_without_a_workspace_only_builtin_and_team():
    assert available_definitions().names() == ("general",)
    assert available_definitions(team=[definition("t")]).names() == ("general", "t")


# --- a child's tools --------------------------------------------------------------------------

PARENT = ("terminal", "file_editor", "think", "finish", "task", "delegate", "workflow")


def test_general_gets_the_parents_tools_while_depth_allows():
    assert resolve_child(PARENT, None, GENERAL, depth=1, max_depth=3) == PARENT
    assert resolve_child(PARENT, None, GENERAL, depth=2, max_depth=None) == PARENT


def test_at_the_depth_limit_the_spawning_tools_go():
    assert resolve_child(PARENT, None, GENERAL, depth=3, max_depth=3) == PARENT[:4]
    assert resolve_child(PARENT, None, GENERAL, depth=1, max_depth=0) == PARENT[:4]
    with pytest.raises(ValueError, match="at least 1"):
        resolve_child(PARENT, None, GENERAL, depth=0, max_depth=3)


def test_a_definition_narrows_but_never_widens_past_the_parent_or_the_policy():
    greedy = definition("greedy", "workspace", tools=("terminal", "browser", "think", "task"))
    parent = ("think", "finish", "task", "terminal")
    # Never "browser": the parent lacks it.
    child = resolve_child(parent, None, greedy, depth=1, max_depth=3)
    assert child == ("think", "task", "terminal")
    policy = ("think", "finish", "browser")
    assert resolve_child(parent, policy, greedy, depth=1, max_depth=3) == ("think",)
    assert resolve_child(parent, (), GENERAL, depth=1, max_depth=3) == ()
    assert resolve_child(parent, None, definition("none", tools=()), depth=1, max_depth=3) == ()
