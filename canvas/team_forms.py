"""Forms of the team, token, audit and settings (secrets, policy, model profiles) pages: shape
and size checks only.

Who may grant which role, who may remove whom and whether a name is taken are the services'
rules (teams.services, teams.tokens); the forms never duplicate them, so a refused request
reaches the service and comes back with the service's own status and words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from django import forms

from teams.models import Role
from teams.secrets import MAX_DESCRIPTION_CHARS as MAX_SECRET_DESCRIPTION
from teams.secrets import MAX_VALUE_BYTES as MAX_SECRET_BYTES
from teams.vocabulary import ConfirmationMode, NetworkAccess, Risk


class TeamSwitchForm(forms.Form):
    team_id = forms.IntegerField(min_value=1)
    next = forms.CharField(max_length=2000, required=False)


class TeamCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100, widget=forms.TextInput(attrs={"placeholder": "e.g. Platform team"})
    )


class MemberForm(forms.Form):
    """Names one member of the team the URL names."""

    username = forms.CharField(max_length=150)


class MemberRoleForm(MemberForm):
    role = forms.ChoiceField(choices=Role.choices)


class MemberInviteForm(forms.Form):
    username = forms.CharField(
        max_length=254,
        label="Username or email",
        widget=forms.TextInput(attrs={"placeholder": "username or email", "autocomplete": "off"}),
    )
    role = forms.ChoiceField(choices=Role.choices, initial=Role.MEMBER)

    def __init__(self, *args, offered_roles: list[tuple[str, str]] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if offered_roles is not None:
            # Only the menu shrinks: validation still accepts every role, so a crafted
            # "owner" from an admin reaches the service and gets its 403, not a vague 400.
            self.fields["role"].widget.choices = offered_roles


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100, widget=forms.TextInput(attrs={"placeholder": "e.g. laptop CLI"})
    )
    expires_in_days = forms.IntegerField(
        min_value=1,
        max_value=3650,
        required=False,
        label="Expires after (days)",
        widget=forms.NumberInput(attrs={"placeholder": "never"}),
    )


class AuditFilterForm(forms.Form):
    """GET filters; unknown values simply match nothing."""

    actor = forms.CharField(max_length=150, required=False)
    kind = forms.CharField(max_length=64, required=False)
    page = forms.IntegerField(min_value=1, required=False)


class SecretCreateForm(forms.Form):
    """The value is a password input that is never rendered back: a refused form comes back
    without it, so the page never holds a value it did not need to."""

    name = forms.CharField(
        max_length=64, widget=forms.TextInput(attrs={"placeholder": "e.g. OPENAI_API_KEY"})
    )
    value = forms.CharField(
        max_length=2 * MAX_SECRET_BYTES, strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )  # fmt: skip
    description = forms.CharField(max_length=MAX_SECRET_DESCRIPTION, required=False)


class SecretReplaceForm(forms.Form):
    """Names one secret; an empty value keeps the old one, an unchanged description is not
    sent (the service then says that nothing was given)."""

    name = forms.CharField(max_length=64, widget=forms.HiddenInput)
    value = forms.CharField(
        max_length=2 * MAX_SECRET_BYTES, strip=False, required=False, label="New value",
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )  # fmt: skip
    description = forms.CharField(max_length=MAX_SECRET_DESCRIPTION, required=False)


def _unlimited() -> forms.NumberInput:
    return forms.NumberInput(attrs={"placeholder": "no limit", "step": "any"})


def _names(text: str) -> list[str]:
    """ "a, b c" -> ["a", "b", "c"]: the page's way of writing a list; the service checks names."""
    return [name for name in re.split(r"[\s,]+", text) if name]


class _NameList(forms.CharField):
    """A list of names written as text; shown from the policy's list as that text."""

    def prepare_value(self, value):
        return ", ".join(value) if isinstance(value, list | tuple) else value

    def clean(self, value) -> list[str]:
        return _names(super().clean(value))


