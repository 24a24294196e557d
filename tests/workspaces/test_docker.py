"""DockerWorkspace against the real engine of this machine and a locally built image
(tests/docker_images.py): no mocks. Without an engine these fail; they are never skipped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from tests import docker_images
from tests.conftest import REPO, wait_for
from tests.escape import CANARY_NAME, worker_values
from workspaces.docker import (
    LABEL_CONVERSATION,
    LABEL_MANAGED,
    LABEL_TEAM,
    DockerLimits,
    DockerWorkspace,
    DockerWorkspaceError,
    docker_available,
    sweep_orphans,
)

pytestmark = pytest.mark.docker

# Every conversation id here starts with this run's prefix: the finalizer removes exactly ours.
PREFIX = f"t{uuid.uuid4().hex[:10]}"
LIMITS = DockerLimits(memory_mb=64, pids=64)


@pytest.fixture(scope="module")
def engine() -> Iterator[docker.DockerClient]:
    client = docker.from_env()
    docker_images.test_image()
    yield client
    for container in client.containers.list(all=True, filters={"label": LABEL_CONVERSATION}):
        if container.labels.get(LABEL_CONVERSATION, "").startswith(PREFIX):
            container.remove(force=True, v=True)
    for container in client.containers.list(all=True, filters={"name": PREFIX}):
        container.remove(force=True, v=True)  # the unlabelled one of the sweep test
    client.close()


def make(tmp_path: Path, name: str = "", **options) -> DockerWorkspace:
    conversation = f"{PREFIX}-{name or uuid.uuid4().hex[:8]}"
    options.setdefault("limits", LIMITS)
    options.setdefault("image", docker_images.test_image())
    return DockerWorkspace(
        tmp_path / "root", tmp_path / "state", conversation_id=conversation, team_id=7, **options
    )


@pytest.fixture
def ws(engine, tmp_path: Path) -> Iterator[DockerWorkspace]:
    workspace = make(tmp_path)
    yield workspace
    workspace.close()


def test_docker_answers_here() -> None:
    assert docker_available() is None


def test_exec_output_and_exit_codes(ws) -> None:
    result = ws.run("echo out; echo err >&2; id -un; pwd", timeout=30)
    assert result.exit_code == 0
    assert result.output == "out\nerr\nagent\n/workspace\n"
    assert ws.run("exit 3", timeout=30).exit_code == 3
    assert ws.run("no-such-tool", timeout=30).exit_code == 127


def test_output_is_bounded(engine, tmp_path) -> None:
    ws = make(tmp_path, max_output_chars=1000)
    try:
        result = ws.run("seq 1 100000", timeout=30)
    finally:
        ws.close()
    assert result.exit_code == 0 and result.truncated
    assert result.output.startswith("1\n2\n") and result.output.endswith("99999\n100000\n")
    assert len(result.output) < 1400
    # The whole of it is in the output area, named as the agent sees it in the container.
    assert f"is in /workspace/{result.output_file}:" in result.output
    kept = tmp_path / "root" / result.output_file
    assert kept.read_text() == "".join(f"{i}\n" for i in range(1, 100001))


_CONTINUE = """
import sys
from pathlib import Path
from workspaces.docker import DockerLimits, DockerWorkspace
ws = DockerWorkspace(Path(sys.argv[1]), Path(sys.argv[2]), conversation_id=sys.argv[3],
                     team_id=7, image=sys.argv[4], limits=DockerLimits(memory_mb=64, pids=64))
