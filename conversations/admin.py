"""Conversations in the admin, read only: the log is written by `store.append` alone, and the
row mirrors it. Each conversation links to its events."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from teams.admin import ReadOnlyAdmin

from .models import Conversation, ConversationEvent


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    list_display = ["__str__", "team", "owner", "status", "model", "steps", "updated_at"]
    list_filter = ["status", "team"]
    search_fields = ["title", "id"]
    list_select_related = ["team", "owner"]
    readonly_fields = ["event_log"]

    @admin.display(description="Events")
    def event_log(self, obj: Conversation) -> str:
        url = reverse("admin:conversations_conversationevent_changelist")
        return format_html(
            '<a href="{}?conversation__id__exact={}">{} events</a>', url, obj.pk, obj.last_seq
        )


@admin.register(ConversationEvent)
class ConversationEventAdmin(ReadOnlyAdmin):
    list_display = ["seq", "type", "conversation", "created_at"]
    list_filter = ["type"]
    list_select_related = ["conversation"]
    search_fields = ["conversation__id"]
