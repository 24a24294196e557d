import os
from pathlib import Path
from typing import Any

import pytest

from orchestration.tools.base import ToolContext, ToolResult, tool_schema
from orchestration.tools.file_editor import FileEditorArgs, FileEditorTool
from workspaces.local import LocalWorkspace


def edit(ws: LocalWorkspace, command: str, path: str, **kwargs: Any) -> ToolResult:
    """Each call builds a fresh workspace and tool, as a different worker process would."""
    fresh = LocalWorkspace(ws.root, ws.state_dir)
    args = FileEditorArgs(command=command, path=path, **kwargs)
    return FileEditorTool().run(args, ToolContext(conversation_id="c1", workspace=fresh))


def ok(result: ToolResult) -> str:
    assert not result.is_error, result.content
    return result.content


def err(result: ToolResult) -> str:
    assert result.is_error, result.content
    return result.content


# -- view --------------------------------------------------------------------------------------


def test_view_file_with_line_numbers(ws: LocalWorkspace) -> None:
    (ws.root / "f.txt").write_text("alpha\nbeta\ngamma\n")
    content = ok(edit(ws, "view", "f.txt"))
    assert content.endswith("     1\talpha\n     2\tbeta\n     3\tgamma")
    assert "lines 1-3 of 3" in content


def test_view_range(ws: LocalWorkspace) -> None:
    (ws.root / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    assert ok(edit(ws, "view", "f.txt", view_range=[3, 4])).endswith(
        "     3\tline 3\n     4\tline 4"
    )
    assert ok(edit(ws, "view", "f.txt", view_range=[9, -1])).endswith(
        "     9\tline 9\n    10\tline 10"
    )
    assert "lines 9-10" in ok(edit(ws, "view", "f.txt", view_range=[9, 50]))
    assert "outside the file" in err(edit(ws, "view", "f.txt", view_range=[11, 12]))
    assert "outside the file" in err(edit(ws, "view", "f.txt", view_range=[0, 2]))
    assert "before its start" in err(edit(ws, "view", "f.txt", view_range=[5, 4]))


def test_view_range_must_have_two_numbers() -> None:
    with pytest.raises(ValueError):
        FileEditorArgs(command="view", path="f", view_range=[1])


def test_view_directory_two_levels_without_hidden(ws: LocalWorkspace) -> None:
    (ws.root / "src" / "pkg" / "deep").mkdir(parents=True)
    (ws.root / "src" / "pkg" / "deep" / "too_deep.py").write_text("")
    (ws.root / "src" / "main.py").write_text("")
    (ws.root / ".git").mkdir()
    (ws.root / "src" / ".hidden").write_text("")
    (ws.root / "README").write_text("")
    content = ok(edit(ws, "view", "."))
    assert content.splitlines()[1:] == ["README", "src/", "src/main.py", "src/pkg/"]


def test_view_missing_and_empty_files(ws: LocalWorkspace) -> None:
    assert "does not exist" in err(edit(ws, "view", "nope.txt"))
    (ws.root / "empty").write_text("")
    assert "is empty" in ok(edit(ws, "view", "empty"))


def test_binary_file_is_refused(ws: LocalWorkspace) -> None:
    (ws.root / "img.bin").write_bytes(b"\x89PNG\r\n\x1a\n\xff\x00")
    assert "not a UTF-8 text file" in err(edit(ws, "view", "img.bin"))
    (ws.root / "nul.txt").write_bytes(b"abc\x00def")
    assert "not a UTF-8 text file" in err(edit(ws, "str_replace", "nul.txt", old_str="abc"))


# -- create ------------------------------------------------------------------------------------


def test_create_makes_parents_and_refuses_to_overwrite(ws: LocalWorkspace) -> None:
    assert "Created" in ok(edit(ws, "create", "a/b/new.py", file_text="x = 1\n"))
    assert (ws.root / "a" / "b" / "new.py").read_text() == "x = 1\n"
    assert "already exists" in err(edit(ws, "create", "a/b/new.py", file_text="y"))
    assert (ws.root / "a" / "b" / "new.py").read_text() == "x = 1\n"


def test_create_needs_file_text(ws: LocalWorkspace) -> None:
    assert "`file_text`" in err(edit(ws, "create", "x.txt"))
    assert not (ws.root / "x.txt").exists()


# -- str_replace ---------------------------------------------------------------------------------


def test_str_replace_unique_match_shows_snippet(ws: LocalWorkspace) -> None:
    (ws.root / "f.py").write_text("".join(f"line {i}\n" for i in range(1, 21)))
    content = ok(edit(ws, "str_replace", "f.py", old_str="line 10\n", new_str="ten\nTEN\n"))
    assert (ws.root / "f.py").read_text().count("ten\nTEN\nline 11\n") == 1
    assert "    10\tten\n    11\tTEN\n" in content
    assert "     6\tline 6" in content
    assert "     5\t" not in content


def test_str_replace_without_new_str_deletes(ws: LocalWorkspace) -> None:
    (ws.root / "f.txt").write_text("keep\ndrop\nkeep too\n")
    ok(edit(ws, "str_replace", "f.txt", old_str="drop\n"))
    assert (ws.root / "f.txt").read_text() == "keep\nkeep too\n"


def test_str_replace_not_found(ws: LocalWorkspace) -> None:
    (ws.root / "f.txt").write_text("hello\n")
    assert "not found" in err(edit(ws, "str_replace", "f.txt", old_str="bye", new_str="x"))
    assert (ws.root / "f.txt").read_text() == "hello\n"


def test_str_replace_ambiguous_lists_lines(ws: LocalWorkspace) -> None:
    (ws.root / "f.txt").write_text("x = 1\ny = 2\nx = 1\n")
    content = err(edit(ws, "str_replace", "f.txt", old_str="x = 1", new_str="x = 3"))
    assert "2 times" in content
    assert "lines 1, 3" in content
    assert (ws.root / "f.txt").read_text() == "x = 1\ny = 2\nx = 1\n"


def test_str_replace_needs_old_str(ws: LocalWorkspace) -> None:
    (ws.root / "f.txt").write_text("hello\n")
    assert "`old_str`" in err(edit(ws, "str_replace", "f.txt", new_str="x"))
    assert "`old_str`" in err(edit(ws, "str_replace", "f.txt", old_str="", new_str="x"))


def test_edits_on_a_directory_are_refused(ws: LocalWorkspace) -> None:
    (ws.root / "d").mkdir()
    assert "is a directory" in err(edit(ws, "str_replace", "d", old_str="a", new_str="b"))


# -- insert --------------------------------------------------------------------------------------


def test_insert_at_top_middle_and_end(ws: LocalWorkspace) -> None:
    (ws.root / "f.txt").write_text("one\ntwo\n")
    ok(edit(ws, "insert", "f.txt", insert_line=0, new_str="zero"))
    ok(edit(ws, "insert", "f.txt", insert_line=2, new_str="one and a half\n"))
    content = ok(edit(ws, "insert", "f.txt", insert_line=4, new_str="three\nfour"))
    assert (ws.root / "f.txt").read_text() == "zero\none\none and a half\ntwo\nthree\nfour\n"
    assert "     5\tthree\n     6\tfour" in content


def test_insert_after_last_line_without_newline(ws: LocalWorkspace) -> None:
    (ws.root / "f.txt").write_text("a\nb")
    ok(edit(ws, "insert", "f.txt", insert_line=2, new_str="c"))
    assert (ws.root / "f.txt").read_text() == "a\nb\nc"


def test_insert_bounds(ws: LocalWorkspace) -> None:
    (ws.root / "f.txt").write_text("one\ntwo\n")
    assert "from 0 to 2" in err(edit(ws, "insert", "f.txt", insert_line=3, new_str="x"))
    assert "needs both" in err(edit(ws, "insert", "f.txt", new_str="x"))
    assert "needs both" in err(edit(ws, "insert", "f.txt", insert_line=1))
    with pytest.raises(ValueError):
        FileEditorArgs(command="insert", path="f.txt", insert_line=-1, new_str="x")
    assert (ws.root / "f.txt").read_text() == "one\ntwo\n"


# -- undo_edit ---------------------------------------------------------------------------------


def test_undo_steps_back_through_edits_across_instances(ws: LocalWorkspace) -> None:
    ok(edit(ws, "create", "f.txt", file_text="v1\n"))
    ok(edit(ws, "str_replace", "f.txt", old_str="v1", new_str="v2"))
    ok(edit(ws, "insert", "f.txt", insert_line=1, new_str="v3"))
    assert (ws.root / "f.txt").read_text() == "v2\nv3\n"

    assert "     1\tv2" in ok(edit(ws, "undo_edit", "f.txt"))
    assert (ws.root / "f.txt").read_text() == "v2\n"
    ok(edit(ws, "undo_edit", "f.txt"))
    assert (ws.root / "f.txt").read_text() == "v1\n"
    assert "no longer exists" in ok(edit(ws, "undo_edit", "f.txt"))
    assert not (ws.root / "f.txt").exists()
    assert "no edit" in err(edit(ws, "undo_edit", "f.txt"))


def test_undo_is_per_file(ws: LocalWorkspace) -> None:
    (ws.root / "a.txt").write_text("a\n")
    (ws.root / "b.txt").write_text("b\n")
    ok(edit(ws, "str_replace", "a.txt", old_str="a", new_str="A"))
    assert "no edit" in err(edit(ws, "undo_edit", "b.txt"))
    ok(edit(ws, "undo_edit", "a.txt"))
    assert (ws.root / "a.txt").read_text() == "a\n"


def test_failed_edits_leave_no_undo_step(ws: LocalWorkspace) -> None:
    (ws.root / "f.txt").write_text("x\n")
    err(edit(ws, "str_replace", "f.txt", old_str="missing", new_str="y"))
    assert "no edit" in err(edit(ws, "undo_edit", "f.txt"))


def test_history_lives_in_state_dir_not_workspace(ws: LocalWorkspace) -> None:
    ok(edit(ws, "create", "f.txt", file_text="x"))
    assert sorted(p.name for p in ws.root.iterdir()) == ["f.txt"]
    assert any(p.name.startswith("file-editor-history-") for p in ws.state_dir.iterdir())


# -- paths -------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["view", "create", "str_replace", "insert", "undo_edit"])
@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "link/secret.txt"])
def test_paths_outside_the_workspace_are_refused(
    ws: LocalWorkspace, tmp_path: Path, command: str, path: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "secret.txt").write_text("secret\n")
    os.symlink(outside, ws.root / "link")
    content = err(
        edit(ws, command, path, file_text="x", old_str="secret", new_str="y", insert_line=0)
    )
    if path.startswith("link/"):  # lexically inside: refused at the link, whatever it points at
        expected = "no edit" if command == "undo_edit" else "'link' is a symbolic link"
        assert expected in content
        assert "secret\n" not in content
    else:
        assert f"path '{path}' is outside the workspace" in content
    assert (outside / "secret.txt").read_text() == "secret\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert not (tmp_path / "outside.txt").exists()


