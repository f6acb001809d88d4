"""The web page in a real headless browser (Debian's chromium and chromium-driver, driven by
selenium) against a real ``isorag serve`` with an API key: enter the key, ask, watch the answer
stream in from a scripted OpenAI-compatible reader (tests/fake_llm_server.py), follow a citation
to its passage, and check the SVG graph against ``index.explain``; with a reader that fails or
without a reader, the passages, the graph and the server's message. Screenshots are kept in each test's tmp dir. Slow tier: a
missing browser fails where ISORAG_REQUIRE_EXTRAS=1 (CI), as a missing extra does."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_llm_server import FakeLLM
from test_page import QUESTION, SMALL, synthetic_index
from test_server import Server

from isorag_pyg import ISORAGIndex
from isorag_pyg.datasets import generate_synthetic_dataset
from isorag_pyg.qa.citations import citations

KEY = "browser-key-0123456789"
#: The scripted reader's answer: it cites the passages numbered 1 and 3 (and 9, which it was not given: left as text).
ANSWER = "Saquaerpath Thel studied at a university [1] whose main campus lies in a city [3], as passage [9] does not say."
#: A question the scripted reader answers with the title of its last passage but the marker [1].
MATCHED = generate_synthetic_dataset(**SMALL).questions[2].text
#: A question the scripted reader refuses (HTTP 500, every time).
REFUSED = generate_synthetic_dataset(**SMALL).questions[1].text


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory) -> Path:
    return synthetic_index().save(tmp_path_factory.mktemp("page") / "index")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless chromium through chromium-driver, both from Debian (selenium downloads nothing)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        message = "needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver; .ci/run installs them)"
        if os.environ.get("ISORAG_REQUIRE_EXTRAS") == "1":
            pytest.fail(f"{message}: required here (ISORAG_REQUIRE_EXTRAS=1)")
        pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    session = webdriver.Chrome(options=options, service=Service(driver))
    yield session
    session.quit()


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 90) -> Any:
    """``condition()``'s first truthy value, polled; an AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := condition():
            return found
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def ask(browser: Any, question: str) -> None:
    from selenium.webdriver.common.by import By

    box = browser.find_element(By.ID, "question")
    box.clear()
    box.send_keys(question)
    browser.find_element(By.ID, "submit").click()


def graph_counts(browser: Any) -> dict[str, int]:
    from selenium.webdriver.common.by import By

    return {kind: len(browser.find_elements(By.CSS_SELECTOR, f"#graph {selector}"))
            for kind, selector in (("nodes", ".node"), ("kept", ".edge.kept"), ("pruned", ".edge.pruned"))}


def check_graph(browser: Any, index_dir: Path) -> None:
    """The SVG graph shows ``index.explain``'s nodes and edges, kept and pruned, sized by PPR mass."""
    from selenium.webdriver.common.by import By

    trace = ISORAGIndex.load(index_dir).explain(QUESTION, k=5)
    assert trace["kept_edges"] and trace["pruned_edges"]
    wait_for(lambda: graph_counts(browser)["nodes"], "the graph")
    assert graph_counts(browser) == {"nodes": len(trace["candidates"]), "kept": len(trace["kept_edges"]), "pruned": len(trace["pruned_edges"])}
    drawn = {node.get_attribute("data-id") for node in browser.find_elements(By.CSS_SELECTOR, "#graph .node")}
    assert drawn == set(trace["candidates"])
    tops = browser.find_elements(By.CSS_SELECTOR, "#graph .node.top")
    assert {node.get_attribute("data-id") for node in tops} == {t["id"] for t in trace["top"]}
    assert len(browser.find_elements(By.CSS_SELECTOR, "#graph .node.entity-seed")) == len(trace["entity_seeds"]) > 0
    sizes = browser.execute_script("return [...document.querySelectorAll('#graph .node circle')].map(c => +c.getAttribute('r'))")
    assert max(sizes) > 2 * min(sizes)  # PPR mass as size
    dashed = browser.execute_script("return getComputedStyle(document.querySelector('#graph .edge.pruned')).strokeDasharray")
    assert dashed not in ("", "none")
    assert f"pruned {len(trace['pruned_edges'])} of" in browser.find_element(By.ID, "graph-note").text


