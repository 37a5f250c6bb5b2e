"""Record every NVML answer the probe reads, and replay a recording through the same code.

A recording is a list of calls as nvidia-ml-py (the `pynvml` module) answered them: the function's name, its
arguments (a device handle written as `{"handle": index}`) and either its result or the NVML error code it raised.
`Recorder` wraps the real module; `Replay` answers from a recording, and only with names the installed module has,
with arguments its functions accept: a call the real binding would reject fails the same way in a test. The same
document carries the sysfs answers of the PCI facts (`sysfs`, machine/sysfs.py), recorded and replayed beside NVML's.
"""

from __future__ import annotations

import ctypes
import inspect
import json
from pathlib import Path
from typing import Any

FORMAT = "provision-nvml-recording"
VERSION = 1
NOT_SUPPORTED = 3  # NVML_ERROR_NOT_SUPPORTED: the answer for a call the recording does not hold


class Handle:
    """A device handle in a replay: the index it was got by."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"Handle({self.index})"


def _encode(value: Any, handles: dict[int, int]) -> Any:
    """A JSON form of an NVML answer or argument that `_decode` turns back into the same shape."""
    if isinstance(value, Handle):
        return {"handle": value.index}
    if isinstance(value, ctypes._Pointer):
        return {"handle": handles.get(ctypes.addressof(value.contents), -1) if value else -1}
    if type(value).__name__ == "CArgObject":  # ctypes.byref(structure): an out-parameter, named by its type
        return {"out": type(getattr(value, "_obj", None)).__name__}
    if isinstance(value, bytes):
        return {"bytes": value.decode("utf-8", "replace")}
    if isinstance(value, ctypes.Structure):
        return {"struct": {name: _encode(getattr(value, name), handles) for name, *_ in value._fields_}}
    if isinstance(value, Struct):
        return {"struct": {name: _encode(field, handles) for name, field in vars(value).items()}}
    if isinstance(value, ctypes.Array):
        return [_encode(item, handles) for item in value]
    if isinstance(value, (list, tuple)):
        return [_encode(item, handles) for item in value]
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return {"repr": repr(value)}


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_decode(item) for item in value)
    if isinstance(value, dict):
        if "handle" in value:
            return Handle(int(value["handle"]))
        if "bytes" in value:
            return str(value["bytes"]).encode()
        if "struct" in value:
            return Struct(**{k: _decode(v) for k, v in value["struct"].items()})
    return value


class Struct:
    """A recorded NVML structure: its fields as attributes, as ctypes structures answer them."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def _fill(structure: Any, recorded: Any) -> None:
    """Write a recorded out-parameter back into the caller's ctypes structure, field by field (only its own fields)."""
    if not (isinstance(recorded, dict) and isinstance(recorded.get("struct"), dict)):
        raise RecordingError(f"an out-parameter is not a recorded structure: {str(recorded)[:60]}")
    for name, kind, *_ in structure._fields_:
        if name not in recorded["struct"]:
            continue
        value = _decode(recorded["struct"][name])
        try:
            setattr(structure, name, kind(*value) if isinstance(value, tuple) else value)
        except (TypeError, ValueError, IndexError) as exc:
            raise RecordingError(
                f"the recorded {name} does not fit {type(structure).__name__} ({exc})"
            ) from None


def _key(name: str, args: tuple[Any, ...], handles: dict[int, int]) -> str:
    return name + json.dumps([_encode(a, handles) for a in args])


