"""SKILL.md files and team skills: parsing, a workspace's folder, merging, triggers."""

from __future__ import annotations

from pathlib import Path

import pytest

from skills.catalog import (
    Skill,
    SkillError,
    available_skills,
    merged,
    parse_skill,
    workspace_skills,
)
from skills.services import skill_create
from skills.triggers import triggered

DEPLOY = """---
name: deploy
description: How this repository is deployed to staging.
triggers: [deploy, staging]
---
Run `make deploy ENV=staging`, then check /health.
"""


def _write(root: Path, folder: str, text: str) -> None:
    (root / ".agents" / "skills" / folder).mkdir(parents=True, exist_ok=True)
    (root / ".agents" / "skills" / folder / "SKILL.md").write_text(text)


def test_a_skill_file_is_parsed():
    skill = parse_skill(DEPLOY, path="x")
    assert (skill.name, skill.triggers, skill.source) == ("deploy", ("deploy", "staging"),
                                                           "workspace")  # fmt: skip
    assert skill.body == "Run `make deploy ENV=staging`, then check /health."


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no front matter", "must start with"),
        ("---\nname: x\n", "no closing"),
        ("---\nname: Bad Name\ndescription: d\n---\nbody", "lowercase"),
        ("---\nname: x\n---\nbody", "description"),
        ("---\nname: x\ndescription: d\n---\n   ", "must not be empty"),
        ("---\nname: x\ndescription: d\ncolor: red\n---\nb", "unknown fields 'color'"),
        ("---\nname: x\ndescription: d\ntriggers: {a: 1}\n---\nb", "triggers"),
        ("---\n[unclosed\n---\nb", "not valid YAML"),
    ],
)
def test_a_broken_file_says_what_is_wrong(text, message):
    with pytest.raises(SkillError, match=message):
        parse_skill(text)


def test_a_workspace_folder_is_read_and_broken_files_are_named(tmp_path):
    _write(tmp_path, "deploy", DEPLOY)
    _write(tmp_path, "broken", "not a skill")
    (tmp_path / ".agents" / "skills" / "assets").mkdir()  # no SKILL.md: not a skill
    (tmp_path / ".agents" / "skills" / "link").symlink_to("/etc")
    catalog = workspace_skills(tmp_path)
    assert [s.name for s in catalog.skills] == ["deploy"]
    assert catalog.skills[0].path == ".agents/skills/deploy/SKILL.md"
    assert any("broken/SKILL.md" in p for p in catalog.problems)
    assert workspace_skills(tmp_path / "nowhere").skills == ()


def test_the_teams_skill_wins_over_a_files(tmp_path):
    _write(tmp_path, "deploy", DEPLOY)
    team = [Skill(name="deploy", description="ours", body="the team's way", source="team")]
    catalog = merged(team, workspace_skills(tmp_path))
    assert [(s.name, s.source) for s in catalog.skills] == [("deploy", "team")]
    assert any("the team's skill" in p for p in catalog.problems)


@pytest.mark.django_db
def test_available_skills_reads_the_team_and_the_workspace(user, team, tmp_path):
    _write(tmp_path, "deploy", DEPLOY)
    skill_create(by=user, team=team, name="review", description="How we review.",
                 body="Check tests first.", triggers=["Review"])  # fmt: skip
    catalog = available_skills(team_id=team.pk, workspace_root=tmp_path)
    assert [(s.name, s.source, s.triggers) for s in catalog.skills] == [
        ("review", "team", ("review",)), ("deploy", "workspace", ("deploy", "staging")),
    ]  # fmt: skip


def test_triggers_match_whole_words_in_any_case():
    skill = parse_skill(DEPLOY)
    assert triggered("Please DEPLOY the app", [skill]) == [(skill, "deploy")]
    assert triggered("the staging box", [skill]) == [(skill, "staging")]
    assert triggered("redeployment plans", [skill]) == []
