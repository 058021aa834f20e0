"""A cap on the memory that input samples keep alive during and after a recording.

A SampleBook keeps a reference to the inputs of every distinct signature, so an intermediate
activation that would be freed right after its call stays alive until the next ``profile()``. Here each
new signature is kept only if the storages its tensors hold, counted once across all kept samples, fit
in what is left of the cap (the observed modules' parameters and buffers are not counted: the model holds
them anyway); otherwise its inputs are replaced at once by their metadata (TensorMeta:
shape, dtype, strides, device, bytes), so the signature is still counted, described in samples.json and
attributed, but its tensors are neither kept in ``function_data`` nor saved in samples.pt.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import torch
from kernelscope.analyzer.rundir import container_items, nested_deeper_than
from kernelscope.analyzer.samples import MAX_NESTING, ObjectRepr, TensorMeta, too_deep

from .sample_descriptions import tensor_meta
from .samples import SampleBook


class CappedSampleBook(SampleBook):
    """A SampleBook whose kept inputs hold at most ``limit_bytes`` of tensor storage (None = no cap)."""

    def __init__(self, limit_bytes: int | None) -> None:
        super().__init__()
        self.limit_bytes = limit_bytes
        self.clear()

    def new_signature(self, function_name: str, sample_id: int, args: tuple, kwargs: dict) -> None:
        """Keep the inputs of a new signature if they fit in the cap, else only their metadata; and only their
        metadata where they nest deeper than samples.json describes (MAX_NESTING), which the analyzer would
        refuse in samples.pt."""
        too_deep = nested_deeper_than(args, MAX_NESTING) or nested_deeper_than(kwargs, MAX_NESTING)
        tensors = [] if too_deep else _tensors(args, kwargs)
        transformed = any(_functorch_wrapped(tensor) for tensor in tensors)
        if self.limit_bytes is None and not too_deep and not transformed:
            return
        new = {} if too_deep or transformed else self._new_storages(tensors, self._kept_storages)
        size = sum(new.values())
        if not (too_deep or transformed) and (self.limit_bytes is None or self.kept_bytes + size <= self.limit_bytes):
            self.kept_bytes += size
            self._kept_storages.update(new)
            return
        self.samples[function_name][sample_id] = (metadata_only(args), metadata_only(kwargs))
        kind = self.too_deep if too_deep else self.transformed if transformed else self.not_kept
        kind.setdefault(function_name, set()).add(sample_id)

    def hold(self, args: tuple, kwargs: dict) -> None:
        """A warm-up call's inputs are held while all the warm-up's calls' inputs fit in ``hold_limit_bytes``;
        once they do not, none are held and the recorded pass is keyed per call."""
        if self.hold_limit_bytes is not None:
            new = self._new_storages(_tensors(args, kwargs), self._held_storages)
            self._held_storages.update(new)
            self.held_bytes += sum(new.values())
            if self.held_bytes > self.hold_limit_bytes:
                self.holding, self.held, self._held_storages = False, [], {}
                return
        self.held.append((args, kwargs))

    def _new_storages(self, tensors: list[torch.Tensor], seen: dict) -> dict:
        """``{storage key: bytes}`` of the storages ``tensors`` (a sample's: _tensors) hold that are not in ``seen``
        (the observed modules' parameters and buffers left out: the model keeps them alive anyway)."""
        persistent = self.persistent
        new = {}
        for tensor in tensors:
            hit = persistent.get(id(tensor))
            if hit is not None and hit[0] is tensor:
                continue
            key, nbytes = _storage(tensor)
            if key not in seen:
                new[key] = nbytes
        return new

    def renumbered(self, function_name: str, new_ids: list[int]) -> None:
        for left_out in (self.not_kept, self.too_deep, self.transformed):
            if function_name in left_out:
                left_out[function_name] = {new_ids[sample_id] for sample_id in left_out[function_name]}

    def is_kept(self, function_name: str, sample_id: int) -> bool:
        """Whether the live inputs of this signature are kept (else only their metadata)."""
        left_out = (self.not_kept, self.too_deep, self.transformed)
        return all(sample_id not in kind.get(function_name, ()) for kind in left_out)

    def report(self) -> dict:
        """The manifest's ``sample_memory`` field."""
        return {
            "limit_bytes": self.limit_bytes,
            "kept_bytes": self.kept_bytes,
            "signatures": sum(len(samples) for samples in self.samples.values()),
            "signatures_not_kept": sum(len(ids) for ids in self.not_kept.values()),
        }

    def reset(self) -> None:
        super().reset()
        self._kept_storages: dict = {}
        self.kept_bytes = 0
        self._held_storages: dict = {}
        self.held_bytes = 0
        self.not_kept: dict[str, set[int]] = {}  # over the cap (report counts them)
        self.too_deep: dict[str, set[int]] = {}  # nested deeper than MAX_NESTING, whatever the cap
        self.transformed: dict[str, set[int]] = {}  # made inside a torch.func transform, whatever the cap


def metadata_only(value: Any, depth: int = 1) -> Any:
    """``value`` with every tensor replaced by its TensorMeta (containers rebuilt, other values kept), down to
    MAX_NESTING levels: a deeper container becomes the description samples.json gives it, holding no tensor."""
    kind = type(value)  # by type: isinstance also runs a __class__ property of the object's own
    if issubclass(kind, torch.Tensor):
        return TensorMeta.from_json(tensor_meta(value))
    if depth > MAX_NESTING and issubclass(kind, (tuple, list, dict)):
        return ObjectRepr(f"{kind.__module__}.{kind.__qualname__}", too_deep(kind))
    if issubclass(kind, (tuple, list)):
        held = container_items(value)  # read without a subclass's own methods, which may raise or never end
        items = [metadata_only(v, depth + 1) for v in held]
        if kind in (tuple, list):
            return kind(items)
        if all(a is b for a, b in zip(items, held, strict=True)):  # torch.Size and other tensor-free tuples
            return value
        if hasattr(kind, "_fields"):  # named tuples keep their type, made as _make makes them (no __new__ of theirs)
            return tuple.__new__(kind, items)
        return tuple(items)
    if issubclass(kind, dict):
        return {k: metadata_only(v, depth + 1) for k, v in container_items(value)}
    return value


# torch.func's wrapped tensors (vmap's BatchedTensor, grad's GradTrackingTensor…), which die with their transform:
# of a call made inside one, only its inputs' metadata can outlive the call
_functorch_wrapped = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", lambda _: False)


def _tensors(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensors among a call's inputs (_collect_tensors)."""
    tensors: list[torch.Tensor] = []
    _collect_tensors(args, tensors)
    _collect_tensors(kwargs.values(), tensors)
    return tensors


def _collect_tensors(values: Any, into: list, depth: int = 1) -> None:
    """Append the tensors among ``values`` (an iterable; nested lists, tuples and dicts included, down to
    MAX_NESTING levels, past which no sample's tensors are kept) to ``into``."""
    if depth > MAX_NESTING:
        return
    for value in values:
        kind = type(value)  # by type: isinstance also runs a __class__ property of the object's own
        if issubclass(kind, torch.Tensor):
            into.append(value)
        elif issubclass(kind, (tuple, list)):
            _collect_tensors(container_items(value), into, depth + 1)
        elif issubclass(kind, dict):
            _collect_tensors([item for _key, item in container_items(value)], into, depth + 1)


def _storage(tensor: torch.Tensor) -> tuple[Any, int]:
    """A key of the memory ``tensor`` keeps alive, and its bytes (the whole storage of a view)."""
    if tensor.is_meta:  # no memory behind it
        return id(tensor), 0
    try:
        storage = tensor.untyped_storage()
        if storage.device.type == "meta":  # a FakeTensor's: no memory behind it either (and its data_ptr() warns)
            return id(tensor), 0
        return (tensor.device, storage.data_ptr()), storage.nbytes()
    except (RuntimeError, NotImplementedError):  # sparse, nested, functional tensors: no plain storage
        return id(tensor), tensor.numel() * tensor.element_size()


def warn_on_samples_not_kept(book: CappedSampleBook, limit_mb: float | None) -> None:
    """Warn (for profile()'s caller: profile -> _profile -> here) of the signatures whose inputs were not kept."""
    signatures = book.report()["signatures"]
    for left_out, why in (
        (book.not_kept, f"of {signatures} distinct signatures were not kept, as they would pass "
                        f"sample_memory_limit_mb={limit_mb}"),
        (book.transformed, "distinct {signatures} called inside torch.func transforms (vmap, grad…) were not kept: "
                           "their tensors end with the transform"),
    ):  # fmt: skip
        count = sum(len(ids) for ids in left_out.values())
        why = why.replace("{signatures}", "signature" if count == 1 else "signatures")
        if count:
            warnings.warn(
                f"kernelscope: the inputs of {count} {why}; their calls are counted and their shapes, dtypes and "
                "strides described, but function_data holds TensorMeta in place of their tensors and samples.pt "
                "leaves them out",
                RuntimeWarning,
                stacklevel=4,
            )


def hold_limit_bytes(device: str, book: CappedSampleBook) -> int | None:
    """How much input storage a recording may hold while its samples are keyed after the recorded pass: half
    the memory free when the warm-up starts, on the GPU (the model's own needs are in the allocator's cache
    by then) or in RAM; the sample memory cap where the free RAM is unknown."""
    if device == "cuda":
        free, _ = torch.cuda.mem_get_info()
        return free // 2
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (AttributeError, ValueError, OSError):  # not a POSIX system that reports it
        return book.limit_bytes
