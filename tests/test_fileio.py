"""sif.fileio: only regular files are opened, never blocking on a FIFO."""

from __future__ import annotations

import os

import pytest

from sif.fileio import NotRegularFile, open_regular, open_regular_file


def test_regular_file_opens(tmp_path):
    p = tmp_path / "a"
    p.write_bytes(b"hello")
    f, st = open_regular_file(p)
    with f:
        assert f.read() == b"hello"
    assert st.st_size == 5


def test_fifo_is_refused_without_blocking(tmp_path):
    p = tmp_path / "fifo"
    os.mkfifo(p)
    with pytest.raises(NotRegularFile, match="FIFO"):
        open_regular(p)


def test_device_and_directory_refused(tmp_path):
    with pytest.raises(NotRegularFile, match="character device"):
        open_regular("/dev/zero")
    with pytest.raises(NotRegularFile, match="directory"):
        open_regular(tmp_path)


def test_symlink_refused_when_not_following(tmp_path):
    (tmp_path / "t").write_bytes(b"x")
    os.symlink(tmp_path / "t", tmp_path / "l")
    fd, _ = open_regular(tmp_path / "l")
    os.close(fd)
    with pytest.raises(NotRegularFile, match="symbolic link"):
        open_regular(tmp_path / "l", follow_symlinks=False)


def test_replaced_file_refused(tmp_path):
    p = tmp_path / "a"
    p.write_bytes(b"one")
    st = p.stat()
    p.unlink()
    (tmp_path / "b").write_bytes(b"two")  # may take a.'s inode: write a new one first
    p.write_bytes(b"one")
    if (p.stat().st_dev, p.stat().st_ino) == (st.st_dev, st.st_ino):
        pytest.fail("the file system reused the inode; the test cannot tell")
    with pytest.raises(NotRegularFile, match="replaced"):
        open_regular(p, expect=(st.st_dev, st.st_ino))
    fd, _ = open_regular(p, expect=(p.stat().st_dev, p.stat().st_ino))
    os.close(fd)