class PolicyForm(forms.Form):
    """The whole team policy, as the API's PUT takes it: a field left empty is "no limit" (or
    "all" for a list). Ranges and names are teams.policies' rules, in its words."""

    confirmation_mode = forms.ChoiceField(choices=ConfirmationMode.choices, label="Confirmation")
    risk_threshold = forms.ChoiceField(choices=Risk.choices, label="Risky from")
    allowed_tools = forms.CharField(
        max_length=2000, required=False, label="Allowed tools",
        widget=forms.TextInput(attrs={"placeholder": "all tools"}),
    )  # fmt: skip
    allowed_agent_kinds = forms.CharField(
        max_length=2000, required=False, label="Allowed agent kinds",
        widget=forms.TextInput(attrs={"placeholder": "all kinds (native, acp:NAME)"}),
    )  # fmt: skip
    max_iterations_per_run = forms.IntegerField(
        required=False, label="Steps per run", widget=_unlimited()
    )
    max_cost_per_run_usd = forms.DecimalField(
        required=False, label="Cost per run (USD)", widget=_unlimited()
    )
    max_cost_per_month_usd = forms.DecimalField(
        required=False, label="Cost per month (USD)", widget=_unlimited()
    )
    max_concurrent_runs = forms.IntegerField(
        required=False, label="Runs at once", widget=_unlimited()
    )
    network = forms.ChoiceField(choices=NetworkAccess.choices, label="Network for commands")
    allowed_workspace_kinds = _NameList(
        max_length=200, required=False, label="Workspace kinds",
        widget=forms.TextInput(attrs={"placeholder": "all kinds (local, docker)"}),
    )  # fmt: skip
    allowed_images = _NameList(
        max_length=2000, required=False, label="Docker images",
        widget=forms.TextInput(attrs={"placeholder": "every image the site offers"}),
    )  # fmt: skip
    docker_cpus = forms.FloatField(required=False, label="CPUs per container", widget=_unlimited())
    docker_memory_mb = forms.IntegerField(
        required=False, label="Memory per container (MB)", widget=_unlimited()
    )
    docker_pids = forms.IntegerField(
        required=False, label="Processes per container", widget=_unlimited()
    )
    subagents_allowed = forms.BooleanField(required=False, label="Sub-agents allowed")
    max_subagent_depth = forms.IntegerField(
        required=False, label="Sub-agent depth", widget=_unlimited()
    )
    max_children_per_call = forms.IntegerField(
        required=False, label="Children per tool call", widget=_unlimited()
    )
    max_children_per_run = forms.IntegerField(
        required=False, label="Children per run", widget=_unlimited()
    )
    max_concurrent_children = forms.IntegerField(
        required=False, label="Children at once", widget=_unlimited()
    )
    acp_auto_allow_kinds = forms.CharField(
        max_length=200, required=False, label="Grant without asking (tool kinds)",
        widget=forms.TextInput(attrs={"placeholder": "none: ask for every request"}),
    )  # fmt: skip
    acp_permission_timeout_seconds = forms.IntegerField(
        required=False, label="Wait for a person (seconds)",
        widget=forms.NumberInput(attrs={"placeholder": "the site's limit"}),
    )  # fmt: skip

    def clean_allowed_tools(self) -> list[str]:
        return _names(self.cleaned_data["allowed_tools"])

    def clean_allowed_agent_kinds(self) -> list[str]:
        return _names(self.cleaned_data["allowed_agent_kinds"])

    def clean_acp_auto_allow_kinds(self) -> list[str]:
        return _names(self.cleaned_data["acp_auto_allow_kinds"])


PROVIDERS = [
    ("", "Other (the model id says it)"),
    ("openai", "OpenAI"),
    ("anthropic", "Anthropic"),
    ("gemini", "Google Gemini"),
    ("mistral", "Mistral"),
    ("groq", "Groq"),
    ("deepseek", "DeepSeek"),
    ("openrouter", "OpenRouter"),
    ("azure", "Azure OpenAI"),
    ("bedrock", "AWS Bedrock"),
    ("ollama_chat", "Ollama"),
]
"""LiteLLM providers offered by name; any other is written into the model id."""


def provider_split(model: str) -> tuple[str, str]:
    """ "openai/gpt-4o" -> ("openai", "gpt-4o"); an id of another provider stays whole."""
    prefix, _, rest = model.partition("/")
    if rest and prefix in dict(PROVIDERS):
        return prefix, rest
    return "", model


class ProfileForm(forms.Form):
    """A model profile's fields as teams.profiles takes them; `provider` and `model` become one
    LiteLLM model id. Which secret exists, which api_base is allowed and the ranges are the
    service's to say."""

    provider = forms.ChoiceField(choices=PROVIDERS, required=False)
    model = forms.CharField(
        max_length=200, widget=forms.TextInput(attrs={"placeholder": "e.g. gpt-4o-mini"})
    )
    api_base = forms.CharField(
        max_length=200, required=False, label="API base URL",
        widget=forms.TextInput(attrs={"placeholder": "the provider's own"}),
    )  # fmt: skip
    api_key_secret = forms.CharField(
        max_length=64, required=False, label="API key (a team secret)", widget=forms.Select
    )
    max_input_tokens = forms.IntegerField(required=False, label="Context limit (tokens)")
    temperature = forms.FloatField(required=False)

    def __init__(self, *args, secret_names: Iterable[str] = (), **kwargs):
        super().__init__(*args, **kwargs)
        # A menu of the team's secrets; a name that is not among them still reaches the
        # service, which says so in its words.
        self.fields["api_key_secret"].widget.choices = [
            ("", "none"),
            *[(n, n) for n in secret_names],
        ]

    def clean(self) -> dict:
        data = super().clean()
        provider, model = data.pop("provider", ""), data.get("model", "")
        if provider and model and not model.startswith(f"{provider}/"):
            data["model"] = f"{provider}/{model}"
        return data


class ProfileCreateForm(ProfileForm):
    name = forms.CharField(
        max_length=100, widget=forms.TextInput(attrs={"placeholder": "e.g. fast"})
    )
    field_order = ["name"]


class ProfileEditForm(ProfileForm):
    name = forms.CharField(max_length=100, widget=forms.HiddenInput)


class TitlesForm(forms.Form):
    model_titles = forms.BooleanField(
        required=False, label="Ask each conversation's model for a short title",
        help_text="One small call per new conversation, on a worker, after the team's prompt "
        "hooks have passed its first message; its cost counts toward the team's budget. "
        "Off: the title is the prompt's first line.",
    )  # fmt: skip
