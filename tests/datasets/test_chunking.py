"""Documents split into passages along their Markdown structure: sections, paragraphs, tables,
code; budgets kept and nothing left out."""
from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from isorag_pyg import defaults
from isorag_pyg.datasets.chunking import heading, split_passages, split_title
from isorag_pyg.datasets.corpus_files import load_corpus, tokenizer_counter
from isorag_pyg.encoders.sentence import resolve_model

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def count():
    return tokenizer_counter(resolve_model(defaults.ENCODER))


def test_paragraphs_are_packed_up_to_the_budget():
    assert split_passages("a b c\n\nd e\n\n\nf g h i", max_tokens=5) == ["a b c d e", "f g h i"]
    assert split_passages("a b c\n\nd e f", max_tokens=6) == ["a b c d e f"]
    assert split_passages("a b c\n\nd e f", max_tokens=5) == ["a b c", "d e f"]  # never over the budget
    assert split_passages("  \n\n \n", max_tokens=5) == []


def test_long_paragraphs_split_at_sentences_then_words(count):
    paragraph = "One two three. Four five six seven. Eight nine."
    assert split_passages(paragraph, max_tokens=4) == ["One two three.", "Four five six seven.", "Eight nine."]
    assert split_passages("w1 w2 w3 w4 w5 w6 w7", max_tokens=3) == ["w1 w2 w3", "w4 w5 w6", "w7"]
    text = "\n\n".join(f"Paragraph {i} talks about the Eiffel Tower and Gustave Eiffel's engineering." for i in range(40))
    chunks = split_passages(text, 64, count)
    assert len(chunks) > 1 and all(count(c) <= 64 for c in chunks)
    assert " ".join(chunks) == " ".join(text.split())  # nothing lost, order kept


def test_passages_never_exceed_the_character_limit():
    assert split_passages("aaa bb. cc dd\n\nee", max_tokens=100, max_chars=6) == ["aaa", "bb.", "cc dd", "ee"]
    assert split_passages("abcdefghij k", max_tokens=100, max_chars=4) == ["abcd", "efgh", "ij k"]


def test_title_is_the_first_heading_else_the_file_name():
    assert split_title("\n# Paris #\n\nThe capital.", "x")[0] == "Paris"
    assert split_title("## Sub heading\ntext", "x")[0] == "Sub heading"
    assert split_title("No heading here.\n# Later", "notes") == ("notes", "No heading here.\n# Later")
    assert split_title("### C# tips\ntext", "x")[0] == "C# tips"  # a closing run of # needs a space before it
    assert split_title("# Title ##\r\nbody\r\n", "x")[0] == "Title"  # Windows line ends


TABLE = """| knob | default | what |
|---|---|---|
| num_seeds | 5 | seeds per question |
| max_expansion | 100 | hub cap: new neighbours kept per hop |
| beta | 0.2 | keep an edge when the profiles agree |"""


def test_a_long_table_gives_a_passage_per_row_under_its_header():
    header = "| knob | default | what | |---|---|---|"
    assert split_passages(TABLE, max_tokens=30) == [
        f"{header} | num_seeds | 5 | seeds per question |",
        f"{header} | max_expansion | 100 | hub cap: new neighbours kept per hop |",
        f"{header} | beta | 0.2 | keep an edge when the profiles agree |",
    ]
    # a table that fits stays whole, packed with the paragraphs around it
    assert split_passages(f"Knobs:\n\n{TABLE}\n\nThat is all.", max_tokens=200) == [" ".join(f"Knobs: {TABLE} That is all.".split())]
    # the paragraph before a split table is not packed with its rows, nor the one after
    assert split_passages(f"Knobs:\n\n{TABLE}\n\nThat is all.", max_tokens=30)[0] == "Knobs:"
    assert split_passages(f"Knobs:\n\n{TABLE}\n\nThat is all.", max_tokens=30)[-1] == "That is all."
    # Windows line ends
    assert split_passages(TABLE.replace("\n", "\r\n"), max_tokens=30) == split_passages(TABLE, max_tokens=30)


