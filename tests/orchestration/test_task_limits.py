"""Celery hygiene: a run_slice task past its hard time limit is killed, and the sweeper revives
its run (issue 9). Celery enforces time limits in the prefork pool, so this worker uses it."""

import pytest

from conversations import store
from conversations.events import ObservationEvent
from conversations.models import Conversation
from orchestration import services
from tests.conftest import wait_for
from tests.runs import script

pytestmark = pytest.mark.worker

PREFORK = {"CANVAS_WORKER_POOL": "prefork", "CANVAS_WORKER_CONCURRENCY": "2"}
"""Through the settings: Celery takes its configured pool over `-P prefork`, the CLI default."""


LIMITS = {"CANVAS_LEASE_SECONDS": "2", "CANVAS_SWEEP_SECONDS": "1"}


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "pool, limits, says",
    [
        # Celery kills the pool process at the hard limit; the sweeper revives the run.
        # The lease keeper's cancel at the soft limit may come first (it does in every pool).
        (PREFORK, {"CANVAS_SLICE_TIME_LIMIT": "4", "CANVAS_SLICE_SOFT_TIME_LIMIT": "4"},
         ("Hard time limit (4", "passed its time limit")),
        # Celery ignores limits in the threads pool: the lease keeper cancels the slice at its
        # soft limit (its command killed) and the run goes on.
        ({"CANVAS_WORKER_POOL": "threads", "CANVAS_WORKER_CONCURRENCY": "4"},
         {"CANVAS_SLICE_SOFT_TIME_LIMIT": "3", "CANVAS_SLICE_TIME_LIMIT": "4"},
         ("passed its time limit",)),
    ],
    ids=["prefork", "threads"],
)  # fmt: skip
def test_a_slice_past_its_time_limit_is_stopped_and_the_run_goes_on(
    start_worker, pool, limits, says
):
    worker = start_worker(beat=True, pool_args=(), extra_env={**pool, **limits, **LIMITS})
    conversation = services.conversation_create(
        owner=None, model="scripted",
        prompt=script(
            {"tool": "terminal", "args": {"command": "sleep 40; echo slept", "timeout": 60}},
            {"tool": "finish", "args": {"message": "went on"}},
        ),
    )  # fmt: skip
    wait_for(
        lambda: Conversation.objects.get(pk=conversation.pk).status == "finished",
        60, message="the run to go on after its slice's limit",
    )  # fmt: skip
    events = [s.event for s in store.load(conversation.pk)]
    (result, _finish) = [e for e in events if isinstance(e, ObservationEvent)]
    assert result.tool == "terminal" and result.interrupted and "slept" not in result.content
    assert [e.type for e in events].count("run.finished") == 1
    log = worker.log_path.read_text()
    assert any(words in log for words in says), log[-2000:]
