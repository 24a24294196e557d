"""The browser UI's pages and htmx endpoints."""

from django.contrib.auth import views as auth_views
from django.urls import path

from . import team_views, views

urlpatterns = [
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="registration/login.html", redirect_authenticated_user=True
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.conversation_list, name="conversation-list"),
    path("conversations/new", views.conversation_new, name="conversation-new"),
    path(
        "conversations/<uuid:conversation_id>/",
        views.conversation_detail,
        name="conversation-detail",
    ),
    path(
        "conversations/<uuid:conversation_id>/messages",
        views.conversation_message,
        name="conversation-message",
    ),
    path(
        "conversations/<uuid:conversation_id>/pause",
        views.conversation_pause,
        name="conversation-pause",
    ),
    # Teams, members, the audit log and personal API tokens (canvas.team_views).
    path("teams/", team_views.team_index, name="team-index"),
    path("teams/new", team_views.team_create, name="team-create"),
    path("teams/switch", team_views.team_switch, name="team-switch"),
    path("teams/<int:team_id>/", team_views.team_detail, name="team-detail"),
    path("teams/<int:team_id>/default", team_views.team_set_default, name="team-default"),
    path("teams/<int:team_id>/leave", team_views.team_leave, name="team-leave"),
    path("teams/<int:team_id>/members/add", team_views.member_add, name="team-member-add"),
    path("teams/<int:team_id>/members/role", team_views.member_set_role, name="team-member-role"),
    path("teams/<int:team_id>/members/remove", team_views.member_remove, name="team-member-remove"),
    path("teams/<int:team_id>/audit/", team_views.team_audit, name="team-audit"),
    path("tokens/", team_views.token_list, name="token-list"),
    path("tokens/new", team_views.token_create, name="token-create"),
    path("tokens/<int:token_id>/revoke", team_views.token_revoke, name="token-revoke"),
]
