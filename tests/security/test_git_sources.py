"""Git sources (issue 23, item 8): https only unless the site allows http, no redirect
followed, and git held to the addresses the outbound guard checked.

The end-to-end tests serve a real repository over git's dumb http protocol from 127.0.0.1
(tests/http_server.py), with loopback let through the guard as a site would list a private
range (CANVAS_ALLOWED_PRIVATE_NETWORKS). The pinning test names the server by a host name that
does not resolve anywhere (.test is reserved): only the guard's resolver is taught it, so the
clone succeeds only if git connects to the address the guard checked.
"""

from __future__ import annotations

import functools
import subprocess
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

import pytest

from common import netguard
from tests.http_server import QuietHandler, serving
from tests.workspaces.test_sources import files, git, make_repo
from workspaces import sources
from workspaces.sources import SourceError, source_check, source_fill
from workspaces.spec import GitSource

UNRESOLVABLE = "git.canvas.test"


@pytest.fixture
def loopback_allowed(settings):
    settings.CANVAS_ALLOWED_PRIVATE_NETWORKS = ["127.0.0.0/8"]


@pytest.fixture
def served(tmp_path: Path):
    """A bare repository (main: a.txt, b.txt) served over dumb http; its base URL's port."""
    work = tmp_path / "work"
    make_repo(work)
    bare = tmp_path / "served" / "repo.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    git(bare, "update-server-info")
    handler = functools.partial(_Quiet, directory=str(tmp_path / "served"))
    with serving(handler) as port:  # type: ignore[arg-type]
        yield port


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def _fill(tmp_path: Path, url: str) -> Path:
    root, state = tmp_path / "root", tmp_path / "state"
    state.mkdir(exist_ok=True)
    source_fill(root, state, GitSource(repo=url), named={}, local_roots=[])
    return root


# -- http ------------------------------------------------------------------------------------


def test_plain_http_is_refused_by_default_with_a_clear_message(tmp_path, settings):
    settings.CANVAS_GIT_ALLOW_HTTP = False
    with pytest.raises(SourceError) as caught:
        source_check(GitSource(repo="http://example.com/r.git"), named={}, local_roots=[])
    assert "plain http is refused" in caught.value.message
    assert "use an https URL" in caught.value.message
    assert "CANVAS_GIT_ALLOW_HTTP" in caught.value.message
    with pytest.raises(SourceError, match="plain http is refused"):  # and again at the runner
        _fill(tmp_path, "HTTP://example.com/r.git")


def test_https_passes_the_check(settings):
    settings.CANVAS_GIT_ALLOW_HTTP = False
    source_check(GitSource(repo="https://example.com/r.git"), named={}, local_roots=[])


def test_http_clones_when_the_site_allows_it(tmp_path, settings, loopback_allowed, served):
    settings.CANVAS_GIT_ALLOW_HTTP = True
    root = _fill(tmp_path, f"http://127.0.0.1:{served}/repo.git")
    assert files(root) == ["a.txt", "b.txt"]


def test_without_the_setting_git_itself_refuses_http(tmp_path, settings):
    settings.CANVAS_GIT_ALLOW_HTTP = False
    assert "protocol.http.allow=never" in sources.clone_config(None)
    settings.CANVAS_GIT_ALLOW_HTTP = True
    assert "protocol.http.allow=always" in sources.clone_config(None)


# -- redirects -------------------------------------------------------------------------------


def test_a_redirect_to_another_host_is_refused(tmp_path, settings, loopback_allowed, served):
    settings.CANVAS_GIT_ALLOW_HTTP = True
    hits: list[str] = []

    class Redirect(QuietHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            hits.append(self.path)
            self.send_response(302)
            # Another host name for the served repository: it would clone fine if followed.
            self.send_header("Location", f"http://localhost:{served}{self.path}")
            self.end_headers()

    with serving(Redirect) as port, pytest.raises(SourceError) as caught:
        _fill(tmp_path, f"http://127.0.0.1:{port}/repo.git")
    assert hits, "git never asked the redirecting server"
    assert "redirect, which is not followed" in caught.value.message
    assert not (tmp_path / "root" / "a.txt").exists()


# -- pinning ---------------------------------------------------------------------------------


def test_git_connects_to_the_address_the_guard_checked(
    tmp_path, settings, loopback_allowed, served, monkeypatch
):
    settings.CANVAS_GIT_ALLOW_HTTP = True
    asked: list[str] = []

    def resolve(host: str, port: int) -> tuple[str, ...]:
        asked.append(host)
        assert host == UNRESOLVABLE
        return ("127.0.0.1",)

    monkeypatch.setattr(netguard, "_resolve", resolve)
    root = _fill(tmp_path, f"http://{UNRESOLVABLE}:{served}/repo.git")
    assert asked == [UNRESOLVABLE]  # resolved once, by the guard; git used that answer
    assert files(root) == ["a.txt", "b.txt"]


def test_a_name_the_guard_refuses_is_never_handed_to_git(tmp_path, settings, monkeypatch):
    settings.CANVAS_GIT_ALLOW_HTTP = False
    monkeypatch.setattr(netguard, "_resolve", lambda host, port: ("10.1.2.3",))
    ran: list[list[str]] = []
    monkeypatch.setattr(sources.subprocess, "run", lambda argv, **kw: ran.append(argv))
    with pytest.raises(SourceError, match="resolves to 10.1.2.3, a private address"):
        _fill(tmp_path, "https://git.example.com/r.git")
    assert [argv for argv in ran if "clone" in argv] == []


def test_the_clone_argv_pins_every_checked_address_and_follows_no_redirect(
    tmp_path, settings, monkeypatch
):
    settings.CANVAS_GIT_ALLOW_HTTP = False
    addresses = ("93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c")
    monkeypatch.setattr(netguard, "_resolve", lambda host, port: addresses)
    ran: list[list[str]] = []

    def fake_run(argv, **kwargs):
        ran.append(argv)
        if "clone" in argv:
            raise subprocess.TimeoutExpired(argv, 1)  # stop here: no network in this test
        out = "git version 2.39.5\n"  # the version probe, unless an earlier test cached it
        return subprocess.CompletedProcess(
            argv, 0, *((out, "") if kwargs.get("text") else (out.encode(), b""))
        )

    monkeypatch.setattr(sources.subprocess, "run", fake_run)
    sources._git_version.cache_clear()  # the probe runs through fake_run in any test order
    with pytest.raises(SourceError, match="took longer"):
        _fill(tmp_path, "https://Git.Example.com/team/r.git")
    (clone,) = [argv for argv in ran if "clone" in argv]
    settings_given = [clone[i + 1] for i, arg in enumerate(clone) if arg == "-c"]
    assert (
        "http.curloptResolve=git.example.com:443:93.184.215.14,"
        "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]"
    ) in settings_given
    assert "http.followRedirects=false" in settings_given
    assert "protocol.http.allow=never" in settings_given
    assert "protocol.allow=never" in settings_given
    # An argv list, the URL after "--", never a shell string.
    assert clone[clone.index("--") + 1] == "https://Git.Example.com/team/r.git"


def test_an_old_git_that_cannot_pin_is_refused(tmp_path, settings, monkeypatch):
    monkeypatch.setattr(netguard, "_resolve", lambda host, port: ("93.184.215.14",))
    monkeypatch.setattr(sources, "_git_version", lambda: (2, 30))
    with pytest.raises(SourceError, match="needs git 2.37 or later"):
        _fill(tmp_path, "https://git.example.com/r.git")
