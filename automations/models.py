"""An automation (what starts runs and how) and its runs (one per delivery or firing).

Rules live in automations.services and automations.runs; these are fields and constraints.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .vocabulary import AUTOMATION_TRIGGERS, Concurrency, Missed, RunStatus, Trigger


def _choices(vocabulary) -> list[tuple[str, str]]:
    return [(v.value, v.name.lower()) for v in vocabulary]


class Automation(models.Model):
    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="automations")
    name = models.CharField(max_length=64)
    enabled = models.BooleanField(default=True)
    trigger = models.CharField(max_length=16, choices=_choices(AUTOMATION_TRIGGERS))
    cron = models.CharField(max_length=100, blank=True, help_text="For schedules (croniter).")
    timezone = models.CharField(max_length=64, default="UTC")
    missed = models.CharField(
        max_length=16, choices=_choices(Missed), default=Missed.SKIP.value,
        help_text="Slots missed while down: skip, or fire once (automations.schedules).",
    )  # fmt: skip
    last_slot_at = models.DateTimeField(
        null=True, blank=True,
        help_text="The latest schedule slot dealt with (fired or skipped); null: none yet.",
    )  # fmt: skip
    prompt_template = models.TextField(help_text="{{ payload.path }} substitutions only.")
    filter = models.TextField(blank=True, help_text="JMESPath over the payload; empty: all.")
    model = models.CharField(max_length=200, help_text="Model profile name.")
    agent = models.CharField(max_length=64, blank=True, help_text="ACP profile; blank: native.")
    workspace_spec = models.JSONField(default=dict, blank=True)
    concurrency = models.CharField(
        max_length=16, choices=_choices(Concurrency), default=Concurrency.SKIP.value
    )
    max_cost_usd = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    allowed_secrets = models.JSONField(
        default=list, blank=True, help_text="Team secrets its runs may use; empty: none."
    )
    callback_url = models.URLField(
        max_length=2000, blank=True,
        help_text="Where each run's result is POSTed, signed with the webhook secret.",
    )  # fmt: skip
    limits = models.JSONField(
        default=dict, blank=True,
        help_text="Its runs' tightening of the team policy: confirmation_mode, risk_threshold, "
        "max_iterations, tools (teams.policies.tighten).",
    )  # fmt: skip
    deadline_minutes = models.PositiveIntegerField(
        default=60, help_text="A run going longer alerts the team's notification webhook."
    )
    webhook_secret = models.TextField(help_text="Fernet ciphertext (teams.crypto).")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="automation_name_per_team")
        ]

    def __str__(self) -> str:
        return self.name


class AutomationRun(models.Model):
    automation = models.ForeignKey(Automation, on_delete=models.CASCADE, related_name="runs")
    trigger = models.CharField(max_length=16, choices=_choices(Trigger))
    delivery_key = models.CharField(
        max_length=255,
        help_text="X-GitHub-Delivery, or the signature: a second delivery with it starts nothing.",
    )
    headers = models.JSONField(default=dict, blank=True, help_text="Signatures dropped.")
    payload = models.JSONField(default=dict, blank=True)
    prompt = models.TextField(blank=True)
    conversation = models.ForeignKey(
        "conversations.Conversation", null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    status = models.CharField(max_length=16, choices=_choices(RunStatus))
    error = models.TextField(blank=True)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    retry_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="retries"
    )
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+", help_text="Who pressed Run now or Retry; null for its trigger.",
    )  # fmt: skip
    # The outbox (automations.outbox): set when the notice was handed to a worker, so each
    # is sent once however many sweepers run.
    failure_alerted_at = models.DateTimeField(null=True, blank=True)
    overdue_alerted_at = models.DateTimeField(null=True, blank=True)
    callback_done_at = models.DateTimeField(
        null=True, blank=True, help_text="Callback handed over, or none to send."
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["automation", "delivery_key"], name="automation_run_delivery_once"
            )
        ]
        indexes = [
            models.Index(fields=["automation", "-created_at"], name="automation_run_recent"),
            # The sweeper's work list: few rows, so a partial index.
            models.Index(
                fields=["created_at"],
                condition=models.Q(status__in=["accepted", "queued", "started"]),
                name="automation_run_open",
            ),
            # The outbox's work list: ended runs with a notice still unsent.
            models.Index(
                fields=["finished_at"],
                condition=models.Q(failure_alerted_at__isnull=True, status="failed")
                | models.Q(
                    callback_done_at__isnull=True, status__in=["finished", "failed", "cancelled"]
                ),
                name="automation_run_unreported",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.automation_id}:{self.delivery_key}"