result = ws.run(sys.argv[5], timeout=30)
print(result.output, end="")
sys.exit(result.exit_code)
"""


def _in_other_process(ws: DockerWorkspace, command: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _CONTINUE, str(ws.root), str(ws.state_dir),
         ws.conversation_id, ws.image, command],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_cwd_and_exports_carry_over_to_another_worker_process(ws) -> None:
    ws.run("mkdir -p a/b && cd a/b && export GREETING='hello there' && X=unexported", timeout=30)
    assert ws.current_dir() == ws.root / "a" / "b"
    output = _in_other_process(ws, 'echo "$PWD|$GREETING|$X"; cd ..; export AFTER=1')
    assert output == "/workspace/a/b|hello there|\n"
    assert ws.run('echo "$PWD|$AFTER"', timeout=30).output == "/workspace/a|1\n"


def test_a_cwd_outside_the_workspace_falls_back_to_root(ws) -> None:
    ws.run("cd /tmp", timeout=30)
    assert ws.current_dir() == ws.root
    assert ws.run("pwd", timeout=30).output == "/workspace\n"


def _processes(ws: DockerWorkspace) -> str:
    return ws.run("ps -o args", timeout=30).output


def test_a_timed_out_command_is_killed_with_its_group(ws) -> None:
    started = time.monotonic()
    result = ws.run("sleep 31 & sleep 32; echo never", timeout=1)
    assert result.timed_out and result.exit_code is None
    assert "never" not in result.output
    assert time.monotonic() - started < 5
    listing = _processes(ws)
    assert "sleep 31" not in listing and "sleep 32" not in listing


def test_background_jobs_end_with_their_command(ws) -> None:
    result = ws.run("sleep 33 & echo started", timeout=30)
    assert result.output == "started\n" and result.exit_code == 0
    assert "sleep 33" not in _processes(ws)


def test_cancel_interrupts_the_command(ws) -> None:
    cancel = threading.Event()
    timer = threading.Timer(0.5, cancel.set)
    timer.start()
    started = time.monotonic()
    result = ws.run("echo begun; sleep 34", timeout=60, cancel=cancel)
    timer.cancel()
    assert result.interrupted and not result.timed_out and result.exit_code is None
    assert result.output.startswith("begun\n")
    assert time.monotonic() - started < 5
    assert "sleep 34" not in _processes(ws)


def test_secrets_reach_only_the_command_given_them(ws) -> None:
    secret = f"s3cret-{uuid.uuid4().hex}"
    result = ws.run(
        'echo "[$TOKEN]"; export COPY="x-$TOKEN-y" KEPT=plain',
        timeout=30,
        extra_env={"TOKEN": secret},
    )
    assert result.output == f"[{secret}]\n"
    saved = b"".join(p.read_bytes() for p in ws.state_dir.rglob("*") if p.is_file())
    assert secret.encode() not in saved
    assert ws.run('echo "[$TOKEN][$COPY][$KEPT]"', timeout=30).output == "[][][plain]\n"
    # Neither the container's own environment nor `docker inspect` carry it.
    info = docker.from_env().api.inspect_container(ws.container_name)
    assert secret not in str(info["Config"]["Env"])
    with pytest.raises(ValueError):
        ws.run("true", timeout=30, extra_env={"BAD NAME": "x"})


def _dispatcher_pid(ws: DockerWorkspace) -> int | None:
    """The host pid of the container's dispatcher (its own group leader; the subshell that
    waits for each command is a fork of it, in its group)."""
    top = docker.from_env().api.top(ws.container_name, ps_args="-o pid,pgid,args")
    for pid, pgid, args in top["Processes"]:
        if pid == pgid and "canvas-dispatch" in args:
            return int(pid)
    return None


def _count_execs(ws: DockerWorkspace, monkeypatch) -> list[list[str]]:
    """Every exec created from here on (its argv), through the workspace's own client."""
    api = ws._api()
    created: list[list[str]] = []
    real = api.exec_create

    def counting(container, cmd, *args, **kwargs):
        created.append(cmd)
        return real(container, cmd, *args, **kwargs)

    monkeypatch.setattr(api, "exec_create", counting)
    return created


