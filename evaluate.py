"""Evaluate retrievers: ``python evaluate.py [index=DIR] dataset=musique retriever=iso`` or ``compare=[iso,dense,bm25,ppr]``."""
import hydra
from omegaconf import DictConfig

from isorag_pyg.jobs.evaluate import run_evaluation
from isorag_pyg.qa import GeneratorError


@hydra.main(version_base="1.3", config_path="conf", config_name="eval")
def main(cfg: DictConfig) -> float:
    """Returns the primary retriever's Recall@5 for hydra sweepers."""
    try:
        return run_evaluation(cfg)["recall@5"]
    except GeneratorError as err:  # an unreachable or failing LLM endpoint: a clear message, not a traceback
        raise SystemExit(f"evaluate.py: QA generation failed: {err}") from None


if __name__ == "__main__":
    main()
