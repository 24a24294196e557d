"""The plain worker command's pool: a conversation waiting on its model must not hold back
the others (issue 9, "Scale")."""

from __future__ import annotations

import json
import threading
import time

import pytest

from conversations.models import Conversation
from orchestration import services
from tests.conftest import wait_for
from tests.fakes import FakeOpenAI, Outcome

pytestmark = pytest.mark.worker

MODEL_SECONDS = 2.0
CONVERSATIONS = 8


def test_plain_worker_runs_conversations_waiting_on_their_model_side_by_side(
    start_worker, monkeypatch
):
    arrivals: list[float] = []
    lock = threading.Lock()

    def slow_finish(request: dict) -> Outcome:
        with lock:
            arrivals.append(time.monotonic())
        return Outcome(delay=MODEL_SECONDS, tool="finish", args={"message": "done"})

    with FakeOpenAI(responder=slow_finish) as fake:
        profiles = json.dumps(
            {
                "slow": {
                    "model": "openai/fake-model",
                    "api_base": fake.base_url,
                    "api_key_env": "FAKE_OPENAI_KEY",
                    "timeout": 30,
                    "num_retries": 0,
                }
            }
        )
        monkeypatch.setenv("CANVAS_MODEL_PROFILES", profiles)
        monkeypatch.setenv("FAKE_OPENAI_KEY", "dummy")
        # No -P / -c: what `celery -A canvas worker` from the README gives.
        start_worker(
            pool_args=(),
            extra_env={"CANVAS_MODEL_PROFILES": profiles, "FAKE_OPENAI_KEY": "dummy"},
        )
        ids = [
            services.conversation_create(owner=None, prompt=f"job {i}", model="slow").pk
            for i in range(CONVERSATIONS)
        ]
        wait_for(
            lambda: (
                Conversation.objects.filter(pk__in=ids, status="finished").count() == CONVERSATIONS
            ),
            60,
            message="every conversation to finish",
        )

    # Every conversation asked its model before the first answer came back: none waited for
    # a worker slot held by another conversation that was only waiting on its model.
    first = min(arrivals)
    assert len(arrivals) == CONVERSATIONS
    assert max(arrivals) - first < MODEL_SECONDS * 0.75, [round(a - first, 2) for a in arrivals]
