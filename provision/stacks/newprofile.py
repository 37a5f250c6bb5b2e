"""`provision profiles new NAME --from sglang==VERSION`: a profile written from the serving stack's own pins. SGLang's
Requires-Dist names the torch, sglang-kernel (or sgl-kernel) and FlashInfer it was built and tested with; the profile
binds each to the CUDA index of the chosen release and says, in a comment beside each pin, where it came from."""

from __future__ import annotations

import datetime
import errno
import os
import platform as host_platform
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from provision import regular
from provision.errors import IndexUnreachable, InputError, ProfileError, ProvisionError, UsageError
from provision.names import NAME_MAX, NAME_RULE
from provision.stacks import index, sglang_bench, urls, uvtool, wheelmeta
from provision.stacks.profiles import PROFILE_PATH_VARIABLE, parse

SERVING = "sglang"
# What the output path's failure says about it: the user's to change (exit 2), not the machine's (a full disk: exit 3)
INPUT_ERRNOS = {
    errno.EISDIR,
    errno.ENOTDIR,
    errno.EACCES,
    errno.EPERM,
    errno.EROFS,
    errno.ENOENT,
    errno.EEXIST,
    errno.ENXIO,
    errno.EINVAL,
}
# The packages of SGLang's pins that make the CUDA stack, in the order a profile lists them.
STACK = ("torch", "sglang-kernel", "sgl-kernel", "flashinfer-python", "flashinfer-cubin")
# Where each CUDA build lives: {tag} is cu130 for CUDA 13.0 (the same hosts the shipped profiles name).
CUDA_INDEXES = {
    "pytorch": "https://download.pytorch.org/whl/{tag}",
    "sglang": "https://docs.sglang.io/whl/{tag}",
    "flashinfer": "https://flashinfer.ai/whl/{tag}",
}
BINDING = {"torch": "pytorch", "sglang-kernel": "sglang", "sgl-kernel": "sglang"}
LOCKSTEP = "https://github.com/flashinfer-ai/flashinfer/blob/main/flashinfer/jit/env.py"
COMPILER_EXTRAS = ["nvcc", "crt", "cudart", "cccl", "nvvm"]


@dataclass(frozen=True, kw_only=True)
class Pin:
    name: str
    version: str  # "==2.14.1"
    extras: tuple[str, ...] = ()
    index: str = "default"
    why: str = ""


@dataclass(frozen=True)
class LeftOut:
    """A package the profile does not pin, and why: SGLang does not pin it and its index has no build to match."""

    name: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class NewProfile:
    name: str
    path: Path
    serving: str  # "sglang 0.5.23"
    cuda: str
    python: str
    metadata_from: wheelmeta.Source
    wheel: str
    pins: tuple[Pin, ...] = ()
    indexes: dict[str, str] = field(default_factory=dict)
    left_out: tuple[LeftOut, ...] = ()
    baseline: sglang_bench.Bench = field(default_factory=sglang_bench.Bench)
    source: str = ""  # --from as the user typed it ("sglang": the newest release, which `serving` names)

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "path": str(self.path),
            "serving": self.serving,
            "cuda": self.cuda,
            "python": self.python,
            "metadata_from": self.metadata_from,
            "wheel": self.wheel,
            "indexes": dict(self.indexes),
            "packages": [
                {
                    "name": p.name,
                    "version": p.version,
                    "extras": list(p.extras),
                    "index": p.index,
                    "source": p.why,
                }
                for p in self.pins
            ],
            "left_out": [{"name": x.name, "reason": x.reason} for x in self.left_out],
            "baseline": {
                "command": list(self.baseline.command),
                "json_key": self.baseline.json_key,
                "read_from": self.baseline.read_from,
            }
            if self.baseline.written
            else {"command": None, "reason": self.baseline.reason},
        }


# what makes another index uv's default (no uv.toml is read: uvtool.environment)
DEFAULT_INDEX_VARIABLES = ("UV_DEFAULT_INDEX", "UV_INDEX_URL")


