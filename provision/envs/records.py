"""What is stored beside an environment, typed: env.json (the environment), its last check run, its baselines and
its all-reduce runs. One reader and one writer for each file (HOME/state.json, the activation history, is state.py's;
both read through recordfile.py).

Files carry `schema_version`; a file without one (written before records were versioned) is read as version 1, whose
keys it already has. Unknown keys are kept through a rewrite, so a newer provision's additions survive an older one.
A file of the wrong shape is one error naming the file and the key, never a traceback.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from provision.atomic import write_json
from provision.envs.recordfile import (
    SCHEMA_VERSION,
    Fields,
    JSONObject,
    RecordError,
    fix_hint,
    load,
    lock_file,
)
from provision.errors import EnvError
from provision.names import SHELL_NAME

if TYPE_CHECKING:  # read when a record holds runs (switch and rollback load no record: envs/state.py)
    from provision.records.allreduce_runs import AllreduceRun
    from provision.records.results import Baseline, BaselineRun, CheckResult, Reader

ENV_FILE = "env.json"

T = TypeVar("T")
# written only when there is something to say
OPTIONAL_KEYS = (
    "env_template",
    "checks_subset",
    "accepted",
    "profile_files",
)


def _allreduce_runs(stored: list[Fields]) -> list[AllreduceRun]:
    """The all-reduce runs env.json keeps; their classes (a dozen dataclasses) load only where one is stored."""
    if not stored:
        return []
    from provision.records.allreduce_runs import AllreduceRun

    return [_typed(run, AllreduceRun.parse) for run in stored]


def _typed(fields: Fields, parse: Callable[[Reader], T]) -> T:
    """A record of records/results.py read from `fields`: a key of the wrong type is a RecordError naming the file."""
    from provision.records.results import MalformedResult, Reader

    try:
        return parse(Reader(fields.data, fields.where))
    except MalformedResult as exc:
        raise RecordError(f"{fields.path}: {exc}", fix_hint(fields.path)) from None


@dataclass(frozen=True, kw_only=True)
class CheckRun:
    """The last smoke checks: one result per check (id, title, status, reason, details...) and when."""

    results: list[CheckResult]
    at: str
    only: list[str] = field(default_factory=list)  # the ids of a `check --only` run; empty for a full run

    @classmethod
    def parse(cls, fields: Fields) -> CheckRun:
        from provision.records.results import CheckResult

        results = [_typed(result, CheckResult.parse) for result in fields.objects("results")]
        return cls(results=results, at=fields.text("at") or "", only=fields.strings("only"))

    def to_dict(self) -> JSONObject:
        return {
            "results": [r.to_dict() for r in self.results],
            "at": self.at,
            **({"only": self.only} if self.only else {}),
        }


@dataclass(frozen=True, kw_only=True)
class KeptFile:
    """A file of the environment's known-good state beside its lock: one `provision accept` took, or one its profile
    carries ([files]). Its content is kept in the build folder as `KEPT/<sha256>`."""

    path: str  # relative to site-packages, normalized ("../../../bin/tool" for a file elsewhere in the venv)
    sha256: str  # hex, as sha256sum prints it
    at: str = ""  # when it was accepted (or the environment created)
    owner: str | None = (
        None  # "name version" of the distribution whose RECORD lists it then; None when none does
    )
    source: str | None = None  # a profile's file: the file beside the profile it came from

    @classmethod
    def parse(cls, fields: Fields) -> KeptFile:
        path, sha256 = fields.text("path"), fields.text("sha256")
        if (
            not path
            or "\0" in path
            or not sha256
            or len(sha256) != 64
            or not all(c in "0123456789abcdef" for c in sha256)
        ):
            raise RecordError(
                f"{fields.path}: {fields.where} needs a 'path' and a 'sha256' of 64 hex digits",
                fix_hint(fields.path),
            )
        return cls(
            path=path,
            sha256=sha256,
            at=fields.text("at") or "",
            owner=fields.text("owner"),
            source=fields.text("source"),
        )

    @property
    def origin(self) -> str:
        """ "profile" for a profile's file, "accepted" for one `provision accept` took."""
        return "accepted" if self.source is None else "profile"

    def to_dict(self) -> JSONObject:
        document = dataclasses.asdict(self)
        if self.source is None:
            del document["source"]
        return document


