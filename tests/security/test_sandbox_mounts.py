"""Issue 23, item 1: a team's MCP server or ACP profile chooses nothing the host sees.

The attack on 34cf807: `PATH="/:<workspace>"` with `command: "tmp"` made the launcher bind `/`
read-only (os.access(X_OK) is true for the directory /tmp) and run a file the agent planted as
<workspace>/tmp; from there the deploy env file, other teams' folders and Postgres through its
Unix socket. Here hostile PATHs, commands and args are either refused with a message naming
the command, or launched through the real spawn path (acp_bridge.process.LocalChild, as
MCP servers and ACP agents are) into a real bubblewrap sandbox whose /proc/self/mountinfo
holds nothing outside the site's set and from which no host Unix socket answers (every one
listening on the host is tried); the terminal and hooks likewise, in every network.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shlex
import socket
import stat
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from acp_bridge.process import LocalChild
from acp_bridge.profiles import AcpProfile, site_profiles_parse
from orchestration.control.hooks import HookSpec, run_hook
from orchestration.external.environment import agent_environment
from orchestration.external.place import agent_place
from orchestration.mcp.launch import LaunchError, server_launch
from orchestration.mcp.rules import McpServerConfig, McpValueError, clean_server
from workspaces import sandbox
from workspaces.local import LocalWorkspace
from workspaces.mounts import SYSTEM_DIRS

HOST_SOCKETS = (
    "/var/run/postgresql/.s.PGSQL.5432",
    "/run/postgresql/.s.PGSQL.5432",
    "/var/run/docker.sock",
    "/var/run/redis/redis-server.sock",
    "/run/redis/redis-server.sock",
)
VIRTUAL = {"proc", "tmpfs", "devtmpfs", "devpts", "mqueue", "sysfs"}

# Runs inside the sandbox: the mount table, HOME, and what connecting to each socket gives.
PROBE = r"""
import json, os, socket, sys
mounts = []
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    fstype = fields[fields.index("-") + 1]
    mounts.append([fields[3], fields[4], fstype])
reached = {}
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        reached[path] = "CONNECTED"
    except OSError as exc:
        reached[path] = type(exc).__name__
    finally:
        s.close()
