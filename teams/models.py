"""People-side models: teams, who belongs to them in which role, and personal API tokens.

Tokens are stored hashed: the plain token is shown once.
"""

from django.conf import settings
from django.db import models

from .vocabulary import ConfirmationMode, HookEvent, NetworkAccess, Risk


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    ADMIN = "admin", "Admin"
    MEMBER = "member", "Member"
    VIEWER = "viewer", "Viewer"


class Team(models.Model):
    name = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    secrets_version = models.PositiveIntegerField(
        default=0, help_text="Bumped on every secret change so caches of values can tell."
    )
    model_titles = models.BooleanField(
        default=False,
        help_text="New conversations get a short title written by their own model (one small "
        "call on a worker) instead of the prompt's first line.",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    is_default = models.BooleanField(
        default=False, help_text="The team used when a request names none."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team__name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="membership_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class TeamInvitation(models.Model):
    """An offer to join a team in a role, pending until the invitee accepts or declines (the
    row then goes; the audit log keeps its history).

    `username` is the name or email as the admin typed it, matched against users when they
    look: an invitation to a name nobody has looks exactly like one to a real person, so
    inviting reveals nothing about which accounts exist."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invitations")
    username = models.CharField(max_length=254, help_text="Username or email, as typed.")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["team", "username"], name="invitation_unique"),
        ]
        indexes = [models.Index(fields=["username"], name="invitation_username")]

    def __str__(self) -> str:
        return f"{self.username} to {self.team} ({self.role})"


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="Shown in lists to tell tokens apart.")
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class AuditRecord(models.Model):
    """Who did what, when. Append-only (a database trigger refuses UPDATE and DELETE)."""

    # No cascades: history outlives the team or user it names, and the rows never change.
    team = models.ForeignKey(
        Team,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="audit_records",
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    actor_name = models.CharField(max_length=150, blank=True)
    """Kept as text so the record still says who it was after the user is deleted."""
    kind = models.CharField(max_length=64, db_index=True)
    target = models.CharField(max_length=255, blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_name} {self.kind} {self.target}"


def _updated_by() -> models.ForeignKey:
    """Who last changed a configuration row; the row outlives the user."""
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )


class Secret(models.Model):
    """A team secret. The value is only ever stored encrypted (see teams.secrets)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="secrets")
    name = models.CharField(max_length=64, help_text="An environment-variable name: API_KEY.")
    description = models.CharField(max_length=500, blank=True)
    ciphertext = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = _updated_by()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="secret_unique")]

    def __str__(self) -> str:
        return f"{self.team}: {self.name}"


