"""A stdio MCP server's private home (issue 23, item 7, as for an external agent's): it may hold
a token the server keeps, so it lives in its conversation's state folder, goes when the server
stops, and the sweeper removes what a dead worker left, never the home of a server still
running (under a slice's live lease, or kept idle in a worker's pool between slices).

A "crashed" worker is staged as it would leave things: the home made by mcp_home_prepare with
a key file inside, no run holding the conversation's lease, and its marker last touched
longer ago than any server may live without a lease."""

from __future__ import annotations

import os
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from conversations.models import Conversation
from orchestration.external.home import (
    MARKERS,
    MCP_HOMES,
    MCP_MARKER_SUFFIX,
    agent_homes_sweep,
    mcp_home,
    mcp_home_prepare,
    mcp_idle_seconds,
)
from orchestration.mcp import pool
from orchestration.mcp.launch import server_launch
from orchestration.mcp.rules import clean_server, config_from_row
from orchestration.mcp.toolbox import McpToolbox
from tests.conftest import wait_for
from tests.factories import make_conversation
from tests.orchestration.mcp.fixture import READONLY, server_fields, server_pids

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "ghp_mcp-home-key-0123456789abcdef"


class Row:
    """What config_from_row reads, without the database."""

    def __init__(self, name: str, **fields) -> None:
        self.name = name
        for key, value in clean_server(fields).items():
            setattr(self, key, value)


@pytest.fixture
def conversation(user, team, settings) -> Conversation:
    workspace = Path(settings.CANVAS_WORKSPACES_ROOT) / "ws"
    workspace.mkdir(parents=True)
    return make_conversation(user, team, workspace_path=str(workspace))


def _marker(settings, conversation_id) -> Path:
    return Path(settings.CANVAS_STATE_ROOT) / MARKERS / f"{conversation_id}{MCP_MARKER_SUFFIX}"


def _age(marker: Path, seconds: float) -> None:
    """Make the marker look last touched `seconds` ago."""
    then = time.time() - seconds
    os.utime(marker, (then, then))


def _left_by_a_crash(conversation: Conversation, server: str = "github") -> Path:
    made = mcp_home_prepare(
        str(conversation.pk), server, workspace=Path(conversation.workspace_path)
    )
    os.close(made.fd)  # the worker is gone
    home = made.path
    (home / ".config").mkdir()
    (home / ".config" / "token").write_text(KEY)
    return home


def test_a_crashed_workers_mcp_home_is_removed_by_the_sweep(conversation, settings):
    home = _left_by_a_crash(conversation)
    other = _left_by_a_crash(conversation, "files")
    assert home == Path(settings.CANVAS_STATE_ROOT) / str(conversation.pk) / MCP_HOMES / "github"
    assert home.stat().st_mode & 0o777 == 0o700
    assert not home.is_relative_to(Path(conversation.workspace_path))
    marker = _marker(settings, conversation.pk)
    _age(marker, mcp_idle_seconds() + 1)
    assert agent_homes_sweep() == 1
    assert not home.exists() and not other.exists() and not home.parent.exists()
    assert not marker.exists()
    assert agent_homes_sweep() == 0


def test_a_home_whose_run_holds_a_live_lease_is_kept_until_the_lease_lapses(conversation, settings):
    home = _left_by_a_crash(conversation)
    _age(_marker(settings, conversation.pk), mcp_idle_seconds() + 1)
    rows = Conversation.objects.filter(pk=conversation.pk)
    rows.update(lease_token="a-live-runner", lease_expires_at=timezone.now() + timedelta(60))
    assert agent_homes_sweep() == 0
    assert (home / ".config" / "token").read_text() == KEY
    rows.update(lease_expires_at=timezone.now() - timedelta(seconds=1))  # the worker died
    assert agent_homes_sweep() == 1
    assert not home.exists()


