"""The `isorag` console script, run as a user runs it: index a folder, query it, inspect it; errors."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = {
    "velmora.md": "# Velmora\n\nVelmora is a film directed by Dara Quen.\n\nIt premiered in 1984.",
    "people/dara.md": "# Dara Quen\n\nDara Quen was born in Kostrov. She studied at Brill University.",
    "places/Kostrov.txt": "Kostrov is a city in Aldania, known for its silver market.",
    "places/aldania.md": "# Aldania\n\nAldania is a country. Its flag is green.",
    "notes.pdf": "ignored",
}


def isorag(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ISORAG_DEBUG"}
    return subprocess.run([sys.executable, "-m", "isorag_pyg.cli", *args], check=False, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    for name, text in DOCS.items():
        (root / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / name).write_text(text)
    done = isorag("index", str(root / "docs"), str(root / "index"), "--epochs", "2", "--p", "1", "--ann", "hnsw", "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "4 passages" in done.stdout and "[INFO]" not in done.stdout and "Traceback" not in done.stderr
    # the automatic graph: every file's title quoted in another, so title mentions carry it alone; its statistics in words
    assert "graph (title_mention): 4 passages, " in done.stdout and "largest hubs: " in done.stdout
    return root / "index"


@pytest.mark.slow
def test_query_prints_ranked_passages_and_json(built):
    done = isorag("query", str(built), "Where was the director of Velmora born?", "Which country is Kostrov in?", "-k", "3", "--json", "--timings")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["question"] for line in lines] == ["Where was the director of Velmora born?", "Which country is Kostrov in?"]
    for line in lines:
        assert len(line["results"]) == 3 and set(line["results"][0]) == {"id", "title", "text", "score"}
        scores = [r["score"] for r in line["results"]]
        assert scores == sorted(scores, reverse=True)
    assert {"velmora.md#0", "people/dara.md#0"} & {r["id"] for r in lines[0]["results"][:2]}
    timings = json.loads(done.stderr.strip().splitlines()[-1])
    assert {"imports_s", "load_s", "model_s", "retrieval_s", "total_s"} <= set(timings)
    plain = isorag("query", str(built), "Aldania flag", "-k", "1", "--retriever", "bm25")
    assert plain.returncode == 0 and plain.stdout.startswith("Q: Aldania flag") and "Aldania" in plain.stdout


@pytest.mark.slow
def test_info_shows_manifest_and_statistics(built):
    done = isorag("info", str(built))
    assert done.returncode == 0, done.stderr[-2000:]
    info = json.loads(done.stdout)
    assert info["counts"]["passages"] == 4 and info["graph"]["statistics"]["edges"] >= 3
    assert "of passages isolated" in done.stderr and info["graph"]["statistics"]["largest_hubs"]
    assert info["f_theta"]["config"]["trainer"]["max_epochs"] == 2 and info["phi"]["p"] == 1.0
    assert info["ann"]["kind"] == "hnsw" and info["ann"]["params"]["M"] > 0


@pytest.mark.slow
def test_errors_are_one_line_and_a_non_zero_exit(built, tmp_path):
    (tmp_path / "empty").mkdir()
    corrupt = Path(shutil.copytree(built, tmp_path / "corrupt"))
    (corrupt / "tensors.safetensors").write_bytes((corrupt / "tensors.safetensors").read_bytes()[:-5])
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "mine.txt").write_text("keep me")
    cases = [
        (("index", str(tmp_path / "nowhere"), str(tmp_path / "out")), "no such file or folder"),
        (("index", str(tmp_path / "empty"), str(tmp_path / "out")), "no passages found"),
        (("index", str(built.parent / "docs"), str(tmp_path / "plain"), "--p", "0"), "not an isorag index"),
        (("index", str(built.parent / "docs"), str(tmp_path / "out"), "--graph", "nope", "--p", "0"), "unknown graph builder"),
        (("query", str(tmp_path / "missing"), "q"), "no such index directory"),
        (("query", str(corrupt), "q"), "truncated"),
        (("query", str(built), "q", "-k", "0"), "k must be"),
        (("query", str(built), "q", "--retriever", "nope"), "unknown retriever"),
        (("info", str(tmp_path / "plain")), "not an isorag index"),
    ]
    for args, message in cases:
        done = isorag(*args)
        assert done.returncode != 0, args
        assert message in done.stderr and "Traceback" not in done.stderr, (args, done.stderr[-1500:])
        assert done.stderr.strip().splitlines()[-1].startswith(f"isorag {args[0]}: error:"), done.stderr
    assert (tmp_path / "plain" / "mine.txt").read_text() == "keep me"


@pytest.mark.slow
def test_add_and_remove_update_the_saved_index(built, tmp_path):
    index_dir = Path(shutil.copytree(built, tmp_path / "index"))
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "brill.md").write_text("# Brill University\n\nBrill University lies in Kostrov, Aldania.")
    done = isorag("add", str(index_dir), str(tmp_path / "more"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "1 passages added" in done.stdout and "5 passages" in done.stdout
    version = json.loads(isorag("info", str(index_dir)).stdout)["generation"]
    done = isorag("add", str(index_dir), str(tmp_path / "more"))  # nothing new: no new version written
    assert done.returncode == 0 and "0 passages added" in done.stdout and f"(version {version}, unchanged)" in done.stdout
    assert json.loads(isorag("info", str(index_dir)).stdout)["generation"] == version
    # the added passage is retrievable (third: Dara's passage names both Brill and Kostrov, and Brill names Kostrov too,
    # so the walk, which follows those mentions forwards and barely back, gathers more at Kostrov)
    hits = json.loads(isorag("query", str(index_dir), "Which university did Dara Quen attend?", "-k", "3", "--json").stdout)
    assert "brill.md#0" in {r["id"] for r in hits["results"]}
    done = isorag("remove", str(index_dir), "brill.md#0", "notes.pdf")
    assert done.returncode == 1 and "no passage with id 'notes.pdf'" in done.stderr  # nothing removed, nothing saved
    done = isorag("remove", str(index_dir), "brill.md#0")
    assert done.returncode == 0 and "1 removed" in done.stdout and "4 passages" in done.stdout
    done = isorag("add", str(index_dir), str(tmp_path / "more" / "brill.md"))  # one document: the id its folder gave it
    assert done.returncode == 0 and "1 passages added" in done.stdout, done.stderr[-2000:]
    info = json.loads(isorag("info", str(index_dir)).stdout)
    assert info["counts"]["passages"] == 5
    assert isorag("remove", str(index_dir), "brill.md#0").returncode == 0


def test_add_splits_new_documents_with_the_token_budget_the_index_was_built_with(tmp_path):
    sentences = " ".join(f"Sentence {i} names Kostrov and Aldania again." for i in range(12))
    for folder in ("docs", "more"):
        (tmp_path / folder).mkdir()
    (tmp_path / "docs" / "a.md").write_text(sentences)
    (tmp_path / "more" / "b.md").write_text(sentences.replace("Kostrov", "Velmora"))
    assert isorag("index", str(tmp_path / "docs"), str(tmp_path / "index"), "--max-tokens", "30", "--p", "0", "--quiet").returncode == 0
    info = json.loads(isorag("info", str(tmp_path / "index")).stdout)
    assert info["max_tokens"] == 30 and info["counts"]["passages"] > 1
    done = isorag("add", str(tmp_path / "index"), str(tmp_path / "more"))  # no --max-tokens: the index's 30, not the default 200
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{info['counts']['passages']} passages added" in done.stdout


@pytest.mark.slow
def test_tune_reports_and_dry_run_stores_nothing(built, tmp_path):
    index_dir = Path(shutil.copytree(built, tmp_path / "index"))
    questions = [("Who directed Velmora?", ["velmora.md#0", "people/dara.md#0"]), ("Where was Dara Quen born?", ["people/dara.md#0"]),
                 ("Which country is Kostrov in?", ["places/Kostrov.txt#0", "places/aldania.md#0"]), ("What colour is Aldania's flag?", ["places/aldania.md#0"])]
    (tmp_path / "q.jsonl").write_text("\n".join(json.dumps({"question": q, "gold_ids": g}) for q, g in questions))
    before = (index_dir / "manifest.json").read_bytes()
    done = isorag("tune", str(index_dir), str(tmp_path / "q.jsonl"), "--grid", "beta=0.01,0.5", "--dry-run")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "4 questions" in done.stdout and "cross-validated held out" in done.stdout and "stored" not in done.stdout.replace("not stored", "")
    assert (index_dir / "manifest.json").read_bytes() == before
    done = isorag("tune", str(index_dir), str(tmp_path / "missing.jsonl"))
    assert done.returncode == 1 and "missing.jsonl" in done.stderr


def test_console_script_is_installed():
    script = shutil.which("isorag", path=str(Path(sys.executable).parent))
    assert script is not None
    done = subprocess.run([script, "--help"], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "index" in done.stdout and "query" in done.stdout