class Recorder:
    """Wrap pynvml: every nvml* call goes through to the real library and is written down with its answer."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib
        self.calls: list[dict[str, Any]] = []
        self._handles: dict[int, int] = {}

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._lib, name)
        if not (callable(real) and name.startswith("nvml")) or inspect.isclass(real):
            return real

        def call(*args: Any) -> Any:
            entry: dict[str, Any] = {"fn": name, "args": [_encode(a, self._handles) for a in args]}
            try:
                result = real(*args)
            except Exception as exc:
                entry["error"] = int(getattr(exc, "value", 999))
                entry["error_name"] = type(exc).__name__
                self.calls.append(entry)
                raise
            outs = [
                _encode(a._obj, self._handles) if type(a).__name__ == "CArgObject" else None for a in args
            ]
            if any(out is not None for out in outs):
                entry["out"] = outs  # what the call wrote into its out-parameters, filled back in by a replay
            if name.startswith("nvmlDeviceGetHandleBy") and hasattr(result, "contents"):
                index = int(args[0]) if name == "nvmlDeviceGetHandleByIndex" else len(self._handles)
                self._handles[ctypes.addressof(result.contents)] = index
                entry["result"] = {"handle": index}
            else:
                entry["result"] = _encode(result, self._handles)
            self.calls.append(entry)
            return result

        return call

    def document(self, note: str = "", sysfs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The recording: NVML's calls, and the sysfs answers the PCI facts came from (machine/sysfs.py)."""
        version = getattr(self._lib, "__version__", None) or _module_version()
        return {
            "format": FORMAT,
            "version": VERSION,
            "recorded_with": f"nvidia-ml-py {version}",
            "note": note,
            "calls": self.calls,
            "sysfs": sysfs or [],
        }

    def write(self, path: Path, note: str = "", sysfs: list[dict[str, Any]] | None = None) -> None:
        from provision import regular

        regular.write_text(path, json.dumps(self.document(note, sysfs), indent=1) + "\n")


def _module_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("nvidia-ml-py")
    except metadata.PackageNotFoundError:
        return "unknown"


class RecordingError(ValueError):
    """The file is not a recording this version reads."""


class Replay:
    """Answer pynvml's calls from a recording. Names the installed pynvml lacks raise AttributeError, as the module
    would; arguments its function would not bind raise TypeError; a call the recording lacks is NotSupported."""

    replaying = (
        True  # nvml.read asks nothing of this machine for a replay (its kernel module is not the recording's)
    )

    def __init__(self, recording: dict[str, Any]) -> None:
        import pynvml

        if not isinstance(recording, dict) or recording.get("format") != FORMAT:
            raise RecordingError(
                f"not a {FORMAT} document (record one with: provision probe --record-nvml FILE)"
            )
        self._lib = pynvml
        self._answers: dict[str, dict[str, Any]] = {}
        calls = recording.get("calls", [])
        if not isinstance(calls, list):
            raise RecordingError("'calls' is not a list")
        for number, entry in enumerate(calls):
            if not (
                isinstance(entry, dict)
                and isinstance(entry.get("fn"), str)
                and isinstance(entry.get("args"), list)
                and ("result" in entry or isinstance(entry.get("error"), int))
            ):
                raise RecordingError(
                    f"calls[{number}] is not {{fn, args, result or error (an NVML error code)}}"
                )
            try:
                _decode(entry.get("result"))  # a handle that is not an index fails here, not mid-probe
            except (ValueError, TypeError) as exc:
                raise RecordingError(f"calls[{number}] ({entry['fn']}): {exc}") from None
            self._answers.setdefault(entry["fn"] + json.dumps(entry["args"]), entry)

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._lib, name)  # AttributeError for a name the binding does not have
        if not (callable(real) and name.startswith("nvml")) or inspect.isclass(real):
            return real
        signature = inspect.signature(real)

        def call(*args: Any) -> Any:
            signature.bind(*args)  # TypeError for arguments the real function would not take
            entry = self._answers.get(_key(name, args, {}))
            if entry is None:
                raise self._lib.NVMLError(NOT_SUPPORTED)
            if "error" in entry:
                raise self._lib.NVMLError(int(entry["error"]))
            for arg, out in zip(args, entry.get("out") or [], strict=False):
                if out is not None and type(arg).__name__ == "CArgObject":
                    _fill(arg._obj, out)
            return _decode(entry["result"])

        return call
