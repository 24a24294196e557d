"""The browser UI's pages and htmx endpoints."""

from django.contrib.auth import views as auth_views
from django.urls import include, path, register_converter

from common.inputs import PathSegment

from . import (
    acp_agent_views,
    agent_views,
    approval_views,
    automation_run_views,
    automation_views,
    fork_views,
    hook_views,
    mcp_server_views,
    panel_views,
    policy_views,
    profile_views,
    review_views,
    run_control_views,
    runs_views,
    secret_views,
    sidebar_views,
    skill_views,
    stream_views,
    team_views,
    title_views,
    token_views,
    usage_views,
    views,
)

register_converter(PathSegment, "segment")

# One conversation's page and what it posts: messages, run control (canvas.run_control_views)
# and the approval cards (canvas.approval_views).
conversation_urls = [
    path("", views.conversation_detail, name="conversation-detail"),
    path("messages", views.conversation_message, name="conversation-message"),
    path("events/<int:seq>/output", stream_views.event_output, name="conversation-event-output"),
    path(
        "events/<int:seq>/output/file",
        stream_views.event_output_file,
        name="conversation-event-output-file",
    ),
    path("title", title_views.conversation_title, name="conversation-title"),
    path("pause", run_control_views.conversation_pause, name="conversation-pause"),
    path("interrupt", run_control_views.conversation_interrupt, name="conversation-interrupt"),
    path("resume", run_control_views.conversation_resume, name="conversation-resume"),
    path("close", run_control_views.conversation_close, name="conversation-close"),
    path("stop", run_control_views.conversation_stop, name="conversation-stop"),
    # The side panel's tabs (canvas.panels, canvas.panel_views).
    path("panels/changes/diff", panel_views.conversation_diff, name="conversation-panel-diff"),
    path("panels/<slug:name>", panel_views.conversation_panel, name="conversation-panel"),
    # The full-width diff review (canvas.review_views).
    path("review/", review_views.conversation_review, name="conversation-review"),
    path("review/send", review_views.conversation_review_send, name="conversation-review-send"),
    path(
        "actions/<segment:action_id>/approve", approval_views.action_approve, name="action-approve"
    ),
    path("actions/<segment:action_id>/reject", approval_views.action_reject, name="action-reject"),
    path("actions/approve-all", approval_views.actions_approve_all, name="actions-approve-all"),
    path("archive", sidebar_views.conversation_archive, name="conversation-archive"),
    path("restore", sidebar_views.conversation_restore, name="conversation-restore"),
    path("delete", sidebar_views.conversation_delete, name="conversation-delete"),
    path("fork", fork_views.conversation_fork_view, name="conversation-fork"),
]

