from django.contrib import admin

from .models import ApiToken, AuditRecord, Membership, ModelProfile, Policy, Team


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


@admin.register(AuditRecord)
class AuditRecordAdmin(admin.ModelAdmin):
    list_display = ["created_at", "team", "actor_name", "kind", "target"]
    list_filter = ["kind"]
    search_fields = ["actor_name", "target"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(Policy)
class PolicyAdmin(admin.ModelAdmin):
    list_display = ["__str__", "confirmation_mode", "risk_threshold", "max_concurrent_runs"]


@admin.register(ModelProfile)
class ModelProfileAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "model", "api_base", "api_key_secret"]
    list_filter = ["team"]
