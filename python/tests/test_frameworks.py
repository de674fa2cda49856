"""The optimizer as a callback of real training frameworks: HuggingFace's Trainer and
Lightning's Trainer each train a tiny randomly initialised model on a simulated V100 (virtual
clock), profile every limit, write the profile and end at the chosen limit. They run where
scripts/install-frameworks.sh installed the pinned frameworks (make test-cuda: torch 2.x) and
skip elsewhere, saying so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from zeus_cpp import device as zdevice
from zeus_cpp.monitor import ZeusMonitor
from zeus_cpp.optimizer.power_limit import Done

SIM = "sim:v100:cifar100:1024"
# wait 1, then per limit: 1 warmup + 2 profiling steps; every 100 W from the maximum down.
KNOBS = dict(wait_steps=1, warmup_steps=1, profile_steps=2, pl_step=100)


@pytest.fixture
def sim(job_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ZEUS_DEVICE", SIM)
    monkeypatch.setattr(zdevice, "_by_locator", {})
    torch.manual_seed(0)
    return job_env


def check_profiled(optimizer, monitor: ZeusMonitor, profile: Path) -> None:
    assert isinstance(optimizer.state, Done)
    saved = json.loads(profile.read_text())
    limits_w = [pl // 1000 for pl in optimizer.power_limits]
    assert len(limits_w) >= 2
    assert [m["power_limit"] for m in saved["measurements"]] == limits_w
    assert all(m["energy"] > 0 and m["time"] > 0 for m in saved["measurements"])
    assert monitor.gpus.get_power_management_limit(0) == optimizer.state.optimal_power_limit
    optimizer.close()


def test_huggingface_trainer_with_the_hf_callback(sim: Path, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    from zeus_cpp.optimizer.power_limit import HFGlobalPowerLimitOptimizer

    config = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=1,
                                     n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    tokens = torch.randint(0, 64, (64, 16))
    data = [{"input_ids": t, "labels": t} for t in tokens]
    monitor = ZeusMonitor(cpu_indices=[])
    profile = tmp_path / "hf-profile.json"
    callback = HFGlobalPowerLimitOptimizer(monitor, profile_path=profile, **KNOBS)
    assert isinstance(callback, transformers.TrainerCallback)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_train_epochs=2,
        report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True,
        use_cpu=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data,
                                   callbacks=[callback])
    trainer.train()
    check_profiled(callback.optimizer, monitor, profile)


def test_lightning_trainer_with_the_lightning_callback(sim: Path, tmp_path: Path) -> None:
    lightning = pytest.importorskip("lightning")
    from zeus_cpp.optimizer.power_limit import LightningGlobalPowerLimitOptimizer

    class Tiny(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(8, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    monitor = ZeusMonitor(cpu_indices=[])
    profile = tmp_path / "lightning-profile.json"
    callback = LightningGlobalPowerLimitOptimizer(monitor, profile_path=profile, **KNOBS)
    trainer = lightning.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False,
                                enable_checkpointing=False, enable_progress_bar=False,
                                enable_model_summary=False, callbacks=[callback],
                                default_root_dir=str(tmp_path))
    trainer.fit(Tiny(), loader)
    check_profiled(callback.optimizer, monitor, profile)
