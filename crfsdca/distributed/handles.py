"""Partition handles: one interface to a partition in this process or in a Dask actor.

``send(method, *args)`` starts a call and returns something with ``result()``; ``call`` waits
for it. A remote wait has a timeout and a failure names the partition (:class:`WorkerLostError`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from crfsdca.distributed.partition import PartitionSolver
from crfsdca.errors import WorkerLostError

__all__ = ["LocalHandle", "RemoteHandle", "result_of"]


class _Done:
    def __init__(self, value: Any) -> None:
        self.value = value

    def result(self) -> Any:
        return self.value


class LocalHandle:
    """A partition in this process: a method runs at once, or on ``pool`` when one is set."""

    def __init__(self, solver: PartitionSolver) -> None:
        self.solver = solver
        self.pool: ThreadPoolExecutor | None = None

    def send(self, method: str, *args: Any) -> Any:
        if self.pool is not None:
            return self.pool.submit(getattr(self.solver, method), *args)
        return _Done(getattr(self.solver, method)(*args))

    def call(self, method: str, *args: Any) -> Any:
        return getattr(self.solver, method)(*args)


class RemoteHandle:
    """A partition's Dask actor; every wait has a timeout and names the partition on failure."""

    def __init__(self, actor: Any, index: int, timeout: float) -> None:
        self.actor, self.index, self.timeout = actor, index, timeout

    def send(self, method: str, *args: Any) -> _Pending:
        try:
            return _Pending(getattr(self.actor, method)(*args), self.index, self.timeout)
        except Exception as err:  # noqa: BLE001 - a dead actor fails here or in result()
            raise _lost(self.index, err) from err

    def call(self, method: str, *args: Any) -> Any:
        return self.send(method, *args).result()


class _Pending:
    def __init__(self, future: Any, index: int, timeout: float) -> None:
        self.future, self.index, self.timeout = future, index, timeout

    def result(self) -> Any:
        return result_of(self.future, self.index, self.timeout)


def result_of(future: Any, index: int, timeout: float) -> Any:
    try:
        return future.result(timeout=timeout)
    except (OSError, TimeoutError) as err:  # dask: a dead actor's worker is an OSError
        raise _lost(index, err) from err
    except Exception as err:
        if type(err).__name__ in ("CancelledError", "KilledWorker", "FutureCancelledError"):
            raise _lost(index, err) from err
        raise


def _lost(index: int, err: BaseException) -> WorkerLostError:
    detail = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    return WorkerLostError(index, detail)
