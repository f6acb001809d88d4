"""Build a dataset's index with f_θ trained on its graph: ``python train.py dataset=musique``."""
import hydra
from omegaconf import DictConfig

from isorag_pyg.jobs.train import run_training


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float:
    """Returns the optimised metric (held-out triplet accuracy) for hydra sweepers."""
    return run_training(cfg)["val/triplet_acc"]


if __name__ == "__main__":
    main()
