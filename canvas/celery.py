"""The Celery app. Tasks are discovered from installed apps; config comes from Django settings."""

import os
import sys
import threading

from celery import Celery
from celery.signals import (
    celeryd_after_setup,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
    worker_shutting_down,
)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "canvas.settings")
# Celery's Django fix-up runs Django's system checks as a worker starts: they import the whole
# URLconf (every view and the API, over a second) that a worker never serves. The web process
# and `manage.py` run them; a worker skips them unless told otherwise.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

from canvas.broker import survive_a_lost_broker_connection  # noqa: E402
from canvas.worker_command import honour_the_pool_flag  # noqa: E402

survive_a_lost_broker_connection()
honour_the_pool_flag()
app = Celery("canvas")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _announce_ready(**_: object) -> None:
    # Lets supervisors and tests wait for a worker that really consumes, without polling
    # the broker.
    ready_file = os.environ.get("CANVAS_WORKER_READY_FILE")
    if ready_file:
        with open(ready_file, "w") as handle:
            handle.write(str(os.getpid()))


@worker_ready.connect
def _announce_host(sender, **_: object) -> None:
    # The host's heartbeat row (orchestration/chain/workers.py): which hosts are alive to run the
    # conversations pinned to them.
    from orchestration.chain.workers import presence_start

    presence_start(sorted(sender.app.amqp.queues.consume_from))


@worker_shutting_down.connect
def _drain(**_: object) -> None:
    # Runs inside the signal handler: only set a flag. Slices stop at their next step
    # boundary and hand the run over; the pool then finishes quickly.
    from orchestration.chain.workers import draining

    draining.set()


@worker_shutdown.connect
def _depart(**_: object) -> None:
    from orchestration.chain.workers import presence_stop

    presence_stop()


@worker_shutdown.connect
@worker_process_shutdown.connect
def _stop_kept_servers(**_: object) -> None:
    # The MCP servers runs left for their next slice (orchestration/mcp/pool.py). A process
    # that never imported the pool kept none, and importing it (the MCP SDK) takes seconds.
    pool = sys.modules.get("orchestration.mcp.pool")
    if pool is not None:
        pool.close_all()


@celeryd_after_setup.connect
def _consume_host_queue(sender: str, instance, **_: object) -> None:
    # Conversations with a local workspace are pinned to the host that holds it; every worker
    # also listens on its host's queue, and an ACP worker on its host's ACP queue (see
    # orchestration.chain.dispatch.slice_queue).
    from django.conf import settings

    from orchestration.chain.dispatch import ACP_QUEUE, host_queue

    queues = instance.app.amqp.queues
    if not queues.consume_from or set(queues.consume_from) - {ACP_QUEUE}:
        queues.select_add(host_queue(settings.CANVAS_WORKER_HOST))
    if ACP_QUEUE in queues.consume_from:  # an ACP worker (`-Q acp`): also its host's ACP turns
        queues.select_add(host_queue(settings.CANVAS_WORKER_HOST, base=ACP_QUEUE))


def _may_run_a_model(app: Celery) -> bool:
    """Whether this worker consumes a queue our own agent's slices (or a title, or a profile
    test) arrive on: anything but the ACP queues, where only external agents run."""
    from orchestration.chain.dispatch import ACP_QUEUE

    return any(
        q != ACP_QUEUE and not q.startswith(f"{ACP_QUEUE}.") for q in app.amqp.queues.consume_from
    )


def _should_warm(app: Celery) -> bool:
    # Not in the embedded mode (the server's own process, mostly the demo model), not on an
    # ACP-only worker, nor with CANVAS_LLM_WARM_UP=0.
    from django.conf import settings

    if settings.EMBEDDED or os.environ.get("CANVAS_LLM_WARM_UP", "1") == "0":
        return False
    return _may_run_a_model(app)


def _warm() -> None:
    # LiteLLM costs seconds of CPU to import (and a little more on its first call). Then move
    # everything imported so far out of the garbage collector's reach: full collections
    # otherwise rescan LiteLLM's ~460k objects and cost seconds over a long run (and, before
    # a fork, would touch every shared page).
    import gc

    from orchestration.step.llm import warm_up

    warm_up()
    gc.freeze()


def _is_prefork(pool_cls: object) -> bool:
    return "prefork" in getattr(pool_cls, "__module__", "")


@celeryd_after_setup.connect
def _warm_before_forking(sender: str, instance, **_: object) -> None:
    # A prefork pool's processes, and every one that replaces a process killed at its hard time
    # limit, are forked from this one: warmed here once, before the pool starts, they all
    # start warm. Warmed in each instead, a fresh process spent its first slice importing
    # LiteLLM (more than a short time limit allows, so a revived run was killed again and
    # again) and every process paid the import's CPU and memory again.
    if _is_prefork(instance.pool_cls) and _should_warm(instance.app):
        _warm()


@worker_ready.connect
def _warm_after_ready(sender, **_: object) -> None:
    # A threads (or solo) pool runs tasks in this process: warm it in the background once it
    # is ready, so the first real model call does not wait while nothing waits for the warm-up.
    if not _is_prefork(getattr(sender.controller, "pool_cls", None)) and _should_warm(sender.app):
        threading.Thread(target=_warm, name="litellm-warm-up", daemon=True).start()
