"""samples.pt and the scripts' sample stores: arguments made loadable with ``torch.load(weights_only=True)``, and
``torch.save`` into a file of the recorder's own, so that a write that fails is the OSError it is."""

from __future__ import annotations

import io
import os
from typing import Any

import torch
from kernelscope.analyzer.rundir import container_items
from kernelscope.analyzer.samples import plain_scalar, safe_repr


def save(value: Any, path: str | os.PathLike) -> None:
    """``torch.save(value)`` to ``path``. Given a path, torch.save turns a failed write (a full disk, a file size
    limit) into a RuntimeError about zip offsets ("unexpected pos 704 vs 598"); given a file, it leaves the
    file's OSError as the RuntimeError's context, which is raised in its place, naming ``path``."""
    with open(path, "wb") as file:
        try:
            torch.save(value, file)
        except RuntimeError as exc:
            failed = exc.__context__
            if not isinstance(failed, OSError):
                raise
            if failed.filename is None:
                failed.filename = os.fspath(path)
            raise failed from None


def loadable(value: Any, storage_dtypes: dict[int, torch.dtype] | None = None) -> Any:
    """Arguments made safe for ``torch.load(weights_only=True)``: tensors (views copied so a slice does
    not drag its whole storage along), plain containers and scalars; anything else as its repr.
    ``storage_dtypes`` (a storage's address: the dtype it is written as) is shared by every value written into one file:
    a tensor viewing a storage written as another dtype (``view_as_real(z)`` beside ``z``) is copied, as
    ``torch.save`` refuses one storage as two dtypes."""
    if issubclass(type(value), torch.Tensor):  # by type: isinstance also runs a __class__ property of the object's
        tensor = _loadable_tensor(value).detach()
        if tensor.layout is torch.strided and tensor.untyped_storage().nbytes() > 2 * tensor.nbytes:
            tensor = tensor.clone()
        if tensor.layout is torch.strided and storage_dtypes is not None:
            storage = tensor.untyped_storage()._cdata  # the storage itself: a fake tensor's data pointer warns
            if storage_dtypes.setdefault(storage, tensor.dtype) != tensor.dtype:
                tensor = tensor.clone()
                storage_dtypes[tensor.untyped_storage()._cdata] = tensor.dtype
        return tensor
    value = plain_scalar(value)
    kind = type(value)
    if value is None or kind in (bool, int, float, str, torch.dtype, torch.device):
        return value
    items = container_items(value)  # read without a subclass's own methods, which may raise or never end
    if issubclass(kind, (tuple, list)):
        values = [loadable(v, storage_dtypes) for v in items]
        return values if issubclass(kind, list) else tuple(values)
    if issubclass(kind, dict):
        return {plain_scalar(k): loadable(v, storage_dtypes) for k, v in items if issubclass(type(k), (str, int))}
    return safe_repr(value)


def _loadable_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor that ``torch.save`` writes and ``torch.load(weights_only=True)`` reads back: an MKLDNN tensor (no
    storage torch.save can reach) in the strided layout, and a tensor of a subclass of the program's own (which
    weights_only refuses, and with it the whole file) as a plain tensor of the same data."""
    if tensor.layout is torch._mkldnn:
        return tensor.to_dense()
    if type(tensor) in (torch.Tensor, torch.nn.Parameter) or tensor.is_nested:  # NestedTensor is one torch reads
        return tensor
    with torch._C.DisableTorchFunctionSubclass():  # its __torch_function__ would make a subclass again
        return tensor.as_subclass(torch.Tensor)


def save_samples(header: dict, kept: dict[str, list], path: str | os.PathLike) -> int:
    """Write samples.pt: ``header`` with ``functions``, each of ``kept``'s samples (args, kwargs) made loadable, None
    where the recorder kept no inputs and where its tensors cannot be made plain ones (a wrapper subclass with no
    storage of its own, as torch.masked's MaskedTensor: the analyzer then reads it back as its description) or
    cannot be written at all (a FakeTensor or a FunctionalTensor, whose storage holds no data: a model that works out
    shapes under a FakeTensorMode calls the functions with them). Returns how many samples were left out so."""
    left_out = 0
    functions: dict[str, list] = {}
    storage_dtypes: dict[int, torch.dtype] = {}
    for name, samples in kept.items():
        functions[name] = []
        for sample in samples:
            try:
                entry = None if sample is None else [list(loadable(sample[0], storage_dtypes)),
                                                     loadable(sample[1], storage_dtypes)]  # fmt: skip
            except Exception:  # noqa: BLE001 (whatever a tensor subclass raises when made plain)
                entry, left_out = None, left_out + 1
            functions[name].append(entry)
    try:
        save({**header, "functions": functions}, path)
    except OSError:
        raise
    except Exception:  # noqa: BLE001 (whatever pickling a tensor with no data of its own raises)
        left_out += _leave_out_unwritable(functions)  # only then: trying each entry alone writes them all twice
        save({**header, "functions": functions}, path)
    return left_out


class _Discard(io.RawIOBase):
    """A file that keeps nothing, to try whether ``torch.save`` can write a value."""

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return memoryview(data).nbytes


def _leave_out_unwritable(functions: dict[str, list]) -> int:
    """Set to None every entry of ``functions`` that ``torch.save`` cannot write alone; returns how many."""
    left_out = 0
    for entries in functions.values():
        for position, entry in enumerate(entries):
            if entry is None:
                continue
            try:
                torch.save(entry, _Discard())
            except Exception:  # noqa: BLE001 (as in save_samples)
                entries[position], left_out = None, left_out + 1
    return left_out
