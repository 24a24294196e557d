"""Creating conversations and posting messages. Every state change is an event appended
through the store, together with the row's run bookkeeping, in one transaction; a run they
start is sent only after commit (orchestration.run_control, which also continues, pauses and
interrupts runs)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q

from common.errors import Forbidden, InvalidInput
from conversations import store
from conversations.events import Status, SystemPromptEvent, UserMessageEvent
from conversations.models import Conversation
from conversations.redaction import redactor_for_team
from teams.audit import audit_record
from teams.models import Team
from teams.permissions import Action, role_allows, team_role
from teams.policies import EffectivePolicy, policy_for_team, tighten
from teams.services import team_ensure_personal, team_get_for
from workspaces.factory import kind_unavailable
from workspaces.paths import WorkspaceNameError, workspace_in_area
from workspaces.sources import SourceError, source_check
from workspaces.spec import WorkspaceSpec

from .run_control import refuse_closed, run_start
from .step.agent import DEFAULT_TOOLS, AgentConfig
from .step.profiles import UnknownProfileError, profile_get
from .subagents.definitions import SPAWNING_TOOLS
from .titles import TITLE_MAX_CHARS, clean_title, default_title
from .tools.base import tool_schema
from .tools.registry import tools_for

MAX_PROMPT_CHARS = 200_000
NATIVE_AGENT = "native"
"""Our own agent loop's kind in a policy's allowed_agent_kinds (external agents: acp:NAME)."""


def _workspace_path(
    requested: str | None,
    *,
    conversation_id: str,
    team_id: int,
    person: AbstractBaseUser | None,
    unrestricted: bool,
) -> Path:
    """The directory a new conversation works in: `requested` (a name, workspaces.paths) or
    the conversation's id, inside the team's own area. A folder some conversation already
    uses is shared only with people who may see that conversation. `unrestricted` is the
    local operator's door (run_conversation): an absolute path there is taken as given."""
    if unrestricted and requested and os.path.isabs(requested):
        path = _operator_path(requested)
    else:
        name = requested or conversation_id
        try:
            path = workspace_in_area(Path(settings.CANVAS_WORKSPACES_ROOT), team_id, name)
        except WorkspaceNameError as exc:
            raise InvalidInput(str(exc)) from None
        if person is not None:
            _check_may_share(path, name, person)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInput(f"workspace cannot be created: {exc.strerror}.") from None
    return path


def _operator_path(requested: str) -> Path:
    if "\0" in requested:
        raise InvalidInput("workspace must not contain a NUL byte.")
    path = Path(requested).resolve()
    if path.exists() and not path.is_dir():
        raise InvalidInput(f"workspace {requested!r} exists and is not a directory.")
    return path


def _check_may_share(path: Path, name: str, person: AbstractBaseUser) -> None:
    """Refuse a folder that is, or holds, the workspace of a conversation `person` may not
    see (rows from before the per-team layout may lie anywhere)."""
    users = Conversation.objects.filter(
        Q(workspace_path=str(path)) | Q(workspace_path__startswith=f"{path}{os.sep}")
    )
    for team_id in users.values_list("team_id", flat=True).distinct():
        if not role_allows(team_role(person, team_id), Action.VIEW):
            raise InvalidInput(f"workspace {name!r} belongs to a conversation you cannot see.")