def test_a_server_kept_in_a_pool_between_slices_keeps_its_home(conversation, settings):
    """No lease between slices: the marker, touched when the slice left its servers in the
    pool, is what keeps the sweep off until the pool must have closed them."""
    home = _left_by_a_crash(conversation)
    marker = _marker(settings, conversation.pk)
    _age(marker, mcp_idle_seconds() + 1)
    kept = pool.Kept(McpToolbox(), [], "fingerprint")
    try:
        pool.toolbox_keep(str(conversation.pk), kept)
        assert time.time() - marker.stat().st_mtime < 60
        assert agent_homes_sweep() == 0
        assert (home / ".config" / "token").read_text() == KEY
    finally:
        pool.close_all()
    _age(marker, mcp_idle_seconds() + 1)  # the pool's keep time and its closing are over
    assert agent_homes_sweep() == 1
    assert not home.exists()


def test_a_home_whose_conversation_is_gone_is_removed(settings):
    orphan = str(uuid.uuid4())
    home = mcp_home_prepare(orphan, "github", workspace=Path(settings.CANVAS_WORKSPACES_ROOT))
    os.close(home.fd)
    (home.path / "token").write_text(KEY)
    _age(_marker(settings, orphan), mcp_idle_seconds() + 1)
    (Path(settings.CANVAS_STATE_ROOT) / MARKERS / "not-ours.mcp").write_text("")
    assert agent_homes_sweep() == 1
    assert not home.path.exists()
    assert os.listdir(Path(settings.CANVAS_STATE_ROOT) / MARKERS) == ["not-ours.mcp"]


def test_a_stopping_server_never_removes_a_home_made_afresh_for_another(conversation):
    """Two worker processes with the same server for one conversation: the idle one's end
    leaves the home the other made for its own, running server."""
    workspace = Path(conversation.workspace_path)
    idle = mcp_home_prepare(str(conversation.pk), "github", workspace=workspace)
    running = mcp_home_prepare(str(conversation.pk), "github", workspace=workspace)
    (running.path / "token").write_text(KEY)
    assert idle.path == running.path
    assert idle.remove()
    assert (running.path / "token").read_text() == KEY
    assert running.remove()
    assert not running.path.exists()
    assert os.listdir(running.path.parent) == []


def test_a_running_servers_home_is_in_the_state_folder_and_goes_when_it_stops(
    conversation, settings
):
    settings.CANVAS_SANDBOX_READONLY_PATHS = READONLY
    config = config_from_row(Row("files", **server_fields()))
    launch = server_launch(
        config, secrets={}, workspace=conversation.workspace_path, network="none",
        conversation_id=str(conversation.pk),
    )  # fmt: skip
    home = mcp_home(str(conversation.pk), "files")
    toolbox = McpToolbox()
    try:
        tools, failed = toolbox.open([launch])
        assert failed == []
        assert "env_value" in {t.name for t in tools}
        for name in ("HOME", "TMPDIR"):
            answer = toolbox.call("files", "env_value", {"name": name}, cancel=None)
            assert (answer.content, answer.is_error) == (str(home), False)
        assert home.is_dir()
        # Its run holds a live lease: the sweep leaves it, however old the marker.
        Conversation.objects.filter(pk=conversation.pk).update(
            lease_token="runner", lease_expires_at=timezone.now() + timedelta(seconds=60)
        )
        _age(_marker(settings, conversation.pk), mcp_idle_seconds() + 1)
        assert agent_homes_sweep() == 0
        assert home.is_dir()
    finally:
        toolbox.close()
    wait_for(lambda: not server_pids(), 10, message=f"servers left: {server_pids()}")
    assert not home.exists()


def test_the_beat_sweep_removes_a_crashed_workers_mcp_home(conversation, settings, dispatched):
    """What removes it in a deployment: beat's periodic orchestration.sweep_runs."""
    from orchestration.tasks import sweep_runs

    home = _left_by_a_crash(conversation)
    _age(_marker(settings, conversation.pk), mcp_idle_seconds() + 1)
    sweep_runs()
    assert not home.exists() and not _marker(settings, conversation.pk).exists()
