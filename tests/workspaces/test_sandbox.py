"""Commands run through the real LocalWorkspace under the real bubblewrap sandbox: what they can
no longer see or reach, what they keep, and what happens where there is no sandbox."""

from __future__ import annotations

import os
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from conversations.events import ActionEvent
from orchestration.step.loop import execute_action
from orchestration.tools.base import ToolContext
from orchestration.tools.terminal import TerminalTool
from tests.conftest import wait_for
from tests.escape import CANARY_NAME, assert_contained, escape_script, sandbox_broken
from workspaces import sandbox
from workspaces.local import LocalWorkspace
from workspaces.sandbox import SandboxUnavailable


@pytest.fixture(autouse=True)
def canary(monkeypatch) -> str:
    value = f"canary-{uuid.uuid4().hex}"
    monkeypatch.setenv(CANARY_NAME, value)
    return value


@pytest.fixture
def ws(tmp_path: Path) -> LocalWorkspace:
    return LocalWorkspace(tmp_path / "root", tmp_path / "state")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    return path


def test_the_sandbox_works_here() -> None:
    status = sandbox.sandbox_status()
    assert status.available, status.reason
    assert not sandbox.commands_unsandboxed()


def test_a_command_cannot_see_or_reach_anything_of_the_workers(ws, outside) -> None:
    result = ws.run(escape_script(outside=outside), timeout=30)
    assert_contained(result.output, outside=outside)
    assert "No such file or directory" in result.output  # settings.py, the worker's cwd
    assert "Connection refused" in result.output or "Network is unreachable" in result.output


def test_unsandboxed_the_worker_is_in_reach_which_is_what_the_sandbox_closes(ws, settings) -> None:
    with sandbox_broken(settings, allow_unsandboxed=True):
        output = ws.run(
            # $PPID is the launcher that ties the command's life to the worker's; its parent
            # is the worker.
            "read -r _ _ _ worker _ < /proc/$PPID/stat; tr '\\0' '\\n' < /proc/$worker/environ; "
            "(exec 3<>/dev/tcp/127.0.0.1/5432) && echo POSTGRES-REACHED",
            timeout=30,
        ).output
    worker_environ = Path(f"/proc/{os.getpid()}/environ").read_text().split("\0")
    assert worker_environ[0] in output  # the test process is the worker here
    assert "POSTGRES-REACHED" in output


def test_secrets_given_to_a_command_are_on_no_argv_and_bwrap_has_no_environment(
    tmp_path: Path,
) -> None:
    secret = f"granted-{uuid.uuid4().hex}"
    ws = LocalWorkspace(tmp_path / "root", tmp_path / "state")
    command = 'touch started; until [ -e stop ]; do sleep 0.02; done; echo "${#TOKEN}"'
    result: dict[str, object] = {}
    runner = threading.Thread(
        target=lambda: result.update(r=ws.run(command, timeout=30, extra_env={"TOKEN": secret}))
    )
    runner.start()
    try:
        wait_for(lambda: (ws.root / "started").exists(), timeout=10, message="command started")
        # Ours only: other test processes (xdist) run sandboxes too, and theirs come and go.
        bwraps = [p for p in _host_processes(parent=os.getpid()) if p[1].startswith(b"bwrap\0")]
        assert bwraps, "no bwrap process seen from the host"
        for pid, cmdline in bwraps:
            assert secret.encode() not in cmdline
            assert Path(f"/proc/{pid}/environ").read_bytes() == b""
            assert b"/work/" not in cmdline  # argv[0] is only "bwrap"
        inside = ws.run("tr '\\0' ' ' < /proc/1/cmdline", timeout=10).output
        assert inside.startswith("bwrap --args ")
    finally:
        (ws.root / "stop").touch()
        runner.join(30)
    assert result["r"].output == f"{len(secret)}\n"  # type: ignore[union-attr]


