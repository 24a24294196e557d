from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.utils.formats import date_format
from django.utils.timezone import localtime

from common.errors import InvalidInput

from .models import (
    ApiToken,
    AuditRecord,
    Hook,
    Membership,
    ModelProfile,
    Policy,
    Secret,
    Team,
    TeamNotification,
    TeamSpend,
)
from .secrets import secret_create, secret_delete, secret_update, validate_name, validate_value


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]
    readonly_fields = ["secrets_version"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "key_hash", "created_at", "last_used_at"]


class ReadOnlyAdmin(admin.ModelAdmin):
    """View only: rows written by services (audited, validated, versioned) or by the run."""

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(AuditRecord)
class AuditRecordAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "team", "actor_name", "kind", "target"]
    list_filter = ["kind"]
    search_fields = ["actor_name", "target"]


@admin.register(Hook)
class HookAdmin(ReadOnlyAdmin):
    """Edited on the team's Hooks page (teams.hooks validates and audits every change)."""

    list_display = ["name", "team", "event", "matcher", "enabled", "fail_closed", "position"]
    list_filter = ["event", "enabled", "team"]
    search_fields = ["name", "command"]


@admin.register(TeamNotification)
class TeamNotificationAdmin(ReadOnlyAdmin):
    """Set on the team's Hooks page (teams.notifications); the signing secret is never shown."""

    list_display = ["team", "webhook_url", "updated_at", "updated_by"]
    exclude = ["webhook_secret"]


@admin.register(TeamSpend)
class TeamSpendAdmin(ReadOnlyAdmin):
    """Added to by the runner as model calls are paid for."""

    list_display = ["team", "month", "cost_usd"]
    list_filter = ["month", "team"]


@admin.register(Policy)
class PolicyAdmin(admin.ModelAdmin):
    list_display = ["__str__", "confirmation_mode", "risk_threshold", "max_concurrent_runs"]


@admin.register(ModelProfile)
class ModelProfileAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "model", "api_base", "api_key_secret"]
    list_filter = ["team"]


class SecretForm(forms.ModelForm):
    """The value is write-only: never rendered back, blank on edit keeps the current one."""

    value = forms.CharField(
        widget=forms.PasswordInput(render_value=False),
        required=False,
        strip=False,
        help_text="Write-only. When editing, leave blank to keep the current value.",
    )

    class Meta:
        model = Secret
        fields = ["team", "name", "description"]

    def clean_name(self) -> str:
        try:
            return validate_name(self.cleaned_data.get("name", ""))
        except InvalidInput as exc:
            raise ValidationError(exc.detail) from None

    def clean_value(self) -> str | None:
        value = self.cleaned_data.get("value") or ""
        if not value:
            if self.instance.pk is None:
                raise ValidationError("A new secret needs a value.")
            return None
        try:
            return validate_value(value)
        except InvalidInput as exc:
            raise ValidationError(exc.detail) from None


@admin.register(Secret)
class SecretAdmin(admin.ModelAdmin):
    """Saves and deletes go through teams.secrets, so they are audited and bump the version."""

    form = SecretForm
    list_display = ["name", "team", "description", "updated_at", "updated_by"]
    list_filter = ["team"]
    search_fields = ["name", "description"]

    def get_fields(self, request, obj=None) -> list[str]:
        if obj is None:
            return ["team", "name", "description", "value"]
        return ["team", "name", "value_status", "value", "description"]

    def get_readonly_fields(self, request, obj=None) -> list[str]:
        # Renaming or moving a secret would silently break commands that reference it.
        return ["team", "name", "value_status"] if obj is not None else []

    @admin.display(description="Value")
    def value_status(self, obj: Secret) -> str:
        by = f" by {obj.updated_by}" if obj.updated_by else ""
        return f"set, updated {date_format(localtime(obj.updated_at), 'DATETIME_FORMAT')}{by}"

    def save_model(self, request, obj: Secret, form: SecretForm, change: bool) -> None:
        data = form.cleaned_data
        if change:
            saved = secret_update(
                by=request.user, team=obj.team, name=obj.name,
                value=data["value"], description=data["description"],
            )  # fmt: skip
        else:
            saved = secret_create(
                by=request.user, team=obj.team, name=obj.name,
                value=data["value"], description=data["description"],
            )  # fmt: skip
        # The admin goes on to log and redirect with `obj`: make it the saved row.
        for field in ("id", "ciphertext", "created_at", "updated_at", "updated_by_id"):
            setattr(obj, field, getattr(saved, field))
        obj._state.adding, obj._state.db = False, saved._state.db

    def delete_model(self, request, obj: Secret) -> None:
        secret_delete(by=request.user, team=obj.team, name=obj.name)

    def delete_queryset(self, request, queryset) -> None:
        for secret in queryset.select_related("team"):
            secret_delete(by=request.user, team=secret.team, name=secret.name)
