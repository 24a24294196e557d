"""The conversation page's agent tree: the Agents section and a child's breadcrumb, Stop on a
node, and the socket re-rendering the tree when the runner hints that it changed."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from channels.db import database_sync_to_async
from django.urls import reverse

from canvas import ui_consumers
from common.errors import Conflict
from conversations import broadcast, store
from conversations.events import ChildSpawn, SubagentsSpawnedEvent, UserMessageEvent
from conversations.models import Conversation
from orchestration import run_control
from teams.models import Role
from teams.services import member_add, team_default_for
from tests.canvas.test_ui_consumer import connect, session_headers
from tests.factories import make_conversation


def child(parent: Conversation, name: str, **fields) -> Conversation:
    fields.setdefault("status", "running")
    fields.setdefault("subagent_type", "general")
    return make_conversation(
        owner=parent.owner, team=parent.team, parent=parent, name=name,
        parent_action_id=f"call-{name}", **fields,
    )  # fmt: skip


def family(user) -> dict[str, Conversation]:
    """root -> alpha (running, 3 steps) -> alpha-1 (finished); root -> beta (finished)."""
    root = make_conversation(owner=user, title="Plan the release", status="waiting_for_subagents")
    alpha = child(root, "alpha", steps=3, cost_usd="0.0125")
    return {
        "root": root,
        "alpha": alpha,
        "alpha-1": child(alpha, "alpha-1", status="finished", title="Check the docs"),
        "beta": child(root, "beta", status="finished", subagent_type="explore"),
    }


def agent_tree(html: str) -> str:
    match = re.search(r'<section id="agent-tree".*?</section>', html, re.S)
    assert match, html
    return match.group(0)


@pytest.mark.django_db
class TestPage:
    def test_the_agents_section_nests_every_node_with_its_facts(self, client, user):
        rows = family(user)
        client.force_login(user)
        html = client.get(reverse("conversation-detail", args=[rows["root"].pk])).content.decode()
        section = agent_tree(html)
        assert "hidden" not in section.split(">", 1)[0]
        assert section.index("alpha") < section.index("alpha-1") < section.index("beta")
        # alpha-1 is nested inside alpha's item, beta is not.
        alpha = re.search(
            rf'<li[^>]*id="agent-node-{rows["alpha"].pk}".*?</li>\s*</ul>', section, re.S
        )
        assert alpha and "alpha-1" in alpha.group(0) and "beta" not in alpha.group(0)
        assert f'href="/conversations/{rows["alpha"].pk}/"' in section
        assert '<span class="badge status-running">Running</span>' in section
        assert "3 steps · $0.0125" in section
        assert ">explore</code>" in section
        # Stop only where something may still run: alpha (running), not the finished ones.
        assert section.count('class="small secondary stop-agent"') == 1
        assert f'hx-post="/conversations/{rows["alpha"].pk}/stop"' in section
        assert 'aria-label="Stop alpha"' in section

    def test_a_conversation_without_children_keeps_a_hidden_section(self, client, user):
        alone = make_conversation(owner=user)
        client.force_login(user)
        html = client.get(reverse("conversation-detail", args=[alone.pk])).content.decode()
        section = agent_tree(html)
        assert " hidden" in section and "Agents" not in section
        assert 'aria-label="Parent conversations"' not in html

    def test_a_childs_page_links_back_through_its_parents(self, client, user):
        rows = family(user)
        client.force_login(user)
        html = client.get(
            reverse("conversation-detail", args=[rows["alpha-1"].pk])
        ).content.decode()
        crumbs = re.search(r'<nav class="breadcrumb".*?</nav>', html, re.S).group(0)
        assert crumbs.index("Plan the release") < crumbs.index(">alpha<")
        assert f'href="/conversations/{rows["root"].pk}/"' in crumbs
        assert f'href="/conversations/{rows["alpha"].pk}/"' in crumbs
        assert '<li aria-current="page">alpha-1</li>' in crumbs
        assert "spawned by call <code>call-alpha-1</code>" in html

    def test_a_viewer_sees_the_tree_without_stop_buttons(self, client, user, django_user_model):
        rows = family(user)
        vera = django_user_model.objects.create_user("vera", password="vera-password-1")
        member_add(by=user, team=team_default_for(user), username="vera", role=Role.VIEWER)
        client.force_login(vera)
        html = client.get(reverse("conversation-detail", args=[rows["root"].pk])).content.decode()
        assert "alpha" in agent_tree(html) and "stop-agent" not in html


@pytest.mark.django_db
class TestStop:
    def test_stop_calls_the_service_for_that_node(self, client, user, monkeypatch):
        rows = family(user)
        calls = []
        monkeypatch.setattr(
            run_control, "conversation_stop", lambda **kw: calls.append(kw), raising=False
        )
        client.force_login(user)
        url = reverse("conversation-stop", args=[rows["alpha"].pk])
        answer = client.post(url, HTTP_HX_REQUEST="true")
        assert answer.status_code == 200
        assert calls == [{"conversation_id": rows["alpha"].pk, "by": user}]
        html = answer.content.decode()
        assert f'id="agent-stop-{rows["alpha"].pk}"' in html and "Stopping…" in html

    def test_a_refusal_is_shown_next_to_the_button(self, client, user, monkeypatch):
        rows = family(user)

        def refuse(**_):
            raise Conflict("nothing in this subtree is running.")

        monkeypatch.setattr(run_control, "conversation_stop", refuse, raising=False)
        client.force_login(user)
        url = reverse("conversation-stop", args=[rows["beta"].pk])
        answer = client.post(url, HTTP_HX_REQUEST="true")
        assert answer.status_code == 409
        html = answer.content.decode()
        assert (
            '<span class="notice" role="status">nothing in this subtree is running.</span>' in html
        )
        assert 'aria-label="Stop beta"' in html  # the button stays, to try again

    def test_the_services_own_refusal_reaches_the_page(self, client, user):
        done = make_conversation(owner=user, status="finished")
        client.force_login(user)
        answer = client.post(reverse("conversation-stop", args=[done.pk]), HTTP_HX_REQUEST="true")
        assert answer.status_code == 409
        assert "nothing to stop" in answer.content.decode()

    def test_without_htmx_it_redirects_with_the_message(self, client, user, monkeypatch):
        rows = family(user)
        monkeypatch.setattr(run_control, "conversation_stop", lambda **kw: None, raising=False)
        client.force_login(user)
        answer = client.post(reverse("conversation-stop", args=[rows["alpha"].pk]))
        assert answer.status_code == 302
        assert answer["Location"] == reverse("conversation-detail", args=[rows["alpha"].pk])

    def test_a_viewer_may_not_stop(self, client, user, django_user_model, monkeypatch):
        rows = family(user)
        monkeypatch.setattr(run_control, "conversation_stop", lambda **kw: 1 / 0, raising=False)
        vera = django_user_model.objects.create_user("vera", password="vera-password-1")
        member_add(by=user, team=team_default_for(user), username="vera", role=Role.VIEWER)
        client.force_login(vera)
        answer = client.post(reverse("conversation-stop", args=[rows["alpha"].pk]))
        assert answer.status_code == 403

    def test_another_teams_node_is_not_found(self, client, user, other_user):
        rows = family(user)
        client.force_login(other_user)
        answer = client.post(reverse("conversation-stop", args=[rows["alpha"].pk]))
        assert answer.status_code == 404


async def tree_frames(communicator, *, timeout: float = 5) -> list[str]:
    """Frames carrying `#agent-tree` until none comes for `timeout` seconds."""
    frames = []
    while not await communicator.receive_nothing(timeout=timeout):
        frame = await communicator.receive_from()
        if 'id="agent-tree"' in frame:
            frames.append(frame)
    return frames


@pytest.mark.django_db(transaction=True)
class TestSocket:
    async def test_a_tree_hint_re_renders_the_section_out_of_band(self, user):
        rows = await database_sync_to_async(family)(user)
        headers = await database_sync_to_async(session_headers)(user)
        communicator = await connect(rows["root"], headers)
        await communicator.send_to(text_data=json.dumps({"resume": 0}))
        await Conversation.objects.filter(pk=rows["alpha"].pk).aupdate(steps=7, status="paused")
        broadcast.publish_tree_changed([rows["root"].pk])
        frame = await communicator.receive_from(timeout=5)
        assert frame.lstrip().startswith('<section id="agent-tree"')
        assert 'hx-swap-oob="true"' in frame.split(">", 1)[0]
        assert "7 steps" in frame and '<span class="badge status-paused">Paused</span>' in frame
        assert "alpha-1" in frame and "beta" in frame
        await communicator.disconnect()

    async def test_hints_are_throttled_and_the_last_state_is_sent(self, user, monkeypatch):
        monkeypatch.setattr(ui_consumers, "TREE_RENDER_SECONDS", 0.5)
        rows = await database_sync_to_async(family)(user)
        headers = await database_sync_to_async(session_headers)(user)
        communicator = await connect(rows["root"], headers)
        await communicator.send_to(text_data=json.dumps({"resume": 0}))
        loop = asyncio.get_running_loop()
        started = loop.time()
        for steps in range(10, 30):
            await Conversation.objects.filter(pk=rows["alpha"].pk).aupdate(steps=steps)
            broadcast.publish_tree_changed([rows["root"].pk])
            await asyncio.sleep(0.05)
        frames = await tree_frames(communicator, timeout=1.5)
        elapsed = loop.time() - started
        # ~1 s of hints, 20 of them: a render at most every 0.5 s, the last one after them.
        assert 2 <= len(frames) <= int(elapsed / 0.5) + 1, len(frames)
        assert "29 steps" in frames[-1]
        await communicator.disconnect()

    async def test_a_spawn_in_the_own_log_re_renders_the_tree(self, user):
        root = await database_sync_to_async(make_conversation)(owner=user)
        headers = await database_sync_to_async(session_headers)(user)
        communicator = await connect(root, headers)
        await communicator.send_to(text_data=json.dumps({"resume": 0}))

        def spawn() -> None:
            kid = child(root, "gamma")
            spawned = SubagentsSpawnedEvent(
                tool_call_id="call-gamma", tool="task",
                children=[ChildSpawn(conversation_id=str(kid.pk), name="gamma",
                                     subagent_type="general")],
            )  # fmt: skip
            store.append(root.pk, [spawned])

        await database_sync_to_async(spawn)()
        frames = await tree_frames(communicator, timeout=2)
        assert len(frames) == 1 and "gamma" in frames[0]
        assert " hidden" not in frames[0].split(">", 1)[0]
        await communicator.disconnect()

    async def test_other_records_and_an_empty_tree_send_no_tree(self, user):
        root = await database_sync_to_async(make_conversation)(owner=user)
        headers = await database_sync_to_async(session_headers)(user)
        communicator = await connect(root, headers)
        await communicator.send_to(text_data=json.dumps({"resume": 0}))
        await database_sync_to_async(store.append)(root.pk, [UserMessageEvent(text="hi")])
        broadcast.publish_tree_changed([root.pk])  # nothing to show: the page is right
        assert await tree_frames(communicator, timeout=1) == []
        await communicator.disconnect()

    async def test_a_hint_before_resume_is_rendered_after_it(self, user):
        rows = await database_sync_to_async(family)(user)
        headers = await database_sync_to_async(session_headers)(user)
        communicator = await connect(rows["root"], headers)
        for _ in range(5):  # the socket joins its group just after it is accepted
            broadcast.publish_tree_changed([rows["root"].pk])
            assert await communicator.receive_nothing(timeout=0.1)
        await communicator.send_to(text_data=json.dumps({"resume": 0}))
        frames = await tree_frames(communicator, timeout=1.5)
        assert len(frames) == 1 and "alpha" in frames[0]
        await communicator.disconnect()

    async def test_the_safety_poll_re_reads_a_live_tree(self, user, monkeypatch):
        from canvas import consumers

        monkeypatch.setattr(consumers, "SAFETY_POLL_SECONDS", 0.3)
        rows = await database_sync_to_async(family)(user)
        headers = await database_sync_to_async(session_headers)(user)
        communicator = await connect(rows["root"], headers)
        await communicator.send_to(text_data=json.dumps({"resume": 0}))
        # A change whose hint was lost (none is sent here): the poll finds it.
        await Conversation.objects.filter(pk=rows["alpha"].pk).aupdate(steps=11)
        frames = await tree_frames(communicator, timeout=1.5)
        assert frames and "11 steps" in frames[-1]
        await communicator.disconnect()