def test_commands_go_to_the_dispatcher_without_an_exec(ws, monkeypatch) -> None:
    ws.run("true", timeout=30)  # creates the container and starts the dispatcher
    execs = _count_execs(ws, monkeypatch)
    for n in range(3):
        assert ws.run(f"echo {n}; exit {n}", timeout=30).exit_code == n
    assert execs == []
    # A message the pipe cannot take in one piece goes by exec, with the same result.
    big = "x" * 5000
    assert ws.run('echo "${#BIG}"', timeout=30, extra_env={"BIG": big}).output == "5000\n"
    assert len(execs) == 1


def test_a_killed_dispatcher_is_replaced_by_the_next_command(ws, monkeypatch) -> None:
    ws.run("export KEPT=1", timeout=30)
    first = _dispatcher_pid(ws)
    assert first is not None
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: _dispatcher_pid(ws) is None, message="the dispatcher is gone")
    assert ws.run('echo "$KEPT"', timeout=30).output == "1\n"
    second = _dispatcher_pid(ws)
    assert second not in (None, first)
    execs = _count_execs(ws, monkeypatch)
    assert ws.run("echo again", timeout=30).output == "again\n"
    assert execs == []  # the new one takes commands again


def test_without_a_dispatcher_commands_use_exec(engine, tmp_path, monkeypatch) -> None:
    # An image without setsid: the dispatcher exits at once (3), and is not tried again.
    monkeypatch.setattr("workspaces.docker._DISPATCH", "exit 3")
    ws = make(tmp_path)
    try:
        ws.run("cd /tmp && mkdir -p /workspace/d && cd /workspace/d && export V=1", timeout=30)
        execs = _count_execs(ws, monkeypatch)
        result = ws.run('echo "$PWD $V"; exit 4', timeout=30)
        assert result.output == "/workspace/d 1\n" and result.exit_code == 4
        assert len(execs) == 1 and "canvas-dispatch" not in execs[0]
        assert _dispatcher_pid(ws) is None
    finally:
        ws.close()


def test_a_command_the_dispatcher_took_and_never_started_still_runs(ws, caplog) -> None:
    ws.run("true", timeout=30)
    pid = _dispatcher_pid(ws)
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # it takes nothing more from the pipe
    threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()
    started = time.monotonic()
    result = ws.run("echo ran once >> log; cat log", timeout=30)
    assert result.output == "ran once\n" and result.exit_code == 0
    assert time.monotonic() - started < 10
    assert "the dispatcher went away" in caplog.text  # and the exec path ran it


def test_a_secret_is_in_no_file_during_or_after_its_command(ws) -> None:
    ws.run("true", timeout=30)
    secret = f"s3cret-{uuid.uuid4().hex}"

    def files() -> bytes:
        found = [p for p in ws.state_dir.rglob("*") if p.is_file() and not p.is_symlink()]
        return b"".join(p.read_bytes() for p in found if p.exists())

    results = []

    def command() -> None:
        script = 'echo "[$TOKEN]" > /dev/null; sleep 2; echo "[$TOKEN]"'
        results.append(ws.run(script, timeout=30, extra_env={"TOKEN": secret}))

    worker = threading.Thread(target=command)
    worker.start()
    try:
        wait_for(lambda: list(ws.runs_dir.glob("run-*/command.pgid")), message="it started")
        assert secret.encode() not in files()
        # Nor in the dispatcher's own environment: only the command's has it.
        environ = Path(f"/proc/{_dispatcher_pid(ws)}/environ").read_bytes()
        assert secret.encode() not in environ
    finally:
        worker.join(timeout=30)
    assert results[0].output == f"[{secret}]\n"
    assert secret.encode() not in files()


def test_files_round_trip_between_host_and_container(ws) -> None:
    ws.write_text("notes/in.txt", "from the host\n")
    result = ws.run("cat notes/in.txt && echo 'from the container' > notes/out.txt", timeout=30)
    assert result.output == "from the host\n"
    assert ws.read_text("notes/out.txt") == "from the container\n"
    # A file the worker wrote stays writable for the agent.
    assert ws.run("echo more >> notes/in.txt && cat notes/in.txt", timeout=30).exit_code == 0
    assert ws.read_text("notes/in.txt") == "from the host\nmore\n"
    assert [c.path for c in ws.changes()] == []  # no baseline taken: nothing to compare