def test_a_row_longer_than_the_budget_is_split_under_its_header():
    table = "| a | b |\n|---|---|\n| " + " ".join(f"w{i}" for i in range(20)) + " | x |"
    passages = split_passages(table, max_tokens=12)
    assert all(p.startswith("| a | b | |---|---| ") and len(p.split()) <= 12 for p in passages)
    assert " ".join(p.removeprefix("| a | b | |---|---| ") for p in passages) == " ".join(table.splitlines()[2].split())


def test_passages_begin_with_the_headings_of_their_section():
    text = "Intro.\n\n## Server\n\nServes.\n\n### Flags\n\none two three four five six\n\n## Index\n\nStores."
    assert split_passages(text, max_tokens=100) == [
        "Intro.", "## Server Serves.", "## Server ### Flags one two three four five six", "## Index Stores."]
    # a long section: every passage carries its headings, within the budget
    assert split_passages(text, max_tokens=9) == [
        "Intro.", "## Server Serves.", "## Server ### Flags one two three four five", "## Server ### Flags six", "## Index Stores."]
    # a heading without text of its own begins its subsections'
    assert split_passages("## A\n\n### B\n\ntext", max_tokens=100) == ["## A ### B text"]
    # a heading with nothing after it is kept as it stands
    assert split_passages("## A\n\ntext\n\n### B\n\n## C", max_tokens=100) == ["## A text", "### B", "## C"]


def test_a_heading_over_half_the_budget_is_a_passage_of_its_own():
    text = "## " + " ".join(f"h{i}" for i in range(8)) + "\n\nbody words here"
    passages = split_passages(text, max_tokens=10)
    assert " ".join(passages).split() == text.split()  # nothing lost, nothing repeated
    assert passages[0] == text.split("\n")[0]
    # an outer heading that does not fit beside the inner one is kept once, where it stands
    text = "## " + " ".join(f"h{i}" for i in range(4)) + "\n\n### Inner\n\nbody"
    assert split_passages(text, max_tokens=10) == ["## h0 h1 h2 h3", "### Inner body"]


def test_code_blocks_split_between_lines_and_hold_no_headings():
    code = "```\n# not a heading\nline one here\n\nline two here\n```"
    assert split_passages(f"## Setup\n\n{code}", max_tokens=100) == ["## Setup ``` # not a heading line one here line two here ```"]
    passages = split_passages(f"## Setup\n\n{code}", max_tokens=8)
    assert passages == ["## Setup ``` # not a heading", "## Setup line one here line two here", "## Setup ```"]
    # an unclosed fence runs to the end of the document
    assert split_passages("```\n# a\n\n# b", max_tokens=100) == ["``` # a # b"]


@pytest.mark.parametrize("max_tokens", [40, defaults.MAX_TOKENS])
def test_this_repositorys_docs_keep_the_budget_and_every_word_in_order(count, max_tokens):
    for path in sorted(DOCS.rglob("*.md")):
        _, body = split_title(path.read_text(encoding="utf-8"), path.stem)
        passages = split_passages(body, max_tokens, count)
        assert passages and all(count(p) <= max_tokens for p in passages), path
        # every word of the document in order, headings repeated in between; a word of more tokens
        # than a quarter of the budget may be split (below)
        passage_words = iter(" ".join(passages).split())
        assert all(any(w == word for w in passage_words) for word in body.split() if 4 * count(word) <= max_tokens), path


def test_a_word_over_the_budget_is_split_into_parts_within_it(count):
    word = "[link](" + "/".join(f"part{i}" for i in range(12)) + ".md#anchor)"
    passages = split_passages(f"## Links\n\n{word}", max_tokens=12, count_tokens=count)
    assert all(count(p) <= 12 and p.startswith("## Links ") for p in passages)
    assert "".join("".join(p.removeprefix("## Links ").split()) for p in passages) == word  # its parts, in order


