"""Team, member, token and audit pages, and the current team, through Django's test client."""

from __future__ import annotations

import json
import re

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from canvas.asgi import application
from conversations import store
from conversations.events import Status, StatusChangeEvent
from conversations.models import Conversation
from orchestration.services import conversation_create
from teams.audit import audit_record
from teams.models import ApiToken, AuditRecord, Membership, Role, Team, TeamInvitation
from teams.services import member_add, team_create
from teams.tokens import api_token_create

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
RAW_TOKEN = re.compile(r'id="new-token-value"[^>]*value="(cnv_[A-Za-z0-9_-]+)"')


@pytest.fixture(autouse=True)
def _no_dispatch(dispatched):
    """Creating conversations starts runs; capture the enqueues instead of sending them."""
    return dispatched


def _member(django_user_model, team: Team, username: str, role: str):
    """Test setup: straight in through the admin helper; the pages only invite."""
    person = django_user_model.objects.create_user(username, password=f"{username}-pw-12345")
    owner = team.memberships.get(role=Role.OWNER).user
    member_add(by=owner, team=team, username=username, role=role)
    return person


def _client(person) -> Client:
    client = Client()
    client.force_login(person)
    return client


@pytest.fixture
def alice_client(user) -> Client:
    return _client(user)


@pytest.fixture
def viewer(django_user_model, team):
    return _member(django_user_model, team, "victor", Role.VIEWER)


@pytest.fixture
def admin(django_user_model, team):
    return _member(django_user_model, team, "ada", Role.ADMIN)


def _url(name: str, *args) -> str:
    return reverse(name, args=args)


def _notice(page: str) -> str:
    """The refusal notice's text: the service's words, never an HTTP status code."""
    (notice,) = re.findall(r'<p class="form-errors" role="alert">(.*?)</p>', page)
    assert not re.search(r"\b[45]\d\d\b", notice), notice
    return notice


def _roles(team: Team) -> dict[str, str]:
    return dict(team.memberships.values_list("user__username", "role"))


# ---- The current team -------------------------------------------------------------------------


def test_switching_teams_changes_the_list(alice_client, user, team):
    second = team_create(user=user, name="Second")
    in_first = conversation_create(owner=user, team=team, prompt="first team work", model="demo")
    in_second = conversation_create(owner=user, team=second, prompt="second work", model="demo")

    page = alice_client.get(_url("conversation-list")).content.decode()
    assert "first team work" in page and "second work" not in page
    assert f'<option value="{second.pk}">Second</option>' in page  # the switcher offers both

    response = alice_client.post(
        _url("team-switch"), {"team_id": second.pk, "next": _url("conversation-list")}
    )
    assert response.status_code == 302
    assert response["Location"] == _url("conversation-list")
    page = alice_client.get(_url("conversation-list")).content.decode()
    assert "second work" in page and "first team work" not in page
    assert f'<option value="{second.pk}" selected>Second</option>' in page
    # The 2-second poll follows the switch too.
    rows = alice_client.get(_url("conversation-list"), **HX).content.decode()
    assert str(in_second.pk) in rows and str(in_first.pk) not in rows

    # New conversations go to the current team.
    alice_client.post(_url("conversation-new"), {"prompt": "made after switching", "model": "demo"})
    assert Conversation.objects.get(title="made after switching").team == second


def test_switch_with_htmx_keeps_the_page_but_for_the_new_team(alice_client, user, team):
    second = team_create(user=user, name="Second")
    response = alice_client.post(
        _url("team-switch"), {"team_id": second.pk, "next": _url("team-detail", team.pk)}, **HX
    )
    assert response["HX-Redirect"] == _url("team-detail", second.pk)
    conversation = conversation_create(owner=user, team=team, prompt="x", model="demo")
    response = alice_client.post(
        _url("team-switch"),
        {"team_id": team.pk, "next": _url("conversation-detail", conversation.pk)},
    )
    assert response["Location"] == _url("conversation-list")
    response = alice_client.post(
        _url("team-switch"), {"team_id": team.pk, "next": "https://evil.example/"}
    )
    assert response["Location"] == _url("conversation-list")


def test_switching_to_a_foreign_team_is_404(alice_client, other_user):
    foreign = Team.objects.get(name="mallory's team")
    assert alice_client.post(_url("team-switch"), {"team_id": foreign.pk}).status_code == 404
    assert alice_client.post(_url("team-switch"), {"team_id": "x"}).status_code == 404
    assert "team_id" not in alice_client.session


