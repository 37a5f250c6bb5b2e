"""Load and validate profiles: strict TOML, every mistake one short error naming the file, the key and the fix."""

from __future__ import annotations

import functools
import math
import os
import re
import stat
import string
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidName, canonicalize_name

from provision import toml
from provision.errors import ProfileError
from provision.names import NAME_MAX, NAME_RULE, SHELL_NAME
from provision.records.recipe import Baseline
from provision.stacks import gitauth, profile_files
from provision.stacks.profile_files import ProfileFile
from provision.stacks.urls import redact_text

SCHEMA = 1
DEFAULT_INDEX = "default"
PROFILE_PATH_VARIABLE = "PROVISION_PROFILES"
COMPILER_PACKAGES = ("cuda-toolkit", "nvidia-cuda-nvcc", "nvidia-cuda-nvcc-cu12")
# What an [env] value may name: the environment's folder, its venv, its site-packages, and the GPUs' arch list
# (FLASHINFER_CUDA_ARCH_LIST form, "9.0a 12.0f"), read from the machine when an environment is built and checked.
PLACEHOLDERS = ("env", "venv", "site", "arch_list")
_CUDA = re.compile(r"^\d+\.\d+\Z")  # \Z, not $: "13.0\n" is no release
_PYTHON = re.compile(r"^3\.\d+\Z")
MAX_BYTES = 1 << 20  # a profile is a few hundred bytes; a bigger file is not one
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Package:
    name: str
    index: str = DEFAULT_INDEX
    version: str = ""
    prerelease: bool = False
    extras: tuple[str, ...] = ()
    path: str = ""  # a source tree (uv's `path` source), absolute or relative to the profile's folder
    editable: bool = False  # with `path`: installed editable (the tree stays the user's)
    git: str = ""  # a git repository (uv's `git` source)
    rev: str = ""  # with `git`: the branch, tag or commit to lock

    @property
    def from_source(self) -> bool:
        """Whether it comes from a source tree or a repository rather than an index."""
        return bool(self.path or self.git)

    def requirement(self) -> str:
        extras = f"[{','.join(self.extras)}]" if self.extras else ""
        return f"{self.name}{extras}{self.version}"


