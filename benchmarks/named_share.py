"""The share of device time inside a named call, per workload that no call scope reaches, recorded by profile()
and by a plain torch.profiler pass (the trace rule of docs/sql.md, "Calls named from the trace"). On CUDA where
there is one, else on the CPU (then the share of CPU operator self time). Prints one JSON line per workload and
recording; the goal is a share of at least 0.999 everywhere.

    python benchmarks/named_share.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch
from kernelscope.analyzer import load_run
from kernelscope.recorder import ModuleFunctionKernelProfiler
from torch import nn


@torch.library.custom_op("ksbench::fused_op", mutates_args=())
def fused_op(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.relu(torch.ops.aten.mm(x, w))


@fused_op.register_fake
def _(x, w):
    return x.new_empty(x.shape[0], w.shape[1])


class Operators(nn.Module):
    """A torch.library.custom_op, torch.ops.aten called directly and a torch._VF call."""

    def __init__(self, width: int = 256):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width, width))

    def forward(self, x):
        y = torch.ops.aten.mm.default(fused_op(x[0], self.weight), self.weight)
        w = self.weight
        h = torch._VF.rnn_tanh(
            x, x.new_zeros(1, x.shape[0], w.shape[0]), [w, w, w[0], w[0]], True, 1, 0.0, False, False, True
        )
        return y.sum() + h[0].sum()


def workloads(device: str) -> dict:
    """name -> (module, samples): the shapes of a small inference batch."""
    layer = nn.TransformerEncoderLayer(256, 8, 1024, dropout=0.0, batch_first=True)
    found = {
        "transformer_encoder_fast_path": (nn.TransformerEncoder(layer, 4, enable_nested_tensor=False), (8, 128, 256)),
        "lstm": (nn.LSTM(256, 256, 2, batch_first=True), (8, 128, 256)),
        "gru": (nn.GRU(256, 256, 2, batch_first=True), (8, 128, 256)),
        "custom_op_aten_vf": (Operators(), (8, 128, 256)),
    }
    try:
        import torchvision

        detector = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
            weights=None, weights_backbone=None
        )
        found["fasterrcnn_nms"] = (detector, None)
    except (ImportError, RuntimeError):  # torchvision absent, or without its operators beside this torch
        pass
    models = {}
    for name, (module, shape) in found.items():
        module = module.to(device).eval()
        if shape is None:
            samples = [(([torch.rand(3, 320, 320, device=device)],), {})]
        else:
            samples = [((torch.randn(*shape, device=device),), {})]
        models[name] = (module, samples)
    return models


def named_share(trace: Path) -> dict:
    with load_run(trace) as run:
        total, named, rows = run.con.execute(
            "SELECT sum(kernel_us), coalesce(sum(kernel_us) FILTER (WHERE function_name IS NOT NULL), 0), count(*) "
            "FROM kernels"
        ).fetchone()
        top = run.describe(top_k=3)[["function_name", "calls", "time_spent_pct"]].to_dict("records")
        return {
            "device": run.device,
            "rows": rows,
            "named_share": round(named / total, 6) if total else None,
            "top": top,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="keep the runs and traces here (default: a temporary directory)")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    activities = [torch.profiler.ProfilerActivity.CPU] + (
        [torch.profiler.ProfilerActivity.CUDA] if device == "cuda" else []
    )
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or Path(scratch)
        for name, (module, samples) in workloads(device).items():
            profiler = ModuleFunctionKernelProfiler()
            profiler.profile(module, samples, warmup_iterations=3, out=out / name, overwrite=True)
            profiler.release()
            print(json.dumps({"workload": name, "recording": "profile", **named_share(out / name)}), flush=True)
            with torch.no_grad():
                module(*samples[0][0])
                with torch.profiler.profile(activities=activities) as prof:
                    module(*samples[0][0])
                    if device == "cuda":
                        torch.cuda.synchronize()
            prof.export_chrome_trace(str(out / f"{name}.plain.json"))
            print(json.dumps({"workload": name, "recording": "plain", **named_share(out / f"{name}.plain.json")}))


if __name__ == "__main__":
    main()
