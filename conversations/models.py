"""A conversation is one small mutable row plus an append-only log of event envelopes.

The envelope holds no event fields of its own beyond `type`: the payload is the event, as
defined in `events.py`. Only `store.py` writes envelopes.
"""

import uuid

from django.conf import settings
from django.db import models

from workspaces.paths import workspace_label

from .events import SCHEMA_VERSION, Status
from .window import MARK_TYPES


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="conversations",
    )
    team = models.ForeignKey("teams.Team", on_delete=models.PROTECT, related_name="conversations")
    title = models.CharField(max_length=200, blank=True)
    archived_at = models.DateTimeField(
        null=True, blank=True, help_text="Archived: out of the team's sidebar, kept whole."
    )
    status = models.CharField(
        max_length=32,
        choices=[(s.value, s.name.replace("_", " ").title()) for s in Status],
        default=Status.IDLE.value,
    )
    model = models.CharField(max_length=200, help_text="Model profile name.")
    workspace_path = models.CharField(max_length=1000)
    workspace_spec = models.JSONField(
        default=dict,
        blank=True,
        help_text="workspaces.spec.WorkspaceSpec: kind, git source, image; {} is local, empty.",
    )
    closed_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Closed: no new runs, its container removed; the folder stays until deleted.",
    )
    agent_config = models.JSONField(default=dict, blank=True)
    secret_names = models.JSONField(
        null=True,
        blank=True,
        help_text="The team secrets this run's tools and agent may use; null: all of them.",
    )
    forked_from = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="forks",
        help_text="The conversation this one was forked from (orchestration.fork).",
    )
    agent = models.CharField(
        max_length=64,
        blank=True,
        help_text="The external ACP agent's profile name; blank: our own agent loop.",
    )

    # A sub-agent's conversation names the conversation and tool call that spawned it. PROTECT,
    # not CASCADE: a cascade would delete a child's row and events without stopping its run (a
    # worker may hold its lease, a container may be up), and the event log refuses a DELETE
    # without the child's own Erasure row anyway. So deleting a parent must first stop and
    # erase its children, deepest first (orchestration.erase); until it does, the parent's
    # delete is refused with ProtectedError rather than half done.
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="children",
        db_index=False,  # the named index in Meta
        help_text="The conversation whose agent spawned this one as a sub-agent.",
    )
    parent_action_id = models.CharField(
        max_length=200, blank=True, help_text="The id of the tool call that spawned it."
    )
    subagent_type = models.CharField(
        max_length=64, blank=True, help_text="The agent definition it runs (general, ...)."
    )
    name = models.CharField(
        max_length=100, blank=True, help_text="Its name among its siblings (delegate's tasks)."
    )

    tokens_in = models.BigIntegerField(default=0)
    tokens_out = models.BigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    steps = models.IntegerField(default=0)
    run_steps = models.IntegerField(default=0, help_text="LLM steps since the current run began.")
    run_cost = models.FloatField(default=0, help_text="Dollars since the current run began.")
    run_children = models.IntegerField(
        default=0, help_text="Sub-agents spawned since the current run began."
    )
    last_seq = models.BigIntegerField(default=0)

    run_slice = models.CharField(
        max_length=64,
        null=True,
        blank=True,
        help_text="Id of the one task slice allowed to run next; other deliveries are no-ops.",
    )
    lease_token = models.CharField(max_length=64, null=True, blank=True)
    interrupt_requested_at = models.DateTimeField(
        null=True, blank=True, help_text="Set by Interrupt; the runner stops what is in flight."
    )
    worker_host = models.CharField(
        max_length=255,
        blank=True,
        default="",
        help_text="Host holding the local workspace; its queue gets the conversation's slices.",
    )
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    run_slice_due_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When `run_slice` should have been claimed; the sweeper re-sends it after.",
    )

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "lease_expires_at"]),
            # A parent's children, for the agent tree and for stopping a subtree.
            models.Index(fields=["parent"], name="conversation_parent"),
            # The sweeper's other half: running slices nobody has claimed (sweep.py). Partial:
            # only the few rows between slices, not every row holding a lease.
            models.Index(
                fields=["run_slice_due_at"],
                condition=models.Q(status="running", lease_token__isnull=True),
                name="conversation_unclaimed_due",
            ),
        ]

    def __str__(self) -> str:
        return self.title or str(self.id)

    @property
    def workspace_name(self) -> str:
        """The workspace as people see and reuse it: its name in the team's area (else the
        stored path, for rows from before the per-team layout or an operator's own path)."""
        return workspace_label(settings.CANVAS_WORKSPACES_ROOT, self.team_id, self.workspace_path)


class ConversationEvent(models.Model):
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="events", db_index=False
    )
    seq = models.BigIntegerField()
    type = models.CharField(max_length=64)
    schema_version = models.PositiveSmallIntegerField(default=SCHEMA_VERSION)
    payload = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="event_unique_seq"),
        ]
        indexes = [
            # The few events a cold reader of a condensed log looks up first (store.load_window).
            models.Index(
                fields=["conversation", "seq"],
                condition=models.Q(type__in=MARK_TYPES),
                name="event_window_marks",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id}#{self.seq} {self.type}"


class Erasure(models.Model):
    """A conversation being deleted. The event log refuses every UPDATE and DELETE in the
    database itself, except the DELETE of a conversation's events while its Erasure row exists:
    the deleting transaction inserts it first and removes it last, so outside that transaction
    nothing can ever delete an event (migration 0009)."""

    conversation_id = models.UUIDField(primary_key=True)

    def __str__(self) -> str:
        return f"erasing {self.conversation_id}"
