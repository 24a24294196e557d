"""Where a conversation's workspace may live: every team has its own area under the workspaces
root, `ROOT/team-<team id>/`, and a workspace is one folder directly inside that area, named
by the person starting the conversation or, by default, after the conversation's id.

A name is a folder name, not a path: letters, digits, `.`, `_` and `-`, starting with a letter
or digit, at most 100 characters. That leaves no room for `.`, `..`, `/`, absolute paths, NUL
bytes or names the filesystem refuses, and it keeps workspaces from nesting: an agent may write
anything inside its own workspace, so a workspace inside another could later be swapped for a
symlink by the outer conversation's agent. Direct children of an area are made only here.

`workspace_in_area` resolves symlinks (realpath) and insists the result is still a direct
child of the team's area, so a link planted in the area cannot lead anywhere else. Who may
share an existing folder is not a path question; the service asks the permission helper.

Pure: no ORM, no settings; the caller passes the root.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

MAX_NAME_CHARS = 100
_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_NAME_CHARS - 1}}}")
_AREA_PREFIX = "team-"
NAME_RULE = (
    f"a folder name in your team's workspace area: letters, digits, '.', '_' or '-', starting "
    f"with a letter or digit, at most {MAX_NAME_CHARS} characters; not a path"
)


class WorkspaceNameError(ValueError):
    """A requested workspace that may not be used; the message is safe to show the requester."""


def team_area(root: Path, team_id: int) -> Path:
    """The directory holding every workspace of the team (not itself a workspace)."""
    return Path(root) / f"{_AREA_PREFIX}{int(team_id)}"


def check_name(name: str) -> str:
    """`name` if it is a valid workspace name; WorkspaceNameError otherwise."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise WorkspaceNameError(f"workspace must be {NAME_RULE}.")
    return name


def workspace_in_area(root: Path, team_id: int, name: str) -> Path:
    """The real path of the workspace `name` of the team, which must stay a directory directly
    inside the team's area once symlinks are followed. Touches the disk only to read links;
    creating the folder is the caller's job."""
    area = team_area(Path(root).resolve(), team_id).resolve()
    path = (area / check_name(name)).resolve()
    if path.parent != area:
        raise WorkspaceNameError(f"workspace {name!r} resolves outside your team's workspace area.")
    if path.exists() and not path.is_dir():
        raise WorkspaceNameError(f"workspace {name!r} exists and is not a directory.")
    return path


def workspace_label(root: Path, team_id: int, stored: str) -> str:
    """What to show for a stored workspace path: its name when it is in the team's area (the
    name a teammate passes to share it), else the path as stored (conversations from before
    the per-team layout, or one an operator pointed elsewhere from the command line)."""
    path = Path(stored)
    if path.parent == team_area(Path(_real_root(str(root))), team_id):
        return path.name
    return stored


@functools.lru_cache(maxsize=16)
def _real_root(root: str) -> str:
    # A listing labels up to a thousand rows, and a realpath costs ~0.1 ms each; the root does
    # not move under a running process (and a stale answer would change only a label).
    return os.path.realpath(root)