def default_index(*, builtin: bool = False) -> str:
    """The registry uv uses by default (UV_DEFAULT_INDEX or UV_INDEX_URL, else its built-in), as uv itself reports it;
    with `builtin`, the built-in one whatever those variables say (the one whose wheels uv's cache keeps in its `pypi`
    bucket)."""
    empty = Path(os.devnull)
    # --python: this interpreter, so that uv does not look through every Python on the machine (most of its time)
    done = uvtool.run(
        [
            "pip",
            "compile",
            str(empty),
            "--emit-index-url",
            "--no-header",
            "--quiet",
            "--python",
            sys.executable,
        ],
        timeout=60,
        unset=DEFAULT_INDEX_VARIABLES if builtin else (),
    )
    for line in done.stdout.splitlines():
        if line.startswith(("--index-url ", "--default-index ")):
            return line.split(maxsplit=1)[1].strip()
    raise IndexUnreachable("uv did not say which index it uses by default", "pass --index default=URL")


def parse_from(text: str) -> Requirement:
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        raise UsageError(
            f"--from {text!r}: not a requirement ({exc})",
            "write it as sglang==0.5.23, or sglang for the newest release",
        ) from exc
    if canonicalize_name(requirement.name) != SERVING:
        raise UsageError(
            f"--from {text!r}: profiles are written from SGLang's pins", "write it as sglang==VERSION"
        )
    pinned = [s for s in requirement.specifier if s.operator in ("==", "===")]
    if requirement.specifier and not pinned:
        raise UsageError(
            f"--from {text!r}: name one release",
            "write it as sglang==0.5.23, or sglang for the newest release",
        )
    for spec in pinned:
        try:  # packaging accepts the text, and fails only where it compares it: a number past int()'s 4300 digits
            Version(spec.version.removesuffix(".*"))
        except ValueError:
            shown = text if len(text) <= 80 else f"{text[:40]}...({len(text)} characters)"
            raise UsageError(
                f"--from {shown!r}: {spec.operator} names no version a release can have",
                "write it as sglang==0.5.23, or sglang for the newest release",
            ) from None
    return requirement


def cuda_tag(cuda: str) -> str:
    return "cu" + cuda.replace(".", "")


def new(
    name: str,
    source: str,
    *,
    cuda: str = "13.0",
    python: str = "3.12",
    output: Path | None = None,
    overrides: dict[str, str] | None = None,
    force: bool = False,
    model_path: Path | None = None,
) -> NewProfile:
    """Write profile NAME from the pins of the SGLang release `source` names; return what was written."""
    overrides = dict(overrides or {})
    requirement = parse_from(source)
    if not NAME_RULE.match(name):  # the loader's own rule for `name`
        raise UsageError(
            f"{name[:80]!r} is not a profile name",
            f"letters, digits, '.', '_' and '-', starting with a letter or digit, at most {NAME_MAX} characters",
        )
    # checked before the index is asked and before anything is written: they go into URLs, comments and the file
    if not re.fullmatch(r"\d+\.\d+", cuda):
        raise UsageError(f"--cuda {cuda!r}: not a CUDA release", "write it as 13.0 or 12.8")
    if not re.fullmatch(r"3\.\d+", python):
        raise UsageError(f"--python {python!r}: not a Python version", "write it as 3.12")
    path = output or _default_path(name)
    _check_output(path, name, force)
    chosen_default = overrides.pop("default", None)
    registry = chosen_default or default_index()
    files = index.project_files(registry, SERVING)
    version, wheel = _release(files, requirement, python, registry)
    meta, how = wheelmeta.metadata(
        wheel.url, core_metadata=wheel.core_metadata, sha256=wheel.sha256, size=wheel.size
    )
    tag = cuda_tag(cuda)
    indexes = {n: overrides.get(n, url.format(tag=tag)) for n, url in CUDA_INDEXES.items()}
    serving = f"sglang {version}"
    stack = _pins(meta.requires_dist or [], python, serving, wheel.url)
    torch = next((p for p in stack if p.name == "torch"), None)
    if torch is None:
        raise ProfileError(
            f"sglang {version}: its metadata pins no torch",
            "choose a release that pins torch (sglang 0.4 and later)",
        )
    toolkit = _torch_toolkit(registry, torch, python)
    _check_cuda(serving, cuda, stack, torch, toolkit)
    left_out: list[LeftOut] = []
    pins = [
        Pin(
            name=SERVING,
            version=f"=={version}",
            why="the release itself: every one of its Requires-Dist reaches the "
            "resolver through it, not only the CUDA stack below",
        ),
        *stack,
    ]
    pins += _unpinned(registry, indexes, stack, left_out)
    pins += _compiler(registry, cuda, torch, toolkit, left_out)
    if model_path is not None and not (model_path / "config.json").is_file():
        raise InputError(
            f"--model-path {model_path}: no config.json there",
            "name the model's folder (its config.json "
            "gives the shapes; no weights are read: --load-format dummy)",
        )
    bench = sglang_bench.read(wheel.url, str(model_path.resolve()) if model_path else None)
    # an index no package is bound to would still be asked for every other package: only those in use are written
    result = NewProfile(
        baseline=bench,
        name=name,
        path=path,
        serving=serving,
        cuda=cuda,
        python=python,
        metadata_from=how,
        wheel=wheel.filename,
        pins=tuple(pins),
        left_out=tuple(left_out),
        indexes={n: u for n, u in indexes.items() if any(p.index == n for p in pins)},
        source=source,
    )
    if overrides:
        unknown = sorted(set(overrides) - set(indexes))
        if unknown:
            raise UsageError(
                f"--index {unknown[0]}=...: this profile has no index named {unknown[0]!r}",
                f"its indexes: default, {', '.join(indexes)}",
            )
    text = render(result, chosen_default)
    try:
        # what is written must load: checked by the profile loader itself, before writing
        parse(text.encode(), path)
    except ProfileError as exc:
        raise ProfileError(
            f"{exc.message} (in the profile to be written: nothing was written)", exc.hint
        ) from exc
    _write(path, text)
    return result


