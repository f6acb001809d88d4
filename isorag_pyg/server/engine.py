"""The retrieval side of the server: answer a batch of requests with one encoder call and one
retrieval call per (retriever, k). Synchronous and single-threaded by design; the
:class:`~isorag_pyg.server.batcher.MicroBatcher` calls it from its one worker thread."""
from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from isorag_pyg.index import ISORAGIndex, RetrievedPassage
from isorag_pyg.retrieval import Queries, Retriever

log = logging.getLogger(__name__)

Hits = list[list[RetrievedPassage]]


@dataclass(frozen=True)
class RetrievalRequest:
    """One client request: its questions, ``k`` and retriever name (already validated)."""

    questions: tuple[str, ...]
    k: int
    retriever: str

    def __len__(self) -> int:
        return len(self.questions)


class RetrievalEngine:
    """Answers batches of :class:`RetrievalRequest` over one index.

    A batch is served by one call of the index's encoder on all its questions, then one
    ``retriever.retrieve(queries, k)`` call per distinct (retriever, k): for ISO-RAG the local
    graphs of all those questions form one block-diagonal batch. Requests with different ``k``
    do not share a call, because ISO-RAG's candidate pool grows with ``k``
    (``over_retrieval * k``): the top 5 of a ``k = 10`` call are not always the answer to
    ``k = 5``. If a batch fails, each of its requests is retried on its own, so an error only
    fails the requests it concerns.

    ``stats`` counts batches, requests, questions, encoder and retrieval calls, failed requests
    and the largest batch (questions), and the seconds spent encoding and retrieving.
    """

    def __init__(self, index: ISORAGIndex):
        self.index = index
        self.stats: Counter[str] = Counter()  # counts, and seconds (floats)
        self._retrievers: dict[str, Retriever] = {}
        self.warm_queries: Queries | None = None

    def retriever(self, name: str) -> Retriever:
        """The index's retriever ``name`` with its stored knobs (built once)."""
        if name not in self._retrievers:
            self._retrievers[name] = self.index.retriever(name)
        return self._retrievers[name]

    def warm_up(self, retriever: str = "iso") -> None:
        """Load the encoder and prepare ``retriever`` before serving (the counters start at 0)."""
        self.warm_queries = self.index.encode_questions(["warm-up"])
        self.retriever(retriever).retrieve(self.warm_queries, 1)
        self.stats.clear()

    def prepare(self, previous: RetrievalEngine) -> None:
        """Build and run once the retrievers ``previous`` had, on its warm-up question when both
        share the encoder (no encoder call: safe while ``previous`` answers a batch on another
        thread), else on the warm-up question encoded by this engine's own encoder."""
        shared = self.index.encoder is previous.index.encoder and previous.warm_queries is not None
        self.warm_queries = previous.warm_queries if shared else self.index.encode_questions(["warm-up"])
        for name in list(previous._retrievers):
            self.retriever(name).retrieve(self.warm_queries, 1)

    def run(self, requests: Sequence[RetrievalRequest]) -> list[Hits | Exception]:
        """Each request's hits (one list per question) or the exception that failed it."""
        self.stats.update(batches=1, requests=len(requests), questions=sum(len(r) for r in requests))
        self.stats["largest_batch"] = max(self.stats["largest_batch"], sum(len(r) for r in requests))
        try:
            outcomes: list[Hits | Exception] = list(self._answer(requests))
        except Exception as err:  # noqa: BLE001 - a failed batch is retried request by request
            if len(requests) == 1:
                outcomes = [err]
            else:
                log.warning("a batch of %d requests failed (%s); answering each on its own", len(requests), err)
                outcomes = [self._answer_alone(request) for request in requests]
        failed = sum(isinstance(outcome, Exception) for outcome in outcomes)
        if failed:
            self.stats["failed_requests"] += failed
        return outcomes

    def _answer_alone(self, request: RetrievalRequest) -> Hits | Exception:
        try:
            return self._answer([request])[0]
        except Exception as err:  # noqa: BLE001 - the request's own failure goes back to its caller
            return err

    def _answer(self, requests: Sequence[RetrievalRequest]) -> list[Hits]:
        start = time.perf_counter()
        queries = self.index.encode_questions([q for request in requests for q in request.questions])
        self.stats.update(encoder_calls=1, encode_seconds=time.perf_counter() - start)
        starts = [0]
        for request in requests:
            starts.append(starts[-1] + len(request))
        groups: dict[tuple[str, int], list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault((request.retriever, request.k), []).append(i)
        answers: list[Hits] = [[] for _ in requests]
        for (name, k), members in groups.items():
            rows = [row for i in members for row in range(starts[i], starts[i + 1])]
            part = Queries([queries.texts[row] for row in rows], queries.embeddings[rows])
            start = time.perf_counter()
            result = self.retriever(name).retrieve(part, k)
            self.stats.update(retrieval_calls=1, retrieval_seconds=time.perf_counter() - start)
            hits = self.index.hits(result.indices, result.scores)
            offset = 0
            for i in members:
                answers[i] = hits[offset:offset + len(requests[i])]
                offset += len(requests[i])
        return answers
