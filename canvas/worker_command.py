"""`celery -A canvas worker -P prefork` runs prefork (issue 25).

The project's default pool is threads (CELERY_WORKER_POOL, from CANVAS_WORKER_POOL). Celery's
`-P` option itself defaults to "prefork", and its converter (`celery.bin.worker.WorkersPool`)
cannot tell that default from a typed `-P prefork`: both yield to the configured pool, so the
flag was silently ignored (any other `-P` value already won). click records where each value
came from, so a pool named on the command line now wins; the default still yields to the
configuration. The slots follow the pool named (`default_slots`).
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

THREADS_SLOTS = 32
"""The threads pool's slots per process (docs/deploy.md, "Workers")."""


def default_slots(pool: str) -> int | None:
    """Slots per process when nothing sets them: threads' 32, or Celery's own default for a
    process pool, one process per core. On a busy 2-core machine 32 prefork processes, each
    loading LiteLLM, took 293 s to be ready and 13 s to stop when idle; 2 took 15-25 s and
    4-8 s."""
    return THREADS_SLOTS if pool == "threads" else None


def honour_the_pool_flag() -> None:
    """Patch the worker command's `-P` converter; only where the `celery` command line loaded
    it, so no other process pays for importing it (idempotent)."""
    command = sys.modules.get("celery.bin.worker")
    if command is None or getattr(command.WorkersPool, "_canvas_patched", False):
        return
    pool_type = command.WorkersPool
    pool_type.convert = _typed_pool_wins(pool_type.convert)
    pool_type._canvas_patched = True


def _typed_pool_wins(convert: Any) -> Any:
    @functools.wraps(convert)
    def converted(self: Any, value: Any, param: Any, ctx: Any) -> Any:
        from click.core import ParameterSource

        typed = (
            isinstance(value, str)
            and ctx is not None
            and param is not None
            and ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE
        )
        if not typed:
            return convert(self, value, param, ctx)
        import click
        from celery import concurrency

        # click.Choice's own check: an unknown name is still a usage error.
        name = click.Choice.convert(self, value, param, ctx)
        if not os.environ.get("CANVAS_WORKER_CONCURRENCY"):
            # Without `-c` (read after a typed `-P`: click takes typed options first), the
            # slots follow the pool typed, not the one configured.
            ctx.obj.app.conf.worker_concurrency = default_slots(name)
        return concurrency.get_implementation(name)

    return converted