def test_a_team_left_behind_in_the_session_falls_back_to_the_default(
    alice_client, user, team, other_user
):
    other = Team.objects.get(name="mallory's team")
    member_add(by=other_user, team=other, username="alice", role=Role.MEMBER)
    alice_client.post(_url("team-switch"), {"team_id": other.pk})
    Membership.objects.filter(team=other, user=user).delete()
    page = alice_client.get(_url("conversation-list")).content.decode()
    assert "mallory" not in page
    assert f'<option value="{team.pk}" selected>' in page


# ---- Cross-team access: 404, and nothing changes ---------------------------------------------


def test_member_of_another_team_gets_404_everywhere(user, team, other_user):
    conversation = conversation_create(owner=user, team=team, prompt="private", model="demo")
    token = api_token_create(user=user, name="alice's")[0]
    mallory = _client(other_user)
    for url in (
        _url("team-detail", team.pk),
        _url("team-audit", team.pk),
        _url("conversation-detail", conversation.pk),
    ):
        assert mallory.get(url).status_code == 404, url
    before = (_roles(team), AuditRecord.objects.count(), conversation.last_seq)
    posts = [
        (_url("team-invite", team.pk), {"username": "mallory", "role": "owner"}),
        (_url("team-member-role", team.pk), {"username": "alice", "role": "viewer"}),
        (_url("team-member-remove", team.pk), {"username": "alice"}),
        (_url("team-leave", team.pk), {}),
        (_url("team-default", team.pk), {}),
        (_url("conversation-message", conversation.pk), {"text": "hi"}),
        (_url("conversation-pause", conversation.pk), {}),
        (_url("token-revoke", token.pk), {}),
    ]
    for url, data in posts:
        assert mallory.post(url, data, **HX).status_code == 404, url
    conversation.refresh_from_db()
    token.refresh_from_db()
    assert (_roles(team), AuditRecord.objects.count(), conversation.last_seq) == before
    assert conversation.status == Status.RUNNING
    assert token.revoked_at is None
    assert "private" not in mallory.get(_url("conversation-list")).content.decode()


# ---- Viewers: read, never write ---------------------------------------------------------------


def test_viewer_sees_no_write_controls(viewer, user, team):
    conversation = conversation_create(owner=user, team=team, prompt="look only", model="demo")
    client = _client(viewer)
    page = client.get(_url("conversation-list")).content.decode()
    assert "look only" in page
    assert 'id="new-conversation"' not in page
    page = client.get(_url("conversation-detail", conversation.pk)).content.decode()
    assert 'id="message-form"' not in page
    assert _url("conversation-pause", conversation.pk) not in page
    page = client.get(_url("team-detail", team.pk)).content.decode()
    assert "victor" in page and "alice" in page
    assert 'id="member-add"' not in page
    assert 'name="role"' not in page
    assert _url("team-member-remove", team.pk) not in page
    assert _url("team-leave", team.pk) in page  # anyone may leave
    assert _url("team-audit", team.pk) not in page


def test_viewer_gets_403_on_every_write(viewer, user, team):
    conversation = conversation_create(owner=user, team=team, prompt="look only", model="demo")
    client = _client(viewer)
    before = (_roles(team), conversation.last_seq, Conversation.objects.count())

    response = client.post(_url("conversation-new"), {"prompt": "mine", "model": "demo"}, **HX)
    assert response.status_code == 403
    assert "does not allow" in response.content.decode()
    url = _url("conversation-message", conversation.pk)
    assert client.post(url, {"text": "hi"}, **HX).status_code == 403
    assert client.post(_url("conversation-pause", conversation.pk), **HX).status_code == 403
    for name, data in (
        ("team-invite", {"username": "mallory", "role": "member"}),
        ("team-member-role", {"username": "alice", "role": "viewer"}),
        ("team-member-remove", {"username": "alice"}),
    ):
        response = client.post(_url(name, team.pk), data, **HX)
        assert response.status_code == 403, name
        page = response.content.decode()
        assert page.strip().startswith('<section id="members"')
        assert "only an owner can grant" in _notice(page), name
    assert client.get(_url("team-audit", team.pk)).status_code == 403

    conversation.refresh_from_db()
    assert (_roles(team), conversation.last_seq, Conversation.objects.count()) == before
    assert conversation.status == Status.RUNNING