def _random_document(rng: random.Random) -> str:
    """Headings of any level (some over the budget), paragraphs, tables and code fences (some
    unclosed), in any order; every word different, so that an order check is exact."""
    serial = iter(range(10**6))
    words = lambda n: " ".join(f"w{next(serial)}" for _ in range(n))
    blocks = []
    for _ in range(rng.randrange(1, 12)):
        kind = rng.choice(["heading", "paragraph", "table", "code"])
        if kind == "heading":
            blocks.append("#" * rng.randint(1, 4) + " " + words(rng.randint(1, 12)) + rng.choice(["", " ##"]))
        elif kind == "paragraph":
            blocks.append("\n".join(words(rng.randint(1, 12)) for _ in range(rng.randint(1, 3))))
        elif kind == "table":
            rows = [f"| {words(1)} | {words(rng.randint(1, 8))} |" for _ in range(rng.randint(1, 6))]
            blocks.append("\n".join([f"| {words(1)} | {words(1)} |", "|---|:-:|", *rows]))
        else:
            blocks.append("\n".join(["```", *(words(rng.randint(0, 6)) for _ in range(rng.randint(1, 5))), *(["```"] if rng.random() < 0.8 else [])]))
    return rng.choice(["\n\n", "\r\n\r\n", "\n"]).join(blocks)


@pytest.mark.parametrize("seed", range(300))
def test_random_documents_keep_the_budget_and_every_word_in_order(seed):
    rng = random.Random(seed)
    text, max_tokens, max_chars = _random_document(rng), rng.randint(2, 40), rng.choice([20, 60, 200, 20_000])
    for markdown in (True, False):
        passages = split_passages(text, max_tokens, max_chars=max_chars, markdown=markdown)
        assert all(0 < len(p.split()) <= max_tokens and len(p) <= max_chars for p in passages)
        passage_words = iter(" ".join(passages).split())
        # every word in order (headings and table headers repeated in between); words are short
        # enough (w0..w999999 and # runs) that none is cut at these budgets
        assert all(any(w == word for w in passage_words) for word in text.split()), markdown


def test_plain_text_is_packed_by_paragraphs_only():
    text = "# not a heading\n\nplain words\n\n| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n\n```\n# code\n```"
    assert split_passages(text, max_tokens=12, markdown=False) == [
        "# not a heading plain words | a | b | |---|---|", "| 1 | 2 | | 3 | 4 |", "``` # code ```"]
    # as Markdown: a section whose passages begin with its heading
    assert split_passages(text, max_tokens=12)[1:] == ["# not a heading | 1 | 2 |", "# not a heading | 3 | 4 |", "# not a heading ``` # code ```"]


def test_headings_are_read_in_linear_time():
    assert heading("#  ") is None and heading("\t# tab") is None and heading("    # indented") is None
    assert heading("   # three spaces #") == (1, "three spaces") and heading("# a #b") == (1, "a #b")
    start = time.perf_counter()
    split_passages("# a" + " " * 50_000 + "b\n|-" + " " * 50_000 + "x\n| a |\n|-" + " " * 50_000 + "|", max_tokens=200)
    assert time.perf_counter() - start < 2.0


def test_only_markdown_files_are_read_as_markdown(tmp_path):
    text = "Title line\n\n## Setup\n\none two three four five six seven"
    (tmp_path / "notes.md").write_text(text)
    (tmp_path / "notes.txt").write_text(text)
    passages, _ = load_corpus(tmp_path, max_tokens=6)
    by_file = {name: [p.text for p in passages if p.id.startswith(name)] for name in ("notes.md", "notes.txt")}
    assert by_file["notes.md"] == ["Title line", "## Setup one two three four", "## Setup five six seven"]
    assert by_file["notes.txt"] == ["Title line ## Setup one two", "three four five six seven"]
