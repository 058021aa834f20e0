"""An executor for work too small for a pool: ingest.py loads a one-part trace on the thread that waits for it."""

from __future__ import annotations

from concurrent.futures import Future


class CallingThread:
    """An executor that runs each call at once on the calling thread, its outcome in the Future it returns."""

    def __enter__(self) -> CallingThread:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def submit(self, call, *args) -> Future:
        done: Future = Future()
        try:
            done.set_result(call(*args))
        except Exception as exc:  # noqa: BLE001 - handed over in the Future, as a pool thread's would be
            done.set_exception(exc)
        return done
