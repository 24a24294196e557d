"""Browser forms: shape and size checks only; the services own the rules."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from pydantic import ValidationError

from acp_bridge.profiles import AcpProfile, acp_profiles_for
from orchestration.services import MAX_PROMPT_CHARS
from orchestration.step.profiles import BUILTIN_PROFILES
from teams.policies import EffectivePolicy, policy_for_team
from workspaces.factory import kind_unavailable
from workspaces.paths import WorkspaceNameError, check_name
from workspaces.spec import KINDS, WorkspaceSpec

KNOWN_MODELS = tuple(BUILTIN_PROFILES)
"""Suggested in the model field; any configured profile or LiteLLM id is accepted."""


class _KindSelect(forms.Select):
    """A select whose unavailable choices are shown disabled, with the reason in the label."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.unavailable: dict[str, str] = {}

    def create_option(self, name, value, label, selected, index, subindex=None, attrs=None):
        option = super().create_option(name, value, label, selected, index, subindex, attrs)
        reason = self.unavailable.get(str(value))
        if reason is not None:
            option["attrs"]["disabled"] = True
            option["label"] = f"{label} (unavailable: {reason})"
        return option


OUR_AGENT_LABEL = "Our agent (with the model below)"
SOURCE_LABELS = {"team": "team profile", "site": "site profile", "preset": "preset"}


def agents_allowed(team_id: int | None, policy: EffectivePolicy) -> list[AcpProfile]:
    """The external (ACP) agent profiles the team can name whose kind `acp:NAME` its policy
    allows: what the picker offers. The service checks again when one is chosen."""
    return [p for p in acp_profiles_for(team_id) if policy.agent_kind_allowed(f"acp:{p.name}")]


def _agent_choices(profiles: list[AcpProfile]) -> list:
    external = [(p.name, f"{p.name} ({SOURCE_LABELS[p.source]})") for p in profiles]
    return [("", OUR_AGENT_LABEL)] + ([("External agents (ACP)", external)] if external else [])


class ConversationCreateForm(forms.Form):
    prompt = forms.CharField(
        max_length=MAX_PROMPT_CHARS,
        widget=forms.Textarea(
            attrs={
                "rows": 4,
                "placeholder": "What should the agent do? (Ctrl+Enter)",
                "autofocus": True,
            }
        ),
    )
    agent = forms.CharField(
        max_length=64, required=False, label="Agent", widget=forms.Select,
        help_text="An external agent brings its own model (the Model field is then ignored) and "
        "runs in a local workspace.",
    )  # fmt: skip
    """A profile name, or empty for our own agent; a Select, not a ChoiceField, so that a name
    the team may not use is refused in the service's words (it names the policy rule)."""
    model = forms.CharField(
        max_length=200,
        required=False,  # required for our own agent only (clean)
        widget=forms.TextInput(attrs={"list": "model-profiles", "autocomplete": "off"}),
        help_text="A model profile name, or a LiteLLM model id.",
    )
    workspace = forms.CharField(
        max_length=1000,
        required=False,
        widget=forms.TextInput(
            attrs={"placeholder": "a folder name in your team's area; a new one if empty"}
        ),
    )
    workspace_kind = forms.ChoiceField(
        choices=[("local", "Local folder"), ("docker", "Docker container")], initial="local",
        required=False, label="Runs in", widget=_KindSelect,
    )  # fmt: skip
    image = forms.ChoiceField(choices=(), required=False, label="Image")
    git_repo = forms.CharField(
        max_length=1000, required=False, label="Git repository",
        widget=forms.TextInput(attrs={"placeholder": "https URL or a repository the site names"}),
    )  # fmt: skip
    git_ref = forms.CharField(
        max_length=250, required=False, label="Branch, tag or commit",
        widget=forms.TextInput(attrs={"placeholder": "default branch"}),
    )  # fmt: skip

    def __init__(self, *args, team_id: int | None = None, **kwargs) -> None:
        """`team_id`: the team it starts in, whose policy lists the images and the external
        agents offered."""
        super().__init__(*args, **kwargs)
        self.fields["model"].initial = settings.CANVAS_DEFAULT_MODEL
        # No team yet: the built-in defaults offer everything; the first conversation makes a
        # personal team, and the service applies the site's policy to it.
        policy = policy_for_team(team_id) if team_id else EffectivePolicy()
        self.fields["agent"].widget.choices = _agent_choices(agents_allowed(team_id, policy))
        self.fields["agent"].widget.attrs["aria-describedby"] = "agent-help"
        images = policy.images() if team_id else tuple(settings.CANVAS_DOCKER_IMAGES)
        self.fields["image"].choices = [(name, name) for name in images]
        self.fields["image"].initial = settings.CANVAS_DOCKER_IMAGE
        widget = self.fields["workspace_kind"].widget
        widget.unavailable = {
            kind: reason for kind in KINDS if (reason := kind_unavailable(kind)) is not None
        }
        self.unavailable = widget.unavailable

    def clean_workspace(self) -> str | None:
        name = self.cleaned_data["workspace"].strip() or None
        if name is not None:
            try:
                check_name(name)
            except WorkspaceNameError as exc:
                raise forms.ValidationError(str(exc)) from None
        return name

    def clean_agent(self) -> str | None:
        return self.cleaned_data["agent"].strip() or None

    def clean(self) -> dict[str, Any]:
        """The workspace fields become one `workspace_spec` (the service's argument); the
        model is required for our own agent and ignored for an external one."""
        data = super().clean()
        if data.get("agent"):
            data["model"] = ""
        elif "model" in data and not data["model"].strip():
            self.add_error("model", self.fields["model"].error_messages["required"])
        kind = data.pop("workspace_kind", None) or "local"
        image = data.pop("image", None) or None
        repo, ref = data.pop("git_repo", "").strip(), data.pop("git_ref", "").strip()
        try:
            data["workspace_spec"] = WorkspaceSpec(
                kind=kind,
                image=image if kind != "local" else None,  # the select always sends one
                source={"repo": repo, "ref": ref or None} if repo else None,
            )
        except ValidationError as exc:
            for error in exc.errors():
                self.add_error(None, error["msg"].removeprefix("Value error, "))
        return data


class MessageForm(forms.Form):
    text = forms.CharField(
        max_length=MAX_PROMPT_CHARS,
        widget=forms.Textarea(
            attrs={"rows": 2, "placeholder": "Send a follow-up message (Ctrl+Enter)"}
        ),
    )
