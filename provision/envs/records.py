"""What is stored beside an environment, typed: env.json (the environment), its last check run, its baselines and
its all-reduce runs; and HOME/state.json (the activation history). One reader and one writer for each file.

Files carry `schema_version`; a file without one (written before records were versioned) is read as version 1, whose
keys it already has. Unknown keys are kept through a rewrite, so a newer provision's additions survive an older one.
A file of the wrong shape is one error naming the file and the key, never a traceback.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from provision import regular
from provision.atomic import write_json
from provision.errors import EnvError
from provision.names import SHELL_NAME

if TYPE_CHECKING:  # read when a record holds runs: switch and rollback, which read only state.json, never load them
    from provision.checks.allreduce_runs import AllreduceRun
    from provision.checks.results import Baseline, BaselineRun, CheckResult, Reader

SCHEMA_VERSION = 1
ENV_FILE = "env.json"
STATE_FILE = "state.json"

JSONObject = dict[str, Any]
T = TypeVar("T")
OPTIONAL_KEYS = ("env_template", "checks_subset", "accepted", "profile_files")  # written only when there is something to say


class RecordError(EnvError):
    """A record file that is not JSON, or has a key of the wrong type."""


def _fix_hint(path: Path) -> str:
    return f"fix or remove that key in {path} (written by hand, or by a newer provision?), or recreate the environment"


class _Fields:
    """Typed access to one JSON object of a record file: every wrong type is a RecordError naming file and key."""

    def __init__(self, path: Path, data: object, where: str = "") -> None:
        if not isinstance(data, dict):
            raise RecordError(f"{path}: {where or 'the file'} is {type(data).__name__}, expected an object", _fix_hint(path))
        self.path, self.data, self.where = path, data, where

    def _get(self, key: str, types: tuple[type, ...], default: Any, what: str) -> Any:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            name = f"{self.where}.{key}" if self.where else key
            raise RecordError(f"{self.path}: key {name!r} is {type(value).__name__} {json.dumps(value)[:60]}, expected {what}",
                              _fix_hint(self.path))
        return value

    def text(self, key: str) -> str | None:
        value: str | None = self._get(key, (str,), None, "a string")
        return value

    def flag(self, key: str) -> bool:
        return bool(self._get(key, (bool,), False, "true or false"))

    def number(self, key: str) -> float | None:
        value = self._get(key, (int, float), None, "a number")
        return None if value is None else float(value)

    def integer(self, key: str) -> int | None:
        value: int | None = self._get(key, (int,), None, "an integer")
        return value

    def mapping(self, key: str) -> JSONObject | None:
        value: JSONObject | None = self._get(key, (dict,), None, "an object")
        return value

    def strings(self, key: str) -> list[str]:
        values: list[Any] = self._get(key, (list,), [], "a list of strings")
        if not all(isinstance(v, str) for v in values):
            raise RecordError(f"{self.path}: key {key!r} holds a non-string, expected a list of strings", _fix_hint(self.path))
        return list(values)

    def objects(self, key: str) -> list[_Fields]:
        values: list[Any] = self._get(key, (list,), [], "a list of objects")
        return [_Fields(self.path, value, f"{self.where + '.' if self.where else ''}{key}[{i}]") for i, value in enumerate(values)]

    def version(self) -> int:
        version = self.integer("schema_version") or 1
        if version > SCHEMA_VERSION:
            raise RecordError(f"{self.path}: schema_version {version} is newer than this provision reads ({SCHEMA_VERSION})",
                              "upgrade provision: pip install -U cuda-provision")
        return version


def _typed(fields: _Fields, parse: Callable[[Reader], T]) -> T:
    """A record of checks/results.py read from `fields`: a key of the wrong type is a RecordError naming the file."""
    from provision.checks.results import MalformedResult, Reader

    try:
        return parse(Reader(fields.data, fields.where))
    except MalformedResult as exc:
        raise RecordError(f"{fields.path}: {exc}", _fix_hint(fields.path)) from None


@dataclass(frozen=True, kw_only=True)
class CheckRun:
    """The last smoke checks: one result per check (id, title, status, reason, details...) and when."""

    results: list[CheckResult]
    at: str
    only: list[str] = field(default_factory=list)  # the ids of a `check --only` run; empty for a full run

    @classmethod
    def parse(cls, fields: _Fields) -> CheckRun:
        from provision.checks.results import CheckResult

        results = [_typed(result, CheckResult.parse) for result in fields.objects("results")]
        return cls(results=results, at=fields.text("at") or "", only=fields.strings("only"))

    def to_dict(self) -> JSONObject:
        return {"results": [r.to_dict() for r in self.results], "at": self.at, **({"only": self.only} if self.only else {})}


@dataclass(frozen=True, kw_only=True)
class KeptFile:
    """A file of the environment's known-good state beside its lock: one `provision accept` took, or one its profile
    carries ([files]). Its content is kept in the build folder as `KEPT/<sha256>`."""

    path: str  # relative to site-packages, normalized ("../../../bin/tool" for a file elsewhere in the venv)
    sha256: str  # hex, as sha256sum prints it
    at: str = ""  # when it was accepted (or the environment created)
    owner: str | None = None  # "name version" of the distribution whose RECORD lists it then; None when none does
    source: str | None = None  # a profile's file: the file beside the profile it came from

    @classmethod
    def parse(cls, fields: _Fields) -> KeptFile:
        path, sha256 = fields.text("path"), fields.text("sha256")
        if not path or "\0" in path or not sha256 or len(sha256) != 64 or not all(c in "0123456789abcdef" for c in sha256):
            raise RecordError(f"{fields.path}: {fields.where} needs a 'path' and a 'sha256' of 64 hex digits", _fix_hint(fields.path))
        return cls(path=path, sha256=sha256, at=fields.text("at") or "", owner=fields.text("owner"), source=fields.text("source"))

    @property
    def origin(self) -> str:
        """"profile" for a profile's file, "accepted" for one `provision accept` took."""
        return "accepted" if self.source is None else "profile"

    def to_dict(self) -> JSONObject:
        document = dataclasses.asdict(self)
        if self.source is None:
            del document["source"]
        return document


