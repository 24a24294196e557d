"""Browser forms: shape and size checks only; the services own the rules."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from django import forms
from django.conf import settings
from pydantic import ValidationError

from acp_bridge.profiles import AcpProfile, acp_profiles_for
from orchestration.services import MAX_PROMPT_CHARS
from orchestration.step.profiles import site_profile_names
from teams.models import ModelProfile
from teams.policies import CONFIRMATION_RANK, EffectivePolicy, policy_for_team
from teams.vocabulary import ConfirmationMode
from workspaces.factory import kind_unavailable
from workspaces.paths import WorkspaceNameError, check_name
from workspaces.spec import KINDS, WorkspaceSpec

OTHER_MODEL = "__other__"
"""The model picker's last choice: a LiteLLM model id typed in `model_other`."""


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


def model_groups(own: Iterable[str], keep: Iterable[str] = ()) -> list:
    """A model picker's groups: the team's profiles, the site's (the default first), then
    `keep` (names saved before that neither offers any more, so an edit does not drop them)."""
    own = list(own)
    site = [name for name in dict.fromkeys((settings.CANVAS_DEFAULT_MODEL, *site_profile_names()))
            if name not in own]  # fmt: skip
    others = [name for name in keep if name and name not in own and name not in site]
    groups: list = []
    for label, names in (("Team profiles", own), ("Site models", site), ("Other", others)):
        if names:
            groups.append((label, [(name, name) for name in names]))
    return groups


def _model_choices(team_id: int | None) -> list:
    """The team's model profiles, then the site's, then "another model id"."""
    own = (
        ModelProfile.objects.filter(team_id=team_id).order_by("name").values_list("name", flat=True)
    )
    return [*model_groups(own if team_id else ()), (OTHER_MODEL, "Another model (a LiteLLM id)…")]


def _confirmation_choices(policy: EffectivePolicy) -> list[tuple[str, str]]:
    """The team's default, then each mode at least as strict (a looser one would be refused)."""
    floor = CONFIRMATION_RANK[ConfirmationMode(policy.confirmation_mode)]
    default = ConfirmationMode(policy.confirmation_mode).label
    return [("", f"Team default: {default.lower()}")] + [
        (mode.value, mode.label) for mode in ConfirmationMode if CONFIRMATION_RANK[mode] > floor
    ]


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
        widget=forms.Select,
        help_text="A model profile of the team or the site, or another LiteLLM model id.",
    )
    """A Select, not a ChoiceField: a name posted without the picker (a script, an old page)
    still reaches the service, which says whether it knows it."""
    model_other = forms.CharField(
        max_length=200, required=False, label="Model id",
        widget=forms.TextInput(attrs={"placeholder": "provider/model, e.g. openai/gpt-4o-mini",
                                      "autocomplete": "off"}),
    )  # fmt: skip
    confirmation_mode = forms.ChoiceField(
        choices=(), required=False, label="Ask before acting",
        help_text="Stricter than the team's policy only.",
    )  # fmt: skip
    max_cost_usd = forms.DecimalField(
        required=False, min_value=Decimal("0.01"), max_digits=12, decimal_places=2,
        label="Budget (USD)", widget=forms.NumberInput(attrs={"step": "0.01", "placeholder": "none"}),
    )  # fmt: skip
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
        self.fields["model"].widget.choices = _model_choices(team_id)
        # No team yet: the built-in defaults offer everything; the first conversation makes a
        # personal team, and the service applies the site's policy to it.
        policy = policy_for_team(team_id) if team_id else EffectivePolicy()
        self.fields["confirmation_mode"].choices = _confirmation_choices(policy)
        if policy.max_cost_per_run_usd is not None:
            self.fields[
                "max_cost_usd"
            ].help_text = f"Per run; the team allows at most ${policy.max_cost_per_run_usd:.2f}."
            self.fields["max_cost_usd"].widget.attrs["max"] = str(policy.max_cost_per_run_usd)
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
        other = data.pop("model_other", "").strip()
        if data.get("model") == OTHER_MODEL:
            data["model"] = other
            if not other and not data.get("agent"):
                self.add_error("model_other", "Type the model's LiteLLM id, or pick one above.")
        if data.get("agent"):
            data["model"] = ""
            data.pop("confirmation_mode", None)  # an external agent asks in its own way
            data.pop("max_cost_usd", None)
        elif "model" in data and not data["model"].strip() and "model_other" not in self.errors:
            self.add_error("model", self.fields["model"].error_messages["required"])
        if data.get("confirmation_mode") == "":
            data["confirmation_mode"] = None
        if data.get("max_cost_usd") is not None:
            data["max_cost_usd"] = float(data["max_cost_usd"])
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