def test_a_memory_hog_is_killed_and_the_container_stays(ws) -> None:
    result = ws.run(
        "x=$(head -c 400000000 /dev/zero | tr '\\0' a); echo survived ${#x}", timeout=60
    )
    assert "survived" not in result.output
    assert result.exit_code not in (0, None)
    assert ws.run("echo fine", timeout=30).output == "fine\n"
    info = docker.from_env().api.inspect_container(ws.container_name)
    assert info["HostConfig"]["Memory"] == 64 * 1024 * 1024
    assert info["HostConfig"]["MemorySwap"] == 64 * 1024 * 1024


def test_a_fork_bomb_stops_at_the_pids_limit(ws) -> None:
    assert ws.run("cat /sys/fs/cgroup/pids/pids.max", timeout=30).output == "64\n"
    result = ws.run("bomb() { bomb | bomb & }; bomb; sleep 30", timeout=4)
    assert result.timed_out
    # The bomb's last processes are reaped after the kill; on a loaded machine that is slow.
    wait_for(lambda: ws.run("echo usable", timeout=10).output == "usable\n", timeout=120)
    listing = _processes(ws)
    assert "bomb" not in listing and "sleep 30" not in listing


def test_network_none_has_only_loopback(ws) -> None:
    result = ws.run(
        "ls /sys/class/net; (exec 3<>/dev/tcp/127.0.0.1/5432) && echo POSTGRES-REACHED",
        timeout=30,
    )
    assert result.output.startswith("lo\n")
    assert "POSTGRES-REACHED" not in result.output
    assert "Connection refused" in result.output


def test_container_is_labelled_limited_and_locked_down(ws) -> None:
    ws.run("true", timeout=30)
    info = docker.from_env().api.inspect_container(ws.container_name)
    assert info["Config"]["Labels"] == {
        LABEL_MANAGED: "1",
        LABEL_CONVERSATION: ws.conversation_id,
        LABEL_TEAM: "7",
    }
    host = info["HostConfig"]
    assert host["NetworkMode"] == "none" and host["Init"] is True
    assert host["CapDrop"] == ["ALL"] and host["SecurityOpt"] == ["no-new-privileges"]
    assert host["PidsLimit"] == 64
    assert sorted(m["Destination"] for m in info["Mounts"]) == ["/canvas/runs", "/workspace"]
    assert info["Config"]["User"] == "agent"


def test_cpu_limit_and_bridge_network_are_passed(engine, tmp_path) -> None:
    ws = make(tmp_path, limits=DockerLimits(cpus=0.5, pids=None), network="bridge")
    try:
        assert ws.run("ls /sys/class/net", timeout=30).output.split() == ["eth0", "lo"]
        host = docker.from_env().api.inspect_container(ws.container_name)["HostConfig"]
        assert host["NanoCpus"] == 500_000_000 and host["NetworkMode"] == "bridge"
    finally:
        ws.close()


