"""A conversation's workspace: what changed since its starting point, one file's diff, a folder
or a file (read-only, the team's secrets redacted), and the whole workspace as a tar.gz.
Anyone who may view the conversation may read its changes and files; the archive, raw bytes
that cannot be redacted (a command may have written a secret into a file), only those who may
act in it. The routes join the conversations router (one prefix, one set of tags)."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Schema
from pydantic import Field

from common.errors import InvalidInput
from common.inputs import Key, Text

from .. import workspace_reads
from ..access import Action, conversation_for
from . import ERRORS
from .conversations import router

TAGS = ["workspace"]

WorkspacePath = Text(4096)


class ChangeOut(Schema):
    path: str
    status: str = Field(description="added, modified or deleted")
    added: int | None = Field(description="Lines added; null for a binary or large file.")
    removed: int | None


class ChangesOut(Schema):
    files: list[ChangeOut]


class DiffOut(Schema):
    path: str
    status: str
    diff: str = Field(description="The unified diff; empty when summarised.")
    summary: str | None = Field(description="Set instead of a diff for binary or large files.")


class EntryOut(Schema):
    name: str
    kind: str = Field(description="dir, file, symlink (never followed) or other")
    size: int | None


class FilesOut(Schema):
    path: str
    kind: str = Field(description="dir (see entries) or file (see text or summary)")
    entries: list[EntryOut] | None = None
    size: int | None = None
    text: str | None = None
    summary: str | None = Field(default=None, description="Why a file's text is not shown.")


@router.get("/{conversation_id}/changes", tags=TAGS, response={200: ChangesOut, **ERRORS})
def workspace_changes(request: HttpRequest, conversation_id: Key):
    conversation = conversation_for(request.user, conversation_id, Action.VIEW)
    return {"files": workspace_reads.changes(conversation)}


@router.get("/{conversation_id}/diff", tags=TAGS, response={200: DiffOut, **ERRORS})
def workspace_diff(request: HttpRequest, conversation_id: Key, path: WorkspacePath = ""):
    # `path` is checked after access, so another team's id is a 404 whatever the query.
    conversation = conversation_for(request.user, conversation_id, Action.VIEW)
    if not path:
        raise InvalidInput("path: which file's diff? Give its path in the workspace.")
    found = workspace_reads.diff(conversation, path)
    return {
        "path": found.path,
        "status": found.status,
        "diff": found.text,
        "summary": found.summary,
    }


@router.get("/{conversation_id}/files", tags=TAGS, response={200: FilesOut, **ERRORS})
def workspace_files(request: HttpRequest, conversation_id: Key, path: WorkspacePath = ""):
    conversation = conversation_for(request.user, conversation_id, Action.VIEW)
    found = workspace_reads.files_at(conversation, path)
    if found.file is None:
        return {"path": found.path, "kind": "dir", "entries": found.entries}
    view = found.file
    return {
        "path": view.path, "kind": "file", "size": view.size, "text": view.text,
        "summary": view.summary,
    }  # fmt: skip


@router.get(
    "/{conversation_id}/archive",
    tags=TAGS,
    response={200: None, **ERRORS},
    openapi_extra={
        "responses": {
            200: {
                "description": "The workspace as a tar.gz download.",
                "content": {"application/gzip": {"schema": {"type": "string", "format": "binary"}}},
            }
        }
    },
)
def workspace_archive(request: HttpRequest, conversation_id: Key):
    conversation = conversation_for(request.user, conversation_id, Action.ACT)
    return workspace_reads.archive_response(request, conversation)
