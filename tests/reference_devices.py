"""The reference's reading of devices other than Kineto's CUDA and ROCm names (tests/reference.py): launches of any
device's runtime, the device categories of Kineto's forks, an Ascend trace's tasks, and the launch points that flow
arrows give device events without a launch. Written apart from the analyzer's SQL, from the trace's JSON alone."""

from __future__ import annotations

import re
from decimal import Decimal

DEVICE = ("kernel", "gpu_memcpy", "gpu_memset")


def _ns(value) -> int:
    return int(Decimal(value) * 1000)


def is_launch(cat) -> bool:
    """A runtime or driver call of any device: <device>_runtime, <device>_driver (CUDA's, XPU's, MTIA's, a fork's:
    musa_runtime, mlu_runtime…), or Kineto's device-agnostic runtime and driver."""
    return isinstance(cat, str) and (cat.endswith(("_runtime", "_driver")) or cat in ("runtime", "driver"))


def runtime_of(cat: str) -> str:
    """The runtime a launch category is of: its text before _runtime or _driver (CUDA's runtime and driver calls are
    one runtime's, numbered by one CUPTI counter), nothing for Kineto's device-agnostic runtime and driver."""
    for suffix in ("_runtime", "_driver"):
        if cat.endswith(suffix):
            return cat[: -len(suffix)]
    return ""


def launch_of(device: dict, launches: list) -> tuple:
    """Of the launches ``(event, index, …)`` that share ``device``'s correlation (one per runtime: each numbers its
    own calls), the one that launched it: the one with its External id (which Kineto copies from its launch), else the
    last one that started before it, else the first after it; of equals, the first in the trace."""
    if len(launches) == 1:
        return launches[0]
    external = (device.get("args") or {}).get("External id")
    start = _ns(device["ts"])

    def key(launch: tuple) -> tuple:
        event, index = launch[0], launch[1]
        at = _ns(event["ts"])
        matches = external is not None and (event.get("args") or {}).get("External id") == external
        return (not matches, at > start, -at if at <= start else at, index)

    return min(launches, key=key)


def fork_device_category(cat):
    """Kineto's name for a fork's device category (privateuse1_kernel, mlu_memcpy, memset…) and for MTIA's on-device
    events (mtia_ccp_events: libkineto's ActivityType.h aliases MTIA_CCP_EVENTS to CONCURRENT_KERNEL), or None."""
    if not isinstance(cat, str) or cat in DEVICE:
        return None
    if cat.endswith("_kernel") or cat == "mtia_ccp_events":
        return "kernel"
    if cat == "memcpy" or cat.endswith("_memcpy"):
        return "gpu_memcpy"
    if cat == "memset" or cat.endswith("_memset"):
        return "gpu_memset"
    return None


def npu_tasks_as_device_events(events: list) -> None:
    """An Ascend trace's tasks (torch_npu, msprof): the complete events without a category, with a "Task Type", of a
    process named "Ascend Hardware": a gpu_memcpy where the type names a MEMCPY, none where it records or waits for an
    event (a stream's synchronisation), else a kernel."""
    objects = [e for e in events if isinstance(e, dict)]
    npu = {
        e.get("pid")
        for e in objects
        if e.get("ph") == "M"
        and e.get("name") == "process_name"
        and (e.get("args") or {}).get("name") == "Ascend Hardware"
    }
    for e in objects:
        args = e.get("args")
        if e.get("ph") != "X" or e.get("cat") is not None or e.get("pid") not in npu or not isinstance(args, dict):
            continue
        task = args.get("Task Type")
        if isinstance(task, str) and not re.search("WAIT|RECORD", task):
            e["cat"] = "gpu_memcpy" if "MEMCPY" in task else "kernel"


