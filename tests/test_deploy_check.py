"""`manage.py check --deploy` passes with the documented production settings."""

import os
import secrets
import subprocess
import sys

from tests.conftest import REPO


def test_check_deploy_passes_with_production_settings():
    env = {
        **os.environ,
        "SECRET_KEY": secrets.token_urlsafe(60),
        "CANVAS_HTTPS": "true",
        "DEBUG": "false",
        "ALLOWED_HOSTS": "canvas.example.com",
        "CSRF_TRUSTED_ORIGINS": "https://canvas.example.com",
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/canvas",
        "REDIS_URL": "redis://127.0.0.1:6379/5",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
