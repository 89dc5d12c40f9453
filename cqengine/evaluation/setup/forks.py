"""Work in forked processes: a function's result sent back over a pipe, or the traceback
that stopped it.

The workers that publish a pass's documents (cqengine.evaluation.passes.publishing) and the
matcher's answers worked out while a ring is indexed (`Background`, for
cqengine.evaluation.setup.inputs) both answer this way: a forked process shares the parent's
rings and corpus instead of having them pickled.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import traceback

from cqengine.evaluation import EvaluationError


def answer(conn, fn, *args) -> None:
    """In a forked process: send fn's result, or the traceback that stopped it, and end."""
    try:
        conn.send(("ok", fn(*args)))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()
        os._exit(0)  # no need to tear down a copy of the whole parent


class Background:
    """A function's result worked out in a forked process while this one goes on."""

    def __init__(self, fn, *args) -> None:
        ctx = mp.get_context("fork")
        self._recv, send = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=answer, args=(send, fn, *args), daemon=True)
        self._proc.start()
        send.close()

    def result(self):
        try:
            status, payload = self._recv.recv()
        except EOFError:
            status, payload = "error", "it died without a word"
        finally:
            self._recv.close()
            self._proc.join(timeout=5)
            if self._proc.is_alive():
                self._proc.kill()
        if status != "ok":
            raise EvaluationError(f"a background process failed:\n{payload}")
        return payload
