"""Throttling authentication: login lock-outs (page and admin) and bad API tokens, audited.

Reproduces issue 8 §3: 50 wrong passwords then the right one logged in; 300 bad tokens in 20 s
all answered 401. Now both lock, say so (429), and come back after the cool-off.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from django.core.cache import caches
from django.test import Client
from django.urls import reverse

from teams.models import AuditRecord
from teams.throttle import LOCKOUT_KIND, client_address, token_failure_record
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db

PASSWORD = "alice-password-1"  # tests/conftest.py's alice
LOGIN = reverse("login")


def _login(client: Client, password: str, url: str = LOGIN, username: str = "alice"):
    return client.post(url, {"username": username, "password": password})


def _logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


@pytest.fixture
def short_cooloff(settings):
    """Call it once the failures are in: counted under the default cool-off, they all fall in
    one window however slowly a loaded machine hashes the passwords; then the lock lasts 2 s."""

    def shorten() -> None:
        settings.AXES_COOLOFF_TIME = timedelta(seconds=2)
        settings.CANVAS_TOKEN_COOLOFF_SECONDS = 2

    return shorten


# ---- Logins -----------------------------------------------------------------------------------


def test_fifty_wrong_passwords_lock_the_login_and_the_right_one_is_refused_too(user):
    client = Client()
    statuses = [_login(client, f"wrong-{i}").status_code for i in range(50)]
    assert statuses[:9] == [200] * 9  # the form says "wrong password" nine times
    assert set(statuses[9:]) == {429}  # the tenth failure locks
    response = _login(client, PASSWORD)
    assert response.status_code == 429
    assert not _logged_in(client)
    page = response.content.decode()
    assert 'id="lockout"' in page and "Too many failed login attempts" in page
    assert int(response["Retry-After"]) == 900
    # Audited once, not once per refused attempt.
    record = AuditRecord.objects.get(kind=LOCKOUT_KIND)
    assert record.team_id is None and record.actor_name == "system"
    assert record.data["via"] == "login" and record.data["username"] == "alice"
    assert record.data["address"] == "127.0.0.1"


def test_the_login_opens_again_after_the_cooloff(user, short_cooloff):
    client = Client()
    for i in range(10):
        _login(client, f"wrong-{i}")
    assert _login(client, PASSWORD).status_code == 429
    short_cooloff()  # axes judges the lock by the cool-off it reads now
    response = wait_for(
        lambda: (r := _login(client, PASSWORD)).status_code == 302 and r,
        timeout=10, interval=0.25, message="the login to open after the 2 s cool-off",
    )  # fmt: skip
    assert response["Location"] == reverse("conversation-list")
    assert _logged_in(client)


def test_a_success_resets_the_count_so_typos_never_add_up(user):
    client = Client()
    for _round in range(3):
        for i in range(9):
            assert _login(client, f"typo-{i}").status_code == 200
        assert _login(client, PASSWORD).status_code == 302
        client.logout()
    assert not AuditRecord.objects.filter(kind=LOCKOUT_KIND).exists()


def test_one_address_guessing_many_accounts_is_locked_too(user, django_user_model):
    client = Client()
    for i in range(10):
        _login(client, "guess", username=f"someone-{i}")
    assert _login(client, PASSWORD).status_code == 429  # alice, from the same address
    # Alice from another address is not locked out by it.
    elsewhere = Client(REMOTE_ADDR="198.51.100.7")
    assert _login(elsewhere, PASSWORD).status_code == 302


def test_the_admin_login_is_locked_the_same_way(django_user_model):
    django_user_model.objects.create_superuser("root", password="root-password-1")
    client = Client()
    url = reverse("admin:login")
    for i in range(10):
        client.post(url, {"username": "root", "password": f"wrong-{i}"})
    response = client.post(url, {"username": "root", "password": "root-password-1"})
    assert response.status_code == 429
    assert "Too many failed login attempts" in response.content.decode()
    assert not _logged_in(client)
    assert AuditRecord.objects.filter(kind=LOCKOUT_KIND, data__username="root").exists()


def test_the_stored_attempts_keep_no_password(user):
    from axes.models import AccessAttempt

    client = Client()
    _login(client, "my-secret-guess-123")
    attempt = AccessAttempt.objects.get()
    assert "my-secret-guess-123" not in attempt.post_data


# ---- API tokens -------------------------------------------------------------------------------


def _get(token: str, address: str = "127.0.0.1"):
    return Client(REMOTE_ADDR=address).get(
        "/api/conversations", headers={"Authorization": f"Bearer {token}"}
    )


def test_many_bad_tokens_from_one_address_get_429_while_good_ones_still_work(user, api_token):
    statuses = [_get(f"cnv_bad-{i}", "203.0.113.9").status_code for i in range(300)]
    assert statuses[:20] == [401] * 20
    assert set(statuses[20:]) == {429}
    # The block throttles failures only: a good token from the blocked address still works.
    assert _get(api_token, "203.0.113.9").status_code == 200
    blocked = _get("cnv_bad-again", "203.0.113.9")
    assert blocked.status_code == 429
    body = blocked.json()
    assert body["error"] == "throttled" and "too many invalid API tokens" in body["detail"]
    assert 1 <= int(blocked["Retry-After"]) <= 300
    assert _get(api_token, "198.51.100.7").status_code == 200  # another address: fine
    record = AuditRecord.objects.get(kind=LOCKOUT_KIND)
    assert record.data == {
        "via": "api_token", "address": "203.0.113.9", "failures": 20, "cooloff_seconds": 300.0,
    }  # fmt: skip


def test_good_tokens_never_count_and_the_block_lifts_after_the_cooloff(
    user, api_token, short_cooloff
):
    for _ in range(50):
        assert _get(api_token).status_code == 200
    for i in range(19):
        _get(f"cnv_bad-{i}")
    short_cooloff()  # the block the 20th failure sets lasts the cool-off read then
    _get("cnv_bad-19")
    assert _get("cnv_bad-blocked").status_code == 429
    assert _get(api_token).status_code == 200  # never refused, even while blocked
    wait_for(
        lambda: _get("cnv_bad-after").status_code == 401,
        timeout=10, interval=0.25, message="the token block to lift after the 2 s cool-off",
    )  # fmt: skip


def test_behind_a_proxy_the_address_is_the_one_the_proxy_appended(rf, settings):
    request = rf.get("/", HTTP_X_FORWARDED_FOR="6.6.6.6, 192.0.2.10", REMOTE_ADDR="10.0.0.2")
    settings.CANVAS_BEHIND_PROXY = False
    assert client_address(request) == "10.0.0.2"  # a client cannot pick its own address
    settings.CANVAS_BEHIND_PROXY = True
    assert client_address(request) == "192.0.2.10"


def test_production_counters_live_in_redis_shared_by_every_process(settings):
    """Two cache connections stand for two processes: a block one sets, the other sees."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": settings.REDIS_URL,
            "KEY_PREFIX": f"test-throttle-{uuid.uuid4().hex}",
        }
    }
    settings.CANVAS_TOKEN_FAILURE_LIMIT = 3
    address = "192.0.2.33"
    try:
        for _ in range(3):
            token_failure_record(address)
        other_process = caches.create_connection("default")
        until = other_process.get(f"throttle:token:blocked:{address}")
        assert until is not None and until > time.time()
    finally:
        caches["default"].delete_many(
            [f"throttle:token:blocked:{address}", f"throttle:token:failures:{address}"]
        )


def test_an_unreachable_cache_fails_the_token_throttle_open(settings, user, api_token):
    """Redis restarting must not turn every API call into an error: the throttle steps aside."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{port}/0",
        }
    }
    client = Client()
    good = client.get("/api/conversations", HTTP_AUTHORIZATION=f"Bearer {api_token}")
    bad = client.get("/api/conversations", HTTP_AUTHORIZATION="Bearer not-a-token")
    assert good.status_code == 200
    assert bad.status_code == 401 and bad.json()["error"]
