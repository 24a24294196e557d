"""What a conversation's workspace is: its kind, where its files start from, and its image.

Stored on the conversation (`Conversation.workspace_spec`, JSON; `{}` reads as the default, an
empty local workspace) and read by the one factory, workspaces.factory. Validation here is about
shape only; what a team may ask for (kinds, images) is its policy's business, checked when the
conversation is created.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

WorkspaceKind = Literal["local", "docker"]
KINDS: tuple[str, ...] = ("local", "docker")

IMAGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$")
"""A Docker image reference: [registry/]name[:tag][@digest]."""
_REF = re.compile(r"^[A-Za-z0-9._/@{}^~+-]{1,250}$")


def _no_option(value: str, field: str) -> str:
    # Handed to git as arguments: a leading "-" would be read as an option.
    if value.startswith("-"):
        raise ValueError(f"{field} must not start with '-'")
    return value


class GitSource(BaseModel):
    """A git repository the workspace starts from (workspaces.sources)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repo: str = Field(min_length=1, max_length=1000)
    """An https URL, a local path the site allows (CANVAS_GIT_LOCAL_ROOTS), or the name of a
    repository the site configures (CANVAS_GIT_REPOS), checked out as a git worktree."""
    ref: str | None = Field(default=None, max_length=250)
    """A branch, tag or commit; None: the repository's default branch (HEAD)."""

    @field_validator("repo")
    @classmethod
    def _repo(cls, value: str) -> str:
        value = value.strip()
        if not value or "\0" in value or any(c in value for c in "\r\n"):
            raise ValueError("repo must be one line of text")
        return _no_option(value, "repo")

    @field_validator("ref")
    @classmethod
    def _ref(cls, value: str | None) -> str | None:
        value = (value or "").strip() or None
        if value is not None:
            if not _REF.fullmatch(value) or ".." in value:
                raise ValueError(f"ref {value!r} is not a branch, tag or commit name")
            _no_option(value, "ref")
        return value


class WorkspaceSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: WorkspaceKind = "local"
    source: GitSource | None = None
    image: str | None = Field(default=None, max_length=255)
    """Docker only; None: the site's default image (resolved when the conversation is made)."""

    @field_validator("image")
    @classmethod
    def _image(cls, value: str | None) -> str | None:
        if value is not None and not IMAGE_NAME.fullmatch(value):
            raise ValueError(f"image {value!r} is not an image name")
        return value

    @model_validator(mode="after")
    def _image_for_docker(self) -> WorkspaceSpec:
        if self.image is not None and self.kind != "docker":
            raise ValueError("an image is only for docker workspaces")
        return self

    def with_default_image(self, image: str) -> WorkspaceSpec:
        """This spec with `image` where it runs in an image and names none."""
        if self.kind != "docker" or self.image is not None:
            return self
        return self.model_copy(update={"image": image})

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def spec_of(stored: dict[str, Any] | None) -> WorkspaceSpec:
    """The spec a conversation row holds (`{}` or None: local, empty)."""
    return WorkspaceSpec.model_validate(stored or {})


@dataclass(frozen=True, slots=True)
class ContainerLimits:
    """Resources of a docker workspace's container (None: no limit); the team policy's, through
    orchestration.workspace."""

    cpus: float | None = None
    memory_mb: int | None = None
    pids: int | None = None
