"""A real torch.distributed job recorded per rank and analyzed as one run: a tensor-parallel MLP block.

Each rank holds half of every Linear's weight (Megatron-style: the first Linear split by output features, the
second by input features), so every layer ends in one ``all_reduce`` made inside the module's forward; an
``all_gather`` of the block's output follows. Every rank calls ``profile(..., out=JOB)`` on the same ``JOB``
(``JOB/rank-<N>/``), then rank 0 analyzes the job: both ranks' rows, the collectives' kernels and the calls
they belong to, ``describe`` per rank and merged, ``diff`` of rank 0 against rank 1, and the job's archive.

Usage:
    python benchmarks/tensor_parallel_job.py OUT [--world-size 2] [--backend nccl|gloo] [--layers 4]

``nccl`` needs one CUDA device per rank (world size 1 is a smoke test on one GPU); ``gloo`` runs on the CPU.
Writes OUT/job/ (the job directory) and OUT/tensor_parallel_job.json; prints a summary. NVLink multicast stays
off in every process (NCCL_NVLS_ENABLE=0 and the others the device machines need), whatever the caller's
environment says.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

# Set before torch loads, in the parent and so in every rank it spawns: multicast over NVLink can take a shared
# host's GPUs out of service.
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
os.environ.update(NO_MULTICAST)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch import nn  # noqa: E402


class ColumnParallelLinear(nn.Module):
    """This rank's slice of a Linear split by output features: no communication."""

    def __init__(self, features: int, out_features: int, world_size: int):
        super().__init__()
        self.part = nn.Linear(features, out_features // world_size)

    def forward(self, x):
        return self.part(x)


class RowParallelLinear(nn.Module):
    """This rank's slice of a Linear split by input features; the partial sums are added across ranks."""

    def __init__(self, in_features: int, features: int, world_size: int):
        super().__init__()
        self.part = nn.Linear(in_features // world_size, features, bias=False)

    def forward(self, x):
        y = self.part(x)
        dist.all_reduce(y)
        return y


class ParallelMLP(nn.Module):
    def __init__(self, features: int, hidden: int, world_size: int):
        super().__init__()
        self.norm = nn.LayerNorm(features)
        self.up = ColumnParallelLinear(features, hidden, world_size)
        self.act = nn.GELU()
        self.down = RowParallelLinear(hidden, features, world_size)

    def forward(self, x):
        return x + self.down(self.act(self.up(self.norm(x))))


class Block(nn.Module):
    """Layers of tensor-parallel MLPs, then every rank's rows gathered (an all_gather)."""

    def __init__(self, layers: int, features: int, hidden: int, world_size: int):
        super().__init__()
        self.layers = nn.ModuleList(ParallelMLP(features, hidden, world_size) for _ in range(layers))
        self.world_size = world_size

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        gathered = [torch.empty_like(x) for _ in range(self.world_size)]
        dist.all_gather(gathered, x)
        return torch.cat(gathered)


def rank_main(rank: int, world_size: int, backend: str, init_file: str, out: str, layers: int) -> None:
    assert all(os.environ.get(k) == v for k, v in NO_MULTICAST.items()), "NVLink multicast must stay off"
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    from kernelscope.recorder import ModuleFunctionKernelProfiler

    torch.manual_seed(rank)  # each rank its own slice of the weights
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = Block(layers, 1024, 4096, world_size).to(device, dtype).eval()
    torch.manual_seed(0)  # every rank the same input, as in tensor parallelism
    # Every rank must make the same collectives, so all ranks run the same passes: two batch sizes.
    samples = [((torch.randn(batch, 128, 1024, device=device, dtype=dtype),), {}) for batch in (8, 4)]
    ModuleFunctionKernelProfiler().profile(
        model, samples, warmup_iterations=3, out=Path(out) / "job", tags={"job": "tensor_parallel", "backend": backend}
    )
    dist.barrier()
    dist.destroy_process_group()


def analyze(out: Path) -> dict:
    """What the job's analysis shows: rows and collectives per rank, summaries, diff, archive."""
    from kernelscope.analyzer import archive_runs, diff, load_run
    from kernelscope.analyzer.archive import Archive

    job = out / "job"
    result: dict = {"job": str(job)}
    with load_run(job) as run:
        result["ranks"] = run.ranks
        kernels = run.profiling_df()
        result["rows_per_rank"] = kernels.groupby("rank").size().to_dict()
        result["device_us_per_rank"] = kernels.groupby("rank")["kernel_us"].sum().round(3).to_dict()
        collective = kernels[
            kernels["kernel"].str.contains("nccl|gloo|allreduce|all_reduce|AllReduce|AllGather", case=False, regex=True)
        ]
        result["collective_kernels"] = (
            collective.groupby(["rank", "module_name", "function_name", "op"], dropna=False)
            .agg(rows=("kernel_us", "size"), us=("kernel_us", "sum"), streams=("stream", "nunique"))
            .reset_index()
            .astype(object)
            .where(lambda f: f.notna(), None)
            .to_dict("records")
        )
        named = kernels["function_name"].notna()
        result["named_pct"] = round(100 * kernels.loc[named, "kernel_us"].sum() / kernels["kernel_us"].sum(), 3)
        result["launch_check_ok"] = {rank: part.check.ok for rank, part in run.parts.items()}
        result["describe_merged"] = run.describe(top_k=0).to_dict("records")
        result["describe_by_rank"] = run.describe_by_rank().to_dict("records")
    if len(result["ranks"]) > 1:
        result["diff_rank0_rank1"] = diff(job / "rank-0", job / "rank-1").head(20).to_dict("records")
    archive = out / "archive"
    archive_runs([job], archive)
    listed = Archive(archive).runs()
    result["archive_runs"] = listed.astype(str).to_dict("records")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    parser.add_argument("--layers", type=int, default=4)
    args = parser.parse_args()
    if args.backend == "nccl" and torch.cuda.device_count() < args.world_size:
        sys.exit(f"--backend nccl needs {args.world_size} CUDA devices, this machine has {torch.cuda.device_count()}")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        mp.spawn(
            rank_main,
            args=(args.world_size, args.backend, str(Path(scratch) / "init"), str(args.out), args.layers),
            nprocs=args.world_size,
        )
    result = analyze(args.out)
    result.update(
        backend=args.backend,
        world_size=args.world_size,
        torch=torch.__version__,
        gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    )
    (args.out / "tensor_parallel_job.json").write_text(json.dumps(result, indent=1, default=str))
    print(
        json.dumps({k: result[k] for k in ("ranks", "rows_per_rank", "device_us_per_rank", "named_pct")}, default=str)
    )
    for row in result["collective_kernels"]:
        print(row)


if __name__ == "__main__":
    main()
