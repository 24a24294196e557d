"""A conversation's workspace as people see it: what changed, one diff, a folder or a file, and
the whole of it as an archive. The API (canvas.api.workspace) and the side panel
(canvas.panels) call these once canvas.access granted VIEW.

Nothing here runs agent code: it reads the files and runs our own git on them
(workspaces.baseline), in the web process, which therefore reads the workspace from its own disk
(one host, or workspaces shared between hosts). Refusals are ServiceErrors with words for people.
Names, diffs and file text pass the team's redactor; the archive is the files' bytes as they
are (compressed, it cannot be redacted), so a secret a command wrote into a file is in it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, replace
from typing import IO

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse

from common.errors import InvalidInput, NotFound, ServiceError
from conversations.models import Conversation
from conversations.redaction import redactor_for_team
from orchestration.workspace import workspace_of
from teams.models import Team
from workspaces.base import DirEntry, FileChange, FileDiff, FileView, WorkspacePathError
from workspaces.baseline import BaselineError
from workspaces.outputs import OUTPUT_NAME, OUTPUTS_DIR

logger = logging.getLogger(__name__)

_CHUNK = 256 * 1024


class WorkspaceUnreadable(ServiceError):
    status = 500
    code = "internal_error"


@dataclass(frozen=True, slots=True)
class FilesAt:
    """What a path in the workspace holds: a folder's entries or a file."""

    path: str
    entries: list[DirEntry] | None = None
    file: FileView | None = None

    @property
    def parent(self) -> str | None:
        """The folder above, "" for the root's children; None at the root."""
        return self.path.rpartition("/")[0] if self.path else None


@contextlib.contextmanager
def _readable(path: str = "") -> Iterator[None]:
    try:
        yield
    except WorkspacePathError as exc:
        raise InvalidInput(f"{exc}.") from None
    except FileNotFoundError:
        raise NotFound(f"no file or folder {path!r} in the workspace.") from None
    except KeyError:
        raise NotFound(f"{path!r} has not changed since the workspace's starting point.") from None
    except OSError as exc:  # a name too long, a file it may not read, ...
        raise InvalidInput(f"{path!r} cannot be read: {exc.strerror or exc}.") from None
    except BaselineError:
        logger.exception("reading the workspace failed")
        raise WorkspaceUnreadable("the workspace could not be read; the error is logged.") from None


def _shown(text: str) -> str:
    """A name or a diff as UTF-8 can carry it: bytes that are not UTF-8 (which file names may
    hold, and which git and os hand back as surrogates) become U+FFFD instead of breaking the
    JSON or HTML answer."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _redact(conversation: Conversation) -> Callable[[str], str]:
    """The team's redactor, as the log's door applies it: a command given a secret may have
    written it into a file, and the workspace, unlike the log, was never redacted."""
    team = Team.objects.only("secrets_version").get(pk=conversation.team_id)
    redactor = redactor_for_team(team.pk, team.secrets_version)
    return (lambda text: redactor.redact(_shown(text))) if redactor is not None else _shown


def changes(conversation: Conversation) -> list[FileChange]:
    with _readable():
        found = workspace_of(conversation).changes()
    shown = _redact(conversation)
    return [replace(change, path=shown(change.path)) for change in found]


def diff(conversation: Conversation, path: str) -> FileDiff:
    with _readable(path):
        found = workspace_of(conversation).diff(path)
    shown = _redact(conversation)
    return replace(found, path=shown(found.path), text=shown(found.text))


def files_at(conversation: Conversation, path: str) -> FilesAt:
    path = path.rstrip("/")
    workspace = workspace_of(conversation)
    shown = _redact(conversation)
    with _readable(path):
        try:
            entries = workspace.list_files(path)
        except NotADirectoryError:
            view = workspace.read_file(path)
            text = shown(view.text) if view.text is not None else None
            return FilesAt(path, file=replace(view, path=shown(view.path), text=text))
    return FilesAt(path, entries=[replace(e, name=shown(e.name)) for e in entries])


def archive_response(request: HttpRequest, conversation: Conversation) -> StreamingHttpResponse:
    """The workspace as a tar.gz download. It is written to a temporary file first, so a
    failure answers an error instead of cutting a download short."""
    workspace = workspace_of(conversation)
    out = tempfile.TemporaryFile()  # noqa: SIM115 - the response closes it
    try:
        with _readable():
            workspace.archive(out)
        out.seek(0)
    except BaseException:
        out.close()
        raise
    chunks = _achunks(out) if isinstance(request, ASGIRequest) else _chunks(out)
    response = StreamingHttpResponse(chunks, content_type="application/gzip")
    name = workspace.root.name
    response["Content-Disposition"] = f'attachment; filename="{name}.tar.gz"'
    return response


def _chunks(out: IO[bytes]) -> Iterator[bytes]:
    with out:
        while chunk := out.read(_CHUNK):
            yield chunk


async def _achunks(out: IO[bytes]) -> AsyncIterator[bytes]:
    # Under ASGI a synchronous iterator would be read whole into memory first (Django).
    try:
        while chunk := await sync_to_async(out.read, thread_sensitive=False)(_CHUNK):
            yield chunk
    finally:
        out.close()


OUTPUT_PAGE_BYTES = 8 * 1024 * 1024
"""How much of a cut command output the page serves (workspaces.outputs keeps up to 32 MiB)."""


def output_text(conversation: Conversation, relative: str) -> tuple[str, bool]:
    """A cut command's whole output from the workspace's output area, redacted, and whether it
    was longer than OUTPUT_PAGE_BYTES. NotFound when it is gone (pruned, or deleted by the
    agent); links are never followed, so a file the agent swapped for one reads as gone."""
    folder, _, name = relative.partition("/")
    if folder != OUTPUTS_DIR or not OUTPUT_NAME.fullmatch(name):
        raise NotFound("no such output.")
    try:
        root = os.open(conversation.workspace_path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            area = os.open(OUTPUTS_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root)
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=area)
            finally:
                os.close(area)
        finally:
            os.close(root)
    except OSError:
        raise NotFound("this output is no longer in the workspace.") from None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(OUTPUT_PAGE_BYTES + 1)
    longer = len(data) > OUTPUT_PAGE_BYTES
    text = data[:OUTPUT_PAGE_BYTES].decode("utf-8", "replace")
    return _redact(conversation)(text), longer
