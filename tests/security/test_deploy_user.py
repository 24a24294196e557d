"""Issue 23, deployment: web, worker, acp-worker, beat and migrate run as an unprivileged user,
in the image and in docker-compose.yml (so an override of the image cannot quietly make the
worker root), and nothing mounts the host's Docker socket or /var/run into them. As root, any
hole in the by-handle file layer would be an arbitrary write on the host (docs/deploy.md,
"Run as an unprivileged user")."""

from __future__ import annotations

import re

import yaml

from tests.conftest import REPO

ROOT_USERS = {"root", "0", "0:0", "root:root"}


def _dockerfile_user() -> str:
    users = re.findall(r"^USER\s+(\S+)\s*$", (REPO / "Dockerfile").read_text(), re.MULTILINE)
    assert users, "the Dockerfile never leaves root"
    return users[-1]


def test_the_image_runs_as_an_unprivileged_user() -> None:
    text = (REPO / "Dockerfile").read_text()
    user = _dockerfile_user()
    assert user not in ROOT_USERS
    assert re.search(rf"useradd\b[^\n]*\b{re.escape(user)}\b", text), "the user is made"
    assert text.rindex(f"USER {user}") < text.rindex("CMD "), "the command runs as that user"


def test_every_app_service_runs_as_that_user_and_mounts_no_host_socket() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    uid = re.search(r"--uid\s+(\d+)", (REPO / "Dockerfile").read_text()).group(1)
    apps = {name: s for name, s in compose["services"].items() if s.get("build") == "."}
    assert {"web", "worker", "beat", "migrate"} <= set(apps)
    for name, service in compose["services"].items():
        if name in apps:
            assert str(service.get("user", "")).split(":")[0] == uid, name
        for volume in service.get("volumes", []):
            source = str(volume).split(":")[0]
            assert "docker.sock" not in source and not source.startswith(("/var/run", "/run"))
            assert source != "/", name


def test_deploy_md_says_why() -> None:
    deploy = (REPO / "docs" / "deploy.md").read_text()
    section = deploy.split("### Run as an unprivileged user", 1)[1].split("\n### ", 1)[0]
    assert "never" in section and "root" in section and "docker.sock" in section
