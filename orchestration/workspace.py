"""A conversation's workspace, made from its row and its team's policy by the one factory
(workspaces.factory); and which conversations may still have one running (the orphan sweep)."""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings

from conversations.models import Conversation
from teams.policies import EffectivePolicy, min_limit, policy_for_team
from workspaces.factory import ManagedWorkspace, workspace_for
from workspaces.spec import ContainerLimits, spec_of


def container_limits(policy: EffectivePolicy) -> ContainerLimits:
    """A container's resources: the site's (CANVAS_DOCKER_*) lowered by the team's policy."""
    return ContainerLimits(
        cpus=min_limit(settings.CANVAS_DOCKER_CPUS, policy.docker_cpus),
        memory_mb=min_limit(settings.CANVAS_DOCKER_MEMORY_MB, policy.docker_memory_mb),
        pids=min_limit(settings.CANVAS_DOCKER_PIDS, policy.docker_pids),
    )


def workspace_of(
    conversation: Conversation, *, policy: EffectivePolicy | None = None
) -> ManagedWorkspace:
    """The conversation's workspace under its team's policy (read now unless given)."""
    policy = policy if policy is not None else policy_for_team(conversation.team_id)
    return workspace_for(
        str(conversation.pk), conversation.workspace_path or None,
        spec=spec_of(conversation.workspace_spec), team_id=conversation.team_id,
        network=policy.network, limits=container_limits(policy),
    )  # fmt: skip


def conversations_open(ids: Iterable[str]) -> set[str]:
    """Those of `ids` that name a conversation that exists and is not closed: the ones whose
    container the orphan sweep keeps. Ids that are not UUIDs are never open."""
    import uuid

    valid = set()
    for value in ids:
        try:
            valid.add(uuid.UUID(value))
        except (ValueError, TypeError, AttributeError):
            continue
    rows = Conversation.objects.filter(pk__in=valid, closed_at__isnull=True)
    return {str(pk) for pk in rows.values_list("pk", flat=True)}
