"""Forking a conversation: a new conversation whose log starts as a copy of another's up to
an event, and whose workspace starts as a copy of the other's folder, so a person can try
another direction without losing the first.

The cut must be a quiet point: every tool call before it has its result, every sub-agent
round before it has settled, and (for an external agent) every prompt has its turn's end.
A copy cut inside one would leave the fork a call to run again or children that are not its
own; such a seq is refused naming the last quiet point before it. The default cut is the last
quiet point of the log.

What is copied: the events up to the cut, through the log's one door (store.append), with
their ids (so actions, decisions and results still refer to each other) but without their
usage, since the source already counted that spend; an external agent's session events are
left out, so the fork's next turn starts a new session told what happened so far rather than
loading the source's. The copy ends with a status change naming the source: the fork rests
(paused, or the source's resting status at the cut) until a person writes to it.

The workspace folder is copied when the fork is made, by handle (workspaces.fs_tree: regular
files, folders and symlinks as links, never followed; sockets and pipes skipped; what the
source's commands swap or remove mid-copy left out), up to CANVAS_FORK_MAX_BYTES: larger is
refused rather than a web request copying for minutes. The shell's state is the fork's own;
the changes baseline is a copy of the source's (only the baseline repository, never its readings'
caches), so the fork's Changes show what the source had changed at the fork point and then what
the fork changes. A Docker fork gets its own container over the copied folder (what the
source's container installed outside the folder is not copied).
"""

from __future__ import annotations

import shutil
from bisect import bisect_left
from collections.abc import Sequence
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from common.errors import InvalidInput
from conversations import store
from conversations.events import (
    AcpPromptEvent,
    AcpSessionEvent,
    AcpTurnEvent,
    ActionEvent,
    AnyEvent,
    CondensationEvent,
    ObservationEvent,
    Status,
    StatusChangeEvent,
    SubagentsSettledEvent,
    SubagentsSpawnedEvent,
    UnknownEvent,
)
from conversations.models import Conversation
from teams.audit import audit_record
from teams.policies import policy_for_team
from workspaces.baseline import BASELINE_DIR, READING_FILES
from workspaces.factory import workspace_dirs
from workspaces.fs_tree import TreeTooDeep, TreeTooLarge, copy_tree, tree_size
from workspaces.paths import workspace_in_area
from workspaces.spec import spec_of

from .services import NATIVE_AGENT, redacted_title

RESTING = frozenset({Status.IDLE, Status.PAUSED, Status.FINISHED, Status.ERROR, Status.STUCK})
COPY_BATCH = 500
LEFT_OUT = (AcpSessionEvent,)


def quiet_points(events: Sequence[tuple[int, AnyEvent]]) -> list[int]:
    """The seqs after which nothing is in flight (see the module's docstring), in order."""
    open_calls: set[str] = set()
    open_rounds: set[tuple[str, int]] = set()
    open_prompts = 0
    quiet = []
    for seq, event in events:
        if isinstance(event, ActionEvent):
            open_calls.add(event.tool_call_id)
        elif isinstance(event, ObservationEvent):
            open_calls.discard(event.tool_call_id)
        elif isinstance(event, SubagentsSpawnedEvent):
            open_rounds.add((event.tool_call_id, event.round))
        elif isinstance(event, SubagentsSettledEvent):
            open_rounds.discard((event.tool_call_id, event.round))
        elif isinstance(event, AcpPromptEvent):
            open_prompts += 1
        elif isinstance(event, AcpTurnEvent):
            open_prompts = 0
        if not open_calls and not open_rounds and not open_prompts:
            quiet.append(seq)
    return quiet


def _cut(events: Sequence[tuple[int, AnyEvent]], at_seq: int | None) -> int:
    last = events[-1][0] if events else 0
    if at_seq is not None and not 1 <= at_seq <= last:
        raise InvalidInput(f"at_seq must be between 1 and {last}, the conversation's last event.")
    quiet = quiet_points([e for e in events if at_seq is None or e[0] <= at_seq])
    if not quiet:
        raise InvalidInput("nothing to fork yet: no point in the log where nothing is in flight.")
    if at_seq is not None and quiet[-1] != at_seq:
        raise InvalidInput(
            f"event {at_seq} is inside a tool call or a sub-agent round; fork at event "
            f"{quiet[-1]} (the last point before it where nothing is in flight)."
        )
    return quiet[-1]


def _copied(event: AnyEvent) -> AnyEvent:
    if getattr(event, "usage", None) is not None:
        return event.model_copy(update={"usage": None})
    return event


def _copies(kept: Sequence[tuple[int, AnyEvent]]) -> list[AnyEvent]:
    """The events the fork's log starts with. It numbers them from 1 and some are left out, so
    where a condensation says its View starts (conversations.window) is renumbered too."""
    copied = [(seq, _copied(e)) for seq, e in kept if not isinstance(e, LEFT_OUT)]
    old_seqs = [seq for seq, _ in copied]
    events = []
    for _, event in copied:
        if isinstance(event, CondensationEvent) and event.kept_from_seq is not None:
            event = event.model_copy(update={
                "kept_head_seqs": [bisect_left(old_seqs, s) + 1 for s in event.kept_head_seqs],
                "kept_from_seq": bisect_left(old_seqs, event.kept_from_seq) + 1,
            })  # fmt: skip
        events.append(event)
    return events


