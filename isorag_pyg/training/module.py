"""The LightningModule that trains f_θ."""
from __future__ import annotations

import lightning as L
import torch
from torch import Tensor
from torchmetrics.functional import spearman_corrcoef

from isorag_pyg.nn.losses import radial_depth_loss, triplet_margin_loss
from isorag_pyg.nn.poincare_encoder import PoincareEncoder


class HyperbolicEmbeddingModule(L.LightningModule):
    """Trains :class:`~isorag_pyg.nn.PoincareEncoder` with a hyperbolic triplet loss plus a
    radial depth regulariser.

    With several negatives per anchor and ``hard_negatives=True`` the closest valid negative in
    the ball is used (hard-negative mining); otherwise all valid negatives count.

    Logged: ``train/loss``, ``train/triplet``, ``train/radial``; after each validation pass over
    all nodes ``val/triplet_acc`` (held-out edges), ``val/triplet``, ``val/radial``,
    ``val/objective`` (the training objective on held-out triplets and all nodes; checkpoints
    monitor it) and ``val/spearman_degree_norm`` (Spearman correlation of node degree and ‖z‖;
    negative means hubs sit near the origin).
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int = 16,
        hidden_dim: int | None = 128,
        curvature: float = 1.0,
        margin: float = 1.0,
        radial_weight: float = 1.0,
        hard_negatives: bool = False,
        lr: float = 3e-3,
        weight_decay: float = 0.0,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.encoder = PoincareEncoder(in_dim, out_dim, hidden_dim, curvature)

    def forward(self, x: Tensor) -> Tensor:
        return self.encoder(x)

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        za, zp = self.encoder(batch["anchor"]), self.encoder(batch["positive"])
        zn = self.encoder(batch["negative"])  # [B, K, D]
        d_pos = self.encoder.distance(za, zp)
        d_neg = self.encoder.distance(za.unsqueeze(1), zn)  # [B, K]
        valid = batch["negative_valid"].float()
        if self.hparams.hard_negatives:
            masked = d_neg.masked_fill(~batch["negative_valid"], float("inf"))
            hardest = masked.min(dim=1).values
            has_valid = torch.isfinite(hardest)
            triplet = triplet_margin_loss(d_pos, hardest.nan_to_num(posinf=0.0), self.hparams.margin, has_valid.float())
        else:
            triplet = triplet_margin_loss(d_pos.unsqueeze(1).expand_as(d_neg), d_neg, self.hparams.margin, valid)
        radial = radial_depth_loss(self.encoder(batch["radial_x"]), batch["radial_target"])
        loss = triplet + self.hparams.radial_weight * radial
        size = za.size(0)
        self.log("train/loss", loss, prog_bar=True, batch_size=size)
        self.log("train/triplet", triplet, batch_size=size)
        self.log("train/radial", radial, batch_size=size)
        return loss

    def on_validation_epoch_start(self) -> None:
        self._val_parts: list[tuple[Tensor, Tensor]] = []

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        index, x = batch
        self._val_parts.append((index, self.encoder(x)))

    def on_validation_epoch_end(self) -> None:
        """Score the whole embedding: held-out triplets, radial fit and degree/depth correlation."""
        datamodule = self.trainer.datamodule
        index = torch.cat([p[0] for p in self._val_parts])
        z_part = torch.cat([p[1] for p in self._val_parts])
        if self.trainer.world_size > 1:  # every rank embedded a shard (padded equally by the sampler)
            index = self.all_gather(index).reshape(-1)
            z_part = self.all_gather(z_part).reshape(-1, z_part.size(-1))
        z = z_part.new_zeros(datamodule.x.size(0), z_part.size(-1))
        z[index] = z_part
        a, p, n = datamodule.val_triplets.to(z.device)
        d_pos, d_neg = self.encoder.distance(z[a], z[p]), self.encoder.distance(z[a], z[n])
        triplet = triplet_margin_loss(d_pos, d_neg, self.hparams.margin)
        radial = radial_depth_loss(z, datamodule.target_radius.to(z.device))
        rho = spearman_corrcoef(z.norm(dim=-1).double().cpu(), datamodule.node_degree.double())
        self.log_dict(
            {
                "val/triplet_acc": (d_pos < d_neg).float().mean(),
                "val/triplet": triplet,
                "val/radial": radial,
                "val/objective": triplet + self.hparams.radial_weight * radial,
                "val/spearman_degree_norm": rho.float().to(z.device),
            },
            prog_bar=False,
            sync_dist=True,  # already equal on every rank (computed from the gathered embedding)
        )
        self._val_parts = []

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)