@dataclass(frozen=True, kw_only=True)
class EnvRecord:
    """env.json: what an environment was built from, and what has been learned about it since."""

    name: str
    profile: str | None = None
    profile_hash: str | None = None
    profile_path: str | None = None
    cuda: str | None = None
    python: str | None = None
    interpreter: str | None = None
    lock: str | None = None
    created: str | None = None
    adopted: bool = False
    venv: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    env_template: JSONObject | None = None  # the profile's [env] and nvcc, kept when [env] names {arch_list}
    packages: list[str] = field(default_factory=list)
    checks_required: list[str] = field(default_factory=list)
    size_bytes: int | None = None
    baseline: Baseline | None = None  # the profile's [baseline] spec, or None for the built-in one
    checks: CheckRun | None = None  # the last full run: what the report's "last smoke checks" shows
    checks_subset: CheckRun | None = None  # a later `check --only` run, kept beside it
    baselines: list[BaselineRun] = field(default_factory=list)
    allreduce: list[AllreduceRun] = field(default_factory=list)
    accepted: list[KeptFile] = field(default_factory=list)  # `provision accept`
    profile_files: list[KeptFile] = field(default_factory=list)  # the profile's [files], as written by create
    extra: JSONObject = field(default_factory=dict)  # keys this version does not know, kept as they were

    def venv_path(self, build: Path) -> Path:
        """The venv: an adopted one by its own path, not through the build's link."""
        return Path(self.venv) if self.venv else build / "venv"

    @property
    def check_results(self) -> list[CheckResult]:
        """The last full run's results."""
        return self.checks.results if self.checks else []

    def latest_results(self) -> dict[str, CheckResult]:
        """Each check's newest result: the last full run, overridden by a later `check --only` run."""
        by_id: dict[str, CheckResult] = {}
        for run in (self.checks, self.checks_subset):
            for result in run.results if run else []:
                by_id[result.id] = result
        return by_id

    def kept_files(self) -> dict[str, KeptFile]:
        """Every file of the known-good state beside the lock, by path: an accepted one wins over the profile's."""
        return {kept.path: kept for kept in [*self.profile_files, *self.accepted]}

    def to_dict(self) -> JSONObject:
        document: JSONObject = {**self.extra, "schema_version": SCHEMA_VERSION}
        for item in dataclasses.fields(self):
            if item.name == "extra" or (item.name in OPTIONAL_KEYS and getattr(self, item.name) in (None, [])):
                continue
            value = getattr(self, item.name)
            if item.name in ("checks", "checks_subset", "baseline"):
                value = value.to_dict() if value is not None else None
            elif item.name in ("baselines", "allreduce", "accepted", "profile_files"):
                value = [run.to_dict() for run in value]
            document[item.name] = value
        return document

    @classmethod
    def parse(cls, path: Path, data: object, name: str) -> EnvRecord:
        fields = _Fields(path, data)
        fields.version()
        env = fields.mapping("env") or {}
        if not all(isinstance(v, str) for v in env.values()):
            raise RecordError(f"{path}: key 'env' holds a non-string value, expected strings", _fix_hint(path))
        for key, value in env.items():  # shell-env exports each key as is, into an eval: one not a name would run as code
            if not SHELL_NAME.match(key):
                shown = repr(key if len(key) <= 80 else key[:77] + "...")
                raise RecordError(f"{path}: key 'env' holds {shown}, not a variable name", _fix_hint(path))
            if "\0" in value:  # no process can be given it: run's exec would fail with a traceback
                raise RecordError(f"{path}: key 'env' holds {key} with a NUL byte in its value", _fix_hint(path))
        from provision.checks.allreduce_runs import AllreduceRun
        from provision.checks.results import Baseline, BaselineRun

        checks, subset, spec = fields.mapping("checks"), fields.mapping("checks_subset"), fields.mapping("baseline")
        known = {item.name for item in dataclasses.fields(cls)} | {"schema_version"}
        return cls(
            name=fields.text("name") or name, profile=fields.text("profile"), profile_hash=fields.text("profile_hash"),
            profile_path=fields.text("profile_path"), cuda=fields.text("cuda"), python=fields.text("python"),
            interpreter=fields.text("interpreter"), lock=fields.text("lock"), created=fields.text("created"),
            adopted=fields.flag("adopted"), venv=fields.text("venv"), env=dict(env), env_template=fields.mapping("env_template"),
            packages=fields.strings("packages"),
            checks_required=fields.strings("checks_required"), size_bytes=fields.integer("size_bytes"),
            baseline=_typed(_Fields(path, spec, "baseline"), Baseline.parse) if spec is not None else None,
            checks=CheckRun.parse(_Fields(path, checks, "checks")) if checks is not None else None,
            checks_subset=CheckRun.parse(_Fields(path, subset, "checks_subset")) if subset is not None else None,
            baselines=[_typed(run, BaselineRun.parse) for run in fields.objects("baselines")],
            allreduce=[_typed(run, AllreduceRun.parse) for run in fields.objects("allreduce")],
            accepted=[KeptFile.parse(kept) for kept in fields.objects("accepted")],
            profile_files=[KeptFile.parse(kept) for kept in fields.objects("profile_files")],
            extra={k: v for k, v in fields.data.items() if k not in known},
        )