@dataclass(frozen=True, kw_only=True)
class Profile:
    name: str
    path: Path
    cuda: str
    description: str = ""
    python: str | None = None
    indexes: dict[str, str] = field(default_factory=dict)  # ordered as written; "default" may be absent
    packages: tuple[Package, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    checks: tuple[str, ...] | None = None  # None: every built-in check
    baseline: Baseline | None = None
    toolkit: str | None = (
        None  # site-packages folder of NVIDIA's compiler wheels ("nvidia/cu13"): {env}/cuda is laid over it
    )
    files: tuple[ProfileFile, ...] = ()  # [files]: the content of each is covered by content_hash
    offline: bool = (
        False  # its machines reach no network: nothing may be downloaded at first use (report FAILs it)
    )
    # the optional features its served path needs (knowledge.toml [[feature_wheel]])
    serves: tuple[str, ...] = ()
    source: bytes = field(default=b"", repr=False, compare=False)  # the profile file's bytes, as read

    @functools.cached_property
    def content_hash(self) -> str:
        """The sha256 of the profile file and of each [files] source it carries (a lock made before a carried file
        changed is refused as for any other change of the profile); "" for a profile read from no file (a lock's own
        description, report/lockself.py). Computed where it is asked for: `lock` asks once uv runs."""
        if not self.source:
            return ""
        import hashlib

        digest = hashlib.sha256(self.source)
        for file in self.files:
            digest.update(f"\0files\0{file.path}\0{file.sha256}".encode())
        return digest.hexdigest()

    def compiler_cuda(self) -> str | None:
        """The CUDA release of the compiler the profile installs itself (cuda-toolkit[nvcc] or nvidia-cuda-nvcc)."""
        for package in self.packages:
            if package.name in COMPILER_PACKAGES and (
                package.name != "cuda-toolkit" or "nvcc" in package.extras
            ):
                found = re.search(r"(\d+\.\d+)", package.version)
                return found.group(1) if found else self.cuda
        return None

    def bound_index(self, package: str) -> str | None:
        for p in self.packages:
            if canonicalize_name(p.name) == canonicalize_name(package):
                return p.index
        return None


def shipped_dir() -> Path:
    """Profiles shipped with the tool: inside the installed package, or the repository's profiles/ folder."""
    package = Path(__file__).resolve().parent.parent
    inside = package / "profiles"
    return inside if inside.is_dir() else package.parent / "profiles"


def is_lock_name(filename: str) -> bool:
    """Whether `filename` is named as PEP 751 names a lock (pylock.toml, pylock.NAME.toml): never a profile, though
    it may lie beside them (a lock kept with the profile it was made from)."""
    return filename == "pylock.toml" or (filename.startswith("pylock.") and filename.endswith(".toml"))


def search_dirs() -> list[Path]:
    extra = [Path(p) for p in os.environ.get(PROFILE_PATH_VARIABLE, "").split(os.pathsep) if p]
    return [*extra, shipped_dir()]


@dataclass(frozen=True, kw_only=True)
class Skipped:
    """A file named *.toml in a profiles folder that is no profile file (a folder, a pipe, a link loop), and why."""

    path: Path
    reason: str


@dataclass(frozen=True, kw_only=True)
class Found:
    """What the profiles folders hold: every profile (the first folder winning for a name), and what was passed over."""

    profiles: tuple[Profile, ...]
    skipped: tuple[Skipped, ...] = ()
    # where they were read from, in order: PROVISION_PROFILES's, then the shipped ones
    folders: tuple[Path, ...] = ()


def available() -> list[Profile]:
    """Every profile found, first directory winning for a name; broken files are errors, not omissions (a folder, a
    pipe or a dangling link named *.toml is no profile file, and is passed over: reading a pipe would block)."""
    return list(found().profiles)


def found() -> Found:
    """Every profile found, first directory winning for a name, and what is named *.toml but is no profile file: a
    folder, a pipe, a link loop or a dangling link, with why. A broken profile file is an error, not an omission."""
    seen: dict[str, Profile] = {}
    skipped: list[Skipped] = []
    folders = search_dirs()
    for folder in folders:
        for path in sorted(folder.glob("*.toml")):
            if path.stem in seen or is_lock_name(path.name):
                continue
            try:
                mode = path.stat().st_mode  # follows a link: what a load would open
            except OSError as exc:
                skipped.append(
                    Skipped(
                        path=path,
                        reason=f"cannot read it ({exc.strerror or exc}): a link loop or a dangling link",
                    )
                )
                continue
            if not stat.S_ISREG(mode):
                what = (
                    "a folder"
                    if stat.S_ISDIR(mode)
                    else "a pipe"
                    if stat.S_ISFIFO(mode)
                    else "a device or socket"
                )
                skipped.append(Skipped(path=path, reason=f"not a regular file ({what})"))
                continue
            seen[path.stem] = load_file(path)
    return Found(profiles=tuple(seen.values()), skipped=tuple(skipped), folders=tuple(folders))


def load(name_or_path: str) -> Profile:
    """Return the profile named `name_or_path` (a shipped or PROVISION_PROFILES name) or at that path."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or os.sep in name_or_path:
        if not (candidate.exists() or candidate.is_symlink()):
            raise ProfileError(
                f"{candidate}: no such profile file", "give a path to a .toml profile or a profile name"
            )
        return load_file(candidate)
    for folder in search_dirs():
        path = folder / f"{name_or_path}.toml"
        if (path.exists() or path.is_symlink()) and not is_lock_name(path.name):
            return load_file(path)
    names = sorted(
        {p.stem for folder in search_dirs() for p in folder.glob("*.toml") if not is_lock_name(p.name)}
    )
    raise ProfileError(f"no profile named {name_or_path!r}", f"known profiles: {', '.join(names) or 'none'}")


def load_file(path: Path) -> Profile:
    return parse(_read(path), path)


def parse(raw: bytes, path: Path) -> Profile:
    """The profile `raw` holds, checked key by key; errors name `path` (where it is, or is to be, written)."""
    if len(raw) > MAX_BYTES:
        raise ProfileError(
            f"{path}: larger than {MAX_BYTES >> 20} MiB, so not a profile",
            "a profile is a few hundred bytes of TOML",
        )
    if not raw.strip():
        raise ProfileError(
            f"{path}: the file is empty", "a profile needs at least schema, name, cuda and [packages]"
        )
    encoding = _not_utf8(raw)
    if (
        encoding
    ):  # TOML is UTF-8 alone: "invalid statement at line 1" and "fix the syntax" pointed at nothing to fix
        raise ProfileError(
            f"{path}: written in {encoding}; TOML is UTF-8, without a byte order mark",
            "save it as UTF-8, without a byte order mark",
        )
    try:
        data = toml.loads(raw.decode("utf-8"))
    except toml.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: not valid TOML: {exc}", "fix the syntax at that line") from exc
    except RecursionError as exc:
        raise ProfileError(
            f"{path}: nested too deeply to be a profile",
            "a profile is a few flat tables; see docs/profiles.md",
        ) from exc
    return _validate(path, data, raw)


_BOMS = {b"\xef\xbb\xbf": "UTF-8 with a byte order mark", b"\xff\xfe": "UTF-16", b"\xfe\xff": "UTF-16"}


def _not_utf8(raw: bytes) -> str | None:
    """What `raw` is written in where that is not the UTF-8 TOML must be (as an editor's 'save as' makes it), else
    None."""
    for bom, name in _BOMS.items():
        if raw.startswith(bom):
            return name
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"another encoding (Latin-1, Windows-1252?: its byte {exc.start + 1} is {raw[exc.start]:#04x})"
    return None


def _read(path: Path) -> bytes:
    """The bytes of a regular file; one ProfileError for anything else. Opened without blocking, so a pipe named
    *.toml is refused rather than waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ProfileError(
            f"{path}: cannot read it ({exc.strerror or exc})",
            "check the file, its permissions and any link to it",
        ) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ProfileError(
                f"{path}: not a regular file",
                "a profile is a .toml file; move whatever this is out of the way",
            )
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
            if sum(map(len, chunks)) > MAX_BYTES:
                break
        raw = b"".join(chunks)
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read it ({exc.strerror or exc})", "check the file") from exc
    finally:
        os.close(fd)
    return raw  # one byte past MAX_BYTES at most: parse refuses it


class _Checker:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, expected: str) -> ProfileError:
        return ProfileError(
            f"{self.path}: {key}: {expected}", f"see docs/profiles.md for the {key.split('.')[0]} key"
        )

    def keys(
        self,
        table: Mapping[str, object],
        where: str,
        allowed: Collection[str],
        required: Collection[str] = (),
    ) -> None:
        for key in table:
            if key not in allowed:
                import difflib

                dotted = f"{where}.{key}" if where else key
                close = difflib.get_close_matches(key, sorted(allowed), n=1, cutoff=0.6)
                meant = f"did you mean {close[0]!r}? " if close else ""
                raise self.fail(dotted, f"unknown key ({meant}allowed here: {', '.join(sorted(allowed))})")
        for key in sorted(required):
            if key not in table:
                dotted = f"{where}.{key}" if where else key
                raise self.fail(dotted, "missing; this key is required")

    def typed(self, value: object, key: str, kind: type[T] | tuple[type[T], ...], expected: str) -> T:
        """`value` when it is a `kind` (an int is never a bool); else the error naming `key` and what was `expected`."""
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.fail(key, f"expected {expected}, got {type(value).__name__} {value!r}")
        return value


def _validate(path: Path, data: Mapping[str, object], raw: bytes) -> Profile:
    c = _Checker(path)
    top = {
        "schema",
        "name",
        "description",
        "python",
        "cuda",
        "indexes",
        "packages",
        "env",
        "checks",
        "baseline",
        "toolkit",
        "files",
        "offline",
        "serves",
    }
    c.keys(data, "", top, {"schema", "name", "cuda", "packages"})
    schema = c.typed(data["schema"], "schema", int, "an integer")
    if schema != SCHEMA:
        raise c.fail(
            "schema",
            f"version {schema} is not known to this provision (it reads schema {SCHEMA}); upgrade provision",
        )
    name = c.typed(data["name"], "name", str, "a string")
    if not NAME_RULE.match(name):
        raise c.fail(
            "name",
            f"letters, digits, '.', '_' and '-' only, starting with a letter or digit, at most {NAME_MAX} characters (it names a folder)",
        )
    cuda = c.typed(data["cuda"], "cuda", str, 'a CUDA release such as "13.0"')
    if not _CUDA.match(cuda):
        raise c.fail("cuda", f'expected a CUDA release such as "13.0", got {cuda!r}')
    python = data.get("python")
    if python is not None:
        python = c.typed(python, "python", str, 'a version such as "3.12"')
        if not _PYTHON.match(python):
            raise c.fail("python", f'expected a version such as "3.12", got {python!r}')
    indexes: dict[str, str] = {}
    for index_name, url in c.typed(data.get("indexes", {}), "indexes", dict, "a table of name = URL").items():
        indexes[index_name] = c.typed(url, f"indexes.{index_name}", str, "a URL string")
        if not _INDEX_NAME.match(index_name):
            raise c.fail(
                f"indexes.{index_name}",
                "an index name is letters, digits, '.', '_' and '-', starting with a "
                "letter or digit (an index is given as NAME=URL, and its name names a variable)",
            )
        _index_url(c, f"indexes.{index_name}", url)
    packages = _packages(
        c, c.typed(data["packages"], "packages", dict, "a table of package = { ... }"), indexes, path
    )
    env: dict[str, str] = {}
    for key, value in c.typed(data.get("env", {}), "env", dict, "a table of NAME = value").items():
        env[key] = c.typed(value, f"env.{key}", str, "a string")
        _env_entry(c, key, env[key])
    files = profile_files.parse(c, data.get("files"))
    return Profile(
        name=name,
        path=path,
        cuda=cuda,
        description=c.typed(data.get("description", ""), "description", str, "a string"),
        python=python,
        indexes=indexes,
        packages=packages,
        env=env,
        checks=_checks(c, data.get("checks")),
        baseline=_baseline(c, data.get("baseline")),
        toolkit=_toolkit(c, data.get("toolkit")),
        files=files,
        offline=c.typed(data.get("offline", False), "offline", bool, "true or false"),
        serves=_serves(c, data.get("serves")),
        source=raw,
    )


_INDEX_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")


def _index_url(c: _Checker, key: str, url: str) -> None:
    problem = index_url_problem(url)
    if problem:
        raise c.fail(key, problem)


def index_url_problem(url: str) -> str | None:
    """What is wrong with an index URL, None when nothing is: it must be an http(s) URL with a host and a port that is
    a number, or a file URL; no whitespace or control characters anywhere (uv takes a space-separated list of them);
    `[` and `]` only around an IPv6 host. Shown with its credentials as ****."""
    from urllib.parse import urlsplit

    shown = redact_text(url)
    if not url.startswith(("http://", "https://", "file://")):
        return f"expected an http(s) or file URL, got {shown!r}"
    if re.search(r"[\s\x00-\x1f\x7f]", url):
        return f"{shown!r} holds a space or a control character; write a space as %20"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"{shown!r} is not a valid URL ({exc}): check the host and the port"
    if re.search(r"[\[\]]", parts.path + parts.query + parts.fragment):
        return f"{shown!r} holds '[' or ']' outside an IPv6 host; write them as %5B and %5D"
    if parts.scheme != "file" and not parts.hostname:
        return f"{shown!r} has no host"
    if port == 0:
        return f"{shown!r}: port 0 is no port"
    return None


def _name(c: _Checker, key: str, name: str, what: str) -> None:
    """A distribution or extra name as PEP 508 spells one: no space, marker, URL, version or leading '-'."""
    try:
        canonicalize_name(name, validate=True)
    except InvalidName:
        raise c.fail(
            key,
            f"{name!r} is not a {what} name (letters, digits, '.', '_' and '-', starting and ending with a "
            "letter or digit); a version goes in version, extras in extras, no markers or URLs",
        ) from None


def _env_entry(c: _Checker, key: str, value: str) -> None:
    """A key that a shell takes as a variable name (shell-env prints `export KEY=...`), and only known placeholders."""
    if not SHELL_NAME.match(key):
        raise ProfileError(
            f"{c.path}: env: {key!r} is not a variable name",
            "use letters, digits and '_', not starting with a digit (shell-env exports it as is)",
        )
    if "\0" in value:  # no process can be given it: create failed at its first check, after uv had installed
        raise c.fail(f"env.{key}", "a NUL byte in its value: no environment variable can hold one")
    try:
        fields = [
            (name, spec, conversion)
            for _, name, spec, conversion in string.Formatter().parse(value)
            if name is not None
        ]
    except ValueError as exc:
        raise c.fail(f"env.{key}", f"{exc} in {value!r}; write {{{{ and }}}} for a literal brace") from exc
    for name, spec, conversion in fields:
        if name not in PLACEHOLDERS or spec or conversion:
            known = ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
            raise c.fail(f"env.{key}", f"unknown placeholder {{{name}}} (known: {known})")


def _packages(
    c: _Checker, table: dict[str, object], indexes: dict[str, str], path: Path
) -> tuple[Package, ...]:
    if not table:
        raise c.fail("packages", "empty; list at least one package")
    result = []
    for name, written in table.items():
        key = f"packages.{name}"
        _name(c, key, name, "package")
        spec: dict[str, object] = c.typed(
            {"version": written} if isinstance(written, str) else written,
            key,
            dict,
            'a table such as { index = "pytorch", version = ">=2.10" } or a version string',
        )
        c.keys(spec, key, {"index", "version", "prerelease", "extras", "path", "editable", "git", "rev"})
        source = _source(c, key, spec, path)
        index = c.typed(spec.get("index", DEFAULT_INDEX), f"{key}.index", str, "an index name")
        if index != DEFAULT_INDEX and index not in indexes:
            defined = ", ".join(sorted({*indexes, DEFAULT_INDEX}))
            raise c.fail(
                f"{key}.index", f"names index {index!r}, which [indexes] does not define (defined: {defined})"
            )
        version = c.typed(
            spec.get("version", ""), f"{key}.version", str, 'a version specifier such as ">=2.10"'
        )
        try:
            SpecifierSet(version)
        except InvalidSpecifier as exc:
            raise c.fail(
                f"{key}.version", f"{version!r} is not a valid version specifier (PEP 440), e.g. '>=2.10,<3'"
            ) from exc
        extras = tuple(
            c.typed(e, f"{key}.extras", str, "a string")
            for e in c.typed(spec.get("extras", []), f"{key}.extras", list, "a list of strings")
        )
        for extra in extras:
            _name(c, f"{key}.extras", extra, "extra")
        result.append(
            Package(
                name=name,
                index=index,
                version=version,
                prerelease=c.typed(spec.get("prerelease", False), f"{key}.prerelease", bool, "true or false"),
                extras=extras,
                path=source.path,
                editable=source.editable,
                git=source.git,
                rev=source.rev,
            )
        )
    return tuple(result)


@dataclass(frozen=True)
class _Source:
    path: str
    editable: bool
    git: str
    rev: str


def _source(c: _Checker, key: str, spec: Mapping[str, object], profile: Path) -> _Source:
    """A package's source tree or repository (uv's `path` and `git` sources), checked: one of them, not with an index."""
    path = c.typed(
        spec.get("path", ""), f"{key}.path", str, "a folder (absolute, or relative to the profile)"
    )
    git = c.typed(spec.get("git", ""), f"{key}.git", str, "a git URL")
    editable = c.typed(spec.get("editable", False), f"{key}.editable", bool, "true or false")
    rev = c.typed(spec.get("rev", ""), f"{key}.rev", str, "a branch, tag or commit")
    for part, value in (("path", path), ("git", git), ("rev", rev)):
        # no file name, URL or argument can hold one: uv and every path call would fail (exit 3)
        if "\0" in value:
            raise c.fail(
                f"{key}.{part}", "a NUL byte in its value: no path, URL or git revision can hold one"
            )
    if path and git:
        raise c.fail(key, "give one of path and git, not both")
    if (path or git) and "index" in spec:
        raise c.fail(
            f"{key}.index", "a package from a path or git comes from there, not from an index: remove index"
        )
    if editable and not path:
        raise c.fail(f"{key}.editable", "editable needs path (a source tree)")
    if rev and not git:
        raise c.fail(f"{key}.rev", "rev needs git (a repository)")
    if git and not git.startswith(("https://", "http://", "ssh://", "git+", "file://", "git@")):
        raise c.fail(
            f"{key}.git",
            f"expected a git URL (https://, ssh://, file:// or git@host:...), got {redact_text(git)!r}",
        )
    if git and gitauth.problem(git):
        raise c.fail(f"{key}.git", f"{gitauth.problem(git)}; got {redact_text(git)!r}")
    if path and not Path(path).is_absolute():
        path = str((profile.absolute().parent / path).resolve())
    return _Source(path, editable, git, rev)


def _toolkit(c: _Checker, written: object) -> str | None:
    if written is None:
        return None
    table: dict[str, object] = c.typed(written, "toolkit", dict, 'a table such as { wheels = "nvidia/cu13" }')
    c.keys(table, "toolkit", {"wheels"}, {"wheels"})
    wheels = c.typed(
        table["wheels"], "toolkit.wheels", str, 'a folder inside site-packages, such as "nvidia/cu13"'
    )
    if wheels.startswith("/") or ".." in wheels.split("/"):
        raise c.fail(
            "toolkit.wheels", f"{wheels!r} must be a folder inside site-packages, such as nvidia/cu13"
        )
    return wheels


def _serves(c: _Checker, written: object) -> tuple[str, ...]:
    """The features the profile's served path needs: a wheel that carries no code for a GPU FAILs the stack only when
    it is one of these; else it takes that feature away (report's features to leave off)."""
    from provision import knowledge

    known = knowledge.feature_names()
    listed: list[object] = c.typed(
        written if written is not None else [], "serves", list, f"a list of features ({', '.join(known)})"
    )
    for feature in listed:
        if not isinstance(feature, str) or feature not in known:
            raise c.fail(
                "serves",
                f"unknown feature {feature!r} (known: {', '.join(known)}; provision/knowledge.toml [[feature_wheel]])",
            )
    return tuple(dict.fromkeys(str(f) for f in listed))


def _checks(c: _Checker, written: object) -> tuple[str, ...] | None:
    if written is None:
        return None
    table: dict[str, object] = c.typed(written, "checks", dict, "a table with required = [...]")
    c.keys(table, "checks", {"required"})
    from provision.records.checks import BY_ID

    required: list[object] = c.typed(
        table.get("required", []), "checks.required", list, "a list of check ids"
    )
    for check in required:
        if not isinstance(check, str) or check not in BY_ID:  # a list or table there cannot even be looked up
            raise c.fail("checks.required", f"unknown check {check!r} (known: {', '.join(BY_ID)})")
    return tuple(str(check) for check in required)


def _baseline(c: _Checker, written: object) -> Baseline | None:
    if written is None:
        return None
    table: dict[str, object] = c.typed(written, "baseline", dict, "a table")
    c.keys(
        table, "baseline", {"command", "cwd", "timeout", "pattern", "json_key", "unit", "better"}, {"command"}
    )
    command: list[object] = c.typed(table["command"], "baseline.command", list, "an argv list of strings")
    argv = tuple(a for a in command if isinstance(a, str))
    if not command or len(argv) != len(command):
        raise c.fail("baseline.command", "expected a non-empty list of strings (argv, no shell)")
    if any("\0" in a for a in argv) or "\0" in str(table.get("cwd", "")):
        raise c.fail("baseline", "a NUL byte in its command or cwd: no program can be given one")
    written_pattern, json_key = table.get("pattern"), table.get("json_key")
    if (written_pattern is None) == (json_key is None):
        raise c.fail("baseline", "give exactly one of pattern (a regex with one group) or json_key")
    pattern = (
        None
        if written_pattern is None
        else c.typed(written_pattern, "baseline.pattern", str, "a regular expression")
    )
    if pattern is not None:
        try:
            if re.compile(pattern).groups < 1:
                raise c.fail("baseline.pattern", "needs one capturing group around the figure")
        except re.error as exc:
            raise c.fail("baseline.pattern", f"not a regular expression: {exc}") from exc
    better = c.typed(table.get("better", "higher"), "baseline.better", str, '"higher" or "lower"')
    if better not in ("higher", "lower"):
        raise c.fail("baseline.better", f'expected "higher" or "lower", got {better!r}')
    timeout = c.typed(table.get("timeout", 1800), "baseline.timeout", (int, float), "seconds")
    if not math.isfinite(timeout) or timeout <= 0:
        raise c.fail("baseline.timeout", f"expected a positive number of seconds, got {timeout!r}")
    return Baseline(
        command=argv,
        cwd=c.typed(table.get("cwd", "."), "baseline.cwd", str, "a folder"),
        timeout=float(timeout),
        pattern=pattern,
        json_key=c.typed(json_key, "baseline.json_key", str, "a key") if json_key is not None else None,
        unit=c.typed(table.get("unit", ""), "baseline.unit", str, "a unit such as tok/s"),
        better="lower" if better == "lower" else "higher",
    )