def _check_output(path: Path, name: str, force: bool) -> None:
    """Refuse, before the index is asked, an output that cannot become this profile's file."""
    if path.is_dir():
        raise InputError(
            f"{path}: is a folder, not a profile file",
            f"give -o the file to write (such as {path / name}.toml), or move that folder out of the way",
        )
    if path.exists() and not force:
        raise InputError(
            f"{path}: already exists", "choose another NAME or -o PATH, or pass --force to replace it"
        )
    folder = path.absolute().parent
    existing = next(p for p in (folder, *folder.parents) if p.exists() or p.is_symlink())
    if not existing.is_dir():
        raise InputError(f"cannot write {path}: {existing} is a file, not a folder", "choose -o in a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(
            f"cannot write {path}: {existing} is not writable", "choose -o in a folder you can write"
        )


def _write(path: Path, text: str) -> None:
    """Write the profile atomically: a failure leaves the old file as it was, or none."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        regular.write_text(path, text)
    except OSError as exc:
        error = InputError if exc.errno in INPUT_ERRNOS else ProvisionError
        raise error(
            f"cannot write the profile to {path}: {exc.strerror or exc}",
            "choose -o in a folder you can write (nothing was written)",
        ) from exc


def _default_path(name: str) -> Path:
    folders = [p for p in os.environ.get(PROFILE_PATH_VARIABLE, "").split(os.pathsep) if p]
    return Path(folders[0] if folders else ".") / f"{name}.toml"


def _release(
    files: list[index.IndexFile], requirement: Requirement, python: str, registry: str
) -> tuple[Version, index.IndexFile]:
    wheels: dict[Version, list[index.IndexFile]] = {}
    for file in files:
        if not file.filename.endswith(".whl"):
            continue
        try:
            _, version, _, tags = parse_wheel_filename(file.filename)
        except (ValueError, InvalidVersion):
            continue
        wheels.setdefault(version, []).append(file)
    wanted = [v for v in wheels if requirement.specifier.contains(v, prereleases=bool(requirement.specifier))]
    # the index answered, and has no such release: the user's to change, not the network's
    if not wanted and wheels:
        newest = ", ".join(str(v) for v in sorted(wheels)[-5:])
        raise UsageError(
            f"--from {requirement}: {urls.redact(registry)} has no sglang release {requirement.specifier}",
            f"newest releases there: {newest}; or --from sglang for the newest",
        )
    if not wanted:
        newest = "none"
        raise IndexUnreachable(
            f"{urls.redact(registry)}: no sglang wheel for {requirement.specifier or 'any release'}",
            f"newest releases there: {newest}",
        )
    version = max(wanted)
    return version, _best_wheel(wheels[version], python)


def _best_wheel(files: list[index.IndexFile], python: str) -> index.IndexFile:
    """The wheel a Linux machine of this architecture with Python `python` would install; its metadata is the one."""
    cp = "cp" + python.replace(".", "")
    machine = host_platform.machine()

    def score(file: index.IndexFile) -> tuple[int, int]:
        tags = parse_wheel_filename(file.filename)[3]
        python_fits = any(t.interpreter in (cp, "py3") for t in tags)
        platform_fits = any(
            t.platform == "any" or (t.platform.startswith("manylinux") and t.platform.endswith(machine))
            for t in tags
        )
        return int(python_fits), int(platform_fits)

    return max(files, key=score)


def _pins(requires: list[Requirement], python: str, serving: str, url: str) -> list[Pin]:
    environment = {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": host_platform.machine(),
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }
    pins: dict[str, Pin] = {}
    for requirement in requires:
        name = str(canonicalize_name(requirement.name))
        if name not in STACK or (requirement.marker and not _holds(requirement, environment, url)):
            continue
        pins[name] = Pin(
            name=name,
            version=str(requirement.specifier),
            extras=tuple(sorted(requirement.extras)),
            index=BINDING.get(name, "default"),
            why=f"{serving} Requires-Dist: {requirement}",
        )
    return [pins[n] for n in STACK if n in pins]


def _holds(requirement: Requirement, environment: dict[str, str], url: str) -> bool:
    """Whether the requirement's marker holds on the target; a marker that cannot be evaluated (a version compared
    with `x`) is an IndexUnreachable naming the wheel, not a traceback."""
    assert requirement.marker is not None
    try:
        return requirement.marker.evaluate(environment)
    # InvalidVersion, UndefinedComparison, UndefinedEnvironmentName
    except (
        ValueError,
        TypeError,
        LookupError,
    ) as exc:
        raise IndexUnreachable(
            f"{urls.redact(url)}: Requires-Dist {str(requirement)[:200]!r}: its marker cannot be evaluated ({exc})"[
                :400
            ],
            "report it to the package's maintainers; choose another release",
        ) from None


def _check_cuda(serving: str, cuda: str, stack: list[Pin], torch: Pin, toolkit: str | None) -> None:
    """Refuse a --cuda whose major is not the one the release's pins are built for: FlashInfer's cuNN extra, and the
    cuda-toolkit the pinned torch requires."""
    built: list[tuple[str, str]] = []
    for pin in stack:
        for extra in pin.extras:
            if re.fullmatch(r"cu\d{2}", extra):
                built.append((extra[2:], f"{pin.why.split(': ', 1)[-1]}"))
    if toolkit:
        built.append(
            (toolkit.split(".")[0], f"torch {torch.version.lstrip('=')} requires cuda-toolkit {toolkit}")
        )
    majors = sorted({major for major, _ in built})
    if majors and cuda.split(".")[0] not in majors:
        raise InputError(
            f"--cuda {cuda}: the pins of {serving} are built for CUDA {' and '.join(majors)} ({'; '.join(w for _, w in built)})",
            f"pass --cuda {toolkit.rsplit('.', 1)[0] if toolkit else majors[0] + '.0'}, or choose an SGLang release built for CUDA {cuda}",
        )


def _versions(url: str, project: str) -> set[Version] | str:
    """The public versions of `project`'s wheels on the index at `url`, or why they could not be read."""
    try:
        files = index.project_files(url, project)
    except ProvisionError as exc:
        return exc.message
    found = set()
    for file in files:
        if not file.filename.endswith(".whl"):
            continue
        try:
            found.add(Version(parse_wheel_filename(file.filename)[1].public))
        except (ValueError, InvalidVersion):
            continue
    return found


