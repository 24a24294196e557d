"""A conversation in a Docker workspace, against the real engine and the locally built test
image: a scripted run from a git source ends FINISHED with its Changes; pause and resume reach
the container; Close and deletion remove it and keep (or remove) the folder as they should; the
periodic sweep removes the container of a conversation whose Close did not."""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest

from canvas import workspace_reads
from conversations import store
from conversations.models import Conversation
from orchestration import erase, run_control, services
from orchestration.workspace import conversations_open
from tests.docker_images import test_image
from tests.runs import drive, script
from tests.workspaces.test_sources import make_repo
from workspaces.docker import sweep_orphans
from workspaces.spec import WorkspaceSpec

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def engine(settings) -> Iterator[docker.DockerClient]:
    """The engine, the test image as the site's only image, and every container a test made
    removed afterwards (found by our label)."""
    image = test_image()
    settings.CANVAS_DOCKER_IMAGE = image
    settings.CANVAS_DOCKER_IMAGES = [image]
    client = docker.from_env()
    made: list[str] = []
    client.made = made  # type: ignore[attr-defined]
    yield client
    for conversation_id in made:
        for container in containers(client, conversation_id):
            container.remove(force=True)
    client.close()


def containers(client: docker.DockerClient, conversation_id) -> list:
    label = f"canvas.conversation={conversation_id}"
    return client.containers.list(all=True, filters={"label": label})


def docker_run(engine, dispatched, *turns, owner=None, **spec) -> Conversation:
    conversation = services.conversation_create(
        owner=owner, model="scripted", prompt=script(*turns),
        workspace_spec=WorkspaceSpec(kind="docker", **spec),
    )  # fmt: skip
    engine.made.append(str(conversation.pk))
    drive(dispatched)
    conversation.refresh_from_db()
    return conversation


def test_a_run_from_a_git_source_in_a_container(engine, dispatched, settings, tmp_path):
    make_repo(tmp_path / "repos" / "p")
    settings.CANVAS_GIT_LOCAL_ROOTS = [str(tmp_path / "repos")]
    conversation = docker_run(
        engine, dispatched,
        {"tool": "terminal", "args": {"command": "pwd; cat a.txt; echo more >> a.txt"}},
        {"tool": "finish", "args": {"message": "done"}},
        source={"repo": str(tmp_path / "repos" / "p"), "ref": "v1"},
    )  # fmt: skip
    assert conversation.status == "finished", [s.event for s in store.load(conversation.pk)]
    assert conversation.workspace_spec["image"] == settings.CANVAS_DOCKER_IMAGE
    result = [s.event for s in store.load(conversation.pk) if s.event.type == "tool.result"][0]
    assert "/workspace" in result.content and "one" in result.content
    assert [c.path for c in workspace_reads.changes(conversation)] == ["a.txt"]
    (container,) = containers(engine, conversation.pk)
    assert container.labels["canvas.team"] == str(conversation.team_id)


def test_pause_resume_close_reach_the_container(engine, dispatched):
    conversation = docker_run(
        engine, dispatched, {"tool": "terminal", "args": {"command": "echo hi > f.txt"}},
        {"say": "done"},
    )  # fmt: skip
    (container,) = containers(engine, conversation.pk)
    services.conversation_post_message(conversation_id=conversation.pk, text="go", sender=None)
    run_control.conversation_pause(conversation_id=conversation.pk, by=None)
    container.reload()
    assert container.status == "paused"
    run_control.conversation_run(conversation_id=conversation.pk, by=None)
    container.reload()
    assert container.status == "running"
    run_control.conversation_close(conversation_id=conversation.pk, by=None)
    assert containers(engine, conversation.pk) == []
    root = workspace_reads.workspace_of(conversation).root
    assert (root / "f.txt").read_text() == "hi\n"  # the folder stays until deletion
    assert [c.path for c in workspace_reads.changes(conversation)] == ["f.txt"]


def test_deleting_removes_the_container_and_the_folder(engine, dispatched, user):
    conversation = docker_run(
        engine, dispatched, {"tool": "terminal", "args": {"command": "true"}}, {"say": "done"},
        owner=user,
    )  # fmt: skip
    root = workspace_reads.workspace_of(conversation).root
    assert containers(engine, conversation.pk)
    erase.conversation_delete(conversation_id=conversation.pk, by=user)
    assert containers(engine, conversation.pk) == []
    assert not root.exists()


def test_the_sweep_removes_the_container_of_a_closed_conversation(engine, dispatched):
    closed, kept = (
        docker_run(engine, dispatched, {"tool": "terminal", "args": {"command": "true"}},
                   {"say": "done"})
        for _ in range(2)
    )  # fmt: skip
    # As if its Close had found the engine down: closed, its container still there.
    Conversation.objects.filter(pk=closed.pk).update(closed_at="2026-01-01T00:00:00Z")
    # The sweep is the engine's whole: other tests' containers on this machine (whose
    # conversations live in other databases) are left to them.
    mine = {str(closed.pk), str(kept.pk)}
    assert sweep_orphans(lambda ids: conversations_open(ids) | (ids - mine)) == 1
    assert containers(engine, closed.pk) == []
    assert len(containers(engine, kept.pk)) == 1