def _load(path: Path) -> object | None:
    """The JSON in `path`, None when there is no file; a file that is not JSON is a RecordError."""
    try:
        text = regular.read_text(path, follow=False, errors="replace")  # a pipe would block every command; a link may lead anywhere
    except FileNotFoundError:
        return None
    except OSError as exc:
        if regular.refusal(exc):
            raise RecordError(f"{path}: not a file provision wrote (a link, a pipe or a device)",
                              f"remove it (rm {path}) or put provision's own file back; nothing was changed") from None
        raise RecordError(f"{path}: cannot be read ({exc.strerror})", "check its permissions") from exc
    try:
        data: object = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})", _fix_hint(path)) from exc
    return data


def read(build: Path) -> EnvRecord:
    """The record of the environment built in `build` (an empty one, named after the folder, when it has none)."""
    path = build / ENV_FILE
    data = _load(path)
    return EnvRecord(name=build.name) if data is None else EnvRecord.parse(path, data, build.name)


def write(build: Path, record: EnvRecord) -> None:
    """Write env.json atomically: a reader sees the old record or the new one."""
    write_json(build / ENV_FILE, record.to_dict())


def _update(build: Path, change: Callable[[EnvRecord], EnvRecord]) -> EnvRecord:
    """Re-read env.json, apply `change` and write it back, holding a lock on the record: two commands storing a run
    at once (two benches, a check beside a baseline) both keep theirs."""
    import fcntl

    with os.fdopen(lock_file(build / f".{ENV_FILE}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = change(read(build))
        write(build, record)
        return record


def lock_file(path: Path) -> int:
    """A descriptor of the lock file `path`, made if missing, never through a link (it would make or write a file
    wherever the link leads) nor waiting on a pipe: either is an EnvError naming it (exit 7)."""
    import errno

    from provision import regular

    try:
        return regular.open_fd(path, os.O_RDWR | os.O_CREAT, follow=False)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EINVAL):
            raise
        raise EnvError(f"{path} is not a file provision wrote (a link, a pipe or a device): it is never followed",
                       f"remove it (rm {path}), then run the command again") from None


def add_checks(build: Path, results: list[CheckResult], at: str, only: tuple[str, ...] | None = None) -> EnvRecord:
    """Store a check run: a full run as the last one, which drops an older --only run; an --only run beside it."""
    if only:
        return _update(build, lambda current: dataclasses.replace(
            current, checks_subset=CheckRun(results=results, at=at, only=list(only))))
    return _update(build, lambda current: dataclasses.replace(
        current, checks=CheckRun(results=results, at=at), checks_subset=None))


def set_lock(build: Path, lock: Path) -> EnvRecord:
    """Name the lock an adopted environment was given (`adopt`, `lock --env`), keeping what a check stores meanwhile."""
    return _update(build, lambda current: dataclasses.replace(current, lock=str(lock)))


def add_baseline(build: Path, run: BaselineRun) -> EnvRecord:
    return _update(build, lambda current: dataclasses.replace(current, baselines=[*current.baselines, run]))


def add_allreduce(build: Path, run: AllreduceRun) -> EnvRecord:
    return _update(build, lambda current: dataclasses.replace(current, allreduce=[*current.allreduce, run]))


def set_accepted(build: Path, change: Callable[[list[KeptFile]], list[KeptFile]]) -> EnvRecord:
    """Replace the accepted files with what `change` makes of the current ones (`provision accept`)."""
    return _update(build, lambda current: dataclasses.replace(current, accepted=change(current.accepted)))


# --- HOME/state.json ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class State:
    """HOME/state.json: the names activated, oldest first (what `rollback` walks back through)."""

    history: list[str] = field(default_factory=list)
    extra: JSONObject = field(default_factory=dict)

    def to_dict(self) -> JSONObject:
        return {**self.extra, "schema_version": SCHEMA_VERSION, "history": self.history}


def read_state(root: Path) -> State:
    """HOME/state.json; a damaged one is an error whose hint says how to go on (it never mends itself, and it holds
    nothing but rollback's history: moved aside, the next switch starts a new one)."""
    path = root / STATE_FILE
    try:
        data = _load(path)
        if data is None:
            return State()
        fields = _Fields(path, data)
        fields.version()
        return State(history=fields.strings("history"),
                     extra={k: v for k, v in fields.data.items() if k not in ("history", "schema_version")})
    except RecordError as exc:
        if "is newer than this provision" in exc.message or "cannot be read" in exc.message:
            raise
        raise RecordError(exc.message, f"move it aside (mv {path} {path}.damaged) and run this again: it holds only "
                                       "the history rollback walks back through, and the next switch starts a new one") from None


def write_state(root: Path, state: State) -> None:
    write_json(root / STATE_FILE, state.to_dict())
