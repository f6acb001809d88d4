"""A seeded synthetic multi-hop corpus with real relational structure.

The world has typed entities (people, cities, countries, films, companies, universities,
bands) joined by typed relations. Each entity gets one passage that names the entities it is
related to; a few generic *hub* passages name many entities; some passages carry *spurious*
mentions of unrelated entities (shortcut links). Questions follow relation chains of 2-4 hops
("What is the country of the birthplace of the director of Velmora?"): the gold passages are
the chain up to the passage that names the answer, and only the first one shares words with the question, so flat dense retrieval
finds the later hops poorly while following mentions finds them.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from isorag_pyg.datasets.types import MatchReport, Passage, QADataset, Question

_ONSETS = ["b", "br", "c", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p", "qu", "r", "s", "st", "t", "th", "v", "z"]
_VOWELS = ["a", "e", "i", "o", "u", "ae", "io", "ou"]
_CODAS = ["", "", "l", "n", "r", "s", "th", "x", "nd", "m"]

# relation name -> (source type, target type, noun used in questions, sentence template)
RELATIONS: dict[str, tuple[str, str, str, str]] = {
    "director": ("film", "person", "the director of", "The film was directed by {t}."),
    "studio": ("film", "company", "the production company of", "It was produced by the studio {t}."),
    "birthplace": ("person", "city", "the birthplace of", "{s} was born in {t}."),
    "alma_mater": ("person", "university", "the university attended by", "{s} studied at {t}."),
    "employer": ("person", "company", "the employer of", "For many years {s} worked for {t}."),
    "headquarters": ("company", "city", "the headquarters city of", "The company is headquartered in {t}."),
    "campus": ("university", "city", "the campus city of", "Its main campus lies in {t}."),
    "country": ("city", "country", "the country of", "{s} is a city in {t}."),
    "founder": ("band", "person", "the founder of", "The band was founded by {t}."),
}

_TYPE_COUNTS = {"country": 0.05, "city": 0.2, "person": 0.3, "university": 0.08, "company": 0.12, "film": 0.17, "band": 0.08}
_FILLER = {  # s: entity name, n/y: numbers, w: a colour
    "country": ["It has a population of about {n} million.", "Its flag is {w}."],
    "city": ["The city has about {n} thousand inhabitants.", "It is known for its {w} market."],
    "person": ["{s} was active from {y} onwards.", "{s} received the {w} prize in {y}."],
    "university": ["It was established in {y}.", "It enrols about {n} thousand students."],
    "company": ["It was founded in {y}.", "It employs about {n} thousand people."],
    "film": ["The film premiered in {y}.", "It runs for {n}0 minutes."],
    "band": ["The band formed in {y}.", "It released {n} albums."],
}
_SPURIOUS = ["It is sometimes confused with {t}.", "Critics have compared it to {t}.", "A street named after {t} is nearby."]
_HUB_TOPICS = ["Glossary of terms", "Index of notable subjects", "Timeline of events", "List of references",
               "Overview of the region", "Outline of culture", "Bibliography", "Almanac"]


@dataclass
class Entity:
    name: str
    kind: str
    relations: dict[str, int] = field(default_factory=dict)


def _make_name(rng: random.Random, used: set[str]) -> str:
    while True:
        syllables = rng.randint(2, 3)
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables))
        name = word.capitalize()
        if rng.random() < 0.35:
            name += " " + (rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)).capitalize()
        if name not in used:
            used.add(name)
            return name


def _build_world(rng: random.Random, n_entities: int) -> list[Entity]:
    used: set[str] = set()
    entities: list[Entity] = []
    for kind, share in _TYPE_COUNTS.items():
        entities.extend(Entity(_make_name(rng, used), kind) for _ in range(max(2, round(share * n_entities))))
    by_kind: dict[str, list[int]] = {}
    for i, e in enumerate(entities):
        by_kind.setdefault(e.kind, []).append(i)
    for e in entities:
        for rel, (src, dst, _, _) in RELATIONS.items():
            if e.kind == src:
                e.relations[rel] = rng.choice(by_kind[dst])
    return entities


def _passage_text(rng: random.Random, e: Entity, entities: list[Entity], spurious_rate: float) -> str:
    sentences = [f"{e.name} is a {e.kind}."]
    for rel, target in e.relations.items():
        sentences.append(RELATIONS[rel][3].format(s=e.name, t=entities[target].name))
    for template in _FILLER[e.kind]:
        sentences.append(template.format(s=e.name, n=rng.randint(2, 90), y=rng.randint(1850, 2020), w=rng.choice(["green", "silver", "red", "blue", "white"])))
    if rng.random() < spurious_rate:
        other = rng.randrange(len(entities))
        if entities[other] is not e:
            sentences.append(rng.choice(_SPURIOUS).format(t=entities[other].name))
    return " ".join(sentences)


def _chains(entities: list[Entity], max_hops: int) -> list[list[tuple[int, str]]]:
    """All relation chains [(entity, relation), ..., (answer, "")] of 2..max_hops relations, no entity repeated."""
    out = []

    def walk(path: list[tuple[int, str]], current: int) -> None:
        if len(path) >= 2:
            out.append(path + [(current, "")])
        if len(path) == max_hops:
            return
        visited = {p[0] for p in path} | {current}
        for rel, target in entities[current].relations.items():
            if target not in visited:
                walk(path + [(current, rel)], target)

    for i in range(len(entities)):
        walk([], i)
    return out


def _question_text(chain: list[tuple[int, str]], entities: list[Entity]) -> str:
    phrase = entities[chain[0][0]].name
    for _, rel in chain[:-1]:
        phrase = f"{RELATIONS[rel][2]} {phrase}"
    return f"What is {phrase}?"


def generate_synthetic_dataset(
    seed: int = 0,
    num_entities: int = 240,
    num_hubs: int = 6,
    hub_size: int = 40,
    num_questions: int = 100,
    max_hops: int = 4,
    spurious_rate: float = 0.3,
    context_size: int = 10,
    split: str = "dev",
) -> QADataset:
    """Generate the synthetic corpus and one split of questions.

    The corpus depends on ``seed`` (and the size arguments) only; ``split`` picks disjoint
    question sets (``'train'`` or ``'dev'``) from the same world, so a graph built from
    training questions never sees the dev chains.
    """
    if split not in ("train", "dev"):
        raise ValueError(f"split must be 'train' or 'dev', got {split!r}")
    if num_entities < 20:
        raise ValueError(f"num_entities must be >= 20, got {num_entities}")
    rng = random.Random(seed)
    entities = _build_world(rng, num_entities)
    corpus = [Passage(str(i), e.name, _passage_text(rng, e, entities, spurious_rate)) for i, e in enumerate(entities)]
    for h in range(num_hubs):
        members = rng.sample(range(len(entities)), min(hub_size, len(entities)))
        names = ", ".join(entities[m].name for m in members)
        topic = f"{_HUB_TOPICS[h % len(_HUB_TOPICS)]} {h + 1}"
        corpus.append(Passage(str(len(corpus)), topic, f"{topic} is a general reference page. It mentions {names}."))

    chains = _chains(entities, max_hops)
    random.Random(seed + 1).shuffle(chains)
    by_hops: dict[int, list] = {}
    for chain in chains:
        by_hops.setdefault(len(chain) - 1, []).append(chain)
    per_split = [c for group in zip(*by_hops.values()) for c in group]  # balanced over hop counts
    half = len(per_split) // 2
    selected = (per_split[:half] if split == "train" else per_split[half:])[:num_questions]
    if len(selected) < num_questions:
        raise ValueError(f"world too small for {num_questions} {split} questions; raise num_entities")

    ctx_rng = random.Random(f"{seed}-{split}-context")
    questions = []
    for k, chain in enumerate(selected):
        gold = [str(i) for i, _ in chain[:-1]]  # the answer is named in the last gold passage
        distractors = [str(i) for i in ctx_rng.sample(range(len(corpus)), context_size) if str(i) not in gold]
        context = gold + distractors[: max(0, context_size - len(gold))]
        ctx_rng.shuffle(context)
        answer = entities[chain[-1][0]].name
        questions.append(Question(f"{split}-{k}", _question_text(chain, entities), [answer], gold, context, f"{len(gold)}hop"))
    return QADataset(f"synthetic-{split}", questions, corpus, MatchReport(exact=sum(len(q.gold_ids) for q in questions)))