def _offered(url: str, project: str, version: str, where: str, left_out: list[LeftOut]) -> bool:
    """Whether the index at `url` has `project` at `version`; where not, what was left out and why goes to `left_out`."""
    found = _versions(url, project)
    if isinstance(found, set) and Version(version) in found:
        return True
    if isinstance(found, str):
        reason = f"{where} could not be read ({found})"
    else:
        newest = f" (newest there: {max(found)})" if found else ""
        # the registry's name is uv's own
        named = "" if where == "the default index" else f" ({urls.redact(url)})"
        reason = f"{where}{named} has no {project} {version}{newest}"
    left_out.append(LeftOut(project, f"{reason}; SGLang does not pin it"))
    return False


def _unpinned(registry: str, indexes: dict[str, str], stack: list[Pin], left_out: list[LeftOut]) -> list[Pin]:
    """FlashInfer's cubin and JIT-cache packages at flashinfer-python's version (flashinfer raises unless they match),
    where SGLang does not pin them and only where the index they would come from has that version."""
    flashinfer = next((p for p in stack if p.name == "flashinfer-python"), None)
    pinned = {p.name for p in stack}
    wanted = [s.version for s in SpecifierSet(flashinfer.version) if s.operator == "=="] if flashinfer else []
    if not wanted:
        return []
    added = []
    if "flashinfer-cubin" not in pinned and _offered(
        registry, "flashinfer-cubin", wanted[0], "the default index", left_out
    ):
        added.append(
            Pin(
                name="flashinfer-cubin",
                version=f"=={wanted[0]}",
                why=f"lockstep with flashinfer-python ({LOCKSTEP})",
            )
        )
    if _offered(indexes["flashinfer"], "flashinfer-jit-cache", wanted[0], "FlashInfer's index", left_out):
        added.append(
            Pin(
                name="flashinfer-jit-cache",
                version=f"=={wanted[0]}",
                index="flashinfer",
                why=f"lockstep with flashinfer-python ({LOCKSTEP}); the CUDA build from FlashInfer's index",
            )
        )
    return added


