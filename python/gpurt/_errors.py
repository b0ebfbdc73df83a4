"""gpurt's errors: one exception class per library status.

Every failure of the C library reaches Python as a subclass of
:class:`gpurt.Error` carrying the status's name (``GRT_ERR_PARSE``), its code
and the library's message, e.g. ``device_traces[0][4]: 'size' is not a
non-negative integer``.
"""
from __future__ import annotations


class Error(Exception):
    """A gpurt call failed. ``status`` is the C status name, ``code`` its value."""

    status: str = "GRT_ERR_INTERNAL"
    code: int = -1

    def __init__(self, message: str, status: str | None = None, code: int | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.message} ({self.status})"


class InvalidArgError(Error, ValueError): status = "GRT_ERR_INVALID_ARG"
class NoMemError(Error, MemoryError): status = "GRT_ERR_NOMEM"
class OutOfMemoryError(Error): status = "GRT_ERR_OOM"
class DoubleFreeError(Error): status = "GRT_ERR_DOUBLE_FREE"
class UnknownPointerError(Error): status = "GRT_ERR_UNKNOWN_POINTER"
class InteriorPointerError(Error): status = "GRT_ERR_INTERIOR_POINTER"
class SizeError(Error, ValueError): status = "GRT_ERR_SIZE"
class BusyError(Error): status = "GRT_ERR_BUSY"
class NotReadyError(Error): status = "GRT_ERR_NOT_READY"
class DestroyedError(Error): status = "GRT_ERR_DESTROYED"  # a closed Python object
class WrongDeviceError(Error): status = "GRT_ERR_WRONG_DEVICE"
class NotPermittedError(Error): status = "GRT_ERR_NOT_PERMITTED"
class DeadlockError(Error): status = "GRT_ERR_DEADLOCK"


class CaptureError(Error):
    """A stream-capture rule was broken: the base of the capture statuses, one per CUDA error."""


class CaptureInvalidatedError(CaptureError): status = "GRT_ERR_CAPTURE_INVALIDATED"
class UnsupportedError(Error): status = "GRT_ERR_UNSUPPORTED"
class ParseError(Error, ValueError): status = "GRT_ERR_PARSE"
class IOError(Error, OSError): status = "GRT_ERR_IO"  # noqa: A001 - gpurt.IOError, an OSError
class NotFoundError(Error, LookupError): status = "GRT_ERR_NOT_FOUND"
class StateError(Error): status = "GRT_ERR_STATE"
class RaceError(Error): status = "GRT_ERR_RACE"
class PoisonError(Error): status = "GRT_ERR_POISON"
class FaultInjectedError(Error): status = "GRT_ERR_FAULT_INJECTED"
class NoDeviceError(Error): status = "GRT_ERR_NO_DEVICE"
class DriverError(Error): status = "GRT_ERR_DRIVER"
class InternalError(Error): status = "GRT_ERR_INTERNAL"
class CaptureUnsupportedError(CaptureError): status = "GRT_ERR_CAPTURE_UNSUPPORTED"
class CaptureImplicitError(CaptureError): status = "GRT_ERR_CAPTURE_IMPLICIT"
class GraphCycleError(Error): status = "GRT_ERR_GRAPH_CYCLE"
class CaptureMergeError(CaptureError): status = "GRT_ERR_CAPTURE_MERGE"
class CaptureUnmatchedError(CaptureError): status = "GRT_ERR_CAPTURE_UNMATCHED"
class CaptureUnjoinedError(CaptureError): status = "GRT_ERR_CAPTURE_UNJOINED"
class CaptureIsolationError(CaptureError): status = "GRT_ERR_CAPTURE_ISOLATION"
class CapturedEventError(CaptureError): status = "GRT_ERR_CAPTURED_EVENT"
class CaptureWrongThreadError(CaptureError): status = "GRT_ERR_CAPTURE_WRONG_THREAD"
class InvalidHandleError(Error): status = "GRT_ERR_INVALID_HANDLE"
class GraphExecUpdateError(Error): status = "GRT_ERR_GRAPH_EXEC_UPDATE"


def _with_status(cls: type[Error]) -> list[type[Error]]:
    found = [cls] if "status" in vars(cls) else []
    for sub in cls.__subclasses__():
        found += _with_status(sub)
    return found


#: status name -> exception class, for every status the library can return
BY_STATUS: dict[str, type[Error]] = {cls.status: cls for cls in _with_status(Error) if cls is not Error}

__all__ = ["Error", "CaptureError", "BY_STATUS"] + sorted(c.__name__ for c in BY_STATUS.values())
