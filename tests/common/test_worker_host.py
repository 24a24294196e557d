"""The worker host name outlives the process and the container: it is the disk's."""

import socket

from common.worker_host import FILE_NAME, stable_worker_host


def test_a_configured_name_wins(tmp_path):
    assert stable_worker_host(tmp_path, "alpha") == "alpha"
    assert not (tmp_path / FILE_NAME).exists()


def test_the_name_is_made_once_and_kept_in_the_state_root(tmp_path):
    first = stable_worker_host(tmp_path / "state")
    assert first.startswith(socket.gethostname() + "-")
    assert (tmp_path / "state" / FILE_NAME).read_text().strip() == first
    # A restarted container (same disk, any hostname) reads the same name back.
    assert stable_worker_host(tmp_path / "state") == first


def test_an_unwritable_state_root_falls_back_to_the_hostname(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert stable_worker_host(blocker / "state") == socket.gethostname()