def fill_env(template: dict[str, str], *, env: str, venv: str, site: str, arch_list: str) -> dict[str, str]:
    """Return the [env] table with its placeholders filled. A variable that needs {arch_list} is left out when no
    GPU was read (empty list): unset, FlashInfer and the like detect the GPU themselves when they run."""
    values = {"env": env, "venv": venv, "site": site, "arch_list": arch_list}
    return {
        key: value.format(**values)
        for key, value in template.items()
        if arch_list or "{arch_list}" not in value
    }


@dataclass(frozen=True, kw_only=True)
class EnvTemplate:
    """The profile's [env] as written and the nvcc release it was built with: kept when [env] names {arch_list}, so
    that a check fills it again for the GPUs it runs on."""

    env: dict[str, str]
    nvcc: str | None = None

    def to_dict(self) -> JSONObject:
        return {"env": dict(self.env), "nvcc": self.nvcc}

    @classmethod
    def parse(cls, fields: Fields) -> EnvTemplate:
        env = fields.mapping("env")
        if env is None or not all(isinstance(v, str) for v in env.values()):
            raise RecordError(
                f"{fields.path}: key 'env_template.env' is {'missing' if env is None else 'not all strings'}, "
                "expected the profile's [env] (strings)",
                fix_hint(fields.path),
            )
        # a check fills it again: a value it cannot fill is named here, not a KeyError out of `check`
        for key, value in env.items():
            try:
                fill_env({key: value}, env="", venv="", site="", arch_list="9.0a")
            except (KeyError, IndexError, ValueError, AttributeError) as exc:
                raise RecordError(
                    f"{fields.path}: key 'env_template.env' holds {key} = {value[:80]!r}, which cannot be "
                    f"filled ({type(exc).__name__}: {exc}); known: {{env}} {{venv}} {{site}} {{arch_list}}",
                    fix_hint(fields.path),
                ) from exc
        return cls(env=dict(env), nvcc=fields.text("nvcc"))


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
    env_template: EnvTemplate | None = None  # kept when [env] names {arch_list}
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
        """The venv: an adopted one by its own path, not through the build's link. A path this locale cannot name to
        the system (`hômé` kept under UTF-8, read under an ASCII one) is its UnicodeEncodeError (said in one line by
        the CLI), never a venv that looks gone: Path.exists() answers False for it."""
        venv = Path(self.venv) if self.venv else build / "venv"
        os.fsencode(venv)
        return venv

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
            if item.name == "extra" or (
                item.name in OPTIONAL_KEYS and getattr(self, item.name) in (None, [])
            ):
                continue
            value = getattr(self, item.name)
            if item.name in ("checks", "checks_subset", "baseline", "env_template"):
                value = value.to_dict() if value is not None else None
            elif item.name in ("baselines", "allreduce", "accepted", "profile_files"):
                value = [run.to_dict() for run in value]
            document[item.name] = value
        return document

    @classmethod
    def parse(cls, path: Path, data: object, name: str) -> EnvRecord:
        fields = Fields(path, data)
        fields.version()
        env = fields.mapping("env") or {}
        if not all(isinstance(v, str) for v in env.values()):
            raise RecordError(f"{path}: key 'env' holds a non-string value, expected strings", fix_hint(path))
        # shell-env exports each key as is, into an eval: one not a name would run as code
        for (
            key,
            value,
        ) in env.items():
            if not SHELL_NAME.match(key):
                shown = repr(key if len(key) <= 80 else key[:77] + "...")
                raise RecordError(f"{path}: key 'env' holds {shown}, not a variable name", fix_hint(path))
            if "\0" in value:  # no process can be given it: run's exec would fail with a traceback
                raise RecordError(
                    f"{path}: key 'env' holds {key} with a NUL byte in its value", fix_hint(path)
                )
        from provision.records.results import Baseline, BaselineRun

        checks, subset, spec = (
            fields.mapping("checks"),
            fields.mapping("checks_subset"),
            fields.mapping("baseline"),
        )
        template = fields.mapping("env_template")
        known = {item.name for item in dataclasses.fields(cls)} | {"schema_version"}
        return cls(
            name=fields.text("name") or name,
            profile=fields.text("profile"),
            profile_hash=fields.text("profile_hash"),
            profile_path=fields.text("profile_path"),
            cuda=fields.text("cuda"),
            python=fields.text("python"),
            interpreter=fields.text("interpreter"),
            lock=fields.text("lock"),
            created=fields.text("created"),
            adopted=fields.flag("adopted"),
            venv=fields.text("venv"),
            env=dict(env),
            env_template=EnvTemplate.parse(Fields(path, template, "env_template"))
            if template is not None
            else None,
            packages=fields.strings("packages"),
            checks_required=fields.strings("checks_required"),
            size_bytes=fields.integer("size_bytes"),
            baseline=_typed(Fields(path, spec, "baseline"), Baseline.parse) if spec is not None else None,
            checks=CheckRun.parse(Fields(path, checks, "checks")) if checks is not None else None,
            checks_subset=CheckRun.parse(Fields(path, subset, "checks_subset"))
            if subset is not None
            else None,
            baselines=[_typed(run, BaselineRun.parse) for run in fields.objects("baselines")],
            allreduce=_allreduce_runs(fields.objects("allreduce")),
            accepted=[KeptFile.parse(kept) for kept in fields.objects("accepted")],
            profile_files=[KeptFile.parse(kept) for kept in fields.objects("profile_files")],
            extra={k: v for k, v in fields.data.items() if k not in known},
        )