print(json.dumps({"mounts": mounts, "home": os.environ.get("HOME"), "reached": reached}))
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A conversation's folder holding what an agent could plant: a program named like a
    directory on the host, links to /, /etc and /usr/bin."""
    root = tmp_path / "ws"
    root.mkdir()
    for name in ("tmp", "python3", "tool"):
        planted = root / name
        planted.write_text("#!/bin/sh\necho PLANTED-RAN\n")
        planted.chmod(0o755)
    (root / "to-root").symlink_to("/")
    (root / "to-etc").symlink_to("/etc")
    (root / "to-usr-bin").symlink_to("/usr/bin")
    return Path(os.path.realpath(root))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    tool = path / "tool"
    tool.write_text("#!/bin/sh\necho OUTSIDE-RAN\n")
    tool.chmod(0o755)
    return path


@pytest.fixture
def own_socket(tmp_path: Path) -> Iterator[str]:
    """A listening Unix socket outside every workspace, reachable from the host."""
    path = str(tmp_path / "sockets" / "service.sock")
    os.makedirs(os.path.dirname(path))
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(path)  # the control: from the host it answers
    client.close()
    yield path
    server.close()


def hostile_path(workspace: Path, outside: Path) -> str:
    return ":".join(["/", str(workspace), f"{workspace}/to-root", f"{workspace}/to-usr-bin",
                     str(outside), "/var/run/postgresql", "../..", "/etc"])  # fmt: skip


def mcp(command: str, *, args: Sequence[str] = (), env: dict | None = None) -> McpServerConfig:
    return McpServerConfig(
        name="evil", transport="stdio", command=command, args=tuple(args), env=env or {}
    )


def launch_mcp(config: McpServerConfig, workspace: Path):
    return server_launch(config, secrets={}, workspace=str(workspace), network="none")


def run_child(
    command: str, args: Sequence[str], *, env: dict, workspace: Path, readonly=()
) -> dict:
    """Spawn as MCP servers and ACP agents are spawned, and read what the probe printed."""

    async def go() -> bytes:
        child = await LocalChild.spawn(
            command, args, env=env, cwd=workspace, readonly=tuple(Path(p) for p in readonly)
        )
        try:
            out = await asyncio.wait_for(child.stdout.read(), 30)
            await asyncio.wait_for(child.wait(), 30)
            return out
        finally:
            await child.end_group(1.0)

    out = asyncio.run(go())
    return json.loads(out.decode().strip().splitlines()[-1])


def assert_nothing_outside(result: dict, *, workspace: Path, sockets: Sequence[str]) -> None:
    allowed = {"/", "/usr", "/tmp", "/etc", str(workspace), result["home"]}
    allowed |= {f"/etc/{name}" for name in sandbox._ETC}
    allowed |= {path for path in SYSTEM_DIRS if not os.path.islink(path)}
    for root, point, fstype in result["mounts"]:
        if point.startswith(("/proc/", "/dev/")) or point in ("/proc", "/dev"):
            assert fstype in VIRTUAL or point in {f"/dev/{n}" for n in
                                                  ("null", "zero", "full", "random", "urandom", "tty")}, point  # fmt: skip
            continue
        assert point in allowed, f"{point} (host {root}, {fstype}) is mounted"
        assert fstype in VIRTUAL or root != "/", f"the host's root is mounted at {point}"
    points = {point for _, point, _ in result["mounts"]}
    assert str(workspace) in points and "/usr" in points
    for path in sockets:
        assert result["reached"][path] != "CONNECTED", f"{path} answered inside the sandbox"


def sockets_to_try(own_socket: str) -> list[str]:
    """The test's own socket, the well-known ones, and every other listening on the host."""
    known = (path for path in HOST_SOCKETS if _is_socket(path))
    return sorted({own_socket, *known, *host_listening_sockets()})


def host_listening_sockets() -> list[str]:
    """Every Unix socket listening on a path of this host (/proc/net/unix, flag SO_ACCEPTCON):
    Postgres's, Docker's and containerd's, Redis's where it has one, and the test's own."""
    found = set()
    with open("/proc/net/unix") as table:
        next(table)
        for line in table:
            fields = line.split()
            if len(fields) >= 8 and int(fields[3], 16) & 0x10000 and fields[7].startswith("/"):
                found.add(fields[7])
    return sorted(found)


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


# ---- MCP servers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "path", "says"),
    [
        ("tmp", "/:{ws}", "'tmp' is not found in the sandbox's system PATH"),
        ("tool", "{ws}:{outside}", "'tool' is not found"),
        ("{ws}", "", "is a directory, not a program"),
        ("/tmp", "", "is a directory, not a program"),
        ("{ws}/tool", "", "is not in what the sandbox shows"),
        ("{ws}/to-root/usr/bin/python3", "", "is not in what the sandbox shows"),
        ("{ws}/to-usr-bin/python3", "", "is not in what the sandbox shows"),
        ("{outside}/tool", "", "is not in what the sandbox shows"),
        ("{ws}/../outside/tool", "", "is not in what the sandbox shows"),
        ("../../usr/bin/python3", "", "is neither a program name nor a path"),
        ("..", "", "is neither a program name nor a path"),
    ],
)
def test_an_mcp_command_outside_the_sandbox_view_is_refused_by_name(
    workspace, outside, command, path, says
) -> None:
    fill = {"ws": workspace, "outside": outside}
    env = {"PATH": path.format(**fill)} if path else {}
    with pytest.raises(LaunchError) as caught:
        launch_mcp(mcp(command.format(**fill), env=env), workspace)
    assert says in str(caught.value)


