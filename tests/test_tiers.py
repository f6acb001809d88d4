"""The two test tiers and the extras they install: the fast tier (the README's command) needs only
``.[test]``; a test needing an optional extra is slow, skipped without it, and fails in CI
(``ISORAG_REQUIRE_EXTRAS=1``, set by ``.ci/run`` after installing ``.[dev]``)."""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import conftest
import pytest

REPO = Path(__file__).resolve().parents[1]


def test_the_fast_tier_installs_no_model_runtime_and_ci_requires_every_extra_for_the_slow_one():
    pyproject = (REPO / "pyproject.toml").read_text()  # (tomllib is Python 3.11+; the project runs on 3.10)
    test = re.search(r"^test = \[\n(.*?)^\]", pyproject, re.MULTILINE | re.DOTALL).group(1)
    assert not re.search(r"\b(ray|onnx|onnxruntime|openvino|gemma|gguf|accelerate|isorag_pyg)\b", re.sub(r"#.*", "", test))
    assert re.search(r'^dev = \["isorag_pyg\[test,qa,ray,onnx,openvino,browser\]"\]$', pyproject, re.MULTILINE)
    assert set(conftest.EXTRAS) <= {"qa", "ray", "onnx", "openvino", "browser"}
    readme = (REPO / "README.md").read_text()
    command = readme.split("<!-- test-command -->")[1].split("<!-- /test-command -->")[0]
    assert 'pip install -e ".[test]"' in command and '-m "not slow" -n auto' in command
    assert re.search(r'^\s*"pytest-xdist>=', test, re.MULTILINE)  # -n: both tiers' parallel workers come with .[test]
    ci = (REPO / ".ci" / "run").read_text()
    slow = ci.index("python -m pytest -q -m slow -n 2 --durations")
    assert ci.index('python -m pip install -q -e ".[dev]"') < ci.index("export ISORAG_REQUIRE_EXTRAS=1") < slow
    assert ci.index("apt-get install -y -qq chromium chromium-driver") < slow  # the web page's browser test (the browser extra)


def _item(*extras: str, fixtures: tuple[str, ...] = ()) -> SimpleNamespace:
    marks = [SimpleNamespace(args=extras)] if extras else []
    return SimpleNamespace(iter_markers=lambda name: marks if name == "extra" else [], fixturenames=fixtures)


def test_a_missing_extra_skips_its_test_and_fails_it_where_required(monkeypatch):
    monkeypatch.setitem(conftest.EXTRAS, "onnx", ["no_such_module_for_this_test"])
    monkeypatch.delenv("ISORAG_REQUIRE_EXTRAS", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"pip install -e '.\[onnx\]'"):
        conftest.pytest_runtest_setup(_item("onnx"))
    monkeypatch.setenv("ISORAG_REQUIRE_EXTRAS", "1")
    with pytest.raises(pytest.fail.Exception, match="required here"):
        conftest.pytest_runtest_setup(_item("onnx"))
    conftest.pytest_runtest_setup(_item())  # a test needing nothing runs
    monkeypatch.setitem(conftest.EXTRAS, "qa", ["no_such_module_for_this_test"])
    with pytest.raises(pytest.fail.Exception):
        conftest.pytest_runtest_setup(_item(fixtures=("gemma_gguf",)))  # the packaged reader's fixture needs [qa]
