"""Usage errors of the isorag command: one line and exit status 1."""
from __future__ import annotations

import os

import pytest
from index_helpers import isorag

from isorag_pyg.store.directory import check_destination


def test_usage_errors_are_one_line_and_exit_status_1(copy):
    done = isorag("query", str(copy), "question", "-k", "abc")
    assert done.returncode == 1, done
    assert done.stderr.strip().splitlines() == ["isorag query: error: argument -k: invalid int value: 'abc'"]

def test_ports_outside_the_valid_range_are_refused(copy):
    for port in ("70000", "-1"):
        done = isorag("serve", str(copy), "--port", port)
        assert done.returncode == 1, done
        assert done.stderr.strip().splitlines()[-1] == f"isorag serve: error: port must lie between 1 and 65535 (or 0 for a free one), got {port}"


def test_an_unwritable_destination_fails_before_the_corpus_is_read(tmp_path):
    """Before: `isorag index` read and embedded the whole corpus, then found it could not save."""
    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("keep me")
    with pytest.raises(NotADirectoryError, match="cannot write there"):
        check_destination(tmp_path / "a-file" / "deeper" / "index")
    with pytest.raises(FileExistsError, match="not an isorag index"):
        check_destination(tmp_path / "taken")
    check_destination(tmp_path / "new" / "index")  # missing folders are made
    if os.geteuid() != 0:  # root may write anywhere
        (tmp_path / "locked").mkdir(mode=0o500)
        with pytest.raises(PermissionError, match="cannot write there"):
            check_destination(tmp_path / "locked" / "index")
    done = isorag("index", str(tmp_path / "no-such-corpus"), str(tmp_path / "a-file" / "index"))
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1].startswith("isorag index: error:"), done.stderr
    assert "cannot write there" in done.stderr and "no such file" not in done.stderr  # the destination first, the corpus never read


@pytest.mark.slow
def test_a_build_warning_is_printed_once(tmp_path):
    """Before: "passages have no edge" was logged by the build and printed again with the statistics."""
    (tmp_path / "docs").mkdir()
    for word in ("alpha", "beta", "gamma", "delta", "epsilon", "zeta"):
        (tmp_path / "docs" / f"{word}.txt").write_text(f"the {word} is quiet here and there today.")
    done = isorag("index", str(tmp_path / "docs"), str(tmp_path / "index"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert (done.stdout + done.stderr).count("of passages have no edge") == 1, (done.stdout, done.stderr[-2000:])