@pytest.mark.parametrize("command", ["view", "create", "str_replace", "insert"])
def test_links_inside_the_workspace_are_not_followed_either(
    ws: LocalWorkspace, command: str
) -> None:
    (ws.root / "real").mkdir()
    (ws.root / "real" / "f.txt").write_text("real\n")
    os.symlink("real", ws.root / "alias")
    os.symlink("real/f.txt", ws.root / "f-link.txt")
    kwargs = {"file_text": "x", "old_str": "real", "new_str": "y", "insert_line": 0}
    for path, link in (("alias/f.txt", "alias"), ("f-link.txt", "f-link.txt")):
        content = err(edit(ws, command, path, **kwargs))
        assert f"'{link}' is a symbolic link; links are not followed" in content, content
    assert (ws.root / "real" / "f.txt").read_text() == "real\n"
    assert sorted(p.name for p in (ws.root / "real").iterdir()) == ["f.txt"]


def test_a_listing_shows_links_without_entering_them(ws: LocalWorkspace, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    (ws.root / "src").mkdir()
    os.symlink(outside, ws.root / "escape")
    os.symlink(outside, ws.root / "src" / "deeper")
    content = ok(edit(ws, "view", "."))
    assert content.splitlines()[1:] == ["escape", "src/", "src/deeper"]
    assert "'escape' is a symbolic link" in err(edit(ws, "view", "escape"))


def test_undo_of_a_creation_removes_a_link_put_in_its_place_not_its_target(
    ws: LocalWorkspace, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    ok(edit(ws, "create", "f.txt", file_text="x"))
    (ws.root / "f.txt").unlink()
    os.symlink(outside, ws.root / "f.txt")
    assert "no longer exists" in ok(edit(ws, "undo_edit", "f.txt"))
    assert not (ws.root / "f.txt").is_symlink()
    assert outside.read_text() == "keep\n"


def test_a_fifo_is_refused_without_hanging(ws: LocalWorkspace) -> None:
    os.mkfifo(ws.root / "pipe")
    assert "is not a regular file" in err(edit(ws, "view", "pipe"))


def test_edits_keep_the_files_mode(ws: LocalWorkspace) -> None:
    script = ws.root / "run.sh"
    script.write_text("echo one\n")
    script.chmod(0o750)
    ok(edit(ws, "str_replace", "run.sh", old_str="one", new_str="two"))
    assert script.read_text() == "echo two\n"
    assert script.stat().st_mode & 0o777 == 0o750


def test_relative_paths_follow_the_terminal_directory(ws: LocalWorkspace) -> None:
    ws.run("mkdir -p pkg && cd pkg", timeout=10)
    ok(edit(ws, "create", "mod.py", file_text="x = 1\n"))
    assert (ws.root / "pkg" / "mod.py").exists()


def test_schema_lists_commands() -> None:
    params = tool_schema(FileEditorTool())["function"]["parameters"]
    assert params["required"] == ["command", "path", "security_risk"]
    assert params["properties"]["command"]["enum"] == [
        "view",
        "create",
        "str_replace",
        "insert",
        "undo_edit",
    ]
    assert all(prop.get("description") for prop in params["properties"].values())
