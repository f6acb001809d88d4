"""``POST /explain``: ISO-RAG's local graph for one question (``index.explain``'s trace: seeds,
query-matched entity seeds, candidates, kept and pruned edges, PPR mass, the top ``k``, every
node's title), which the web page draws. Run in a worker thread, outside the micro-batcher."""
from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from isorag_pyg.server.reloading import ServedIndex
from isorag_pyg.server.schema import ErrorBody, ExplainBody, Explanation, RequestError, checked_explain, error_response, explain_body_schema
from isorag_pyg.server.settings import ServerSettings


def explain_router(served: ServedIndex, settings: ServerSettings) -> APIRouter:
    """The ``POST /explain`` route over ``served`` (its current version at each request), with
    ``settings``' limits on the question and ``k``."""
    router = APIRouter()
    body_schema = {"required": True, "content": {"application/json": {"schema": explain_body_schema(settings)}}}

    @router.post("/explain", response_model=Explanation, openapi_extra={"requestBody": body_schema},
                 responses={500: {"model": ErrorBody, "description": "a failure inside retrieval"}})
    async def explain(body: ExplainBody) -> JSONResponse:
        """ISO-RAG's local graph for ``question``: which edges the isoperimetric filter kept and
        pruned, the seeds, the PPR mass of every candidate and the top ``k``, nodes by id with their titles."""
        try:
            question, k = checked_explain(body, settings)
        except RequestError as err:
            return error_response(422, str(err))
        index = served.index
        try:
            graph = await asyncio.to_thread(index.explain, question, k=k)
        except Exception as err:  # noqa: BLE001 - any failure answers 500, the server keeps serving
            return error_response(500, f"explain failed: {type(err).__name__}: {err}")
        return JSONResponse(graph, headers={"X-Index-Version": str(index.generation)})

    return router
