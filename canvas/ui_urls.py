"""The browser UI's pages and htmx endpoints."""

from django.contrib.auth import views as auth_views
from django.urls import path

from . import views

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
]
