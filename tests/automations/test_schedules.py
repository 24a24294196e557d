"""Cron schedules under controlled time (automations.schedules): a slot fires once, in the
automation's time zone, however many firers race for it; missed slots follow `missed`; the
beat and the embedded sweep both fire them; a fired slot runs to FINISHED."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from automations import schedules, services
from automations.models import Automation, AutomationRun
from automations.runs import runs_settle
from automations.schedules import fire_schedules, latest_slot, slot_due, slot_fire
from conversations.models import Conversation
from teams.models import AuditRecord
from tests.api import call
from tests.runs import drive, script

SAY = script({"say": "report for {{ payload.scheduled_for }} ({{ payload.automation }})"})
T0 = datetime(2026, 1, 5, 7, 58, tzinfo=UTC)
"""When the test schedules were made: a winter Monday, Paris at UTC+1."""
GRACE = timedelta(seconds=60)


def at(hh: int, mm: int, ss: int = 0, day: datetime = T0) -> datetime:
    return day.replace(hour=hh, minute=mm, second=ss)


@pytest.fixture(autouse=True)
def beat_period(settings):
    settings.CANVAS_SCHEDULE_SECONDS = 30  # so the skip grace is max(60 s, 60 s)


@pytest.fixture
def make_schedule(make_automation):
    """A schedule made at T0 (its created_at moved there)."""

    def make(cron: str = "*/5 * * * *", name: str = "report", **fields) -> Automation:
        fields = {"prompt_template": SAY, **fields}
        automation, _ = make_automation(name=name, trigger="schedule", cron=cron, **fields)
        Automation.objects.filter(pk=automation.pk).update(created_at=T0)
        automation.refresh_from_db()
        return automation

    return make


def keys(automation: Automation) -> list[str]:
    return list(automation.runs.order_by("id").values_list("delivery_key", flat=True))


# The pure rules.


def test_the_latest_slot_includes_one_at_exactly_now_and_reads_the_zone():
    assert latest_slot("*/5 * * * *", "UTC", at(8, 0)) == at(8, 0)
    assert latest_slot("*/5 * * * *", "UTC", at(8, 4, 59)) == at(8, 0)
    summer = T0.replace(month=7, day=6)
    assert latest_slot("0 9 * * *", "Europe/Paris", at(8, 30)) == at(8, 0)
    assert latest_slot("0 9 * * *", "Europe/Paris", at(8, 30, day=summer)) == at(7, 0, day=summer)
    assert latest_slot("0 9 * * *", "UTC", at(8, 30)) == at(9, 0) - timedelta(days=1)


@pytest.mark.parametrize(
    "missed, now, fires",
    [
        ("skip", at(8, 0, 30), True),
        ("skip", at(8, 1), True),  # exactly the grace late
        ("skip", at(8, 1, 1), False),
        ("once", at(8, 1, 1), True),
        ("once", at(11, 3), True),  # late by hours: still one run
    ],
)
def test_slot_due_fires_the_latest_slot_by_the_missed_rule(missed, now, fires):
    due = slot_due(cron="0 * * * *", zone="UTC", missed=missed, after=at(7, 0), now=now,
                   grace=GRACE)  # fmt: skip
    assert due is not None and due.fire is fires
    assert due.slot == now.replace(minute=0, second=0)


def test_nothing_is_due_at_or_before_the_watermark():
    due = slot_due(cron="0 * * * *", zone="UTC", missed="once", after=at(8, 0), now=at(8, 59),
                   grace=GRACE)  # fmt: skip
    assert due is None


# Firing, against the database.


@pytest.mark.django_db
def test_a_five_minute_schedule_fires_at_its_slot_and_not_again(make_schedule, dispatched):
    automation = make_schedule()
    assert fire_schedules(now=at(7, 59, 59)) == 0
    assert fire_schedules(now=at(8, 0, 10)) == 1
    assert fire_schedules(now=at(8, 0, 40)) == 0  # the same slot, the next beat
    assert fire_schedules(now=at(8, 4, 59)) == 0
    run = AutomationRun.objects.get()
    assert (run.trigger, run.delivery_key, run.status) == (
        "schedule", "slot:2026-01-05T08:00:00+00:00", "started"
    )  # fmt: skip
    assert run.payload == {"slot": "2026-01-05T08:00:00+00:00", "automation": "report",
                           "scheduled_for": "2026-01-05T08:00:00+00:00"}  # fmt: skip
    assert (
        "report for <untrusted_payload>2026-01-05T08:00:00+00:00</untrusted_payload> "
        "(<untrusted_payload>report</untrusted_payload>)" in run.prompt
    )
    assert run.conversation_id is not None
    automation.refresh_from_db()
    assert automation.last_slot_at == at(8, 0)

    Conversation.objects.update(status="finished")
    assert fire_schedules(now=at(8, 5, 1)) == 1
    assert keys(automation)[-1] == "slot:2026-01-05T08:05:00+00:00"


@pytest.mark.django_db
def test_the_time_zone_decides_when_nine_oclock_is(make_schedule, dispatched):
    paris = make_schedule("0 9 * * *", name="paris", timezone="Europe/Paris")
    utc = make_schedule("0 9 * * *", name="utc")
    assert fire_schedules(now=at(8, 0, 5)) == 1
    assert (keys(paris), keys(utc)) == (["slot:2026-01-05T08:00:00+00:00"], [])
    assert paris.runs.get().payload["scheduled_for"] == "2026-01-05T09:00:00+01:00"
    assert (
        "report for <untrusted_payload>2026-01-05T09:00:00+01:00</untrusted_payload> "
        "(<untrusted_payload>paris</untrusted_payload>)" in paris.runs.get().prompt
    )

    assert fire_schedules(now=at(9, 0, 5)) == 1
    assert (len(keys(paris)), keys(utc)) == (1, ["slot:2026-01-05T09:00:00+00:00"])


@pytest.mark.django_db
def test_a_second_firer_with_a_stale_view_records_nothing_and_starts_nothing(make_schedule,
                                                                           dispatched):  # fmt: skip
    automation = make_schedule()
    stale = Automation.objects.get(pk=automation.pk)  # what a second beat read meanwhile
    first = slot_fire(automation, at(8, 0))
    assert first is not None and first.status == "started"
    assert slot_fire(stale, at(8, 0)) is None
    assert AutomationRun.objects.count() == 1 and Conversation.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_workers_firing_at_once_start_one_run(make_schedule, dispatched, monkeypatch):
    automation = make_schedule()
    both_saw_it_due = threading.Barrier(2, timeout=20)
    real_slot_due = schedules.slot_due

    def slot_due_then_wait(**kwargs):
        due = real_slot_due(**kwargs)
        both_saw_it_due.wait()  # both have read the old watermark: both will insert
        return due

    monkeypatch.setattr(schedules, "slot_due", slot_due_then_wait)
    fired: list[int] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            fired.append(fire_schedules(now=at(8, 0, 10)))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors and sorted(fired) == [0, 1]
    assert keys(automation) == ["slot:2026-01-05T08:00:00+00:00"]
    assert Conversation.objects.count() == 1 and len(dispatched) == 1


@pytest.mark.django_db
def test_after_three_hours_down_skip_records_nothing_for_the_missed_slots(make_schedule,
                                                                        dispatched):  # fmt: skip
    automation = make_schedule(missed="skip")
    assert fire_schedules(now=at(8, 0, 10)) == 1
    Conversation.objects.update(status="finished")
    assert fire_schedules(now=at(11, 7)) == 0  # the latest, 11:05, is 2 minutes late
    automation.refresh_from_db()
    assert automation.last_slot_at == at(11, 5) and len(keys(automation)) == 1
    assert fire_schedules(now=at(11, 10, 20)) == 1  # back on time
    assert keys(automation) == ["slot:2026-01-05T08:00:00+00:00", "slot:2026-01-05T11:10:00+00:00"]


@pytest.mark.django_db
def test_after_three_hours_down_skip_still_fires_a_fresh_latest_slot_only(make_schedule,
                                                                        dispatched):  # fmt: skip
    automation = make_schedule(missed="skip")
    fire_schedules(now=at(8, 0, 10))
    Conversation.objects.update(status="finished")
    assert fire_schedules(now=at(11, 5, 30)) == 1
    assert keys(automation) == ["slot:2026-01-05T08:00:00+00:00", "slot:2026-01-05T11:05:00+00:00"]


@pytest.mark.django_db
def test_after_three_hours_down_once_fires_one_run_for_them_all(make_schedule, dispatched):
    automation = make_schedule(missed="once")
    fire_schedules(now=at(8, 0, 10))
    Conversation.objects.update(status="finished")
    assert fire_schedules(now=at(11, 7)) == 1  # 36 slots missed: one run, the latest's key
    assert fire_schedules(now=at(11, 8)) == 0
    assert keys(automation) == ["slot:2026-01-05T08:00:00+00:00", "slot:2026-01-05T11:05:00+00:00"]
    assert automation.runs.order_by("id").last().status == "started"


@pytest.mark.django_db
def test_a_new_schedule_fires_no_slot_from_before_its_creation(make_schedule, dispatched):
    automation = make_schedule("0 7 * * *", missed="once")  # made at 07:58, after 07:00
    assert fire_schedules(now=at(7, 59)) == 0
    assert fire_schedules(now=at(9, 0)) == 0
    assert keys(automation) == []
    assert fire_schedules(now=at(7, 0, 5) + timedelta(days=1)) == 1


@pytest.mark.django_db
def test_a_disabled_schedule_and_a_webhook_fire_nothing(make_schedule, make_automation,
                                                       dispatched):  # fmt: skip
    make_schedule(enabled=False, missed="once")
    make_automation(name="hook")
    assert fire_schedules(now=at(8, 0, 10)) == 0
    assert fire_schedules(now=at(12, 0, 10)) == 0
    assert not AutomationRun.objects.exists()


@pytest.mark.django_db
def test_enabled_again_once_does_not_catch_up_the_slots_from_while_disabled(make_schedule, user,
                                                                          team, dispatched):  # fmt: skip
    automation = make_schedule("* * * * *", missed="once")
    now = datetime.now(UTC)
    Automation.objects.filter(pk=automation.pk).update(created_at=now - timedelta(hours=3))
    for enabled in (False, True):
        services.automation_update(by=user, team=team, automation_id=automation.pk,
                                   enabled=enabled)  # fmt: skip
    assert fire_schedules(now=now) == 0  # its slots are before the re-enabling
    assert fire_schedules(now=now + timedelta(minutes=1, seconds=1)) == 1


@pytest.mark.django_db
def test_a_template_the_payload_lacks_fails_its_run_once(make_schedule, dispatched):
    automation = make_schedule(prompt_template="run {{ payload.nope }}")
    assert fire_schedules(now=at(8, 0, 10)) == 1
    assert fire_schedules(now=at(8, 0, 40)) == 0
    run = automation.runs.get()
    assert run.status == "failed" and "payload.nope" in run.error
    assert not Conversation.objects.exists()


# The edges: beat, the embedded sweep, the API.


def test_beat_fires_schedules_with_a_registered_task(settings):
    from canvas.celery import app

    app.loader.import_default_modules()  # the task modules, as a worker imports them at start
    entry = settings.CELERY_BEAT_SCHEDULE["automations-fire-schedules"]
    assert entry["task"] == "automations.fire_schedules" and entry["task"] in app.tasks
    assert entry["schedule"] == settings.CANVAS_SCHEDULE_SECONDS


@pytest.mark.django_db
def test_the_api_takes_and_shows_the_missed_rule(api, team):
    url = f"/api/teams/{team.pk}/automations"
    body = {"name": "nightly", "trigger": "schedule", "cron": "0 3 * * *",
            "prompt_template": SAY, "model": "scripted", "missed": "once"}  # fmt: skip
    status, made = call(api, "post", url, body)
    assert status == 201 and made["missed"] == "once", made
    assert call(api, "get", f"{url}/{made['id']}")[1]["missed"] == "once"

    status, bad = call(api, "patch", f"{url}/{made['id']}", {"missed": "sometimes"})
    assert status == 400 and "missed must be one of skip, once" in str(bad["detail"])
    status, changed = call(api, "patch", f"{url}/{made['id']}", {"missed": "skip"})
    assert status == 200 and changed["missed"] == "skip"
    update = AuditRecord.objects.filter(kind="automation.updated").get()
    assert (update.data["before"]["missed"], update.data["after"]["missed"]) == ("once", "skip")

    status, bad = call(api, "post", url, {**body, "name": "other", "missed": "all"})
    assert status == 400 and "missed must be one of" in str(bad["detail"])
    hook = {"name": "hook", "trigger": "webhook", "prompt_template": SAY, "model": "scripted"}
    assert call(api, "post", url, hook)[1]["missed"] == "skip"  # the default


@pytest.mark.django_db
def test_a_cron_that_never_comes_is_a_400(api, team):
    body = {"name": "never", "trigger": "schedule", "cron": "0 0 31 2 *",
            "prompt_template": SAY, "model": "scripted"}  # fmt: skip
    status, bad = call(api, "post", f"/api/teams/{team.pk}/automations", body)
    assert status == 400 and "names no time that ever comes" in str(bad["detail"])


@pytest.mark.django_db(transaction=True)  # drive() runs real slices
def test_a_fired_slot_runs_to_finished(make_schedule, dispatched):
    automation = make_schedule("0 9 * * *", timezone="Europe/Paris")
    assert fire_schedules(now=at(8, 0, 10)) == 1
    run = automation.runs.get()
    assert run.status == "started"
    drive(dispatched)
    conversation = Conversation.objects.get(pk=run.conversation_id)
    assert conversation.status == "finished"
    assert runs_settle() == 1
    run.refresh_from_db()
    assert run.status == "finished" and "2026-01-05T09:00:00+01:00" in run.prompt
