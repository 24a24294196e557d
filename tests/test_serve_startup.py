"""`make up` prepares inside the server process: migrations only when some are pending, the
demo login when missing (canvas.startup), so a restart goes straight to serving."""

from __future__ import annotations

import subprocess
import sys

from canvas.startup import pending_migrations
from tests.conftest import REPO
from tests.test_embedded import embedded_env

PREPARE = (
    "import sys, django; django.setup()\nfrom canvas.startup import prepare\nprepare(sys.stdout)\n"
)


def test_prepare_migrates_a_new_database_then_skips_migrate(tmp_path):
    env = embedded_env(tmp_path) | {"DJANGO_SETTINGS_MODULE": "canvas.settings"}

    def prepare() -> str:
        done = subprocess.run(
            [sys.executable, "-c", PREPARE], cwd=REPO, env=env, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    first = prepare()
    assert "Applying" in first and "migration(s)" in first
    assert "Demo login: demo / demo-password" in first
    again = prepare()
    assert "Applying" not in again
    assert "Demo login: demo (password unchanged)" in again


def test_nothing_is_pending_on_a_migrated_database(db):
    assert pending_migrations() == []
