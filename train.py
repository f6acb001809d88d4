"""Train the hyperbolic encoder f_θ: ``python train.py dataset=musique``."""
import hydra
from omegaconf import DictConfig

from isorag_pyg.training.run import run_training


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float:
    """Returns the optimised metric (held-out triplet accuracy) for hydra sweepers."""
    return run_training(cfg)["val/triplet_acc"]


if __name__ == "__main__":
    main()