class Policy(models.Model):
    """Limits for a team's agents. The row without a team is the site default; a team's row
    may only be stricter in effect (teams.policies combines them)."""

    team = models.OneToOneField(
        Team, null=True, blank=True, on_delete=models.CASCADE, related_name="policy"
    )
    confirmation_mode = models.CharField(
        max_length=16, choices=ConfirmationMode.choices, default=ConfirmationMode.RISKY
    )
    risk_threshold = models.CharField(max_length=8, choices=Risk.choices, default=Risk.HIGH)
    allowed_tools = models.JSONField(
        default=list, blank=True, help_text="Tool names; empty allows every tool."
    )
    allowed_agent_kinds = models.JSONField(
        default=list, blank=True, help_text="Agent kinds (native, acp:NAME); empty allows all."
    )
    max_iterations_per_run = models.PositiveIntegerField(null=True, blank=True)
    max_cost_per_run_usd = models.DecimalField(
        max_digits=12, decimal_places=4, null=True, blank=True
    )
    max_cost_per_month_usd = models.DecimalField(
        max_digits=12, decimal_places=4, null=True, blank=True
    )
    max_concurrent_runs = models.PositiveIntegerField(null=True, blank=True)
    network = models.CharField(
        max_length=8,
        choices=NetworkAccess.choices,
        default=NetworkAccess.NONE,
        help_text="Network for sandboxed commands; host needs CANVAS_SANDBOX_ALLOW_HOST_NETWORK.",
    )
    allowed_workspace_kinds = models.JSONField(
        default=list, blank=True, help_text="Workspace kinds (local, docker); empty allows all."
    )
    allowed_images = models.JSONField(
        default=list,
        blank=True,
        help_text="Docker images; empty allows every image the site lists (CANVAS_DOCKER_IMAGES).",
    )
    docker_cpus = models.FloatField(null=True, blank=True, help_text="CPUs per container.")
    docker_memory_mb = models.PositiveIntegerField(
        null=True, blank=True, help_text="Memory per container, MB."
    )
    docker_pids = models.PositiveIntegerField(
        null=True, blank=True, help_text="Processes per container."
    )
    # Sub-agents (issue 13). The site's CANVAS_SUBAGENT_* settings cap every row: a row's empty
    # limit means "no limit of its own", and the stricter value is in force.
    subagents_allowed = models.BooleanField(
        default=True, help_text="May agents spawn sub-agents (task, delegate, workflow)?"
    )
    max_subagent_depth = models.PositiveIntegerField(
        null=True, blank=True, help_text="How deep sub-agents may nest (1: children only)."
    )
    max_children_per_call = models.PositiveIntegerField(
        null=True, blank=True, help_text="Children one tool call may spawn."
    )
    max_children_per_run = models.PositiveIntegerField(
        null=True, blank=True, help_text="Children one run may spawn in all."
    )
    max_concurrent_children = models.PositiveIntegerField(
        null=True, blank=True, help_text="Children of one parent running at once."
    )
    # External (ACP) agents' permission requests (issue 14). Unlike the allow-lists above, an
    # empty list here grants nothing: auto-allowing loosens, so empty must be the safe default.
    acp_auto_allow_kinds = models.JSONField(
        default=list, blank=True,
        help_text="ACP tool kinds allowed without asking (read, search, ...); empty: ask for all.",
    )  # fmt: skip
    acp_permission_timeout_seconds = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="How long a permission request waits for a person before it is rejected.",
    )  # fmt: skip
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = _updated_by()

    class Meta:
        verbose_name_plural = "policies"
        constraints = [
            models.UniqueConstraint(
                fields=["team"], condition=models.Q(team__isnull=True), name="one_site_policy"
            ),
        ]

    def __str__(self) -> str:
        return f"policy of {self.team}" if self.team_id else "site default policy"


class ModelProfile(models.Model):
    """A model a team's conversations can pick: a LiteLLM id and how to reach it."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="model_profiles")
    name = models.CharField(max_length=100)
    model = models.CharField(max_length=200, help_text="LiteLLM model id, e.g. openai/gpt-4o.")
    api_base = models.URLField(blank=True)
    api_key_secret = models.CharField(
        max_length=64, blank=True, help_text="Name of the team secret holding the API key."
    )
    max_input_tokens = models.PositiveIntegerField(null=True, blank=True)
    temperature = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="model_profile_unique")
        ]

    def __str__(self) -> str:
        return f"{self.team}: {self.name}"


class TeamAgent(models.Model):
    """A sub-agent definition the team's admins wrote: a kind of child a parent may spawn
    (`subagent_type`). The rules for its values live with the other definitions
    (orchestration.subagents.definitions, checked by orchestration.subagents.team_agents), so
    the columns here only bound what the database holds."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=64, help_text="Fits Conversation.subagent_type.")
    description = models.TextField(help_text="What the parent's model reads when choosing.")
    tools = models.JSONField(
        null=True, blank=True, default=None,
        help_text="Tool names the child may have at most; null: the parent's.",
    )  # fmt: skip
    model = models.CharField(
        max_length=200, blank=True, help_text="A model profile name; blank: the parent's."
    )
    max_iterations = models.PositiveIntegerField(
        null=True, blank=True, help_text="Null: the child's share of the parent's budget."
    )
    instructions = models.TextField(blank=True, help_text="Appended to the child's prompt.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="team_agent_unique")]

    def __str__(self) -> str:
        return f"{self.team}: {self.name}"


class AcpAgentProfile(models.Model):
    """An external ACP agent the team's admins set up (acp_bridge.profiles): the command the
    bridge spawns and its environment. `env` maps a variable to literal text or to
    {"secret": NAME}, a team secret's name, never its value; the rules for all values live in
    acp_bridge.profiles (checked by acp_bridge.team_profiles), so the columns only bound what
    the database holds."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="acp_agents")
    name = models.CharField(max_length=64)
    command = models.CharField(max_length=255, help_text="A program name or absolute path.")
    args = models.JSONField(default=list, blank=True, help_text="Arguments, a list of strings.")
    env = models.JSONField(
        default=dict, blank=True, help_text='NAME: text, or NAME: {"secret": TEAM_SECRET}.'
    )
    allowed_secrets = models.JSONField(
        default=list, blank=True, help_text="Team secrets the process sees by their own names."
    )
    default_mode = models.CharField(max_length=64, blank=True)
    idle_timeout_seconds = models.PositiveIntegerField(default=300)
    turn_timeout_seconds = models.PositiveIntegerField(default=1800)
    readonly = models.JSONField(
        default=list,
        blank=True,
        help_text="Host paths the agent sees read-only, within the site's.",
    )
    network = models.CharField(
        max_length=16, default="none", help_text='"none", "outbound" or "host", as the site allows.'
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="acp_agent_profile_unique")
        ]

    def __str__(self) -> str:
        return f"{self.team}: {self.name}"


class McpServer(models.Model):
    """An MCP server the team's admins set up (orchestration.mcp): its tools join our own
    agent's while a conversation runs. `transport` "stdio" spawns `command args` in the
    sandbox; "http" talks Streamable HTTP to `url`. `env` (stdio) and `headers` (http) map a
    name to literal text or {"secret": NAME}, a team secret's name, never its value; the value
    rules live in orchestration.mcp.rules, so the columns only bound what the database holds."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="mcp_servers")
    name = models.CharField(max_length=32, help_text="Its tools are named mcp__NAME__TOOL.")
    transport = models.CharField(max_length=8, choices=[("stdio", "stdio"), ("http", "HTTP")])
    command = models.CharField(max_length=255, blank=True)
    args = models.JSONField(default=list, blank=True)
    url = models.CharField(max_length=2000, blank=True)
    env = models.JSONField(default=dict, blank=True)
    headers = models.JSONField(default=dict, blank=True)
    model_profiles = models.JSONField(
        default=list, blank=True, help_text="Model profile names it serves; empty: all of them."
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="mcp_server_unique")]

    def __str__(self) -> str:
        return f"{self.team}: {self.name}"