def test_the_state_directory_is_out_of_reach_and_a_planted_symlink_is_not_followed(
    ws, outside
) -> None:
    ws.state_path("history.json").write_text("private to the worker")
    secret = outside / "secret.sh"
    secret.write_text("FROM_HOST=host-only-value\n")
    ws.run("cd . && export KEPT=1", timeout=10)
    shown = ws.run(f"cat {ws.state_path('history.json')}; ls {ws.state_dir}", timeout=10).output
    assert "private to the worker" not in shown
    assert "env.sh" not in shown  # only its own run directory is there
    # The shell's save trap writes through a symlink the command put in its place; the worker
    # refuses anything but regular files, so the next command does not source the host file.
    ws.run(f'rm -f "$__canvas_run.env"; ln -s {secret} "$__canvas_run.env"', timeout=10)
    after = ws.run('echo "[${FROM_HOST-}] [$KEPT]"', timeout=10).output
    assert after == "[] [1]\n"
    assert not (ws.state_dir / "env.sh").is_symlink()


def test_the_agent_keeps_what_it_works_with(ws) -> None:
    result = ws.run(
        "mkdir -p src && cd src && export GREETING=hi && echo hello > f.txt && "
        "python3 -c 'print(open(\"f.txt\").read().strip())' && git --version >/dev/null && "
        'echo "$HOME"',
        timeout=30,
    )
    assert result.exit_code == 0, result.output
    assert result.output == f"hello\n{ws.root}\n"
    assert ws.run('pwd; echo "$GREETING"', timeout=10).output == f"{ws.root}/src\nhi\n"


def test_a_timeout_kills_everything_inside_yet_the_shell_saves_its_state(ws) -> None:
    marker = f"{uuid.uuid4().int % 1000}.{os.getpid()}"
    result = ws.run(f"mkdir -p sub && cd sub && {{ sleep {marker} & sleep {marker}; }}", timeout=1)
    assert result.timed_out
    assert not [p for p in _host_processes() if marker.encode() in p[1]]
    assert ws.run("pwd", timeout=10).output == f"{ws.root}/sub\n"


def test_loopback_is_reached_only_with_host_network_and_the_site_allowing_it(
    tmp_path: Path, settings
) -> None:
    ping = "exec 3<>/dev/tcp/127.0.0.1/6379 && printf 'PING\\r\\n' >&3 && head -c 7 <&3"
    host = LocalWorkspace(tmp_path / "root", tmp_path / "state", network="host")
    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = False
    refused = host.run(ping, timeout=10)
    assert refused.exit_code != 0 and "PONG" not in refused.output
    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = True
    assert host.run(ping, timeout=10).output.startswith("+PONG")
    none = LocalWorkspace(tmp_path / "root", tmp_path / "state")  # still none by default
    assert "PONG" not in none.run(ping, timeout=10).output


def test_without_a_sandbox_commands_refuse_naming_the_setting(ws, settings) -> None:
    with sandbox_broken(settings, allow_unsandboxed=False):
        assert not sandbox.sandbox_status().available
        assert "/bin/false failed" in sandbox.sandbox_status().reason
        with pytest.raises(SandboxUnavailable, match="CANVAS_UNSANDBOXED_COMMANDS=true"):
            ws.run("echo should-not-run > ran.txt", timeout=10)
        ctx = ToolContext(conversation_id="c1", workspace=ws)
        action = ActionEvent(tool_call_id="t1", tool="terminal", arguments='{"command": "ls"}')
        observation = execute_action(action, {"terminal": TerminalTool()}, ctx).observation
        assert observation.is_error
        assert "no working sandbox" in observation.content
        assert "CANVAS_UNSANDBOXED_COMMANDS" in observation.content
        assert not sandbox.commands_unsandboxed()
    assert not (ws.root / "ran.txt").exists()
    assert sorted(p.name for p in ws.state_dir.iterdir()) == []


def test_where_the_site_allows_it_commands_run_unsandboxed_and_say_so(ws, settings) -> None:
    with sandbox_broken(settings, allow_unsandboxed=True):
        assert sandbox.commands_unsandboxed()
        assert ws.run("echo plain", timeout=10).output == "plain\n"


