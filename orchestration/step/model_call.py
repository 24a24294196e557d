"""One model request on a thread of its own, so a runner can walk away from it.

An Interrupt must not wait for a slow model: the runner stops waiting at once. The request
itself cannot be cancelled (LiteLLM's call blocks), and the provider bills it all the same, so
when an abandoned request's answer arrives its cost goes to `on_abandoned` (the runner puts it
on the team's bill). Nothing else of that answer is used.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connections

from .llm import LLMClient, LLMResponse


class Interrupted(Exception):
    """A person interrupted the run while the model was thinking."""


class ModelCall:
    def __init__(
        self, llm: LLMClient, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *,
        on_abandoned: Callable[[LLMResponse], None],
    ) -> None:  # fmt: skip
        self._llm, self._messages, self._tools = llm, messages, tools
        self._on_abandoned = on_abandoned
        self._lock = threading.Lock()
        self._response: LLMResponse | None = None
        self._error: BaseException | None = None
        self._abandoned = False
        self._thread = threading.Thread(target=self._run, name="llm-call", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            response = self._llm.complete(self._messages, self._tools)
        except BaseException as exc:  # handed back to the runner's thread
            with self._lock:
                self._error = exc
            return
        with self._lock:
            self._response = response
            abandoned = self._abandoned
        if abandoned:
            try:
                self._on_abandoned(response)
            finally:
                connections.close_all()  # this thread's own, if billing opened one

    def result(self, cancel: threading.Event) -> LLMResponse:
        """The answer; raises Interrupted as soon as `cancel` is set while it is pending."""
        while self._thread.is_alive():
            self._thread.join(0.1)
            if cancel.is_set():
                with self._lock:
                    arrived, self._abandoned = self._response, self._response is None
                if arrived is not None:
                    self._on_abandoned(arrived)  # it came just now: bill it here
                raise Interrupted()
        if self._error is not None:
            raise self._error
        assert self._response is not None
        return self._response
