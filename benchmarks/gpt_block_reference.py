"""The GPT block's reference numbers (grader/exercise/definitions/gpt_block.py): the block trained
with the instructor's hand-written backward pass (no autograd), then its loss on the whole
training and held-out streams cut into windows of T characters. One thread, as exercise 4 runs.

    .venv/bin/python benchmarks/gpt_block_reference.py [STEPS] [LR]   (default 50000 0.3)
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from grader.authoring.train import train  # noqa: E402
from grader.exercise.definitions.gpt_block import GPT_BLOCK  # noqa: E402

from conftest import find_names_txt  # noqa: E402


def split_loss(values: dict, stream: torch.Tensor) -> float:
    T = values["T"]
    n = (len(stream) - 1) // T
    X, Y = stream[: n * T].view(n, T), stream[1 : n * T + 1].view(n, T)
    with torch.no_grad():
        return GPT_BLOCK.forward(dict(values, Xb=X, Yb=Y))["loss"].item()


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    lr = float(sys.argv[2]) if len(sys.argv) > 2 else 0.3
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        shutil.copy(find_names_txt(), Path(folder) / "names.txt")
        run = train(GPT_BLOCK, Path(folder), steps, lr)
    v = run.values
    print(
        f"gpt_block: {sum(v[p].numel() for p in GPT_BLOCK.params):,} parameters, {steps:,} steps, lr {lr:g}"
    )
    print(f"  loss at the first step {run.losses[0]:.3f}, the last 1,000 steps {run.mean_loss(1000):.3f}")
    print(f"  {run.ms_per_step:.2f} ms a step with the hand-written backward, one thread")
    print(f"  train {split_loss(v, v['train']):.4f}  val {split_loss(v, v['val']):.4f}")


if __name__ == "__main__":
    main()