def test_the_rules_refuse_relative_tricks_before_any_launch() -> None:
    for command in ("../../bin/sh", "./tmp", "/opt/../bin/sh", "tmp; sh"):
        with pytest.raises(McpValueError, match="command must be a program name"):
            clean_server({"name": "evil", "transport": "stdio", "command": command})


def test_a_hostile_mcp_path_adds_no_mount_and_no_socket_answers(
    workspace, outside, own_socket
) -> None:
    sockets = sockets_to_try(own_socket)
    env = {"PATH": hostile_path(workspace, outside)}
    launch = launch_mcp(mcp("python3", args=["-c", PROBE, *sockets], env=env), workspace)
    stdio = launch.stdio
    assert stdio is not None
    assert stdio.readonly == ()
    assert stdio.command == "/usr/bin/python3"  # found in the view, not in the planted one
    assert stdio.env["PATH"] == env["PATH"]  # still the server's own environment inside
    result = run_child(
        stdio.command, stdio.args, env=dict(stdio.env), workspace=workspace,
        readonly=stdio.readonly,
    )  # fmt: skip
    assert_nothing_outside(result, workspace=workspace, sockets=sockets)


# ---- ACP profiles -----------------------------------------------------------------------------


@pytest.fixture
def local_conversation(user):
    from orchestration import services

    return services.conversation_create(owner=user, prompt="hello", model="demo")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("tmp", "'tmp' is not found in the sandbox's system PATH"),
        ("{ws}", "is a directory, not a program"),
        ("{ws}/tool", "is not in what the sandbox shows"),
        ("{ws}/to-root/usr/bin/python3", "is not in what the sandbox shows"),
    ],
)
def test_a_team_acp_command_outside_the_view_is_refused(
    team, local_conversation, workspace, command, says
) -> None:
    from teams.policies import policy_for_team

    profile = AcpProfile(
        name="evil", command=command.format(ws=workspace), team_id=team.pk, source="team",
        env={"PATH": f"/:{workspace}"},
    )  # fmt: skip
    where = agent_place(local_conversation, policy=policy_for_team(team.pk), profile=profile)
    assert where.error is not None and says in where.error and "'evil'" in where.error


@pytest.mark.django_db
def test_a_team_acp_profile_adds_no_mount_whatever_its_path_or_readonly(
    team, local_conversation, workspace, outside, own_socket
) -> None:
    from teams.policies import policy_for_team

    sockets = sockets_to_try(own_socket)
    profile = AcpProfile(
        name="evil", command="python3", args=("-c", PROBE, *sockets), team_id=team.pk,
        source="team", env={"PATH": hostile_path(workspace, outside)},
    )  # fmt: skip
    policy = policy_for_team(team.pk)
    # A team row's readonly is bounded by CANVAS_ACP_TEAM_READONLY_PATHS (none by default):
    # were one to hold more (written before the site narrowed it), the launch is refused.
    for path in ("/", "/etc", str(outside), "/var/run/postgresql"):
        hostile = dataclasses.replace(profile, readonly=(path,))
        refused = agent_place(local_conversation, policy=policy, profile=hostile).error
        assert refused is not None and '"readonly" path' in refused and repr(path) in refused
    where = agent_place(local_conversation, policy=policy, profile=profile)
    assert where.error is None and where.readonly == () and where.command == "/usr/bin/python3"
    env = agent_environment(profile, team.pk).env
    result = run_child(where.command, profile.args, env=env, workspace=workspace,
                       readonly=where.readonly)  # fmt: skip
    assert_nothing_outside(result, workspace=workspace, sockets=sockets)


