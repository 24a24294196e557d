"""The Automations pages' forms: shape and size only. Every rule (name pattern, cron, time zone,
template, filter, which model or external agent the policy allows, budget range, secret names)
is automations.fields', reached through automations.services, so a refusal comes back in the
service's words and status.

The menus (model profiles, external agents, secret names) offer what the team has; a value that
is not offered (a profile deleted since) still reaches the service, which says what is wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings

from automations.fields import MAX_TEMPLATE_CHARS, MAX_URL_CHARS
from automations.filters import MAX_FILTER_CHARS
from automations.models import Automation
from automations.vocabulary import AUTOMATION_TRIGGERS, Concurrency, Missed, RunStatus, Trigger
from teams.models import Team
from teams.policies import policy_for_team
from teams.profiles import profile_list
from teams.secrets import secret_list
from teams.vocabulary import RISK_NAMES, ConfirmationMode

from .forms import OUR_AGENT_LABEL, SOURCE_LABELS, agents_allowed, model_groups

MAX_PAYLOAD_CHARS = 100_000


def _choices(vocabulary) -> list[tuple[str, str]]:
    return [(v.value, v.value) for v in vocabulary]


class _AnyOf(forms.MultipleChoiceField):
    """Checkboxes of the team's names whose posted values are checked by the service, not
    against the menu: a name it no longer has is refused in the service's words."""

    def valid_value(self, value: str) -> bool:
        return True


class AutomationForm(forms.Form):
    name = forms.CharField(
        max_length=64, widget=forms.TextInput(attrs={"placeholder": "e.g. pr-review"})
    )
    trigger = forms.ChoiceField(
        choices=_choices(AUTOMATION_TRIGGERS), initial=Trigger.WEBHOOK.value
    )
    cron = forms.CharField(
        max_length=100, required=False, label="Cron (schedules)",
        widget=forms.TextInput(attrs={"placeholder": "e.g. 0 3 * * 1-5", "spellcheck": "false"}),
    )  # fmt: skip
    timezone = forms.CharField(max_length=64, required=False, initial="UTC", label="Time zone")
    missed = forms.ChoiceField(
        choices=_choices(Missed), initial=Missed.SKIP.value, label="Missed slots",
        help_text="After downtime: skip them, or run once for all of them.",
    )  # fmt: skip
    prompt_template = forms.CharField(
        max_length=MAX_TEMPLATE_CHARS, strip=False, label="Prompt template",
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false",
                                     "placeholder": "Review {{ payload.pull_request.html_url }}"}),
        help_text="{{ payload.a.b }} substitutions (list items by number); nothing else runs.",
    )  # fmt: skip
    filter = forms.CharField(
        max_length=MAX_FILTER_CHARS, required=False, label="Filter (JMESPath)",
        widget=forms.TextInput(attrs={"placeholder": "e.g. action == 'opened'",
                                      "spellcheck": "false"}),
        help_text="A delivery runs when this is truthy on its payload; empty: every delivery.",
    )  # fmt: skip
    model = forms.CharField(
        max_length=200, required=False, label="Model profile", widget=forms.Select
    )
    agent = forms.CharField(
        max_length=64, required=False, label="Agent", widget=forms.Select,
        help_text="An external agent brings its own model (the model profile is then unused).",
    )  # fmt: skip
    concurrency = forms.ChoiceField(
        choices=_choices(Concurrency), initial=Concurrency.SKIP.value,
        label="While the previous run goes",
    )  # fmt: skip
    max_cost_usd = forms.DecimalField(
        required=False, label="Budget per run (USD)",
        help_text="Empty: the policy's limit only.",
        widget=forms.NumberInput(attrs={"placeholder": "the policy's", "step": "any"}),
    )  # fmt: skip
    allowed_secrets = _AnyOf(
        required=False, label="Secrets it may use", widget=forms.CheckboxSelectMultiple
    )
    callback_url = forms.CharField(
        max_length=MAX_URL_CHARS, required=False, label="Completion callback URL",
        widget=forms.TextInput(attrs={"placeholder": "https://ci.example.com/agent-done",
                                      "spellcheck": "false"}),
        help_text="Each run's result (status, final answer, conversation link) is POSTed here, "
        "signed with the webhook secret; empty: none.",
    )  # fmt: skip
    deadline_minutes = forms.IntegerField(
        initial=60, label="Deadline (minutes)",
        help_text="A run still going after this alerts the team's notification webhook.",
    )  # fmt: skip
    enabled = forms.BooleanField(required=False, initial=True)
    # Where its runs work, sent to the service as one `workspace_spec` (checked there).
    workspace_kind = forms.ChoiceField(
        choices=[("local", "Local folder"), ("docker", "Docker container")], initial="local",
        required=False, label="Runs in",
    )  # fmt: skip
    image = forms.CharField(
        max_length=255, required=False, label="Image",
        widget=forms.TextInput(attrs={"placeholder": "the site's default", "spellcheck": "false"}),
    )  # fmt: skip
    git_repo = forms.CharField(
        max_length=1000, required=False, label="Git repository",
        widget=forms.TextInput(attrs={"placeholder": "https URL or a repository the site names",
                                      "spellcheck": "false"}),
    )  # fmt: skip
    git_ref = forms.CharField(
        max_length=250, required=False, label="Branch, tag or commit",
        widget=forms.TextInput(attrs={"placeholder": "default branch", "spellcheck": "false"}),
    )  # fmt: skip
    # The runs' tightening of the team policy, sent to the service as one `limits` value.
    confirmation_mode = forms.ChoiceField(
        choices=[("", "the policy's"), *ConfirmationMode.choices], required=False,
        label="Approvals",
    )  # fmt: skip
    risk_threshold = forms.ChoiceField(
        choices=[("", "the policy's"), *((name, name.lower()) for name in RISK_NAMES)],
        required=False, label="Ask from risk",
    )  # fmt: skip
    max_iterations = forms.IntegerField(
        required=False, min_value=1, label="Max iterations",
        widget=forms.NumberInput(attrs={"placeholder": "the policy's"}),
    )  # fmt: skip
    tools = forms.CharField(
        max_length=2000, required=False, label="Tools",
        widget=forms.TextInput(attrs={"placeholder": "the policy's", "spellcheck": "false"}),
        help_text="Tighter than the team policy for its runs (our agent only): names separated "
        "by commas, e.g. terminal, file_editor, finish.",
    )  # fmt: skip

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        tools = [t for t in re.split(r"[\s,]+", data.get("tools") or "") if t]
        limits = {"confirmation_mode": data.get("confirmation_mode") or None,
                  "risk_threshold": data.get("risk_threshold") or None,
                  "max_iterations": data.get("max_iterations"), "tools": tools or None}  # fmt: skip
        data["limits"] = {key: value for key, value in limits.items() if value is not None}
        kind = data.get("workspace_kind") or "local"
        repo, ref = (data.get("git_repo") or "").strip(), (data.get("git_ref") or "").strip()
        data["workspace_spec"] = {
            "kind": kind,
            "image": (data.get("image") or "").strip() or None if kind == "docker" else None,
            "source": {"repo": repo, "ref": ref or None} if repo else None,
        }
        return data

    def __init__(self, *args: Any, menus: Menus, current: Automation | None = None, **kwargs: Any):
        """`menus`: what the team offers; `current`: the automation being edited, whose own
        model and secrets stay offered even if the team no longer has them."""
        super().__init__(*args, **kwargs)
        keep_model = [current.model] if current else []
        keep_secrets = list(current.allowed_secrets) if current else []
        if self.is_bound:  # a refused form comes back with what was chosen, offered or not
            keep_model.append(self.data.get("model", ""))
            posted = getattr(self.data, "getlist", lambda key: self.data.get(key) or [])
            keep_secrets += list(posted("allowed_secrets"))
        self.fields["model"].widget.choices = _model_choices(menus, keep_model)
        self.fields["model"].initial = settings.CANVAS_DEFAULT_MODEL
        self.fields["agent"].widget.choices = menus.agents
        self.fields["allowed_secrets"].choices = [
            (name, name) for name in sorted({*menus.secrets, *keep_secrets})
        ]