def severe_console_errors(browser: Any) -> list[dict[str, Any]]:
    """The page's own errors: failed loads and script errors (an expected HTTP error status is the server's answer, not the page's fault)."""
    return [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE" and "the server responded with a status of" not in entry["message"]]


@pytest.mark.slow
@pytest.mark.extra("browser")
def test_the_page_asks_with_the_key_streams_the_answer_follows_a_citation_and_draws_the_graph(browser, index_dir, tmp_path, monkeypatch):
    from selenium.webdriver.common.by import By

    monkeypatch.setenv("ISORAG_API_KEY", KEY)
    hits = ISORAGIndex.load(index_dir).retrieve([MATCHED], k=5)[0]
    copied = f"{hits[-1].title} [1]"  # a copied marker: the citation is the passage that holds the title, labelled so
    [(matched, by)] = citations(copied, [f"{h.title} {h.text}" for h in hits], MATCHED)
    assert by == "match" and matched != 1
    with FakeLLM(failures={REFUSED: ["500"] * 20}, answers={QUESTION: ANSWER, MATCHED: copied}, piece_delay=0.15) as llm:
        server = Server(index_dir, tmp_path / "serve.log", "--llm-base-url", llm.base_url, "--llm-model", "fake-reader").ready()
        try:
            browser.get(f"{server.url}/")
            key_box = browser.find_element(By.ID, "key-box")
            wait_for(key_box.is_displayed, "the API key box (GET /info answered 401)")
            browser.find_element(By.ID, "api-key").send_keys(KEY)
            browser.find_element(By.ID, "save-key").click()
            wait_for(lambda: "62 passages" in browser.find_element(By.ID, "index-info").text, "the index's info, with the key")
            assert not key_box.is_displayed()

            ask(browser, QUESTION)
            partial = set()
            answer = browser.find_element(By.ID, "answer")
            while browser.find_element(By.TAG_NAME, "body").get_attribute("data-state") != "done":
                partial.add(answer.text)
                time.sleep(0.02)
            assert answer.text == ANSWER and browser.find_element(By.ID, "status").text == ""
            assert len({text for text in partial if text and text != ANSWER}) >= 3, partial  # the answer arrived in pieces, shown as they came
            assert llm.streamed == len(ANSWER.split(" "))

            links = answer.find_elements(By.CSS_SELECTOR, "a.cite")
            assert [link.text for link in links] == ["[1]", "[3]"]  # [9] names no passage given: plain text
            cited = [item.text for item in browser.find_elements(By.CSS_SELECTOR, "#citations li")]
            assert len(cited) == 2 and cited[0].startswith("[1]") and cited[1].startswith("[3]")
            assert len(browser.find_elements(By.CSS_SELECTOR, "#passages li.passage")) == 5
            assert re.search(r"reader \d+\.\d{3} s", browser.find_element(By.ID, "timings").text)

            browser.execute_script("window.scrollTo(0, 0)")
            links[1].click()
            passage = browser.find_element(By.ID, "passage-3")
            wait_for(lambda: "highlight" in passage.get_attribute("class"), "the cited passage highlighted")
            in_view = "const r = arguments[0].getBoundingClientRect(); return r.top >= 0 && r.bottom <= window.innerHeight"
            wait_for(lambda: browser.execute_script(in_view, passage), "the cited passage scrolled into view", timeout=10)
            highlighted = browser.find_elements(By.CSS_SELECTOR, "#graph .node.highlight")
            assert [node.get_attribute("data-id") for node in highlighted] == [passage.get_attribute("data-id")]  # and its node in the graph

            check_graph(browser, index_dir)
            assert severe_console_errors(browser) == []
            assert browser.save_screenshot(str(tmp_path / "page.png")) and (tmp_path / "page.png").stat().st_size > 10_000

            ask(browser, MATCHED)
            wait_for(lambda: browser.find_element(By.TAG_NAME, "body").get_attribute("data-state") == "done", "the page done")
            cited = [item.text for item in browser.find_elements(By.CSS_SELECTOR, "#citations li")]
            assert len(cited) == 1 and cited[0].startswith(f"[{matched}] ") and cited[0].endswith("matched to the answer"), cited

            ask(browser, REFUSED)  # a reader that fails: the passages and the graph all the same, and why there is no answer
            wait_for(lambda: browser.find_element(By.TAG_NAME, "body").get_attribute("data-state") == "done", "the page done")
            assert answer.text == "" and browser.find_element(By.ID, "answer-note").text.startswith("The reader failed (502): ")
            assert len(browser.find_elements(By.CSS_SELECTOR, "#passages li.passage")) == 5
            wait_for(lambda: graph_counts(browser)["nodes"], "the second question's graph")
            assert browser.save_screenshot(str(tmp_path / "page-reader-failed.png"))
        finally:
            server.stop()
    assert "Traceback" not in server.log.read_text()


@pytest.mark.slow
@pytest.mark.extra("browser")
def test_without_a_reader_the_page_shows_the_passages_the_graph_and_why_there_is_no_answer(browser, index_dir, tmp_path):
    from selenium.webdriver.common.by import By

    server = Server(index_dir, tmp_path / "serve.log", "--llm", "none").ready()
    try:
        browser.execute_script("sessionStorage.clear()")
        browser.get(f"{server.url}/")
        wait_for(lambda: "62 passages" in browser.find_element(By.ID, "index-info").text, "the index's info")
        ask(browser, QUESTION)
        wait_for(lambda: browser.find_element(By.TAG_NAME, "body").get_attribute("data-state") == "done", "the page done")
        assert browser.find_element(By.ID, "answer").text == ""
        assert "no reader" in browser.find_element(By.ID, "answer-note").text
        expected = [hit.id for hit in ISORAGIndex.load(index_dir).retrieve([QUESTION], k=5)[0]]
        assert [item.get_attribute("data-id") for item in browser.find_elements(By.CSS_SELECTOR, "#passages li.passage")] == expected
        check_graph(browser, index_dir)
        assert severe_console_errors(browser) == []
        assert browser.save_screenshot(str(tmp_path / "page-without-reader.png"))
    finally:
        server.stop()


@pytest.mark.slow
def test_the_wheel_ships_the_page(tmp_path):
    """The built wheel holds the page's files (pyproject's package-data), as ``pip install`` gets them."""
    repo = Path(__file__).resolve().parents[2]
    source = tmp_path / "source"  # a copy: building writes build/ and *.egg-info beside the sources
    shutil.copytree(repo / "isorag_pyg", source / "isorag_pyg", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(repo / name, source / name)
    offline = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []  # else pip fetches the build backend
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *offline, "-q", "-w", str(tmp_path), str(source)],
                   check=True, capture_output=True, timeout=600, cwd=tmp_path)
    wheel = next(tmp_path.glob("isorag_pyg-*.whl"))
    static = repo / "isorag_pyg" / "server" / "static"
    with zipfile.ZipFile(wheel) as archive:
        for path in static.iterdir():
            assert archive.read(f"isorag_pyg/server/static/{path.name}") == path.read_bytes()