def _check_text(text: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("the message text must not be empty.")
    if len(text) > MAX_PROMPT_CHARS:
        raise InvalidInput(f"the message is longer than {MAX_PROMPT_CHARS} characters.")
    return text


LOCAL_TEAM = "Local"
"""Team of conversations started from the command line without a user."""


def _team_for(owner: AbstractBaseUser | None, team: Team | int | str | None) -> Team:
    if owner is None:  # trusted callers: the CLI, automations
        if isinstance(team, Team):
            return team
        if team is not None:
            found = Team.objects.filter(pk=team).first()
            if found is None:
                raise InvalidInput(f"no team {team!r}.")
            return found
        return Team.objects.get_or_create(name=LOCAL_TEAM)[0]
    chosen = (
        team_get_for(owner, team.pk if isinstance(team, Team) else team, Action.ACT)
        if team is not None
        else team_ensure_personal(owner)
    )
    if not role_allows(team_role(owner, chosen.pk), Action.ACT):
        raise Forbidden("viewers cannot start conversations.")
    return chosen


def _agent_config(
    *, team: Team, policy: EffectivePolicy, model: str, requested: dict[str, Any]
) -> AgentConfig:
    """The agent's configuration under the team's effective policy: a request may tighten it
    (InvalidInput, with the reason, when it would loosen it); the default tool set is quietly
    narrowed to the tools the policy allows."""
    try:
        profile_get(model, team.pk)
    except UnknownProfileError as exc:
        raise InvalidInput(str(exc)) from exc
    if not policy.agent_kind_allowed(NATIVE_AGENT):
        raise InvalidInput(f"team {team.name!r} does not allow native agents by policy.")
    resolved = tighten(policy, {k: v for k, v in requested.items() if v is not None})
    tools = resolved["tools"]
    if tools is None:
        spawning = policy.subagents_allowed and policy.max_subagent_depth != 0
        tools = tuple(
            name
            for name in DEFAULT_TOOLS
            if policy.tool_allowed(name) and (spawning or name not in SPAWNING_TOOLS)
        )
    try:
        tools_for(tools)
    except KeyError as exc:
        raise InvalidInput(str(exc.args[0])) from None
    return AgentConfig(
        model=model,
        tools=tools,
        max_iterations=resolved["max_iterations"],
        confirmation_mode=resolved["confirmation_mode"],
        risk_threshold=resolved["risk_threshold"],
        max_cost_usd=resolved["max_cost_usd"],
    )


def _names(secret_names: list[str] | None) -> list[str] | None:
    return None if secret_names is None else sorted(set(secret_names))


def _external_agent(name: str, *, team: Team, policy: EffectivePolicy) -> str:
    """The ACP profile `name` as the team may use it: InvalidInput when the team has no such
    profile (naming those it has) or its policy does not allow `acp:NAME`."""
    from acp_bridge.profiles import UnknownAcpProfileError, acp_profile_get

    try:
        profile = acp_profile_get(name, team.pk)
    except UnknownAcpProfileError as exc:
        raise InvalidInput(str(exc)) from None
    if not policy.agent_kind_allowed(f"acp:{profile.name}"):
        raise InvalidInput(
            f"team {team.name!r} does not allow the external agent {profile.name!r} by policy "
            f"(allowed_agent_kinds needs acp:{profile.name})."
        )
    return profile.name


def _workspace_spec(
    spec: WorkspaceSpec | None, *, team: Team, policy: EffectivePolicy
) -> WorkspaceSpec:
    """The spec to store, its image resolved (the site's default unless one was asked for):
    InvalidInput naming the policy rule a kind or image breaks, when no Docker engine answers,
    or when the site will not clone the source."""
    spec = spec or WorkspaceSpec()
    if not policy.workspace_kind_allowed(spec.kind):
        allowed = ", ".join(policy.allowed_workspace_kinds or ()) or "none"
        raise InvalidInput(
            f"team {team.name!r} does not allow {spec.kind} workspaces by policy "
            f"(allowed_workspace_kinds: {allowed})."
        )
    spec = spec.with_default_image(settings.CANVAS_DOCKER_IMAGE)
    if spec.image is not None and spec.image not in policy.images():
        allowed = ", ".join(policy.images()) or "none"
        raise InvalidInput(
            f"image {spec.image!r} is not allowed by team {team.name!r}'s policy "
            f"(allowed_images, within the site's CANVAS_DOCKER_IMAGES: {allowed})."
        )
    reason = kind_unavailable(spec.kind)
    if reason is not None:
        raise InvalidInput(f"{spec.kind} workspaces cannot be used here: {reason}")
    if spec.source is not None:
        try:
            source_check(
                spec.source, named=settings.CANVAS_GIT_REPOS,
                local_roots=settings.CANVAS_GIT_LOCAL_ROOTS,
            )  # fmt: skip
        except SourceError as exc:
            raise InvalidInput(exc.message) from None
    return spec


def redacted_title(team: Team, text: str) -> str:
    """Titles live on the row, outside the log's door, so they get the same redaction."""
    redactor = redactor_for_team(team.pk, team.secrets_version)
    return (redactor.redact(text) if redactor is not None else text)[:200]


def conversation_create(
    *,
    owner: AbstractBaseUser | None,
    prompt: str,
    team: Team | int | str | None = None,
    model: str,
    workspace: str | None = None,
    workspace_spec: WorkspaceSpec | None = None,
    title: str | None = None,
    max_iterations: int | None = None,
    confirmation_mode: str | None = None,
    risk_threshold: str | None = None,
    max_cost_usd: float | None = None,
    tools: list[str] | None = None,
    unrestricted_workspace: bool = False,
    agent: str | None = None,
    secret_names: list[str] | None = None,
) -> Conversation:
    """Create a conversation whose first user message is `prompt`, and start its run.

    `workspace` names its folder; `workspace_spec` says what kind of workspace it is and
    where its files start from, within the team's policy (default: local, empty). The
    optional limits may only tighten the team's policy (teams.policies.tighten). `agent`
    names an external ACP agent's profile to run instead of our own agent and `model`.
    `secret_names` narrows the team secrets its tools (or the external agent) may use, for it
    and its sub-agents; None: all of them."""
    _check_text(prompt)
    chosen = _team_for(owner, team)
    policy = policy_for_team(chosen.pk)
    if agent:
        return _external_create(
            owner=owner, prompt=prompt, team=chosen, policy=policy,
            agent=_external_agent(agent, team=chosen, policy=policy), workspace=workspace,
            workspace_spec=workspace_spec, title=title,
            unrestricted_workspace=unrestricted_workspace, secret_names=secret_names,
        )  # fmt: skip
    config = _agent_config(
        team=chosen,
        policy=policy,
        model=model,
        requested={
            "max_iterations": max_iterations,
            "confirmation_mode": confirmation_mode,
            "risk_threshold": risk_threshold,
            "max_cost_usd": max_cost_usd,
            "tools": tools,
        },
    )
    spec = _workspace_spec(workspace_spec, team=chosen, policy=policy)
    conversation = Conversation(
        owner=owner, team=chosen, model=model, agent_config=config.model_dump(mode="json"),
        workspace_spec=spec.as_json(), secret_names=_names(secret_names),
    )  # fmt: skip
    conversation.title = redacted_title(chosen, title or default_title(prompt))
    conversation.workspace_path = str(
        _workspace_path(
            workspace,
            conversation_id=str(conversation.pk),
            team_id=chosen.pk,
            person=owner,
            unrestricted=unrestricted_workspace,
        )
    )
    sender = owner.get_username() if owner is not None else None
    with transaction.atomic():
        conversation.save()
        system = SystemPromptEvent(
            content=config.system_prompt,
            tools=[tool_schema(t) for t in tools_for(config.tools)],
        )
        # UserPromptSubmit hooks check the prompt on the worker, before the model reads it
        # (orchestration.control.prompt_check): the web process never runs a hook.
        events = [system, UserMessageEvent(text=prompt, sender=sender)]
        events += run_start(conversation, Status.IDLE, sender or "api")
        store.append(conversation.pk, events)
        audit_record(
            actor=owner, kind="conversation.created", team=conversation.team,
            target=str(conversation.pk), data={"model": model},
        )  # fmt: skip
    conversation.refresh_from_db()
    return conversation


def _external_create(
    *, owner: AbstractBaseUser | None, prompt: str, team: Team, policy: EffectivePolicy,
    agent: str, workspace: str | None, workspace_spec: WorkspaceSpec | None, title: str | None,
    unrestricted_workspace: bool, secret_names: list[str] | None,
) -> Conversation:  # fmt: skip
    """An external agent's conversation: no system prompt or tools of ours (the agent brings
    its own); its first turn starts on the ACP workers."""
    spec = _workspace_spec(workspace_spec, team=team, policy=policy)
    conversation = Conversation(
        owner=owner, team=team, model="", agent=agent, workspace_spec=spec.as_json(),
        secret_names=_names(secret_names),
    )  # fmt: skip
    conversation.title = redacted_title(team, title or default_title(prompt))
    conversation.workspace_path = str(
        _workspace_path(
            workspace,
            conversation_id=str(conversation.pk),
            team_id=team.pk,
            person=owner,
            unrestricted=unrestricted_workspace,
        )  # fmt: skip
    )
    sender = owner.get_username() if owner is not None else None
    with transaction.atomic():
        conversation.save()
        events: list = [UserMessageEvent(text=prompt, sender=sender)]
        events += run_start(conversation, Status.IDLE, sender or "api")
        store.append(conversation.pk, events)
        audit_record(
            actor=owner, kind="conversation.created", team=conversation.team,
            target=str(conversation.pk), data={"agent": agent},
        )  # fmt: skip
    conversation.refresh_from_db()
    return conversation


def conversation_rename(
    *, conversation_id, title: str, by: AbstractBaseUser | None
) -> Conversation:
    """Give a conversation a title a person chose: one line, redacted like every title.

    Whoever may act in the conversation's team may rename it; the change is audited."""
    text = clean_title(title)
    if not text:
        raise InvalidInput("a title needs at least one word.")
    if len(text) > TITLE_MAX_CHARS:
        raise InvalidInput(f"a title has at most {TITLE_MAX_CHARS} characters.")
    with transaction.atomic():
        conversation = (
            Conversation.objects.select_for_update().select_related("team").get(pk=conversation_id)
        )
        if not role_allows(team_role(by, conversation.team_id), Action.ACT):
            raise Forbidden("your role in this team does not allow renaming conversations.")
        previous = conversation.title
        conversation.title = redacted_title(conversation.team, text)
        conversation.save(update_fields=["title", "updated_at"])
        audit_record(
            actor=by, kind="conversation.renamed", team=conversation.team_id,
            target=str(conversation.pk), data={"from": previous, "to": conversation.title},
        )  # fmt: skip
    return conversation


def conversation_post_message(
    *, conversation_id, text: str, sender: AbstractBaseUser | None
) -> int:
    """Append a user message; start a run unless one is going (it reads it next step, once
    the team's UserPromptSubmit hooks let it through on the worker).

    Returns the message's seq.
    """
    _check_text(text)
    name = sender.get_username() if sender is not None else None
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        refuse_closed(conversation)
        events: list = [UserMessageEvent(text=text, sender=name)]
        if conversation.status != Status.RUNNING:
            events += run_start(conversation, Status(conversation.status), name or "api")
        return store.append(conversation.pk, events)[0].seq
