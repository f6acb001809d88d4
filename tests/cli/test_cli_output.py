"""What the isorag command writes where: the answer alone on stdout, progress on stderr as bars on
a terminal and as plain lines in a pipe or file (no carriage return, no escape code), library
logs as one line each (-v for INFO, -q for errors only), no library warning a user cannot act on."""
from __future__ import annotations

import json

import pytest
from index_helpers import isorag

from isorag_pyg import progress as progress_module
from isorag_pyg.progress import LineProgress, progress

#: transformers prints this on import where WANDB_MODE=offline (as the tests set it): not ours to silence.
WANDB_NOTICE = "[INFO] Running in WANDB offline mode\n"
DOCS = {"velmora.md": "# Velmora\n\nVelmora is a film directed by Dara Quen.", "dara.md": "# Dara Quen\n\nDara Quen was born in Kostrov.",
        "kostrov.md": "# Kostrov\n\nKostrov is a city in Aldania, where Velmora premiered."}


def test_off_a_terminal_progress_is_plain_lines_at_stage_changes_counts_and_the_end(capsys, monkeypatch):
    monkeypatch.setattr(progress_module, "interactive", lambda: False)
    clock = iter([0.0, 0.0, 0.5, 12.0, 12.0, 30.0, 31.0])
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: next(clock))
    with progress(total=3, desc="index") as stages:
        assert isinstance(stages, LineProgress)
        stages.set_postfix_str("encoding passages")
        stages.update()  # within the interval: nothing
        stages.set_postfix_str("encoding passages")  # the same stage: nothing
        stages.update()  # 11 s since the last line: a record
        stages.set_postfix_str("φ")
        stages.update()
    assert capsys.readouterr().err.splitlines() == ["index: encoding passages (0/3, 0.0 s)", "index: encoding passages (2/3, 12.0 s)",
                                                    "index: φ (2/3, 30.0 s)", "index: done (3/3, 31.0 s)"]
    assert list(progress(range(3), desc="answers", enabled=False)) == [0, 1, 2] and capsys.readouterr().err == ""


def test_query_writes_only_its_answer_to_stdout_and_nothing_else_unless_asked(copy):
    question = "Which town is known for craft number 5?"
    done = isorag("query", str(copy), question, "-k", "2", "--json", "-v", "--timings")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["question"] for line in done.stdout.splitlines()] == [question]  # logs never reach stdout
    assert "isorag: INFO: " in done.stderr
    assert json.loads(done.stderr.splitlines()[-1])["threads"] == 1  # retrieval on one thread unless --threads says otherwise
    refused = isorag("query", str(copy), question, "--threads", "0")
    assert refused.returncode == 1 and refused.stderr.strip().splitlines()[-1] == "isorag query: error: --threads must be >= 1, got 0"
    quiet = isorag("query", str(copy), question, "-k", "2")
    assert quiet.returncode == 0 and quiet.stdout.startswith(f"Q: {question}")
    assert quiet.stderr in ("", WANDB_NOTICE)  # no library warning (torch's sparse CSR note, Lightning's, HF's), no progress


@pytest.mark.slow
def test_index_into_a_file_leaves_plain_progress_lines_and_no_terminal_codes(tmp_path):
    for name, text in DOCS.items():
        (tmp_path / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "docs" / name).write_text(text)
    done = isorag("index", str(tmp_path / "docs"), str(tmp_path / "index"), "--p", "1", "--epochs", "1")  # f_θ too: Lightning
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr and "\x1b" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if f"{line}\n" != WANDB_NOTICE]
    assert "index: done (4/4" in done.stderr and all(line.split(":")[0] in ("index", "encoding", "query encoder") for line in lines), lines
    assert "3 passages" in done.stdout
    quiet = isorag("index", str(tmp_path / "docs"), str(tmp_path / "again"), "--p", "1", "--epochs", "1", "-q")
    assert quiet.returncode == 0 and quiet.stderr in ("", WANDB_NOTICE)