def flow_launch_points(events: list, launched: dict) -> dict:
    """{id(device event): (pid, tid, ns)}: where a device event whose correlation no launch in ``launched``
    ({correlation: [(launch event, ...), ...]}) has was launched from, by a flow arrow that finishes on its pid and tid
    within it (at its start, or before its end): the start of the same id and category. Of several, one on a thread
    that runs operators, then the earliest. A start that a launch call starts with, of a flow of several finishes,
    places a device event only where no device event before it on its pid and tid was launched later (by its launch, or
    by such a start of a flow of one finish): a stream runs in launch order."""
    objects = [e for e in events if isinstance(e, dict)]
    starts: dict = {}
    for e in objects:
        if e.get("ph") == "s" and "ts" in e and e.get("pid") is not None and e.get("tid") is not None:
            starts.setdefault((_flow_id(e), e.get("cat")), []).append(e)
    finishes = [e for e in objects if e.get("ph") == "f" and "ts" in e]
    finish_count: dict = {}
    for f in finishes:
        finish_count[(_flow_id(f), f.get("cat"))] = finish_count.get((_flow_id(f), f.get("cat")), 0) + 1
    operator_threads = {(e.get("pid"), e.get("tid")) for e in objects if e.get("cat") == "cpu_op"}
    call_starts = {  # Kineto writes a flow's start at its launch call's start
        (e.get("pid"), e.get("tid"), _ns(e["ts"])) for e in objects if e.get("ph") == "X" and is_launch(e.get("cat"))
    }
    device = [e for e in objects if e.get("ph") == "X" and e.get("cat") in DEVICE]
    points, launch_ns, checked, trusted = {}, {}, set(), {}
    for e in device:
        args = e.get("args") or {}
        if args.get("correlation") in launched:
            launch_ns[id(e)] = _ns(launch_of(e, launched[args["correlation"]])[0]["ts"])
            continue
        begin, end = _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])
        found = []
        for f in finishes:
            at = _ns(f["ts"])
            if (f.get("pid"), f.get("tid")) != (e.get("pid"), e.get("tid")) or not (at == begin or begin <= at < end):
                continue
            for s in starts.get((_flow_id(f), f.get("cat")), []) if _flow_id(f) is not None else []:
                t = _ns(s["ts"])
                shared = finish_count[(_flow_id(f), f.get("cat"))] > 1
                found.append((((s["pid"], s["tid"]) not in operator_threads, t), (s["pid"], s["tid"], t), shared))
        if found:
            _key, point, shared = min(found, key=lambda x: x[0])
            points[id(e)] = point
            at_launch = point in call_starts
            if at_launch and shared:
                checked.add(id(e))
            elif at_launch:
                trusted[id(e)] = point[2]
    streams: dict = {}
    for position, e in enumerate(device):
        streams.setdefault((e.get("pid"), e.get("tid")), []).append((_ns(e["ts"]), position, e))
    for items in streams.values():
        latest = None  # the latest launch of the device events before, on this stream
        for _start, _position, e in sorted(items, key=lambda x: x[:2]):
            if id(e) in checked and latest is not None and latest > points[id(e)][2]:
                del points[id(e)]
            own = launch_ns.get(id(e), trusted.get(id(e)))
            if own is not None:
                latest = own if latest is None else max(latest, own)
    return points


def _flow_id(e: dict) -> int | None:
    """A flow's id as the analyzer reads it: an integer, or a string of an integer's digits."""
    value = e.get("id")
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,18}", value):
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def processes_apart(events: list) -> None:
    """Several processes' traces pasted into one file, whose launches share correlations: each event's correlation
    and External id become its process's own, value * (processes + 1) + its process's number (processes for none).
    A host event's process is its pid; a device event's the one process with a launch of its correlation, else the
    one of those whose launches alone own other correlations of its device (its pid). A device's pid (device events and
    no operator or annotation) launches nothing, whatever calls are filed under it."""
    complete = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and isinstance(e.get("args"), dict)]
    hosts = {e.get("pid") for e in events if isinstance(e, dict) and e.get("cat") in ("cpu_op", "user_annotation")}
    devices = {e.get("pid") for e in events if isinstance(e, dict) and e.get("cat") in DEVICE_CATEGORIES} - hosts
    launches = [e for e in complete if is_launch(e.get("cat")) and e["args"].get("correlation") is not None]
    launches = [e for e in launches if e.get("pid") not in devices]
    launch_pids: dict = {}  # correlation -> pids of the launches that carry it
    for e in launches:
        launch_pids.setdefault(e["args"]["correlation"], set()).add(e.get("pid"))
    by_runtime: dict = {}  # (runtime, correlation) -> pids
    for e in launches:
        by_runtime.setdefault((runtime_of(e["cat"]), e["args"]["correlation"]), set()).add(e.get("pid"))
    if all(len(pids) == 1 for pids in by_runtime.values()):
        return
    number = {pid: n for n, pid in enumerate(sorted(set().union(*launch_pids.values())))}
    device = [e for e in complete if e.get("cat") in DEVICE_CATEGORIES]
    device_owners: dict = {}  # device pid -> the processes whose unshared correlations its events carry
    for e in device:
        pids = launch_pids.get(e["args"].get("correlation"), set())
        if len(pids) == 1:
            device_owners.setdefault(e.get("pid"), set()).update(pids)
    owner = {}
    for e in device:
        pids = launch_pids.get(e["args"].get("correlation"), set())
        pids = pids if len(pids) <= 1 else pids & device_owners.get(e.get("pid"), set())
        assert len(pids) <= 1, "the analyzer refuses a device event whose process is unknown"
        owner[id(e)] = next(iter(pids), None)
    for e in events:
        args = e.get("args") if isinstance(e, dict) else None
        if isinstance(args, dict):
            process = number.get(owner.get(id(e), e.get("pid")), len(number))
            for key in ("correlation", "External id"):
                if isinstance(args.get(key), int):
                    args[key] = args[key] * (len(number) + 1) + process