def read(build: Path) -> EnvRecord:
    """The record of the environment built in `build` (an empty one, named after the folder, when it has none)."""
    path = build / ENV_FILE
    data = load(path)
    return EnvRecord(name=build.name) if data is None else EnvRecord.parse(path, data, build.name)


def write(build: Path, record: EnvRecord) -> None:
    """Write env.json atomically: a reader sees the old record or the new one."""
    write_json(build / ENV_FILE, record.to_dict())


def _update(build: Path, change: Callable[[EnvRecord], EnvRecord]) -> EnvRecord:
    """Re-read env.json, apply `change` and write it back, holding a lock on the record: two commands storing a run
    at once (two benches, a check beside a baseline) both keep theirs."""
    import fcntl

    try:
        handle = os.fdopen(lock_file(build / f".{ENV_FILE}.lock"), "a")
    except FileNotFoundError:
        raise _gone(build) from None
    with handle as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not build.is_dir():  # taken away while we waited: never made again by the write below
            raise _gone(build)
        record = change(read(build))
        write(build, record)
        return record


def _gone(build: Path) -> EnvError:
    return EnvError(
        f"{build}: the environment was removed or replaced while this ran; nothing was stored",
        "run it again on the environment as it is now (provision envs lists them)",
    )


def now() -> str:
    """The time a run is stored with: UTC, to the second."""
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def add_checks(
    build: Path, results: list[CheckResult], at: str, only: tuple[str, ...] | None = None
) -> EnvRecord:
    """Store a check run: a full run as the last one, which drops an older --only run; an --only run beside it."""
    if only:
        return _update(
            build,
            lambda current: dataclasses.replace(
                current, checks_subset=CheckRun(results=results, at=at, only=list(only))
            ),
        )
    return _update(
        build,
        lambda current: dataclasses.replace(
            current, checks=CheckRun(results=results, at=at), checks_subset=None
        ),
    )


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
