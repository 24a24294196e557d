"""Bodies over the upload limit: the composers' limits keep the page under it, and the server's
answer to one that is over is a readable message (canvas.request_limits), not a bare 400."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.urls import reverse

from conversations.models import Conversation
from orchestration.services import MAX_PROMPT_CHARS, conversation_create

MESSAGE = "Not sent: this is larger than the 2.5\xa0MB a form may hold."
TOO_BIG = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)


def test_a_full_composer_fits_in_one_request_body():
    # maxlength counts UTF-16 units; one unit is at most 3 UTF-8 bytes, each sent as %XX. So
    # the page's own check keeps a form body under the limit, with room for the other fields.
    assert 9 * MAX_PROMPT_CHARS + 10_000 < settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def _post(client, url: str, data: dict[str, str], **headers: str):
    # Form-encoded, as htmx and a plain form send it.
    body = urlencode(data)
    return client.post(url, body, content_type="application/x-www-form-urlencoded", **headers)


@pytest.fixture
def urls(client, user, dispatched) -> dict[str, tuple[str, dict[str, str]]]:
    client.force_login(user)
    conversation = conversation_create(owner=user, prompt="hello", model="scripted")
    message = reverse("conversation-message", args=[conversation.pk])
    return {
        "prompt": (reverse("conversation-new"), {"prompt": TOO_BIG, "model": "scripted"}),
        "message": (message, {"text": TOO_BIG}),
    }


@pytest.mark.django_db
@pytest.mark.parametrize("form", ["prompt", "message"])
def test_htmx_gets_a_message_added_to_the_form(client, urls, form):
    url, data = urls[form]
    response = _post(client, url, data, HTTP_HX_REQUEST="true")
    assert response.status_code == 413
    assert response["HX-Reswap"] == "beforeend"  # added to the form, which keeps the text
    html = response.content.decode()
    assert MESSAGE in html and 'role="alert"' in html
    assert "<html" not in html and "Bad Request" not in html and "413" not in html
    assert Conversation.objects.count() == 1  # only the fixture's


@pytest.mark.django_db
def test_a_plain_post_gets_a_page_that_says_why(client, urls):
    url, data = urls["prompt"]
    response = _post(client, url, data)
    assert response.status_code == 413
    html = response.content.decode()
    assert "<title>Too large to send" in html and MESSAGE in html
    assert "Bad Request" not in html


@pytest.mark.django_db
def test_other_bad_requests_keep_django_s_answer(client, urls):
    url, _ = urls["message"]
    fields = {f"f{i}": "v" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1)}
    response = _post(client, url, fields, HTTP_HX_REQUEST="true")
    assert response.status_code == 400
    assert "HX-Reswap" not in response
