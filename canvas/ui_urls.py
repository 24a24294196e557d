"""The browser UI's pages and htmx endpoints."""

from django.contrib.auth import views as auth_views
from django.urls import path, register_converter

from common.inputs import PathSegment

from . import approval_views, hook_views, run_control_views, team_views, token_views, views

register_converter(PathSegment, "segment")

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
        run_control_views.conversation_pause,
        name="conversation-pause",
    ),
    # Teams, members and the audit log (canvas.team_views); personal API tokens (token_views).
    path("teams/", team_views.team_index, name="team-index"),
    path("teams/new", team_views.team_create, name="team-create"),
    path("teams/switch", team_views.team_switch, name="team-switch"),
    path("teams/<int:team_id>/", team_views.team_detail, name="team-detail"),
    path("teams/<int:team_id>/default", team_views.team_set_default, name="team-default"),
    path("teams/<int:team_id>/leave", team_views.team_leave, name="team-leave"),
    path("teams/<int:team_id>/invitations/new", team_views.member_invite, name="team-invite"),
    path(
        "teams/<int:team_id>/invitations/<int:invitation_id>/cancel",
        team_views.invitation_cancel,
        name="team-invitation-cancel",
    ),
    path(
        "invitations/<int:invitation_id>/accept",
        team_views.invitation_accept,
        name="invitation-accept",
    ),
    path(
        "invitations/<int:invitation_id>/decline",
        team_views.invitation_decline,
        name="invitation-decline",
    ),
    path("teams/<int:team_id>/members/role", team_views.member_set_role, name="team-member-role"),
    path("teams/<int:team_id>/members/remove", team_views.member_remove, name="team-member-remove"),
    path("teams/<int:team_id>/audit/", team_views.team_audit, name="team-audit"),
    path("tokens/", token_views.token_list, name="token-list"),
    path("tokens/new", token_views.token_create, name="token-create"),
    path("tokens/<int:token_id>/revoke", token_views.token_revoke, name="token-revoke"),
    # Approval cards and the "Needs approval" page (canvas.approval_views); interrupt and resume
    # (canvas.run_control_views, like pause).
    path(
        "conversations/<uuid:conversation_id>/actions/<segment:action_id>/approve",
        approval_views.action_approve,
        name="action-approve",
    ),
    path(
        "conversations/<uuid:conversation_id>/actions/<segment:action_id>/reject",
        approval_views.action_reject,
        name="action-reject",
    ),
    path(
        "conversations/<uuid:conversation_id>/actions/approve-all",
        approval_views.actions_approve_all,
        name="actions-approve-all",
    ),
    path(
        "conversations/<uuid:conversation_id>/interrupt",
        run_control_views.conversation_interrupt,
        name="conversation-interrupt",
    ),
    path(
        "conversations/<uuid:conversation_id>/resume",
        run_control_views.conversation_resume,
        name="conversation-resume",
    ),
    path("approvals/", approval_views.approval_list, name="approvals"),
    path("approvals/count", approval_views.approval_count, name="approvals-count"),
    # A team's hooks and notification webhook (canvas.hook_views).
    path("teams/<int:team_id>/hooks/", hook_views.team_hooks, name="team-hooks"),
    path("teams/<int:team_id>/hooks/add", hook_views.hook_add, name="team-hook-add"),
    path(
        "teams/<int:team_id>/hooks/<int:hook_id>/edit", hook_views.hook_edit, name="team-hook-edit"
    ),
    path(
        "teams/<int:team_id>/hooks/<int:hook_id>/enable",
        hook_views.hook_enable,
        name="team-hook-enable",
    ),
    path(
        "teams/<int:team_id>/hooks/<int:hook_id>/delete",
        hook_views.hook_delete,
        name="team-hook-delete",
    ),
    path(
        "teams/<int:team_id>/notifications",
        hook_views.notification_set,
        name="team-notification-set",
    ),
    path("teams/<int:team_id>/sandbox", hook_views.sandbox_set, name="team-sandbox-set"),
    path(
        "teams/<int:team_id>/notifications/clear",
        hook_views.notification_clear,
        name="team-notification-clear",
    ),
]