@dataclass(frozen=True, slots=True)
class Menus:
    """The team's model profiles, external agents (as the policy allows them) and secret
    names: read once per answer, however many edit forms the page holds."""

    profiles: tuple[str, ...]
    agents: list
    secrets: tuple[str, ...]

    @classmethod
    def of(cls, team: Team) -> Menus:
        external = [
            (p.name, f"{p.name} ({SOURCE_LABELS[p.source]})")
            for p in agents_allowed(team.pk, policy_for_team(team.pk))
        ]
        agents = [("", OUR_AGENT_LABEL)]
        if external:
            agents.append(("External agents (ACP)", external))
        return cls(
            profiles=tuple(profile.name for profile in profile_list(team=team)),
            agents=agents,
            secrets=tuple(info.name for info in secret_list(team)),
        )


def _model_choices(menus: Menus, keep: Iterable[str]) -> list:
    return model_groups(menus.profiles, keep)


LIMIT_FIELDS = ("confirmation_mode", "risk_threshold", "max_iterations", "tools")
WORKSPACE_FIELDS = ("workspace_kind", "image", "git_repo", "git_ref")


def edit_initial(automation: Automation) -> dict[str, Any]:
    """An edit form's starting values: the automation's own."""
    initial = {
        key: getattr(automation, key)
        for key in AutomationForm.base_fields
        if key not in LIMIT_FIELDS and key not in WORKSPACE_FIELDS
    }
    limits = automation.limits or {}
    initial |= {key: limits.get(key) for key in LIMIT_FIELDS}
    initial["tools"] = ", ".join(limits.get("tools") or [])
    spec = automation.workspace_spec or {}
    source = spec.get("source") or {}
    initial |= {"workspace_kind": spec.get("kind", "local"), "image": spec.get("image") or "",
                "git_repo": source.get("repo", ""), "git_ref": source.get("ref") or ""}  # fmt: skip
    return initial


class RunNowForm(forms.Form):
    payload = forms.CharField(
        max_length=MAX_PAYLOAD_CHARS, required=False, strip=False, label="Payload (JSON)",
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false",
                                     "placeholder": '{"action": "opened"}'}),
        help_text="What the prompt template reads as payload; empty: none.",
    )  # fmt: skip

    def clean_payload(self) -> dict[str, Any] | None:
        text = self.cleaned_data.get("payload", "")
        if not text.strip():
            return None
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"The payload is not JSON: {exc}.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("The payload must be a JSON object.")
        return value


class RunFilterForm(forms.Form):
    status = forms.ChoiceField(
        choices=[("", "all"), *_choices(RunStatus)], required=False, label="Status"
    )


def run_status(data) -> str:
    """The status `data` (a GET or a POST) filters the history by; "" for all, and for one
    that is not a run status."""
    form = RunFilterForm(data)
    return form.cleaned_data["status"] if form.is_valid() else ""
