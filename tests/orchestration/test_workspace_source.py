"""A run whose workspace starts from a git source: filled on the first slice, before the
baseline, so Changes diff against the source's commit; a bad ref ends the run with a clear
error event and ERROR, never a crash."""

from __future__ import annotations

import pytest

from canvas import workspace_reads
from conversations import store
from conversations.events import AgentErrorEvent
from conversations.models import Conversation
from orchestration import services
from tests.runs import drive, script
from tests.workspaces.test_sources import git, make_repo
from workspaces.spec import WorkspaceSpec

pytestmark = pytest.mark.django_db(transaction=True)


def created(dispatched, spec: WorkspaceSpec, *turns) -> Conversation:
    """A conversation given `spec` before its first slice runs (the API sets it at creation)."""
    conversation = services.conversation_create(owner=None, model="scripted", prompt=script(*turns))
    Conversation.objects.filter(pk=conversation.pk).update(workspace_spec=spec.as_json())
    drive(dispatched)
    conversation.refresh_from_db()
    return conversation


def test_changes_after_a_run_diff_against_the_source_commit(dispatched, settings, tmp_path):
    commits = make_repo(tmp_path / "repos" / "project")
    settings.CANVAS_GIT_LOCAL_ROOTS = [str(tmp_path / "repos")]
    spec = WorkspaceSpec(source={"repo": str(tmp_path / "repos" / "project"), "ref": "v1"})
    conversation = created(
        dispatched, spec,
        {"tool": "terminal", "args": {"command": "ls; echo more >> a.txt; echo new > n.txt"}},
        {"tool": "finish", "args": {"message": "done"}},
    )  # fmt: skip
    assert conversation.status == "finished"
    listing = [s.event for s in store.load(conversation.pk) if s.event.type == "tool.result"][0]
    assert "a.txt" in listing.content and "b.txt" not in listing.content
    root = workspace_reads.workspace_of(conversation).root
    assert git(root, "rev-parse", "HEAD") == commits["first"]
    changes = {c.path: c.status for c in workspace_reads.changes(conversation)}
    assert changes == {"a.txt": "modified", "n.txt": "added"}  # .git is not a change
    diff = workspace_reads.diff(conversation, "a.txt")
    assert "+more" in diff.text and " one" in diff.text


def test_a_bad_ref_ends_the_run_with_a_clear_error(dispatched, settings, tmp_path):
    make_repo(tmp_path / "repos" / "project")
    settings.CANVAS_GIT_LOCAL_ROOTS = [str(tmp_path / "repos")]
    spec = WorkspaceSpec(source={"repo": str(tmp_path / "repos" / "project"), "ref": "nope"})
    conversation = created(dispatched, spec, {"say": "never asked"})
    assert conversation.status == "error"
    errors = [s.event for s in store.load(conversation.pk) if isinstance(s.event, AgentErrorEvent)]
    assert [e.code for e in errors] == ["workspace_source"]
    assert "checking out nope failed" in errors[0].message
    assert conversation.steps == 0  # the model was never asked


def test_a_source_outside_the_allowed_folders_is_an_error_event(dispatched, tmp_path):
    spec = WorkspaceSpec(source={"repo": "/etc"})
    conversation = created(dispatched, spec, {"say": "never asked"})
    assert conversation.status == "error"
    errors = [s.event for s in store.load(conversation.pk) if isinstance(s.event, AgentErrorEvent)]
    assert "CANVAS_GIT_LOCAL_ROOTS" in errors[-1].message