#: Server-sent events as a server may send them: CRLF and LF line ends, a comment, a field without a space, a data line split
#: in two, and a last event without its blank line.
EVENTS = ('event: passages\r\ndata: {"passages": []}\r\n\r\n: keep-alive\n\nevent:token\ndata: {"text": "é"}\n\n'
          'event: done\ndata: {"answer":\ndata: "é"}')


def load_script(browser: Any) -> None:
    """page.js on a blank page: its functions without a server."""
    script = (Path(__file__).resolve().parents[2] / "isorag_pyg" / "server" / "static" / "page.js").read_text()
    browser.get("about:blank")
    browser.execute_script("const s = document.createElement('script'); s.textContent = arguments[0]; document.head.append(s)", script)


@pytest.mark.slow
@pytest.mark.extra("browser")
def test_the_pages_event_reader_takes_events_split_anywhere(browser):
    """The page's reader of a fetch() body, fed ``EVENTS`` cut at every byte (a CRLF and a UTF-8 character cut in two included)."""
    load_script(browser)
    seen = browser.execute_async_script("""
        const [text, done] = arguments, bytes = new TextEncoder().encode(text), seen = [];
        const body = new ReadableStream({start(c) { for (const b of bytes) c.enqueue(new Uint8Array([b])); c.close(); }});
        readEvents(new Response(body), (name, data) => seen.push([name, data])).then(() => done(seen), (err) => done(String(err)));
    """, EVENTS)
    assert seen == [["passages", {"passages": []}], ["token", {"text": "é"}], ["done", {"answer": "é"}]]


@pytest.mark.slow
@pytest.mark.extra("browser")
def test_the_graph_layout_is_the_same_every_time_and_fits_the_picture(browser):
    load_script(browser)
    for count in (1, 2, 40, 400):
        first, again, box = browser.execute_script("""
            const n = arguments[0], links = [];
            for (let i = 1; i < n; i++) links.push([i, Math.floor(i / 3)]);
            return [layout(n, links), layout(n, links), [WIDTH, HEIGHT]];""", count)
        assert first == again and len(first) == count
        assert all(0 <= x <= box[0] and 0 <= y <= box[1] for x, y in first)


@pytest.mark.slow
@pytest.mark.extra("browser")
def test_the_legend_counts_the_retrieved_passages_the_graph_does_not_hold(browser):
    """A hybrid with BM25 (documentation) may retrieve passages outside the walk's local graph: the legend says how many."""
    load_script(browser)
    notes = browser.execute_script("""
        const trace = {candidates: ["a", "b", "entity:x"], top: [{id: "a"}, {id: "c"}, {id: "d"}]};
        return [outsideGraph(trace), outsideGraph({candidates: ["a"], top: [{id: "a"}]})];""")
    assert notes == [", 2 of them found by BM25 outside this graph", ""]
