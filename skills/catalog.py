"""Skills as the agent sees them: parsed from SKILL.md text (a workspace's file, or a team's
row checked by the same rules) and merged into one catalog.

A workspace's skills live in `.agents/skills/<folder>/SKILL.md`; links are never followed
(workspaces.browse), so a file cannot point outside the workspace, and a file that breaks a
rule is left out with a problem naming it. A workspace skill is repository content: the agent
is told so when it loads one (orchestration/tools/invoke_skill.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from workspaces import browse
from workspaces.base import WorkspacePathError

SKILLS_DIR = ".agents/skills"
SKILL_FILE = "SKILL.md"
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
TRIGGER = re.compile(r"^[\w][\w .+#/-]{0,62}[\w+#]?$")
MAX_DESCRIPTION_CHARS = 1000
MAX_BODY_BYTES = 64 * 1024
MAX_TRIGGERS = 20
MAX_SKILLS = 50
FIELDS = frozenset({"name", "description", "triggers"})

Source = Literal["team", "workspace"]


class SkillError(ValueError):
    """Why a skill was refused, in words."""


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    body: str
    triggers: tuple[str, ...] = ()
    source: Source = "workspace"
    path: str = ""
    """Where a workspace skill's file is, relative to the workspace root."""


@dataclass(frozen=True, slots=True)
class Catalog:
    skills: tuple[Skill, ...] = ()
    problems: tuple[str, ...] = ()

    def get(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)


def clean_name(value: Any) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise SkillError(
            "a skill name is 1 to 64 lowercase letters, digits, '-' or '_', starting with a "
            "letter or digit"
        )
    return value


def clean_description(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SkillError("'description' must not be empty: the model chooses a skill by it")
    value = value.strip()
    if len(value) > MAX_DESCRIPTION_CHARS or "\0" in value:
        raise SkillError(f"'description' must be at most {MAX_DESCRIPTION_CHARS} characters")
    return value


def clean_triggers(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or len(value) > MAX_TRIGGERS:
        raise SkillError(f"'triggers' must be a list of at most {MAX_TRIGGERS} words or phrases")
    cleaned = []
    for index, trigger in enumerate(value, start=1):
        if not isinstance(trigger, str) or not TRIGGER.fullmatch(trigger.strip()):
            raise SkillError(f"trigger {index} must be a word or short phrase (at most 64)")
        cleaned.append(trigger.strip().lower())
    return tuple(dict.fromkeys(cleaned))


def clean_body(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SkillError("the skill's instructions (its body) must not be empty")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_BODY_BYTES or "\0" in value:
        raise SkillError(f"the instructions must be at most {MAX_BODY_BYTES // 1024} KB of text")
    return value.strip()


def _split(text: str) -> tuple[str, str]:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError("it must start with a '---' line opening the YAML front matter")
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    raise SkillError("its YAML front matter has no closing '---' line")


def parse_skill(text: str, *, source: Source = "workspace", path: str = "") -> Skill:
    """One skill from a SKILL.md's text; SkillError says what is wrong."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BODY_BYTES:
        raise SkillError(f"it is larger than {MAX_BODY_BYTES // 1024} KB")
    head, body = _split(text)
    try:
        meta = yaml.safe_load(head)
    except yaml.YAMLError:
        raise SkillError("its front matter is not valid YAML") from None
    except RecursionError:
        raise SkillError("its front matter is nested too deeply") from None
    if not isinstance(meta, dict):
        raise SkillError("its front matter must be a mapping of fields (name: ...)")
    unknown = sorted(str(k)[:40] for k in meta if k not in FIELDS)
    if unknown:
        raise SkillError(f"unknown fields {', '.join(map(repr, unknown))} (known: "
                         f"{', '.join(sorted(FIELDS))})")  # fmt: skip
    return Skill(
        name=clean_name(meta.get("name")), description=clean_description(meta.get("description")),
        triggers=clean_triggers(meta.get("triggers")), body=clean_body(body), source=source,
        path=path,
    )  # fmt: skip


def workspace_skills(root: Path) -> Catalog:
    """The skills in `root/.agents/skills/*/SKILL.md`, by folder name, with a problem for
    each one left out."""
    try:
        entries = browse.list_files(root, SKILLS_DIR)
    except (FileNotFoundError, NotADirectoryError):
        return Catalog()
    except (WorkspacePathError, OSError) as exc:
        return Catalog(problems=(f"{SKILLS_DIR}: not read: {exc}",))
    folders = sorted((e for e in entries if e.kind == "dir"), key=lambda e: e.name)
    problems: list[str] = []
    if len(folders) > MAX_SKILLS:
        problems.append(f"{SKILLS_DIR}: {len(folders)} folders; only the first {MAX_SKILLS} read")
        folders = folders[:MAX_SKILLS]
    found: dict[str, Skill] = {}
    for folder in folders:
        shown = f"{SKILLS_DIR}/{folder.name}/{SKILL_FILE}"
        try:
            skill = _read(root, shown)
        except FileNotFoundError:
            continue  # a folder without a SKILL.md is not a skill (it may hold its files)
        except SkillError as exc:
            problems.append(f"{shown}: {exc}")
            continue
        if skill.name in found:
            problems.append(f"{shown}: defines {skill.name!r} again")
            continue
        found[skill.name] = skill
    return Catalog(tuple(found.values()), tuple(problems))


def _read(root: Path, shown: str) -> Skill:
    try:
        view = browse.read_file(root, shown)
    except FileNotFoundError:
        raise
    except (WorkspacePathError, OSError) as exc:
        raise SkillError(f"not read: {exc}") from None
    if view.text is None:
        raise SkillError(f"not read: {view.summary}")
    return parse_skill(view.text, source="workspace", path=shown)


def team_skills(team_id: int) -> list[Skill]:
    from .models import TeamSkill

    return [
        Skill(
            name=row.name,
            description=row.description,
            body=row.body,
            triggers=tuple(row.triggers or ()),
            source="team",
        )  # fmt: skip
        for row in TeamSkill.objects.filter(team_id=team_id).order_by("name")
    ]


def merged(team: Iterable[Skill], workspace: Catalog) -> Catalog:
    """The team's skills, then the workspace's whose names the team does not use."""
    chosen: dict[str, Skill] = {s.name: s for s in team}
    problems = list(workspace.problems)
    for skill in workspace.skills:
        if skill.name in chosen:
            problems.append(
                f"{skill.path}: {skill.name!r} is the team's skill; the file is ignored"
            )
            continue
        chosen[skill.name] = skill
    return Catalog(tuple(list(chosen.values())[:MAX_SKILLS]), tuple(problems))


def available_skills(*, team_id: int, workspace_root: Path | None) -> Catalog:
    workspace = workspace_skills(workspace_root) if workspace_root is not None else Catalog()
    return merged(team_skills(team_id), workspace)