@pytest.mark.django_db(transaction=True)
async def test_viewer_watches_the_live_feed_without_controls(viewer, user, team):
    conversation = await database_sync_to_async(conversation_create)(
        owner=user, team=team, prompt="watch", model="demo"
    )
    client = await database_sync_to_async(_client)(viewer)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    communicator = WebsocketCommunicator(
        application,
        f"/ws/ui/conversations/{conversation.pk}/",
        headers=[(b"cookie", cookie), (b"origin", b"http://testserver"), (b"host", b"testserver")],
    )
    connected, _ = await communicator.connect()
    assert connected
    await communicator.send_to(text_data=json.dumps({"resume": conversation.last_seq}))
    change = StatusChangeEvent(status=Status.PAUSED, previous=Status.RUNNING, reason="test")
    await database_sync_to_async(store.append)(conversation.pk, [change])
    frame = await communicator.receive_from(timeout=5)
    assert 'id="controls"' in frame
    assert "conversation-pause" not in frame and "/pause" not in frame
    await communicator.disconnect()


def test_viewer_full_page_post_answers_403_too(viewer, team):
    response = _client(viewer).post(
        _url("team-invite", team.pk), {"username": "alice", "role": "member"}
    )
    assert response.status_code == 403
    assert b"<html" in response.content


# ---- Managing members -------------------------------------------------------------------------