# One team's page, members and audit log (canvas.team_views); its hooks, sandbox and
# notification webhook (canvas.hook_views); its secrets, policy, model profiles and agent
# definitions and external ACP agents (canvas.secret_views, canvas.policy_views,
# canvas.profile_views, canvas.agent_views, canvas.acp_agent_views); its MCP servers
# (canvas.mcp_server_views); its automations and their run history
# (canvas.automation_views, canvas.automation_run_views).
team_urls = [
    path("", team_views.team_detail, name="team-detail"),
    path("default", team_views.team_set_default, name="team-default"),
    path("leave", team_views.team_leave, name="team-leave"),
    path("invitations/new", team_views.member_invite, name="team-invite"),
    path(
        "invitations/<int:invitation_id>/cancel",
        team_views.invitation_cancel,
        name="team-invitation-cancel",
    ),
    path("members/role", team_views.member_set_role, name="team-member-role"),
    path("members/remove", team_views.member_remove, name="team-member-remove"),
    path("audit/", team_views.team_audit, name="team-audit"),
    path("runs/", runs_views.team_runs_page, name="team-runs"),
    path("usage/", usage_views.team_usage_page, name="team-usage"),
    path("usage.csv", usage_views.team_usage_csv, name="team-usage-csv"),
    path("hooks/", hook_views.team_hooks, name="team-hooks"),
    path("hooks/add", hook_views.hook_add, name="team-hook-add"),
    path("hooks/<int:hook_id>/edit", hook_views.hook_edit, name="team-hook-edit"),
    path("hooks/<int:hook_id>/enable", hook_views.hook_enable, name="team-hook-enable"),
    path("hooks/<int:hook_id>/delete", hook_views.hook_delete, name="team-hook-delete"),
    path("notifications", hook_views.notification_set, name="team-notification-set"),
    path("notifications/clear", hook_views.notification_clear, name="team-notification-clear"),
    path("sandbox", hook_views.sandbox_set, name="team-sandbox-set"),
    path("secrets/", secret_views.team_secrets, name="team-secrets"),
    path("secrets/new", secret_views.secret_create, name="team-secret-create"),
    path("secrets/replace", secret_views.secret_replace, name="team-secret-replace"),
    path("secrets/delete", secret_views.secret_delete, name="team-secret-delete"),
    path("policy/", policy_views.team_policy, name="team-policy"),
    path("policy/set", policy_views.policy_set, name="team-policy-set"),
    path("profiles/", profile_views.team_profiles, name="team-profiles"),
    path("profiles/new", profile_views.profile_create, name="team-profile-create"),
    path("profiles/edit", profile_views.profile_edit, name="team-profile-edit"),
    path("profiles/delete", profile_views.profile_delete, name="team-profile-delete"),
    path("profiles/test", profile_views.profile_test, name="team-profile-test"),
    path("profiles/titles", profile_views.profile_titles, name="team-profile-titles"),
    path(
        "profiles/checks/<segment:check_id>", profile_views.profile_check, name="team-profile-check"
    ),
    path("agents/", agent_views.team_agents_page, name="team-agents"),
    path("agents/new", agent_views.agent_create, name="team-agent-create"),
    path("agents/edit", agent_views.agent_edit, name="team-agent-edit"),
    path("agents/delete", agent_views.agent_delete, name="team-agent-delete"),
    path("skills/", skill_views.team_skills_page, name="team-skills"),
    path("skills/new", skill_views.skill_create, name="team-skill-create"),
    path("skills/edit", skill_views.skill_edit, name="team-skill-edit"),
    path("skills/delete", skill_views.skill_delete, name="team-skill-delete"),
    path("acp-agents/", acp_agent_views.team_acp_agents_page, name="team-acp-agents"),
    path("acp-agents/new", acp_agent_views.acp_agent_create, name="team-acp-agent-create"),
    path("acp-agents/edit", acp_agent_views.acp_agent_edit, name="team-acp-agent-edit"),
    path("acp-agents/delete", acp_agent_views.acp_agent_delete, name="team-acp-agent-delete"),
    path("mcp-servers/", mcp_server_views.team_mcp_servers_page, name="team-mcp-servers"),
    path("mcp-servers/new", mcp_server_views.mcp_server_create, name="team-mcp-server-create"),
    path("mcp-servers/edit", mcp_server_views.mcp_server_edit, name="team-mcp-server-edit"),
    path("mcp-servers/delete", mcp_server_views.mcp_server_delete, name="team-mcp-server-delete"),
    path("automations/", automation_views.team_automations, name="team-automations"),
    path("automations/new", automation_views.automation_create, name="team-automation-create"),
    path(
        "automations/<int:automation_id>/edit",
        automation_views.automation_edit,
        name="team-automation-edit",
    ),
    path(
        "automations/<int:automation_id>/enable",
        automation_views.automation_enable,
        name="team-automation-enable",
    ),
    path(
        "automations/<int:automation_id>/delete",
        automation_views.automation_delete,
        name="team-automation-delete",
    ),
    path(
        "automations/<int:automation_id>/rotate-secret",
        automation_views.automation_rotate_secret,
        name="team-automation-rotate-secret",
    ),
    path(
        "automations/<int:automation_id>/runs",
        automation_run_views.automation_runs,
        name="team-automation-runs",
    ),
    path(
        "automations/<int:automation_id>/run-now",
        automation_run_views.automation_run_now,
        name="team-automation-run-now",
    ),
    path(
        "automations/<int:automation_id>/runs/<int:run_id>/retry",
        automation_run_views.automation_run_retry,
        name="team-automation-run-retry",
    ),
]

# An invitation addressed to the user (canvas.team_views).
invitation_urls = [
    path("accept", team_views.invitation_accept, name="invitation-accept"),
    path("decline", team_views.invitation_decline, name="invitation-decline"),
]

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
    # The sidebar's rows for its search and filters (canvas.sidebar_views).
    path("conversations/sidebar", sidebar_views.conversation_sidebar, name="conversation-sidebar"),
    path("conversations/<uuid:conversation_id>/", include(conversation_urls)),
    path("teams/", team_views.team_index, name="team-index"),
    path("teams/new", team_views.team_create, name="team-create"),
    path("teams/switch", team_views.team_switch, name="team-switch"),
    path("teams/<int:team_id>/", include(team_urls)),
    path("invitations/<int:invitation_id>/", include(invitation_urls)),
    # Personal API tokens (canvas.token_views).
    path("tokens/", token_views.token_list, name="token-list"),
    path("tokens/new", token_views.token_create, name="token-create"),
    path("tokens/<int:token_id>/revoke", token_views.token_revoke, name="token-revoke"),
    # The "Needs approval" page of every team the user is in (canvas.approval_views).
    path("approvals/", approval_views.approval_list, name="approvals"),
    path("approvals/count", approval_views.approval_count, name="approvals-count"),
]