def _host_processes(*, parent: int | None = None) -> list[tuple[int, bytes]]:
    """(pid, cmdline) of the host's processes, or only the children of `parent`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[1])
                if parent is None or ppid == parent:
                    found.append((int(entry.name), (entry / "cmdline").read_bytes()))
            except (OSError, IndexError, ValueError):
                continue
    return found


PROJECT = str(Path(__file__).resolve().parents[2])


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/", "it holds /proc"),
        # Issue 23's list, each itself and something inside it.
        ("/proc", "it is inside /proc"),
        ("/proc/1/root", "it is inside /proc"),
        ("/sys", "it is inside /sys"),
        ("/sys/fs/cgroup", "it is inside /sys"),
        ("/dev", "it is inside /dev"),
        ("/dev/shm", "it is inside /dev"),
        ("/run", "it is inside /run"),
        ("/run/user", "it is inside /run"),
        ("/var/run", "it is inside /var/run"),
        ("/var/run/postgresql", "it is inside /var/run"),
        ("/var/run/docker.sock", "it is inside /var/run"),
        ("/var/lib", "it is inside /var/lib"),
        ("/var/lib/postgresql", "it is inside /var/lib"),
        ("/etc", "it is inside /etc"),
        ("/etc/ssl", "it is inside /etc"),
        ("/var", "it holds /var/run"),
        ("/tmp", "it is or holds /tmp"),
        (PROJECT, "it is or holds the project's own folder"),
        # Its parent: named as the project's, or as /tmp or / when the clone lives there.
        (str(Path(PROJECT).parent), "holds"),
        ("relative/dir", "it is not an absolute path"),
    ],
)
def test_the_sandbox_refuses_system_paths_and_the_project_as_mounts(
    tmp_path: Path, settings, path: str, says: str
) -> None:
    for spec in (
        sandbox.SandboxSpec(cwd=tmp_path, writable=(tmp_path,), readonly=(Path(path),)),
        sandbox.SandboxSpec(cwd=tmp_path, writable=(tmp_path, Path(path))),
    ):
        with pytest.raises(sandbox.MountRefused, match="cannot be mounted") as caught:
            sandbox.prepare(spec, ["true"])
        assert path in str(caught.value) and says in str(caught.value)
    settings.CANVAS_SANDBOX_READONLY_PATHS = [path]
    with pytest.raises(sandbox.MountRefused, match="CANVAS_SANDBOX_READONLY_PATHS"):
        sandbox.prepare(sandbox.SandboxSpec(cwd=tmp_path, writable=(tmp_path,)), ["true"])


def test_a_link_to_a_system_path_is_refused_by_what_it_resolves_to(tmp_path: Path) -> None:
    (tmp_path / "etc-link").symlink_to("/etc")
    spec = sandbox.SandboxSpec(cwd=tmp_path, readonly=(tmp_path / "etc-link",))
    with pytest.raises(sandbox.MountRefused, match="it resolves to /etc"):
        sandbox.prepare(spec, ["true"])


def test_refused_mounts_are_refused_unsandboxed_too(tmp_path: Path, settings) -> None:
    with sandbox_broken(settings, allow_unsandboxed=True):
        spec = sandbox.SandboxSpec(cwd=tmp_path, readonly=(Path("/"),))
        with pytest.raises(sandbox.MountRefused):
            sandbox.prepare(spec, ["true"])


def test_the_settings_refuse_a_system_path_at_startup() -> None:
    from workspaces.mounts import site_path_refusals

    assert site_path_refusals(["/opt/tools", "/usr/local"]) == []
    refused = site_path_refusals(["/opt/tools", "/var/run", PROJECT])
    assert [line.split(":")[0] for line in refused] == ["/var/run", PROJECT]


def test_allowed_mounts_are_bound_by_descriptor_and_seen_inside(tmp_path: Path, settings) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "note").write_text("site-visible\n")
    settings.CANVAS_SANDBOX_READONLY_PATHS = [str(shared), str(tmp_path / "missing")]
    spec = sandbox.SandboxSpec(cwd=tmp_path / "root", writable=(tmp_path / "root",))
    (tmp_path / "root").mkdir()
    proc = sandbox.popen(
        spec,
        ["/bin/sh", "-c", f"cat {shared}/note; echo x > {shared}/w; grep -c ' {shared} ' "
         "/proc/self/mountinfo"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    out = proc.communicate(timeout=30)[0].decode()
    assert out.startswith("site-visible\n") and "Read-only file system" in out
    assert out.strip().endswith("1")
    assert not (shared / "w").exists()
