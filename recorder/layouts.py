"""Replayed inputs laid out exactly as the recorded ones: shape, dtype, strides, storage offset, device.

samples.pt keeps each input's values, but not always its layout: the recorder copies a view that holds a small
part of a large storage (torch.save would write the whole storage), and that copy is dense. A kernel's speed
depends on the layout it reads (a transposed or sliced operand takes another GEMM path, a misaligned offset
another vector width), so every replayed tensor is rebuilt with the strides samples.json recorded, and with
the stored storage offset where the stored tensor still has those strides.

Only torch and the standard library are used here: ``kernelscope bench --scripts`` copies this module's
source into the standalone scripts it writes.
"""

import torch


def rebuild(tensor, shape, stride, device):
    """A fresh tensor holding ``tensor``'s values, of exactly ``shape`` and ``stride`` on ``device``.

    The storage offset is ``tensor``'s when it has that stride already (the layout was stored as recorded),
    else 0. Gaps between the elements hold zeros. Overlapping strides (an expanded view: stride 0) are written
    through their storage indices, as ``copy_`` refuses a destination whose elements share memory.
    """
    shape, stride = tuple(shape), tuple(stride)
    if tuple(tensor.shape) != shape:
        raise ValueError(f"a stored tensor of shape {list(tensor.shape)} stands for one of shape {list(shape)}")
    offset = tensor.storage_offset() if tuple(tensor.stride()) == stride else 0
    extent = 0 if 0 in shape else 1 + sum((size - 1) * step for size, step in zip(shape, stride, strict=True))
    storage = torch.zeros(offset + extent, dtype=tensor.dtype, device=device)
    out = storage.as_strided(shape, stride, offset)
    if extent == 0:
        return out
    try:
        out.copy_(tensor)
    except RuntimeError:  # elements of ``out`` share memory
        index = torch.arange(offset + extent, device=device).as_strided(shape, stride, offset)
        storage[index.reshape(-1)] = tensor.to(device).reshape(-1)
    return out


def exact_copy(tensor, device):
    """``tensor`` on ``device`` with its own shape, strides and storage offset (a plain ``.to`` makes a view
    with gaps dense)."""
    if tensor.layout != torch.strided:
        return tensor.to(device, copy=True)
    return rebuild(tensor, tensor.shape, tensor.stride(), device)


def map_arguments(value, tensor, device):
    """``value`` with ``tensor(t)`` in place of every tensor and ``device(d)`` in place of every
    ``torch.device`` and string, at any depth of tuples, lists and dicts (in the order the recorder keys them:
    positions, then dict values in order)."""
    if isinstance(value, torch.Tensor):
        return tensor(value)
    if isinstance(value, (torch.device, str)):
        return device(value)
    if isinstance(value, list):
        return [map_arguments(v, tensor, device) for v in value]
    if isinstance(value, dict):
        return {k: map_arguments(v, tensor, device) for k, v in value.items()}
    if isinstance(value, tuple) and not isinstance(value, torch.Size):
        items = [map_arguments(v, tensor, device) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value


def device_mapper(recorded_type, target):
    """The ``device`` argument of ``map_arguments`` that moves what was on a device of type ``recorded_type``
    (``"cuda"``, ``"cpu"``) to the device ``target`` (a CUDA device keeps its index where it exists here);
    devices of other types, and strings that name no device, are left as they are."""
    target = torch.device(target)

    def mapped(value):
        if isinstance(value, str):
            try:
                parsed = torch.device(value)
            except (RuntimeError, ValueError):
                return value
            moved = mapped(parsed)
            return value if moved == parsed else str(moved)
        if value.type != recorded_type:
            return value
        if target.type == "cuda" and value.type == "cuda" and value.index is not None:
            if value.index < torch.cuda.device_count():
                return value
        return target

    return mapped
