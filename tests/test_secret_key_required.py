"""Outside the embedded mode the server refuses to start without SECRET_KEY: the fallback key
is public, so sessions, CSRF tokens and the derived secrets key would be forgeable."""

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

SERVICE_VARIABLES = [
    {"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/canvas"},
    {"REDIS_URL": "redis://127.0.0.1:6379/5"},
]


def _check(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _without(*names: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in names}


@pytest.mark.parametrize("service", SERVICE_VARIABLES, ids=lambda s: next(iter(s)))
def test_a_server_with_services_refuses_to_start_without_secret_key(service, tmp_path):
    base = _without("SECRET_KEY", "DATABASE_URL", "REDIS_URL")
    result = _check({**base, **service, "CANVAS_VAR_DIR": str(tmp_path)})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "SECRET_KEY is not set" in result.stderr
    # An empty value is no key either.
    result = _check({**base, **service, "SECRET_KEY": "", "CANVAS_VAR_DIR": str(tmp_path)})
    assert result.returncode != 0 and "SECRET_KEY is not set" in result.stderr


def test_the_embedded_mode_still_starts_without_one(tmp_path):
    base = _without("SECRET_KEY", "DATABASE_URL", "REDIS_URL")
    result = _check({**base, "CANVAS_VAR_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