class TeamSpend(models.Model):
    """Money spent on models per team and calendar month (UTC), for monthly budgets."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="spend")
    month = models.DateField(help_text="First day of the month.")
    cost_usd = models.DecimalField(max_digits=14, decimal_places=6, default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "month"], name="spend_unique")]

    def __str__(self) -> str:
        return f"{self.team} {self.month:%Y-%m}: ${self.cost_usd}"


HOOK_TIMEOUT_MIN = 1
HOOK_TIMEOUT_MAX = 300


class Hook(models.Model):
    """An admin-configured command run around the team's agent steps (teams.hooks)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="hooks")
    name = models.CharField(max_length=64)
    event = models.CharField(max_length=32, choices=HookEvent.choices)
    matcher = models.CharField(
        max_length=500, blank=True, help_text="Regular expression on the tool name; blank: all."
    )
    command = models.TextField(help_text="Run with bash; gets the event as JSON on stdin.")
    timeout_seconds = models.PositiveSmallIntegerField(default=10)
    fail_closed = models.BooleanField(
        default=False, help_text="Block the step when the hook itself fails or times out."
    )
    enabled = models.BooleanField(default=True)
    position = models.PositiveIntegerField(default=0, help_text="Hooks run in this order.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="hook_unique"),
            models.CheckConstraint(
                condition=models.Q(
                    timeout_seconds__gte=HOOK_TIMEOUT_MIN, timeout_seconds__lte=HOOK_TIMEOUT_MAX
                ),
                name="hook_timeout_range",
            ),
        ]
        # The runner asks for one team's enabled hooks of one event before every step.
        indexes = [models.Index(fields=["team", "event"], name="hook_team_event")]

    def __str__(self) -> str:
        return f"{self.team}: {self.name} ({self.event})"


class TeamNotification(models.Model):
    """Where a team's status notifications go. A row of its own rather than fields on Team:
    most teams have none, and the signing secret stays off the hot Team row."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="notification")
    webhook_url = models.URLField(max_length=500)
    webhook_secret = models.TextField(help_text="The signing secret, Fernet-encrypted.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = _updated_by()

    def __str__(self) -> str:
        return f"notifications of {self.team}"
