"""The review page and Send review: the message's exact text (canvas.review_message), the page
after a real scripted run in both layouts, the one user message a review posts, refusals, and
who may send one."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from canvas.review_message import (
    MAX_COMMENTS,
    CitedComment,
    ReviewComment,
    parse_comments,
    review_message,
)
from common.errors import InvalidInput
from conversations import store
from conversations.events import UserMessageEvent
from teams.models import Role
from teams.services import member_add
from tests.canvas.test_workspace_api import ran  # noqa: F401 - the fixture

INTRO = (
    "Review of your changes: {count}. Please address each one. Line numbers are those of the "
    'files as they are now, except where marked "before the change".'
)


def _comment(**fields) -> ReviewComment:
    return ReviewComment(
        **({"path": "a.py", "side": "new", "start": 1, "end": 1, "body": "x"} | fields)
    )


def test_the_message_cites_each_comment_in_order_and_quotes_the_reviewers_words():
    cited = [
        CitedComment(
            _comment(path="b.py", start=7, end=8, body="Two lines."), ["+p = 1", " q = 2"]
        ),
        CitedComment(_comment(path="a.py", side="old", start=3, end=3, body="Why?"), ["-gone"]),
        CitedComment(_comment(path="a.py", start=2, end=2, body="ok\r\n\r\nreally"), ["+new"]),
    ]
    assert (
        review_message(cited, note="  Also run the tests.  ")
        == "\n\n".join(
            [
                INTRO.format(count="3 comments"),
                ">   Also run the tests.",
                "a.py:2\n```diff\n+new\n```\n> ok\n>\n> really",
                "a.py:3 (before the change)\n```diff\n-gone\n```\n> Why?",
                "b.py:7-8\n```diff\n+p = 1\n q = 2\n```\n> Two lines.",
            ]
        )
        + "\n"
    )


def test_what_a_reviewer_or_the_code_holds_cannot_break_the_messages_shape():
    sneaky = "fine\nother.py:1\n```\n> injected"
    code = ["+s = '```'", "+t = '````'"]
    text = review_message([CitedComment(_comment(path="we\nird.py", body=sneaky), code)])
    assert text == (
        INTRO.format(count="1 comment") + "\n\n"
        '"we\\nird.py":1\n'
        "`````diff\n+s = '```'\n+t = '````'\n`````\n"
        "> fine\n> other.py:1\n> ```\n> > injected\n"
    )
    many = [f"+{i}" for i in range(20)]
    long = review_message([CitedComment(_comment(end=20), many)])
    assert "+11\n  … 8 more lines\n```" in long and "+12" not in long


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ("", "has no comments"),
        ("[]", "has no comments"),
        ("{", "not a valid list"),
        ('{"path": "a"}', "not a valid list"),
        ('[{"path": "a.py", "side": "new", "start": 1, "end": 1, "body": "  "}]', "comment 1: body"),
        ('[{"path": "a.py", "side": "left", "start": 1, "end": 1, "body": "x"}]', "comment 1: side"),
        ('[{"path": "a.py", "side": "new", "start": 0, "end": 1, "body": "x"}]', "comment 1: start"),
        ('[{"path": "a.py", "side": "new", "start": 3, "end": 2, "body": "x"}]', "last line is before"),
        ('[{"path": "a.py", "side": "new", "start": 1, "end": 1, "body": "x", "y": 1}]', "comment 1: y"),
        (json.dumps([{"path": "a", "side": "new", "start": 1, "end": 1, "body": "x"}] * (MAX_COMMENTS + 1)), "at most"),
    ],
)  # fmt: skip
def test_bad_comments_are_refused_in_words(raw, said):
    with pytest.raises(InvalidInput) as refused:
        parse_comments(raw)
    assert said in refused.value.detail


def _review(client: Client, conversation_id: str, **query) -> str:
    response = client.get(reverse("conversation-review", args=[conversation_id]), query)
    assert response.status_code == 200, response.content[:300]
    return response.content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_page_shows_every_file_numbered_and_coloured_in_both_layouts(browser, ran):  # noqa: F811
    split = _review(browser, ran)
    for path in ("edit.py", "notes.txt", "old.txt", "src/made.py"):
        assert f'data-path="{path}"' in split
    assert 'class="diff diff-split highlight"' in split
    # edit.py: line 2 removed on the left, its replacement on the right, both coloured.
    assert (
        '<td class="ln dl-del"><button type="button" class="ln-button" data-side="old" '
        'data-line="2" aria-label="Comment on line 2 before the change">2</button></td>'
        '<td class="code dl-del"><span class="n">y</span>'
    ) in split
    assert '<span class="nb">print</span>' in split  # src/made.py
    unified = _review(browser, ran, mode="unified")
    assert 'class="diff diff-unified highlight"' in unified
    review = reverse("conversation-review", args=[ran])
    assert f'<a href="{review}?mode=unified" aria-current="page">Unified</a>' in unified
    assert 'id="review-form"' in unified
    changes = browser.get(reverse("conversation-panel", args=[ran, "changes"])).content.decode()
    assert reverse("conversation-review", args=[ran]) in changes


@pytest.mark.django_db(transaction=True)
def test_send_review_posts_one_user_message_citing_file_and_line(browser, ran, dispatched):  # noqa: F811
    comments = [
        {"path": "old.txt", "side": "old", "start": 1, "end": 1, "body": "Keep <this> file."},
        {"path": "edit.py", "side": "new", "start": 2, "end": 2, "body": "Why 3?"},
    ]
    before = len(store.load(ran))
    url = reverse("conversation-review-send", args=[ran])
    response = browser.post(url, {"comments": json.dumps(comments), "note": ""})
    assert response.status_code == 302
    assert response["Location"] == reverse("conversation-detail", args=[ran])
    messages = [e.event for e in store.load(ran)[before:] if isinstance(e.event, UserMessageEvent)]
    assert [m.text for m in messages] == [
        INTRO.format(count="2 comments")
        + "\n\nedit.py:2\n```diff\n+y = 3\n```\n> Why 3?"
        + "\n\nold.txt:1 (before the change)\n```diff\n-gone soon\n```\n> Keep <this> file.\n"
    ]
    assert messages[0].sender == "alice"
    assert dispatched  # the finished conversation runs again to read it


@pytest.mark.django_db(transaction=True)
def test_a_refused_review_keeps_its_comments_and_says_why(browser, ran):  # noqa: F811
    url = reverse("conversation-review-send", args=[ran])
    before = len(store.load(ran))
    for comment, said in (
        ({"path": "edit.py", "side": "new", "start": 9, "end": 9}, "line 9 is not in the diff now"),
        ({"path": "same.md", "side": "new", "start": 1, "end": 1}, "has not changed"),
        ({"path": "../x", "side": "new", "start": 1, "end": 1}, "may not contain"),
    ):
        pending = json.dumps([comment | {"body": "<b>bold</b>"}])
        response = browser.post(url, {"comments": pending, "note": "n", "mode": "unified"})
        assert response.status_code in (400, 404), response.content[:300]
        page = response.content.decode()
        assert said in page
        assert 'id="review-error"' in page and "diff-unified" in page
        # Its layout links lead back to the page, not to where the form posted.
        assert f'href="{reverse("conversation-review", args=[ran])}?mode=split"' in page
        assert "&lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold</b>" not in page
    assert len(store.load(ran)) == before


@pytest.mark.django_db(transaction=True)
def test_viewers_read_but_cannot_send_and_other_teams_see_nothing(
    browser, ran, user, team, other_user, django_user_model,  # noqa: F811
):  # fmt: skip
    viewer = django_user_model.objects.create_user("victor", password="victor-password-1")
    member_add(by=user, team=team, username="victor", role=Role.VIEWER)
    as_viewer, as_mallory = Client(), Client()
    as_viewer.force_login(viewer)
    as_mallory.force_login(other_user)
    page = _review(as_viewer, ran)
    assert 'data-path="edit.py"' in page
    assert "ln-button" not in page and 'id="review-form"' not in page
    assert "(viewer) can read the changes but not send a review" in page
    comments = json.dumps([{"path": "edit.py", "side": "new", "start": 2, "end": 2, "body": "x"}])
    send = reverse("conversation-review-send", args=[ran])
    before = len(store.load(ran))
    assert as_viewer.post(send, {"comments": comments}).status_code == 403
    assert as_mallory.post(send, {"comments": comments}).status_code == 404
    assert as_mallory.get(reverse("conversation-review", args=[ran])).status_code == 404
    assert Client().post(send, {"comments": comments}).status_code == 302  # to the login page
    assert len(store.load(ran)) == before


def test_a_hunk_side_is_coloured_as_one_text_and_split_back_into_its_lines():
    from canvas.highlight import highlighted_lines

    lines = ['x = """start', "<still> a string", 'end"""  # done']
    html = highlighted_lines("a.py", lines)
    assert len(html) == 3
    assert html[1] == '<span class="s2">&lt;still&gt; a string</span>'
    assert html[2].endswith('<span class="c1"># done</span>')
    assert highlighted_lines("notes.unknown-ext", ["<b>"]) == ["&lt;b&gt;"]
    assert highlighted_lines("a.py", ["", "", "y"])[:2] == ["", ""]
