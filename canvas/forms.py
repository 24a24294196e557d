"""Browser forms: shape and size checks only; the services own the rules."""

from __future__ import annotations

from django import forms
from django.conf import settings

from orchestration.services import MAX_PROMPT_CHARS
from orchestration.step.profiles import BUILTIN_PROFILES
from workspaces.paths import WorkspaceNameError, check_name

KNOWN_MODELS = tuple(BUILTIN_PROFILES)
"""Suggested in the model field; any configured profile or LiteLLM id is accepted."""


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
    model = forms.CharField(
        max_length=200,
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

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["model"].initial = settings.CANVAS_DEFAULT_MODEL

    def clean_workspace(self) -> str | None:
        name = self.cleaned_data["workspace"].strip() or None
        if name is not None:
            try:
                check_name(name)
            except WorkspaceNameError as exc:
                raise forms.ValidationError(str(exc)) from None
        return name


class MessageForm(forms.Form):
    text = forms.CharField(
        max_length=MAX_PROMPT_CHARS,
        widget=forms.Textarea(
            attrs={"rows": 2, "placeholder": "Send a follow-up message (Ctrl+Enter)"}
        ),
    )