def _status_at(events: Sequence[tuple[int, AnyEvent]]) -> Status:
    status = Status.IDLE
    for _, event in events:
        if isinstance(event, StatusChangeEvent):
            status = event.status
    return status if status in RESTING else Status.PAUSED


def _copy_workspace(source: Conversation, target: Path) -> None:
    """Copy the source's folder into `target` by handle (workspaces.fs_tree): an agent
    swapping a folder for a link while it is copied gets the entry left out, never a file
    from outside copied in. InvalidInput when it is too large or too deeply nested."""
    if not source.workspace_path:
        return
    root = Path(source.workspace_path)
    if not root.is_dir():
        return  # never materialised (no command ran): the fork starts empty too
    limit = int(settings.CANVAS_FORK_MAX_BYTES)
    try:
        if tree_size(root, limit) > limit:  # refused before copying anything
            raise TreeTooLarge(limit)
        copy_tree(root, target, limit_bytes=limit)
    except TreeTooLarge:
        raise InvalidInput(
            f"the workspace is larger than the {limit // (1024 * 1024)} MiB a fork copies "
            "(CANVAS_FORK_MAX_BYTES); remove build outputs from it, or start a new "
            "conversation from its git source."
        ) from None
    except TreeTooDeep as exc:
        raise InvalidInput(f"the workspace cannot be copied: {exc}.") from None


def _copy_baseline(source: Conversation, fork: Conversation) -> None:
    """Give the fork the source's baseline, so its Changes start as the source's did at the
    cut. The baseline lives in our state directory, out of any agent's reach, so a plain copy
    is safe; the readings' index and stat cache are left behind (they name the source's files).
    No baseline yet (no command ran): the fork takes its own when it first runs."""
    source_git = workspace_dirs(str(source.pk), source.workspace_path)[1] / BASELINE_DIR
    if not source_git.is_dir():
        return
    target = workspace_dirs(str(fork.pk), fork.workspace_path)[1]
    target.mkdir(parents=True, exist_ok=True)
    ignored = shutil.ignore_patterns(*READING_FILES)
    shutil.copytree(source_git, target / BASELINE_DIR, symlinks=True, ignore=ignored)


def _check_policy(source: Conversation) -> None:
    policy = policy_for_team(source.team_id)
    kind = f"acp:{source.agent}" if source.agent else NATIVE_AGENT
    if not policy.agent_kind_allowed(kind):
        raise InvalidInput("the team's policy no longer allows this conversation's agent.")
    workspace_kind = (source.workspace_spec or {}).get("kind", "local")
    if not policy.workspace_kind_allowed(workspace_kind):
        raise InvalidInput(f"the team's policy no longer allows {workspace_kind} workspaces.")


def conversation_fork(
    *, source: Conversation, by: AbstractBaseUser | None, at_seq: int | None = None,
    title: str | None = None,
) -> Conversation:  # fmt: skip
    """A new conversation in the source's team, owned by `by`, copied up to `at_seq` (the
    last quiet point by default). The caller has checked that `by` may act on `source`.
    InvalidInput for a cut inside something in flight, a sub-agent's conversation, a policy
    that no longer allows its agent or workspace kind, or a workspace too large to copy."""
    if source.parent_id is not None:
        raise InvalidInput("a sub-agent's conversation cannot be forked; fork its parent.")
    _check_policy(source)
    stored = [(s.seq, s.event) for s in store.load(source.pk)]
    if any(isinstance(e, UnknownEvent) for _, e in stored):
        raise InvalidInput("this conversation holds events this version cannot copy.")
    cut = _cut(stored, at_seq)
    kept = [(seq, e) for seq, e in stored if seq <= cut]
    fork = Conversation(
        owner=by if getattr(by, "is_authenticated", False) else None, team_id=source.team_id,
        model=source.model, agent=source.agent, agent_config=source.agent_config,
        # The folder is a copy: its git source must not be cloned into it again.
        workspace_spec=spec_of(source.workspace_spec).model_copy(update={"source": None}).as_json(),
        secret_names=source.secret_names, worker_host=source.worker_host, forked_from=source,
    )  # fmt: skip
    fork.title = redacted_title(source.team, title or f"{source.title or 'Untitled'} (fork)")
    target = workspace_in_area(Path(settings.CANVAS_WORKSPACES_ROOT), source.team_id,
                               str(fork.pk))  # fmt: skip
    target.mkdir(parents=True, exist_ok=True)
    try:
        _copy_workspace(source, target)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    fork.workspace_path = str(target)
    try:
        _copy_baseline(source, fork)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        shutil.rmtree(workspace_dirs(str(fork.pk), fork.workspace_path)[1], ignore_errors=True)
        raise
    events = _copies(kept)
    rest = _status_at(kept)
    where = f"forked from “{source.title or source.pk}” at event {cut}"
    try:
        with transaction.atomic():
            fork.save()
            for start in range(0, len(events), COPY_BATCH):
                store.append(fork.pk, events[start : start + COPY_BATCH])
            store.append(fork.pk, [StatusChangeEvent(status=rest, previous=None, reason=where)])
            audit_record(
                actor=by, kind="conversation.forked", team=source.team, target=str(fork.pk),
                data={"source": str(source.pk), "at_seq": cut},
            )  # fmt: skip
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    fork.refresh_from_db()
    return fork
