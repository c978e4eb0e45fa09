"""Files written atomically get the mode the user's umask gives, like any other new file.

The atomic write (temporary file in the same folder, fsync, rename) must not
leak the temporary file's private 0600 mode into results, checkpoints or
tables, and must leave no temporary file behind.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager

import pytest
import torch

from dfl_core.checkpoint import FORMAT, save_atomic, write_atomic
from dfl_core.results import History, read_results, write_results


@contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def only_files(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_results_checkpoints_and_raw_writes_follow_the_umask(tmp_path, mask, expected):
    history = History(config={"algorithm": "dfedavg", "seed": 0}, records=[{"round": 0, "test_acc": 0.5}])
    with umask(mask):
        results = write_results(tmp_path / "results.json", [history], command="python -m dfl_core run")
        checkpoint = save_atomic({"format": FORMAT, "t": 1, "x": torch.ones(3)}, tmp_path / "run.pt")
        raw = write_atomic(tmp_path / "raw.bin", b"\x00\x01")
        written = write_atomic(tmp_path / "called.txt", lambda f: f.write(b"hello"))
    assert {p.name: mode(p) for p in (results, checkpoint, raw, written)} == {
        "results.json": expected,
        "run.pt": expected,
        "raw.bin": expected,
        "called.txt": expected,
    }
    assert read_results(results)[0].records == history.records
    assert raw.read_bytes() == b"\x00\x01" and written.read_text() == "hello"
    assert only_files(tmp_path) == ["called.txt", "raw.bin", "results.json", "run.pt"]  # no temp files


def test_an_overwrite_takes_the_umask_mode_and_replaces_the_content(tmp_path):
    with umask(0o077):
        write_atomic(tmp_path / "f", b"old")
    assert mode(tmp_path / "f") == 0o600
    with umask(0o022):
        write_atomic(tmp_path / "f", b"new")
    assert mode(tmp_path / "f") == 0o644 and (tmp_path / "f").read_bytes() == b"new"


def test_a_failing_writer_leaves_the_old_file_and_no_temporary_file(tmp_path):
    write_atomic(tmp_path / "f", b"old")

    def fail(f):
        f.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_atomic(tmp_path / "f", fail)
    assert (tmp_path / "f").read_bytes() == b"old" and only_files(tmp_path) == ["f"]


def test_table_progress_records_follow_the_umask(tmp_path):
    from dfl_core.config import Config
    from dfl_book.tables import _Done

    with umask(0o022):
        done = _Done(tmp_path)
        done.put("dfedavg-iid-seed0", Config(), 91.5, 12.0)
    assert mode(tmp_path / "done.json") == 0o644 and only_files(tmp_path) == ["done.json"]
    assert _Done(tmp_path).get("dfedavg-iid-seed0", Config()) == 91.5
    assert _Done(tmp_path).cpu_time("dfedavg-iid-seed0") == 12.0
