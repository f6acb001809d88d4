"""Usage errors of the isorag command: one line and exit status 1."""
from __future__ import annotations

from index_helpers import isorag


def test_usage_errors_are_one_line_and_exit_status_1(copy):
    done = isorag("query", str(copy), "question", "-k", "abc")
    assert done.returncode == 1, done
    assert done.stderr.strip().splitlines() == ["isorag query: error: argument -k: invalid int value: 'abc'"]

def test_ports_outside_the_valid_range_are_refused(copy):
    for port in ("70000", "-1"):
        done = isorag("serve", str(copy), "--port", port)
        assert done.returncode == 1, done
        assert done.stderr.strip().splitlines()[-1] == f"isorag serve: error: port must lie between 1 and 65535 (or 0 for a free one), got {port}"