def test_admin_invites_changes_and_removes_members(admin, team, django_user_model):
    dave = django_user_model.objects.create_user(
        "dave", email="dave@example.com", password="x" * 12
    )
    client = _client(admin)

    response = client.post(
        _url("team-invite", team.pk), {"username": "DAVE@example.com", "role": "member"}, **HX
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert page.strip().startswith('<section id="members"')
    invitation = TeamInvitation.objects.get(team=team)
    assert f'id="invitation-{invitation.pk}"' in page and "DAVE@example.com" in page
    assert 'id="member-dave"' not in page and "dave" not in _roles(team)  # not before he accepts

    dave_client = _client(dave)
    index = dave_client.get(_url("team-index")).content.decode()
    assert f'id="my-invitation-{invitation.pk}"' in index and "alice&#x27;s team" in index
    response = dave_client.post(_url("invitation-accept", invitation.pk))
    assert response.status_code == 302 and response["Location"] == _url("team-detail", team.pk)
    assert _roles(team)["dave"] == Role.MEMBER
    assert 'id="my-invitation-' not in dave_client.get(_url("team-index")).content.decode()

    response = client.post(
        _url("team-member-role", team.pk), {"username": "dave", "role": "viewer"}, **HX
    )
    assert response.status_code == 200
    assert _roles(team)["dave"] == Role.VIEWER

    response = client.post(_url("team-member-remove", team.pk), {"username": "dave"}, **HX)
    assert response.status_code == 200
    assert 'id="member-dave"' not in response.content.decode()
    assert "dave" not in _roles(team)

    # Without htmx a success redirects back to the page (a reload repeats nothing).
    response = client.post(_url("team-invite", team.pk), {"username": "dave", "role": "member"})
    assert response.status_code == 302
    assert response["Location"] == _url("team-detail", team.pk)


def test_the_invitation_link_is_shown_once(admin, team):
    client = _client(admin)
    url = _url("team-invite", team.pk)
    page = client.post(url, {"username": "erin", "role": "viewer"}, **HX).content.decode()
    assert 'id="invite-sent"' in page and "erin is invited as viewer" in page
    assert 'id="invite-link"' in page and 'value="http://testserver/teams/"' in page
    assert 'id="invite-sent"' not in client.get(_url("team-detail", team.pk)).content.decode()

    # Without htmx: the redirect's page says it once, as a message.
    client.post(url, {"username": "fred", "role": "member"})
    page = client.get(_url("team-detail", team.pk)).content.decode()
    assert "fred is invited. Send them this link to accept it: http://testserver/teams/" in page
    assert "fred is invited" not in client.get(_url("team-detail", team.pk)).content.decode()


def test_invitee_declines_and_admin_cancels(admin, team, django_user_model):
    dave = django_user_model.objects.create_user("dave", password="x" * 12)
    client = _client(admin)
    client.post(_url("team-invite", team.pk), {"username": "dave", "role": "viewer"})
    client.post(_url("team-invite", team.pk), {"username": "erin", "role": "member"})
    for_dave = TeamInvitation.objects.get(username="dave")
    for_erin = TeamInvitation.objects.get(username="erin")

    # Only the invitee may answer; anyone else gets 404 and changes nothing.
    assert client.post(_url("invitation-accept", for_dave.pk)).status_code == 404
    response = _client(dave).post(_url("invitation-decline", for_dave.pk))
    assert response.status_code == 302 and response["Location"] == _url("team-index")
    assert "dave" not in _roles(team)

    response = client.post(_url("team-invitation-cancel", team.pk, for_erin.pk), **HX)
    assert response.status_code == 200
    assert f'id="invitation-{for_erin.pk}"' not in response.content.decode()
    assert not TeamInvitation.objects.exists()
    kinds = set(AuditRecord.objects.filter(team=team).values_list("kind", flat=True))
    assert {"member.invited", "member.invitation_declined", "member.invitation_cancelled"} <= kinds


def test_admin_cannot_grant_or_touch_owner_and_admin_roles(admin, team, django_user_model):
    django_user_model.objects.create_user("dave", password="x" * 12)
    client = _client(admin)
    page = client.get(_url("team-detail", team.pk)).content.decode()
    add_form = page[page.index('id="member-add"') :]
    assert '<option value="viewer"' in add_form and '<option value="owner"' not in add_form

    response = client.post(
        _url("team-invite", team.pk), {"username": "dave", "role": "owner"}, **HX
    )
    assert response.status_code == 403
    page = response.content.decode()
    assert "only an owner can grant" in _notice(page)
    assert 'value="dave"' in page  # the typed name is kept
    assert "dave" not in _roles(team) and not TeamInvitation.objects.exists()

    response = client.post(
        _url("team-member-role", team.pk), {"username": "alice", "role": "member"}, **HX
    )
    assert response.status_code == 403
    assert (
        client.post(_url("team-member-remove", team.pk), {"username": "alice"}).status_code == 403
    )
    assert _roles(team)["alice"] == Role.OWNER


def test_owner_is_offered_every_role(alice_client, team, admin):
    page = alice_client.get(_url("team-detail", team.pk)).content.decode()
    add_form = page[page.index('id="member-add"') :]
    assert '<option value="owner"' in add_form and '<option value="admin"' in add_form
    assert _url("team-member-remove", team.pk) in page  # alice may remove the admin
    response = alice_client.post(
        _url("team-member-role", team.pk), {"username": "ada", "role": "owner"}, **HX
    )
    assert response.status_code == 200
    assert _roles(team)["ada"] == Role.OWNER


def test_inviting_answers_alike_whether_or_not_the_name_exists(
    alice_client, team, django_user_model
):
    django_user_model.objects.create_user("dave", password="x" * 12)
    pages = {}
    for name in ("dave", "nobody"):
        response = alice_client.post(
            _url("team-invite", team.pk), {"username": name, "role": "member"}, **HX
        )
        assert response.status_code == 200
        pages[name] = re.sub(r"invitation-\d+|/invitations/\d+/", "", response.content.decode())
    assert 'class="form-errors"' not in pages["dave"]
    assert "no user named" not in pages["nobody"]
    rows = TeamInvitation.objects.filter(team=team)
    assert sorted(rows.values_list("username", flat=True)) == ["dave", "nobody"]


def test_member_errors_answer_their_status_and_say_it_in_words(alice_client, team):
    response = alice_client.post(
        _url("team-invite", team.pk), {"username": "alice", "role": "member"}, **HX
    )
    assert response.status_code == 409
    assert _notice(response.content.decode()) == "alice is already a member."
    response = alice_client.post(_url("team-invite", team.pk), {"username": ""}, **HX)
    assert response.status_code == 400
    assert "This field is required." in response.content.decode()


def test_last_owner_cannot_leave_but_others_can(alice_client, user, team, admin):
    response = alice_client.post(_url("team-leave", team.pk), **HX)
    assert response.status_code == 409
    assert "at least one owner" in response.content.decode()
    assert _roles(team)["alice"] == Role.OWNER

    response = _client(admin).post(_url("team-leave", team.pk), **HX)
    assert response.status_code == 200
    assert response["HX-Redirect"] == _url("team-index")
    assert "ada" not in _roles(team)


# ---- Teams index: creating, default -----------------------------------------------------------


def test_create_team_and_make_it_default(alice_client, user, team):
    response = alice_client.post(_url("team-create"), {"name": "Research"}, **HX)
    created = Team.objects.get(name="Research")
    assert response["HX-Redirect"] == _url("team-detail", created.pk)
    assert _roles(created) == {"alice": Role.OWNER}

    response = alice_client.post(_url("team-create"), {"name": "Research"}, **HX)
    assert response.status_code == 409
    page = response.content.decode()
    assert page.strip().startswith('<form id="team-create"')
    assert "already exists" in page

    page = alice_client.get(_url("team-index")).content.decode()
    assert "Research" in page and _url("team-default", created.pk) in page
    response = alice_client.post(_url("team-default", created.pk), **HX)
    assert response.status_code == 200
    assert response.content.decode().strip().startswith('<div id="team-rows"')
    assert Membership.objects.get(user=user, is_default=True).team == created
    # A fresh session starts in the default team.
    assert f'value="{created.pk}" selected' in _client(user).get("/").content.decode()


def test_team_list_queries_do_not_grow_with_the_teams(
    alice_client, user, team, django_assert_max_num_queries
):
    with CaptureQueriesContext(connection) as one_team:
        alice_client.get(_url("team-index"))
    for n in range(5):
        team_create(user=user, name=f"Extra {n}")
    with django_assert_max_num_queries(len(one_team)):
        page = alice_client.get(_url("team-index")).content.decode()
    assert all(f"Extra {n}" in page for n in range(5))


def test_team_pages_require_login(client, team):
    for url in (_url("team-index"), _url("team-detail", team.pk), _url("token-list")):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))
    assert client.post(_url("team-create"), {"name": "x"}).status_code == 302
    assert not Team.objects.filter(name="x").exists()