def test_nothing_of_the_worker_or_the_host_is_in_reach(ws, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(CANARY_NAME, f"canary-{uuid.uuid4().hex}")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host only\n")
    result = ws.run(
        f"""
        echo "== environ"; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < "$f"; done
        echo "== host"; ls {REPO} {outside}; cat {outside}/secret.txt
        echo "== writes"
        for p in / /etc /usr /bin /canvas {outside}; do echo x > "$p/escaped" && echo "WROTE $p"; done
        echo ok > /workspace/inside
        echo "== done"
        """,
        timeout=30,
    )
    output = result.output
    assert "== done" in output
    for name, value in worker_values().items():
        assert value not in output, f"the worker's {name} leaked"
    assert CANARY_NAME not in output and "DJANGO" not in output
    assert "host only" not in output and "manage.py" not in output
    assert "WROTE" not in output
    assert not (outside / "escaped").exists()
    assert ws.read_text("inside") == "ok\n"


def test_pause_and_resume(ws) -> None:
    ws.run("true", timeout=30)
    ws.pause()
    assert ws.container_status() == "paused"
    ws.resume()
    assert ws.container_status() == "running"
    ws.pause()
    assert ws.run("echo back", timeout=30).output == "back\n"  # a command unpauses it
    assert ws.container_status() == "running"


def test_close_removes_the_container_and_keeps_the_directory(ws) -> None:
    ws.run("echo kept > file.txt", timeout=30)
    ws.close()
    assert ws.container_status() is None
    assert ws.read_text("file.txt") == "kept\n"
    ws.close()  # twice is fine


def test_a_vanished_container_is_recreated(ws) -> None:
    ws.run("cd / && mkdir -p /workspace/d && cd /workspace/d && export V=1", timeout=30)
    first = docker.from_env().api.inspect_container(ws.container_name)["Id"]
    docker.from_env().api.remove_container(ws.container_name, force=True)
    assert ws.run('echo "$PWD $V"', timeout=30).output == "/workspace/d 1\n"
    assert docker.from_env().api.inspect_container(ws.container_name)["Id"] != first
    docker.from_env().api.stop(ws.container_name, timeout=0)
    assert ws.run("echo started", timeout=30).output == "started\n"


def test_two_racing_processes_end_up_with_one_container(engine, tmp_path) -> None:
    workspaces = [make(tmp_path, "race") for _ in range(4)]
    ids: list[str] = []
    threads = [threading.Thread(target=lambda w=w: ids.append(w.ensure_container())) for w in workspaces]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    try:
        assert len(ids) == 4 and len(set(ids)) == 1
    finally:
        workspaces[0].close()


def test_stop_leftovers_kills_what_a_dead_runner_left(ws) -> None:
    ws.run("true", timeout=30)
    runner = subprocess.Popen(
        [sys.executable, "-c", _CONTINUE, str(ws.root), str(ws.state_dir),
         ws.conversation_id, ws.image, "sleep 35"],
        cwd=REPO,
    )  # fmt: skip
    try:
        wait_for(lambda: "sleep 35" in _processes(ws), message="the runner's command started")
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    assert "sleep 35" in _processes(ws)  # the runner's death did not end it
    assert ws.stop_leftovers() == 1
    assert "sleep 35" not in _processes(ws)
    assert not list(ws.state_dir.glob("run-*.pid"))
    assert ws.stop_leftovers() == 0


def test_sweep_removes_orphans_and_leaves_unlabelled_containers(engine, tmp_path) -> None:
    closed, open_ = make(tmp_path / "a", "closed"), make(tmp_path / "b", "open")
    closed.ensure_container()
    open_.ensure_container()
    stranger = engine.containers.run(
        docker_images.test_image(), ["sleep", "infinity"], name=f"{PREFIX}-stranger", detach=True
    )
    try:
        # Only our own ids are judged closed: other tests' containers on this engine stay.
        removed = sweep_orphans(lambda ids: ids - {closed.conversation_id})
        assert removed == 1
        assert closed.container_status() is None
        assert open_.container_status() == "running"
        stranger.reload()
        assert stranger.status == "running"
    finally:
        stranger.remove(force=True)
        open_.close()


def test_errors_say_what_to_do(engine, tmp_path) -> None:
    missing = make(tmp_path / "a", image="canvas-test/no-such-image:0")
    with pytest.raises(DockerWorkspaceError, match="is not on this engine"):
        missing.run("true", timeout=30)
    nowhere = make(
        tmp_path / "b",
        client_factory=lambda: docker.DockerClient(base_url="unix:///nonexistent/docker.sock"),
    )
    with pytest.raises(DockerWorkspaceError, match="no Docker engine answers"):
        nowhere.run("true", timeout=30)
    assert os.path.isdir(tmp_path / "b" / "root")
