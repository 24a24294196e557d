"""The web process must stay small: LiteLLM (seconds and ~200 MB) is for workers only. It runs
no hook either (they run on workers, with the agent's sandbox)."""

import subprocess
import sys

from tests.conftest import REPO

PROBE = """
import sys
import django
django.setup()
from django.urls import get_resolver
import canvas.asgi
import canvas.views, canvas.api, canvas.consumers
get_resolver().url_patterns  # import every view module the URLconf names
from django.test import Client
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {"litellm", "openai", "tiktoken"})
# Hooks run on workers only (UserPromptSubmit too): the web process cannot even import them.
heavy += sorted(m for m in sys.modules if m in {"orchestration.control.hooks", "orchestration.control.hook_points"})
# Nor the agent's step (LiteLLM itself is checked above; these would pull it in on first use).
heavy += sorted(m for m in sys.modules if m in {"orchestration.step.llm", "orchestration.step.runner"})
print(",".join(heavy) or "clean")
"""


def test_web_process_never_imports_litellm():
    env = {
        "DJANGO_SETTINGS_MODULE": "canvas.settings",
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/canvas",
        "REDIS_URL": "redis://127.0.0.1:6379/5",
        "SECRET_KEY": "test-web-imports-not-a-secret",
        "PATH": "/usr/bin:/bin",
    }
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "clean"