@pytest.mark.django_db(transaction=True)  # a slice runs as a worker does, on its own commits
def test_a_turn_of_a_team_profile_that_names_a_directory_fails_naming_it(
    user, team, dispatched
) -> None:
    from acp_bridge.team_profiles import acp_agent_create
    from conversations.events import AgentErrorEvent
    from orchestration import services
    from tests.acp_bridge.turns import of
    from tests.runs import drive

    acp_agent_create(by=user, team=team, name="evil", command="tmp", env={"PATH": "/"})
    conversation = services.conversation_create(
        owner=user, prompt="hello", model="demo", agent="evil"
    )
    drive(dispatched)
    error = of(conversation, AgentErrorEvent)[-1]
    assert error.code == "acp_start_failed"
    assert "'tmp' is not found in the sandbox's system PATH" in error.message


@pytest.mark.parametrize("bad", ["/", "/etc", "/var/run/postgresql", "/proc/1/root", "{link}"])
def test_a_site_profile_cannot_name_a_system_path_as_readonly(tmp_path, bad) -> None:
    from django.core.exceptions import ImproperlyConfigured

    link = tmp_path / "looks-harmless"
    link.symlink_to("/etc")
    spec = {"agent": {"command": sys.executable, "readonly": [bad.format(link=link)]}}
    with pytest.raises(ImproperlyConfigured, match="cannot be shown to an agent"):
        site_profiles_parse(spec)


# ---- the door itself --------------------------------------------------------------------------


def test_the_sandbox_refuses_a_socket_or_a_link_to_the_host_whatever_the_origin(
    settings, workspace, own_socket
) -> None:
    for readonly in (Path(own_socket), workspace / "to-root", workspace / "to-etc"):
        spec = sandbox.SandboxSpec(cwd=workspace, writable=(workspace,), readonly=(readonly,))
        with pytest.raises(sandbox.MountRefused, match="cannot be mounted into a sandbox"):
            sandbox.prepare(spec, ["true"])
    settings.CANVAS_SANDBOX_READONLY_PATHS = [str(workspace / "to-root")]
    with pytest.raises(sandbox.MountRefused, match="CANVAS_SANDBOX_READONLY_PATHS path"):
        sandbox.prepare(sandbox.SandboxSpec(cwd=workspace, writable=(workspace,)), ["true"])


def test_a_hook_in_a_folder_that_is_a_link_to_the_root_does_not_run(tmp_path) -> None:
    link = tmp_path / "ws-link"
    link.symlink_to("/")
    spec = HookSpec(name="h", event="PreToolUse", command="echo ran", fail_closed=True)
    outcome = run_hook(spec, {}, cwd=str(link))
    assert not outcome.allowed
    assert "cannot be mounted into a sandbox" in outcome.failure


# ---- every sandbox: no host Unix socket answers -----------------------------------------------


@pytest.mark.parametrize("network", ["none", "outbound", "host"])
def test_no_host_unix_socket_answers_a_terminal_command_or_a_hook(
    tmp_path, settings, own_socket, network
) -> None:
    """The terminal and hooks, in every network a site may allow (host included): a Unix
    socket is reached through the file system, which shows none of the host's."""
    settings.CANVAS_SANDBOX_ALLOW_HOST_NETWORK = True
    sockets = sockets_to_try(own_socket)
    ws = LocalWorkspace(tmp_path / "root", tmp_path / "state", network=network)
    ws.write_text("probe.py", PROBE)
    probe = "python3 probe.py " + " ".join(map(shlex.quote, sockets))
    terminal = json.loads(ws.run(probe, timeout=60).output.strip().splitlines()[-1])
    hook = HookSpec(name="h", event="PreToolUse", command=f"{probe} > hook.json", fail_closed=True)
    outcome = run_hook(hook, {}, cwd=str(ws.root), network=network)
    assert outcome.allowed, outcome.failure
    from_hook = json.loads(ws.read_text("hook.json"))
    for result in (terminal, from_hook):
        assert sorted(result["reached"]) == sockets
        reached = [path for path, what in result["reached"].items() if what == "CONNECTED"]
        assert reached == [], f"host sockets answered inside the sandbox ({network}): {reached}"
