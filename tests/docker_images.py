"""Test images for the Docker workspace, built on this machine without any registry.

`canvas-test/busybox:1` is a rootfs imported with `docker import`: Debian's busybox-static
(every applet as a link) and bash-static as /bin/bash, an /etc/passwd with root and a non-root
`agent` (uid 1000), and /tmp. The image's USER is `agent`, its CMD `sleep infinity`. Built once
per engine and found by tag afterwards (bump the tag when the recipe changes). Builds hold a
file lock, so two xdist workers (or two test runs) never import the same image at once.

When no engine answers this raises: Docker tests fail loudly, they are never skipped.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import io
import shutil
import subprocess
import tarfile
import time

import docker
import docker.errors

from tests.marks import require

TEST_IMAGE = "canvas-test/busybox:1"
_BUSYBOX = "/bin/busybox"
_BASH = "/bin/bash-static"
_PACKAGES = ("busybox-static", "bash-static")
_PASSWD = (
    "root:x:0:0:root:/root:/bin/bash\n"
    "agent:x:1000:1000:agent:/home/agent:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
)
_GROUP = "root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n"
_LOCK = "/tmp/canvas-test-docker-images.lock"


@contextlib.contextmanager
def _building():
    """One build at a time on this machine (xdist workers, parallel runs)."""
    with open(_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def test_image() -> str:
    """The test image's tag, built if the engine does not have it yet (a `docker` test)."""
    require("docker")
    return _test_image()


@functools.cache
def _test_image() -> str:
    client = docker.from_env()
    try:
        client.ping()
    except docker.errors.DockerException as exc:
        raise RuntimeError(f"no Docker engine answers: {exc}") from exc
    try:
        with _building():
            _import_missing(client, TEST_IMAGE, None)
    finally:
        client.close()
    return TEST_IMAGE


def _import_missing(client, tag: str, extra: dict[str, bytes] | None) -> None:
    """Import `tag` (the rootfs plus `extra`) unless the engine has it; call under the lock."""
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        repository, version = tag.rsplit(":", 1)
        client.api.import_image_from_data(
            _rootfs_tar(extra),
            repository=repository,
            tag=version,
            changes=["USER agent", "WORKDIR /", 'CMD ["sleep", "infinity"]'],
        )
        client.images.get(tag)  # raises if the import did not produce it


test_image.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test to collect


def test_image_with(name: str, files: tuple[tuple[str, bytes], ...]) -> str:
    """The test image plus `files` (path in the image, content; executable), tagged
    `canvas-test/NAME:<digest of the files>` so a changed file makes a new image."""
    require("docker")
    return _test_image_with(name, files)


@functools.cache
def _test_image_with(name: str, files: tuple[tuple[str, bytes], ...]) -> str:
    digest = hashlib.sha256(repr(files).encode()).hexdigest()[:12]
    tag = f"canvas-test/{name}:{digest}"
    client = docker.from_env()
    try:
        client.ping()
    except docker.errors.DockerException as exc:
        raise RuntimeError(f"no Docker engine answers: {exc}") from exc
    try:
        with _building():
            _import_missing(client, tag, dict(files))
    finally:
        client.close()
    return tag


test_image_with.__test__ = False  # type: ignore[attr-defined]


def _ensure_packages() -> None:
    if shutil.which(_BUSYBOX) and shutil.which(_BASH):
        return
    subprocess.run(["apt-get", "update", "-q"], check=True, timeout=600)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *_PACKAGES],
        check=True,
        timeout=600,
    )


def _rootfs_tar(extra: dict[str, bytes] | None = None) -> bytes:
    """The image's whole file system as an uncompressed tar, built in memory (about 5 MB),
    with `extra` files (executable; their missing directories made)."""
    _ensure_packages()
    applets = subprocess.run(
        [_BUSYBOX, "--list-full"], capture_output=True, text=True, check=True
    ).stdout.split()
    buffer = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buffer, mode="w") as tar:

        def add_dir(name: str, mode: int = 0o755, uid: int = 0) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, mode, now
            info.uid = info.gid = uid
            tar.addfile(info)

        def add_file(name: str, data: bytes, mode: int = 0o644) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, now
            tar.addfile(info, io.BytesIO(data))

        def add_link(name: str, target: str) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.mode, info.mtime = tarfile.SYMTYPE, target, 0o777, now
            tar.addfile(info)

        for name in ("bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "root", "home"):
            add_dir(name, 0o700 if name == "root" else 0o755)
        add_dir("home/agent", 0o755, uid=1000)
        add_dir("tmp", 0o1777)
        with open(_BUSYBOX, "rb") as f:
            add_file("bin/busybox", f.read(), 0o755)
        with open(_BASH, "rb") as f:
            add_file("bin/bash", f.read(), 0o755)
        for applet in applets:
            if applet in ("bin/busybox", "bin/bash", "bin/sh"):
                continue
            depth = applet.count("/")
            add_link(applet, "../" * depth + "bin/busybox")
        add_link("bin/sh", "bash")
        add_file("etc/passwd", _PASSWD.encode())
        add_file("etc/group", _GROUP.encode())
        made = {"bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "root", "home", "tmp"}
        for path, data in (extra or {}).items():
            parts = path.strip("/").split("/")
            for depth in range(1, len(parts)):
                directory = "/".join(parts[:depth])
                if directory not in made:
                    add_dir(directory)
                    made.add(directory)
            add_file("/".join(parts), data, 0o755)
    return buffer.getvalue()