def _compiler(registry: str, cuda: str, torch: Pin, pinned: str | None, left_out: list[LeftOut]) -> list[Pin]:
    """The profile's own nvcc: the cuda-toolkit release torch's wheel pins where that is this CUDA release (its
    runtime and the compiler then agree) and the default index has it, else the newest cuda-toolkit X.Y release there."""
    found = _versions(registry, "cuda-toolkit")
    releases = (
        {v for v in found if not v.is_prerelease and f"{v.major}.{v.minor}" == cuda}
        if isinstance(found, set)
        else set()
    )
    if pinned and ".".join(pinned.split(".")[:2]) == cuda and Version(pinned) in releases:
        version, why = (
            pinned,
            f"the cuda-toolkit torch {torch.version.lstrip('=')} pins (its Requires-Dist): the environment's own nvcc",
        )
    elif releases:
        version, why = (
            str(max(releases)),
            f"the newest cuda-toolkit {cuda} release on the default index: the environment's own nvcc",
        )
    else:
        reason = found if isinstance(found, str) else f"the default index has no cuda-toolkit {cuda} release"
        left_out.append(
            LeftOut(
                "cuda-toolkit",
                f"{reason}: no compiler of the profile's own (FlashInfer's JIT needs one "
                "on the machine); SGLang does not pin it",
            )
        )
        return []
    return [
        Pin(name="cuda-toolkit", version=f"=={version}", extras=tuple(COMPILER_EXTRAS), why=why),
        Pin(name="ninja", version="", why="FlashInfer's JIT drives its builds with ninja"),
    ]


def _torch_toolkit(registry: str, torch: Pin, python: str) -> str | None:
    """The cuda-toolkit version the registry's torch wheel of the pinned release requires, if it says."""
    wanted = [s.version for s in Requirement(f"torch{torch.version}").specifier if s.operator == "=="]
    wheels = [
        f
        for f in index.project_files(registry, "torch")
        if f.filename.endswith(".whl")
        and "manylinux" in f.filename
        and wanted
        and _version_of(f.filename) == wanted[0]
    ]
    if not wheels:
        return None
    wheel = _best_wheel(wheels, python)
    meta, _ = wheelmeta.metadata(
        wheel.url, core_metadata=wheel.core_metadata, sha256=wheel.sha256, size=wheel.size
    )
    for requirement in meta.requires_dist or []:
        pins = [s.version for s in requirement.specifier if s.operator == "=="]
        if canonicalize_name(requirement.name) == "cuda-toolkit" and pins:
            return pins[0]
    return None


def description(result: NewProfile) -> str:
    """What the profile holds, in one line."""
    stack = ", ".join(f"{p.name} {p.version.lstrip('=')}" for p in result.pins if p.name in STACK)
    text = f"{result.serving} and the CUDA {result.cuda} stack it pins: {stack}"
    extra = [
        f"{p.name} {p.version.lstrip('=')}"
        for p in result.pins
        if p.name in ("flashinfer-cubin", "flashinfer-jit-cache") and p.name not in STACK
    ]
    compiler = next((p for p in result.pins if p.name == "cuda-toolkit"), None)
    text += (f"; with {', '.join(extra)}" if extra else "") + (
        f"; its own nvcc (cuda-toolkit {compiler.version.lstrip('=')})" if compiler else ""
    )
    return text + (f"; left out: {', '.join(x.name for x in result.left_out)}" if result.left_out else "")


