"""End-to-end QA: prompts over retrieved passages, LLM generators, EM/F1."""
from isorag_pyg.qa.generators import GeneratorError, OpenAIChatGenerator, TransformersGenerator
from isorag_pyg.qa.metrics import exact_match, normalize_answer, token_f1
from isorag_pyg.qa.prompt import PromptTemplate
from isorag_pyg.qa.runner import answer_questions

__all__ = ["GeneratorError", "OpenAIChatGenerator", "PromptTemplate", "TransformersGenerator", "answer_questions",
           "exact_match", "normalize_answer", "token_f1"]
