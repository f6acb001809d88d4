"""schemathesis, a property-based fuzzer, against the running server's own OpenAPI schema:
every operation, positive and negative requests, every check (no 5xx, status codes, content
types, headers and bodies as the schema states them, schema-valid requests accepted and invalid
ones refused, requests without the API key refused)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_server import Server

KEY = "fuzzing-key-0123456789"


@pytest.mark.slow
def test_schemathesis_finds_no_failure_in_over_a_thousand_generated_requests(saved, tmp_path, monkeypatch):
    monkeypatch.setenv("ISORAG_API_KEY", KEY)
    server = Server(saved, tmp_path / "serve.log", "--max-questions", "8", "--max-question-chars", "400", "--max-k", "25").ready()
    report = tmp_path / "report.json"
    try:
        run = subprocess.run(
            [sys.executable, "-c", "import sys; from schemathesis.cli import schemathesis; sys.exit(schemathesis())", "run",
             f"{server.url}/openapi.json", "--header", f"Authorization: Bearer {KEY}", "--checks", "all", "--max-examples", "700",
             "--workers", "1", "--seed", "20261205", "--generation-database", "none", "--no-color", "--report", "json",
             "--report-json-path", str(report), "--request-timeout", "60"],
            capture_output=True, text=True, timeout=1500, check=False, cwd=tmp_path)
        outcome = json.loads(report.read_text())
        assert run.returncode == 0 and outcome["exit_code"] == 0, run.stdout[-4000:]
        assert outcome["operations"]["tested"] == outcome["operations"]["total"] == 4  # /retrieve, /reload, /health, /info
        cases = outcome["test_cases"]
        print(f"schemathesis {outcome['schemathesis_version']}: {cases['generated']} test cases generated, {cases['with_failures']} failing, "
              f"{len(outcome['errors'])} errors, in {outcome['running_time']:.0f} s")
        assert cases["generated"] >= 1000 and cases["with_failures"] == cases["errored"] == 0, cases
        assert outcome["failures"] == [] and outcome["errors"] == []
        assert server.process.poll() is None and server.stats()["failed_requests"] == 0
        assert "Traceback" not in server.log.read_text()
    finally:
        server.stop()