# ---- Tokens -----------------------------------------------------------------------------------


def test_token_is_shown_once_authenticates_and_revokes(alice_client, user):
    response = alice_client.post(
        _url("token-create"), {"name": "laptop", "expires_in_days": "30"}, **HX
    )
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    page = response.content.decode()
    assert page.strip().startswith('<section id="tokens"')
    assert "won't see it again" in page
    raw = RAW_TOKEN.search(page).group(1)
    token = ApiToken.objects.get(user=user, name="laptop")
    assert token.expires_at is not None

    listing = alice_client.get(_url("token-list")).content.decode()
    assert raw not in listing
    assert f"{token.prefix}…" in listing

    api = Client(headers={"Authorization": f"Bearer {raw}"})
    assert api.get("/api/conversations").status_code == 200

    response = alice_client.post(_url("token-revoke", token.pk), **HX)
    assert response.status_code == 200
    assert "Revoked" in response.content.decode()
    assert api.get("/api/conversations").status_code == 401


def test_token_form_errors(alice_client):
    response = alice_client.post(_url("token-create"), {"name": "", "expires_in_days": "0"}, **HX)
    assert response.status_code == 400
    page = response.content.decode()
    assert "This field is required." in page
    assert "greater than or equal to 1" in page
    assert not ApiToken.objects.exists()


def test_token_revoke_is_own_only(user, viewer):
    token = api_token_create(user=user, name="alice's")[0]
    assert _client(viewer).post(_url("token-revoke", token.pk), **HX).status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None
    assert "alice's" not in _client(viewer).get(_url("token-list")).content.decode()


# ---- Audit ------------------------------------------------------------------------------------


def test_audit_lists_and_filters(alice_client, user, team, admin, viewer):
    response = alice_client.get(_url("team-audit", team.pk))
    page = response.content.decode()
    assert response.status_code == 200
    table = page[page.index('<div id="audit-table"') :]
    assert "member.added" in table and "team.created" in table
    assert table.index("victor") < table.index("team.created")  # newest first

    response = alice_client.get(_url("team-audit", team.pk), {"kind": "member.added"}, **HX)
    page = response.content.decode()
    assert page.strip().startswith('<div id="audit-table"')
    assert "team.created" not in page
    assert "ada" in page and "victor" in page
    assert "HX-Request" in response["Vary"]

    _client(admin).post(_url("team-member-role", team.pk), {"username": "victor", "role": "member"})
    response = alice_client.get(_url("team-audit", team.pk), {"actor": "ada"}, **HX)
    page = response.content.decode()
    assert "member.role_changed" in page and "member.added" not in page

    response = alice_client.get(_url("team-audit", team.pk), {"kind": "no.such"}, **HX)
    assert "No records match these filters" in response.content.decode()

    # An admin may read it; a member may not.
    assert _client(admin).get(_url("team-audit", team.pk)).status_code == 200
    assert _client(viewer).get(_url("team-audit", team.pk)).status_code == 403


def test_audit_is_paginated(alice_client, user, team):
    for n in range(105):
        audit_record(actor=user, kind="test.bulk", team=team, target=f"row-{n}")
    page = alice_client.get(_url("team-audit", team.pk), {"kind": "test.bulk"}).content.decode()
    assert page.count("<tr>") == 101  # header + 100
    assert "row-104" in page and "row-4<" not in page
    assert "?kind=test.bulk&page=2" in page
    page = alice_client.get(
        _url("team-audit", team.pk), {"kind": "test.bulk", "page": "2"}, **HX
    ).content.decode()
    assert "row-4<" in page and "row-104" not in page
    assert "Page 2 of 2" in page
