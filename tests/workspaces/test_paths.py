"""The per-team workspace path rules, on a real temporary directory."""

from __future__ import annotations

import pytest

from workspaces.paths import (
    MAX_NAME_CHARS,
    WorkspaceNameError,
    check_name,
    team_area,
    workspace_in_area,
    workspace_label,
)


@pytest.mark.parametrize(
    "name",
    ["project-a", "a", "v1.2_final", "0f1e2d3c-0000-4000-8000-123456789abc", "x" * MAX_NAME_CHARS],
)
def test_plain_folder_names_are_accepted(name):
    assert check_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "", ".", "..", "../x", "a/b", "/etc", "a\x00b", "a\nb", "a\\b", " a", "-rf", ".hidden",
        "é", "x" * (MAX_NAME_CHARS + 1), "x" * 1000, "a\n",
    ],
)  # fmt: skip
def test_anything_else_is_refused(name):
    with pytest.raises(WorkspaceNameError, match="folder name"):
        check_name(name)


def test_each_team_has_its_own_area(tmp_path):
    assert team_area(tmp_path, 7) == tmp_path / "team-7"
    assert team_area(tmp_path, 7) != team_area(tmp_path, 8)


def test_a_name_lands_directly_in_the_area(tmp_path):
    assert workspace_in_area(tmp_path, 3, "proj") == tmp_path.resolve() / "team-3" / "proj"
    assert not (tmp_path / "team-3").exists()  # creating it is the caller's job


def test_a_link_to_a_folder_of_the_same_area_is_that_folder(tmp_path):
    area = team_area(tmp_path, 3)
    (area / "proj").mkdir(parents=True)
    (area / "alias").symlink_to(area / "proj")
    assert workspace_in_area(tmp_path, 3, "alias") == area.resolve() / "proj"


@pytest.mark.parametrize("target", ["team-4", "team-4/theirs", ".", "team-3", "/etc"])
def test_a_link_leading_anywhere_else_is_refused(tmp_path, target):
    (tmp_path / "team-4" / "theirs").mkdir(parents=True)
    (team_area(tmp_path, 3) / "sub").mkdir(parents=True)
    (team_area(tmp_path, 3) / "escape").symlink_to(tmp_path / target)
    with pytest.raises(WorkspaceNameError, match="outside your team's workspace area"):
        workspace_in_area(tmp_path, 3, "escape")


def test_a_file_is_not_a_workspace(tmp_path):
    team_area(tmp_path, 3).mkdir(parents=True)
    (team_area(tmp_path, 3) / "notes").write_text("x")
    with pytest.raises(WorkspaceNameError, match="not a directory"):
        workspace_in_area(tmp_path, 3, "notes")


def test_the_label_is_the_name_in_the_area_else_the_stored_path(tmp_path):
    in_area = str(tmp_path.resolve() / "team-3" / "proj")
    assert workspace_label(tmp_path, 3, in_area) == "proj"
    assert workspace_label(tmp_path, 4, in_area) == in_area
    legacy = str(tmp_path.resolve() / "0f1e2d3c-0000-4000-8000-123456789abc")
    assert workspace_label(tmp_path, 3, legacy) == legacy
    assert workspace_label(tmp_path, 3, "/srv/operator/ws") == "/srv/operator/ws"
