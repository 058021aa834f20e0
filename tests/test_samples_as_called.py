"""Samples as the call saw them, read without touching the values. A model that changes a list after passing it to
a call: DenseNet's ``features.append(layer(torch.cat(features)))`` (timm's and torchvision's). The sample of each
torch.cat held the list itself, so every sample, and samples.pt, showed the list as the pass left it (four tensors for
the call that took one), and the recorded pass, keyed after it, seemed to differ from the warm-up: it was recorded
again, keyed per call, with a warning. And a model that slices by 0-dim tensors (Mask R-CNN's
paste_masks_in_image): samples.json wrote the slice's repr, which printed the tensors' values, reading them off the
device inside the recorded pass where it was keyed per call (2,852 device events of Tensor.item that were not the
model's, on the H200)."""

import json
import types
import warnings

import pytest

torch = pytest.importorskip("torch")
from kernelscope.recorder import ModuleFunctionKernelProfiler  # noqa: E402
from kernelscope.recorder.sample_descriptions import repr_without_values  # noqa: E402
from torch import nn  # noqa: E402


class Dense(nn.Module):
    """Each layer takes the concatenation of every feature map before it."""

    def __init__(self, by_keyword: bool):
        super().__init__()
        self.layers = nn.ModuleList(nn.Conv2d(4 * (i + 1), 4, 1) for i in range(3))
        self.by_keyword = by_keyword

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            joined = torch.cat(tensors=features, dim=1) if self.by_keyword else torch.cat(features, 1)
            features.append(layer(joined))
        return torch.stack([torch.cat(features, 1)] * 2)


@pytest.mark.parametrize("warmup_iterations, keys", [(2, "predicted"), (0, "per_call")])
@pytest.mark.parametrize("by_keyword", [False, True])
def test_a_list_changed_after_its_call_is_kept_as_the_call_saw_it(tmp_path, by_keyword, warmup_iterations, keys):
    model, x = Dense(by_keyword).eval(), torch.randn(1, 4, 8, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        profiler = ModuleFunctionKernelProfiler()
        _, data = profiler.profile(model, [((x,), {})], warmup_iterations=warmup_iterations, out=tmp_path / "run")
    assert [str(w.message) for w in caught if "kernelscope" in str(w.message)] == []
    assert profiler.run.manifest["sample_keys"] == keys, "the recorded pass was not recorded again"
    lists = [args[0] if args else kwargs["tensors"] for _, (args, kwargs) in data["torch.cat"]]
    assert [[t.shape[1] for t in tensors] for tensors in lists] == [[4], [4, 4], [4, 4, 4], [4, 4, 4, 4]]
    assert [calls for calls, _ in data["torch.cat"]] == [1, 1, 1, 1]
    assert data["torch.stack"][0][0] == 1
    assert [t.shape for t in data["torch.stack"][0][1][0][0]] == [(1, 16, 8, 8)] * 2


class Paste(nn.Module):
    """Pastes each mask into an image at its box, slicing both by the box's 0-dim tensors."""

    def forward(self, masks, boxes):
        images = []
        for mask, box in zip(masks, boxes, strict=True):
            box = box.to(dtype=torch.int64)
            x0, x1 = max(box[0], 0), min(box[2] + 1, 8)
            image = torch.zeros(8, 8)
            image[x0:x1, x0:x1] = mask[(x0 - box[1]) : (x1 - box[1]), (x0 - box[0]) : (x1 - box[0])]
            images.append(image)
        return torch.stack(images)


def test_slices_by_tensors_are_described_without_reading_the_tensors(tmp_path):
    masks = torch.rand(6, 8, 8)
    boxes = torch.tensor([[0, 0, 3 + i // 2, 4] for i in range(6)], dtype=torch.float32)
    calls = {}
    for warmup_iterations in (3, 0):  # keyed after the pass, then as each call is made
        out = tmp_path / f"run{warmup_iterations}"
        frame, _ = ModuleFunctionKernelProfiler().profile(
            Paste(), [((masks, boxes), {})], warmup_iterations=warmup_iterations, out=out
        )
        calls[warmup_iterations] = frame.groupby("function_name").size().to_dict()
    assert "Tensor.item" not in calls[0] and calls[0] == calls[3], "the keying made calls of its own"
    functions = json.loads((out / "samples.json").read_text())["functions"]
    indices = [sample["args"]["tuple"][1] for sample in functions["Tensor.__getitem__"]]
    reprs = [v["object"]["repr"] for i in indices if isinstance(i, dict) for v in i.get("tuple", []) if "object" in v]
    assert reprs and all(r.startswith("slice(tensor(shape=[], dtype=torch.int64, device=cpu), ") for r in reprs)


class Views(nn.Module):
    """Makes an empty tensor a view of its input's storage (Tensor.set_, as torch.load rebuilds every tensor)."""

    def forward(self, x):
        return torch.empty(0).set_(x.untyped_storage(), 0, (4, 4), (1, 4)).sum()


def test_a_storage_is_described_without_its_bytes(tmp_path):
    """A storage's repr prints every byte, one a line (read off the device where it lies there): that of a 4 MB
    tensor's storage, as torch.load rebuilds it, is 19 MB of text, made in 26 s on the 2-core test machine."""
    for warmup_iterations in (2, 0):  # keyed as each call is made, the set_ call's own input changed by it
        out = tmp_path / f"run{warmup_iterations}"
        ModuleFunctionKernelProfiler().profile(
            Views(), [((torch.randn(16),), {})], warmup_iterations=warmup_iterations, out=out
        )
        [sample] = json.loads((out / "samples.json").read_text())["functions"]["Tensor.set_"]
        storage = sample["args"]["tuple"][1]["object"]
        assert storage == {"type": "torch.storage.UntypedStorage", "repr": "UntypedStorage(nbytes=64, device=cpu)"}
    held = types.SimpleNamespace(storage=torch.randn(3).untyped_storage(), typed=torch.randn(2).storage())
    assert repr_without_values(held) == (
        "namespace(storage=UntypedStorage(nbytes=12, device=cpu), "
        "typed=TypedStorage(dtype=torch.float32, size=2, device=cpu))"
    ), "an object of the model's holding storages"
    assert " of size 12]" in repr(held.storage), "put back"


class Tagged(torch.autograd.Function):
    """An autograd Function of the model's own that takes a file name, as ``os.fsdecode`` gives it."""

    @staticmethod
    def forward(ctx, x, tag):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2, None


class TaggedModel(nn.Module):
    def forward(self, x):
        return Tagged.apply(x, "caf\udce9.bin")  # a Latin-1 byte of a file name: a lone surrogate


def test_a_string_without_utf8_is_kept_as_its_ascii_repr(tmp_path):
    """JSON holds no lone surrogate: the write of samples.json failed after the model had run."""
    ModuleFunctionKernelProfiler().profile(TaggedModel(), [((torch.randn(3),), {})], out=tmp_path / "run")
    (sample,) = json.loads((tmp_path / "run" / "samples.json").read_text())["functions"]["Tagged.apply"]
    assert sample["args"]["tuple"][-1] == {"object": {"type": "builtins.str", "repr": "'caf\\udce9.bin'"}}
