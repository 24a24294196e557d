"""A skill the team's admins wrote. The value rules live in skills.catalog (shared with the
workspace's SKILL.md files) and are checked by skills.services; the columns only bound what
the database holds."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class TeamSkill(models.Model):
    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="skills")
    name = models.CharField(max_length=64)
    description = models.TextField(help_text="What the model reads when choosing a skill.")
    triggers = models.JSONField(
        default=list, blank=True, help_text="Words in a user's message that load it."
    )
    body = models.TextField(help_text="The instructions the agent reads when it loads it.")
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="team_skill_unique")]

    def __str__(self) -> str:
        return self.name