def _version_of(filename: str) -> str | None:
    """The version a wheel's file name carries as written (`2.9.0+cu130`); None for a name that is not a wheel's."""
    try:
        parse_wheel_filename(filename)
    except (ValueError, InvalidVersion):
        return None
    return filename.split("-")[1]


def render(result: NewProfile, default_url: str | None) -> str:
    doc = tomlkit.document()
    typed = result.source or result.serving.replace(" ", "==")  # what was asked for, not what it resolved to
    newest = "" if "==" in typed else f", the newest release on {datetime.date.today().isoformat()}"
    doc.add(
        tomlkit.comment(
            f"Written by `provision profiles new {result.name} --from {typed} --cuda {result.cuda} --python {result.python}`"
        )
    )
    doc.add(
        tomlkit.comment(
            f"from the pins of {result.serving}{newest} (the Requires-Dist of {result.wheel}, read by {result.metadata_from})."
        )
    )
    doc.add(tomlkit.comment("Edit freely; regenerate to follow a newer SGLang release."))
    doc["schema"] = 1
    doc["name"] = result.name
    doc["description"] = description(result)
    doc["python"] = result.python
    doc["cuda"] = result.cuda
    indexes = tomlkit.table()
    for name, url in result.indexes.items():
        indexes[name] = url
        indexes[name].comment(f"{cuda_tag(result.cuda)} builds")
    if default_url:
        indexes["default"] = default_url
    doc["indexes"] = indexes
    packages = tomlkit.table()
    for pin in result.pins:
        spec = tomlkit.inline_table()
        if pin.index != "default":
            spec["index"] = pin.index
        if pin.version:
            spec["version"] = pin.version
        if pin.extras:
            spec["extras"] = list(pin.extras)
        packages[pin.name] = spec
        packages[pin.name].comment(pin.why)
    for left in result.left_out:
        packages.add(tomlkit.comment(f"left out: {left.name}: {left.reason}"))
    doc["packages"] = packages
    if any(p.name == "cuda-toolkit" for p in result.pins):
        toolkit = tomlkit.table()
        toolkit["wheels"] = f"nvidia/cu{result.cuda.split('.')[0]}"
        toolkit["wheels"].comment("NVIDIA's compiler wheels: provision lays out {env}/cuda over them")
        doc["toolkit"] = toolkit
    env = tomlkit.table()
    if "toolkit" in doc:
        env["CUDA_HOME"] = "{env}/cuda"
    env["FLASHINFER_CUDA_ARCH_LIST"] = "{arch_list}"
    env["FLASHINFER_CUDA_ARCH_LIST"].comment("filled from the GPUs at create and check time")
    env["FLASHINFER_WORKSPACE_BASE"] = "{env}"
    env["FLASHINFER_WORKSPACE_BASE"].comment(
        "FlashInfer's cubins, JIT modules and PCIe all-reduce tunings: under the environment"
    )
    env["SGLANG_CACHE_DIR"] = "{env}/cache/sglang"
    env["SGLANG_CACHE_DIR"].comment(
        "SGLang's triton, inductor, deep_gemm and cute_aot caches: a rollback never runs on the new stack's"
    )
    doc["env"] = env
    if result.baseline.written:
        baseline = tomlkit.table()
        baseline.add(
            tomlkit.comment(
                f"{result.serving}'s own one-batch benchmark, read from its wheel "
                f"({result.baseline.read_from}): random weights from the model's config.json"
            )
        )
        baseline.add(
            tomlkit.comment(
                "{model}: provision's weight-free model folder; {tp_size}: 1, 2, 4 or 8 as the GPUs "
                "allow; {result}: the JSON lines the benchmark writes, read for json_key"
            )
        )
        baseline["command"] = list(result.baseline.command)
        baseline["json_key"] = result.baseline.json_key
        baseline["unit"] = "tok/s"
        baseline["better"] = "higher"
        baseline["timeout"] = 1800
        doc["baseline"] = baseline
    else:
        doc.add(tomlkit.comment(f"no [baseline]: {result.baseline.reason}; the built-in GPU baseline runs"))
    return tomlkit.dumps(doc).rstrip("\n") + "\n"
