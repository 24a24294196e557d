import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workspaces.base import WorkspacePathError
from workspaces.local import LocalWorkspace

REPO_ROOT = Path(__file__).resolve().parents[2]


def _alive_in_group(pgid: int) -> list[int]:
    """Pids of live (non-zombie) processes in a process group."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(entry.name))
    return alive


# -- state across commands ----------------------------------------------------------------------


def test_cwd_and_exports_persist_across_instances(dirs: tuple[Path, Path]) -> None:
    first = LocalWorkspace(*dirs)
    result = first.run(
        "mkdir -p sub/deeper && cd sub/deeper && export GREETING='hi there'", timeout=10
    )
    assert result.exit_code == 0

    second = LocalWorkspace(*dirs)  # as if a different worker picked up the next step
    result = second.run('pwd; echo "$GREETING"', timeout=10)
    assert result.output == f"{second.root}/sub/deeper\nhi there\n"
    assert second.resolve("x.txt") == second.root / "sub" / "deeper" / "x.txt"


def test_state_persists_across_a_real_separate_process(dirs: tuple[Path, Path]) -> None:
    root, state = dirs
    script = (
        "import sys; from pathlib import Path; from workspaces.local import LocalWorkspace; "
        "ws = LocalWorkspace(Path(sys.argv[1]), Path(sys.argv[2])); "
        "r = ws.run('mkdir -p elsewhere && cd elsewhere && export FROM_CHILD=yes', timeout=10); "
        "sys.exit(r.exit_code)"
    )
    subprocess.run([sys.executable, "-c", script, str(root), str(state)], cwd=REPO_ROOT, check=True)
    ws = LocalWorkspace(root, state)
    assert ws.run('pwd; echo "$FROM_CHILD"', timeout=10).output == f"{ws.root}/elsewhere\nyes\n"


def test_multiline_and_quoted_exports_round_trip(ws: LocalWorkspace) -> None:
    ws.run("export ML=$'line one\\nline \"two\"' SPACED='a  b'", timeout=10)
    assert (
        ws.run('printf "%s|%s" "$ML" "$SPACED"', timeout=10).output == 'line one\nline "two"|a  b'
    )


def test_unset_variable_stays_unset(ws: LocalWorkspace) -> None:
    ws.run("export GONE=1", timeout=10)
    ws.run("unset GONE", timeout=10)
    assert ws.run('echo "[${GONE-unset}]"', timeout=10).output == "[unset]\n"


def test_cd_outside_root_falls_back_to_root(ws: LocalWorkspace) -> None:
    ws.run("cd /", timeout=10)
    assert ws.run("pwd", timeout=10).output == f"{ws.root}\n"


def test_removed_cwd_falls_back_to_root(ws: LocalWorkspace) -> None:
    ws.run("mkdir gone && cd gone", timeout=10)
    ws.run("rmdir ../gone", timeout=10)
    assert ws.run("pwd", timeout=10).output == f"{ws.root}\n"


def test_state_survives_a_broken_path(ws: LocalWorkspace) -> None:
    ws.run("mkdir d && cd d && export PATH=/nonexistent", timeout=10)
    result = ws.run('pwd; echo "$PATH"', timeout=10)
    assert result.output == f"{ws.root}/d\n/nonexistent\n"


# -- exit codes, output --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "code"), [("true", 0), ("false", 1), ("exit 3", 3), ("nosuchcommand-xyz", 127)]
)
def test_exit_codes(ws: LocalWorkspace, command: str, code: int) -> None:
    result = ws.run(command, timeout=10)
    assert result.exit_code == code
    assert not result.timed_out


def test_exit_still_saves_state(ws: LocalWorkspace) -> None:
    assert ws.run("mkdir a && cd a && export X=1 && exit 5", timeout=10).exit_code == 5
    assert ws.run('pwd; echo "$X"', timeout=10).output == f"{ws.root}/a\n1\n"


def test_stdout_and_stderr_are_merged_and_stdin_is_empty(ws: LocalWorkspace) -> None:
    result = ws.run("echo out; echo err >&2; cat; echo done", timeout=10)
    assert result.output == "out\nerr\ndone\n"


def test_undecodable_bytes_are_replaced(ws: LocalWorkspace) -> None:
    assert ws.run(r"printf 'ok\377'", timeout=10).output == "ok\ufffd"


def test_long_output_keeps_head_and_tail(dirs: tuple[Path, Path]) -> None:
    ws = LocalWorkspace(*dirs, max_output_chars=1000)
    result = ws.run("echo START; head -c 100000 /dev/zero | tr '\\0' x; echo; echo END", timeout=10)
    assert result.truncated
    assert result.output.startswith("START\n")
    assert result.output.endswith("END\n")
    assert "[... 99011 characters cut; the whole output (3 lines) is in " in result.output
    assert len(result.output) < 1400


def test_short_output_is_not_truncated(ws: LocalWorkspace) -> None:
    result = ws.run("echo hello", timeout=10)
    assert (result.output, result.truncated) == ("hello\n", False)


def test_background_job_does_not_hold_the_command(ws: LocalWorkspace) -> None:
    # The job runs until the test releases it (at most a minute if the test dies first): a
    # command that waited for it would time out instead of answering.
    # The command answers only once the job has started: under bubblewrap a job still ends
    # with its command's sandbox, and on a loaded machine it could end before it ran at all.
    job = "touch job-started; for i in $(seq 600); do [ -e release ] && break; sleep 0.1; done"
    started = "for i in $(seq 200); do [ -e job-started ] && break; sleep 0.05; done"
    try:
        result = ws.run(f"({job}) >/dev/null 2>&1 & {started}; echo started", timeout=30)
        assert (ws.root / "job-started").exists()
    finally:
        (ws.root / "release").touch()
    assert (result.output, result.exit_code, result.timed_out) == ("started\n", 0, False)


# -- timeouts ------------------------------------------------------------------------------------


def test_timeout_returns_partial_output_and_kills_the_group(ws: LocalWorkspace) -> None:
    started = time.monotonic()
    result = ws.run("echo $$ > shell.pid; echo before; sleep 30 & sleep 30", timeout=1)
    elapsed = time.monotonic() - started

    assert result.timed_out
    assert result.exit_code is None
    assert result.output == "before\n"
    assert elapsed < 10  # the 1 s timeout and its kill, not the 30 s command
    pgid = int((ws.root / "shell.pid").read_text())
    assert _alive_in_group(pgid) == []


def test_timeout_kills_children_that_ignore_sigterm(ws: LocalWorkspace) -> None:
    started = time.monotonic()
    result = ws.run("echo $$ > shell.pid; trap '' TERM; sleep 30", timeout=1)
    assert result.timed_out
    # The 1 s timeout, the 1 s grace before SIGKILL and the drain: ~2.5 s, not 30.
    assert time.monotonic() - started < 10
    assert _alive_in_group(int((ws.root / "shell.pid").read_text())) == []


# -- environment -------------------------------------------------------------------------------


def test_worker_environment_does_not_leak(ws: LocalWorkspace, monkeypatch) -> None:
    monkeypatch.setenv("CANVAS_TEST_SECRET", "s3cret-value")
    result = ws.run('env; echo "[$CANVAS_TEST_SECRET]"', timeout=10)
    assert "s3cret-value" not in result.output
    assert "CANVAS_TEST_SECRET" not in result.output
    assert "[]" in result.output
    assert f"HOME={ws.root}" in result.output


def test_extra_env_is_given_to_commands(dirs: tuple[Path, Path]) -> None:
    ws = LocalWorkspace(*dirs, env={"GRANTED_TOKEN": "abc"})
    assert ws.run('echo "$GRANTED_TOKEN"', timeout=10).output == "abc\n"


def test_run_leaves_no_temporary_files(ws: LocalWorkspace) -> None:
    ws.run("cd . && export A=1", timeout=10)
    assert sorted(p.name for p in ws.state_dir.iterdir()) == ["cwd", "env.sh"]


# -- paths -------------------------------------------------------------------------------------


def test_resolve_relative_absolute_and_new_paths(ws: LocalWorkspace) -> None:
    assert ws.resolve("a/b.txt") == ws.root / "a" / "b.txt"
    assert ws.resolve(str(ws.root / "x")) == ws.root / "x"
    assert ws.resolve(".") == ws.root
    assert ws.resolve("new/dir/../file") == ws.root / "new" / "file"


@pytest.mark.parametrize("path", ["..", "../x", "a/../../x", "/etc/passwd", "/"])
def test_resolve_refuses_paths_outside(ws: LocalWorkspace, path: str) -> None:
    with pytest.raises(WorkspacePathError, match=f"path '{path}' is outside the workspace"):
        ws.resolve(path)


def test_resolve_refuses_sibling_with_common_prefix(ws: LocalWorkspace) -> None:
    sibling = ws.root.parent / (ws.root.name + "-other")
    sibling.mkdir()
    with pytest.raises(WorkspacePathError):
        ws.resolve(str(sibling))


def test_links_are_refused_when_opened_never_followed(ws: LocalWorkspace, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("no")
    os.symlink(outside, ws.root / "link")
    assert ws.resolve("link/secret.txt") == ws.root / "link" / "secret.txt"  # lexical only
    with pytest.raises(WorkspacePathError, match="'link' is a symbolic link"):
        ws.read_text("link/secret.txt")
    with pytest.raises(WorkspacePathError, match="'link' is a symbolic link"):
        ws.write_text("link/new.txt", "x")
    assert not (outside / "new.txt").exists()


def test_a_link_inside_root_is_not_followed_either(ws: LocalWorkspace) -> None:
    (ws.root / "real").mkdir()
    (ws.root / "real" / "f").write_text("real")
    os.symlink(ws.root / "real", ws.root / "alias")
    os.symlink("real/f", ws.root / "f-link")
    assert ws.resolve("alias/f") == ws.root / "alias" / "f"
    for path in ("alias/f", "f-link"):
        with pytest.raises(WorkspacePathError, match="is a symbolic link; links are not followed"):
            ws.read_text(path)
        with pytest.raises(WorkspacePathError, match="is a symbolic link"):
            ws.write_text(path, "x")
    assert (ws.root / "real" / "f").read_text() == "real"
    assert (ws.root / "f-link").is_symlink()


def test_write_exclusive_and_mode_kept(ws: LocalWorkspace) -> None:
    ws.write_text("new.txt", "one", exclusive=True)
    with pytest.raises(FileExistsError):
        ws.write_text("new.txt", "two", exclusive=True)
    (ws.root / "new.txt").chmod(0o640)
    ws.write_text("new.txt", "three")
    assert ws.read_text("new.txt") == "three"
    assert (ws.root / "new.txt").stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in ws.root.iterdir()) == ["new.txt"]  # no temporary left


def test_current_dir_is_the_folder_itself_and_never_a_link(ws: LocalWorkspace) -> None:
    ws.run("mkdir -p real/sub && ln -s real alias && cd alias/sub", timeout=10)
    assert ws.current_dir() == ws.root / "real" / "sub"  # the shell saved the folder, not the link
    for saved in (f"{ws.root}/alias/sub", "/etc", f"{ws.root}/../x", "relative", f"{ws.root}/gone"):
        (ws.state_dir / "cwd").write_text(saved)
        assert ws.current_dir() == ws.root, saved
    (ws.state_dir / "cwd").write_text(f"{ws.root}/real/../real/sub")
    assert ws.current_dir() == ws.root / "real" / "sub"


def test_write_and_read_text(ws: LocalWorkspace) -> None:
    target = ws.write_text("deep/dir/f.txt", "a\r\nb\n")
    assert target == ws.root / "deep" / "dir" / "f.txt"
    assert ws.read_text("deep/dir/f.txt") == "a\r\nb\n"


def test_state_path_rejects_nested_names(ws: LocalWorkspace) -> None:
    assert ws.state_path("history.json") == ws.state_dir / "history.json"
    for bad in ["", "..", "a/b", "../x"]:
        with pytest.raises(ValueError):
            ws.state_path(bad)
