"""The uv seam: find the binary the `uv` dependency ships, check its version, run it, turn its failures into
one-line errors that name what went wrong."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import cache
from pathlib import Path

from provision import proc
from provision.errors import IndexUnreachable, ProvisionError, ResolveError, ToolError
from provision.log import Progress
from provision.stacks import urls

MINIMUM = (0, 9, 0)


_finding = threading.Lock()  # binary() asked from two threads (binary_soon's and the caller's): found once
_locating = threading.Lock()


def binary() -> str:
    """Return the uv binary of the `uv` package (its Python module exposes it), checked against MINIMUM. Found once per
    process, its failure too: a uv that hangs on --version costs its 30 s once, not again in the caller's thread."""
    found = _find()
    if isinstance(found, ToolError):
        raise found
    return found


def located() -> str:
    """The uv binary `binary` returns, its version not checked yet (`run(..., version_after=True)`)."""
    found = _locate()
    if isinstance(found, ToolError):
        raise found
    return found


def binary_soon() -> None:
    """Find uv (`binary`) in a thread of its own: the caller goes on with what comes before uv runs while `uv
    --version` answers (16 ms of a lock's 95 before uv starts); binary() then waits for it, or says its error.
    sysconfig's variables are read here first: Python 3.11 fills them unguarded on first use, and the thread's
    find_uv_bin, meeting them half filled by the caller's packaging.tags, read EXE as None (a TypeError, 1 lock in 3
    under load)."""
    import sysconfig

    sysconfig.get_config_vars()
    threading.Thread(target=_find, name="uv-binary", daemon=True).start()


def _find() -> str | ToolError:
    with _finding:
        return _found()


def _locate() -> str | ToolError:
    with _locating:
        return _located()


@cache
def _found() -> str | ToolError:
    path = _locate()
    if isinstance(path, ToolError):
        return path
    try:
        return _checked(path)
    except ToolError as exc:
        return exc


@cache
def _located() -> str | ToolError:
    try:
        import uv

        return str(uv.find_uv_bin())
    except (ImportError, FileNotFoundError):
        import shutil

        found = shutil.which("uv")  # an image that ships uv's binary without its Python package
        if found is None:
            return ToolError(
                "the uv binary was not found",
                "reinstall provision: pip install cuda-provision (it depends on uv)",
            )
        return found


def _checked(path: str) -> str:
    done = proc.run([path, "--version"], timeout=30)
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", done.stdout)
    version = tuple(int(x) for x in match.groups()) if match else (0, 0, 0)
    if version < MINIMUM:
        raise ToolError(
            f"uv {'.'.join(map(str, version))} at {path} is older than {'.'.join(map(str, MINIMUM))}",
            "upgrade it: pip install -U uv",
        )
    return path


def environment(extra: Mapping[str, str] | None = None, unset: Collection[str] = ()) -> dict[str, str]:
    """The environment uv runs with: the caller's, less every UV_* setting provision does not honour (uvsettings.py:
    the ones it honours are checked by uv's rules, and -v names them), no uv.toml read, its HTTP timeout bounded like
    ours unless UV_HTTP_TIMEOUT says otherwise, no interpreter downloaded, no colour nor wrapping, no log but what
    `extra` asks for (RUST_LOG); then `extra` (the indexes provision gives), less the variables named in `unset`."""
    from provision.stacks import uvsettings

    uvsettings.say_once()
    env = {name: value for name, value in proc.environment().items() if not name.startswith("UV_")}
    env.update(uvsettings.honoured())
    env["UV_NO_CONFIG"] = "1"  # a uv.toml bends resolution as the variables would
    env.setdefault("UV_HTTP_TIMEOUT", str(int(urls.timeout())))
    env.setdefault("UV_HTTP_RETRIES", "2")
    # Never fetch an interpreter behind the user's back: a missing Python is reported with how to get it.
    env["UV_PYTHON_DOWNLOADS"] = "never"
    # uv's words are read, not shown: never coloured (a CI's FORCE_COLOR had its errors' "error:" arrive as escapes)
    for forcing in ("FORCE_COLOR", "CLICOLOR_FORCE"):
        env.pop(forcing, None)
    env["NO_COLOR"] = "1"
    # nor broken over lines: an exported COLUMNS had uv wrap its error, and the one line said lost the file and why
    env.pop("COLUMNS", None)
    # uv's log is provision's to ask for (lock's UV_FETCHES), never the caller's: a RUST_LOG=trace wrote multi-line
    # entries whose later lines read as uv's error, and every URL uv asked, into the error provision says
    env.pop("RUST_LOG", None)
    env.update(extra or {})
    if "UV_DEFAULT_INDEX" in (extra or {}):
        env.pop("UV_INDEX_URL", None)  # provision's default index replaces uv's, and uv takes one of the two
    env.pop("VIRTUAL_ENV", None)  # uv must act on the venv we name, never on the caller's
    for name in unset:
        env.pop(name, None)
    return env


def run(
    args: Sequence[str | Path],
    *,
    timeout: float = 1800,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    started: Callable[[], None] | None = None,
    on_line: Callable[[str], None] | None = None,
    version_after: bool = False,
    unset: Collection[str] = (),
    ahead: bool = False,
) -> proc.Completed:
    """Run uv from the main thread; it dies with provision (a kill -9 leaves no install writing on). With
    `progress`, each line uv writes on stderr (what it downloads, installs) is handed to it as it comes, and with
    `on_line` each line as it is (uv's log, where `env`'s RUST_LOG asks for one); `started` is called once uv runs
    (proc.run). uv's log lines (DEBUG ...) are no part of an error said. With `version_after` (a command that
    writes only in a folder of provision's own: `pip compile`), uv starts before its version is known, which
    binary_soon's thread checks meanwhile; a uv older than MINIMUM is said once it ends, whatever it answered.
    With `ahead` (`lock`), a uv the `provision` script started ahead that is exactly this one is taken instead of
    starting it (stacks/ahead)."""

    def each(line: str) -> None:
        if on_line is not None:
            on_line(line)
        if progress is not None and not line.startswith(_LOG):
            _say(line, progress)

    argv = [located() if version_after else binary(), *map(str, args)]
    full_env = environment(env, unset)
    pending = None
    if ahead and cwd is not None:
        from provision.stacks import ahead as started_ahead

        pending = started_ahead.claim(argv, full_env, cwd)
    try:
        done = proc.run(
            argv,
            timeout=timeout,
            cwd=cwd if pending is None else Path(pending.folder),
            env=full_env,
            on_stderr_line=None if progress is None and on_line is None else each,
            started=started,
            child=None if pending is None else pending.child,
        )
    finally:
        if pending is not None and cwd is not None:
            started_ahead.taken(pending, cwd)
    if version_after:
        binary()  # too old: that is the error, not what it answered
    if done.timed_out:
        raise ToolError(
            f"uv {args[0]} {args[1] if len(args) > 1 else ''} took longer than {timeout:g} s",
            "retry; check the indexes",
        )
    if not done.ok:
        raise failure("".join(line for line in done.stderr.splitlines(True) if not line.startswith(_LOG)))
    return done


_LOG = ("DEBUG ", "TRACE ", "INFO ", "WARN ")  # uv's log lines, as a RUST_LOG of provision's asks for them


def _say(line: str, progress: Progress) -> None:
    text = urls.redact_text(line.strip())
    if text and not text.startswith(("warning", "error", "×", "hint")):
        # "Downloading torch (846.0MiB)", " + torch==2.9.1", "Installed 61 packages in 3.2s"
        progress(f"uv: {text}")


def index_options(indexes: Mapping[str, str | None]) -> tuple[list[str], dict[str, str]]:
    """uv's index options, all as variables: (no arguments, the variables that carry the indexes and credentials).

    A command line is readable by every local user (ps, /proc/PID/cmdline); a process's environment only by its owner.
    So the indexes reach uv as UV_DEFAULT_INDEX and UV_INDEX (NAME=URL, the URL without its user info: a query token
    or a token in its path stays off the command line too), and each user name and password in uv's own
    UV_INDEX_<NAME>_USERNAME / _PASSWORD. The default index gets a name too ("default") for the same reason.
    """
    env: dict[str, str] = {}
    listed: list[str] = []
    for name, url in indexes.items():
        if not url:
            continue
        bare = urls.strip_credentials(url)
        if name == "default":
            env["UV_DEFAULT_INDEX"] = f"{name}={bare}"
        else:
            listed.append(f"{name}={bare}")
        user, password = urls.credentials(url)
        variable = "UV_INDEX_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()
        if user:
            env[f"{variable}_USERNAME"] = user
        if password:
            env[f"{variable}_PASSWORD"] = password
    if listed:
        # uv splits it at spaces: a profile's URL has none (the profile check)
        env["UV_INDEX"] = " ".join(listed)
    return [], env


def sync(
    lock_file: Path,
    python: Path,
    indexes: Mapping[str, str | None],
    *,
    timeout: float = 1800,
    progress: Progress | None = None,
    git: Sequence[str] = (),
) -> proc.Completed:
    """Install `lock_file` into the venv of `python` exactly (hashes verified); credentials for its files come from
    the indexes, and for its git sources from the profile's `git` URLs, by variable (gitauth). With `progress`, what
    uv downloads and installs, package by package."""
    from provision.stacks import gitauth

    args, env = index_options(indexes)
    env |= gitauth.variables(git)
    quiet = [] if progress is not None else ["--quiet"]
    return run(
        ["pip", "sync", str(lock_file), "--python", str(python), *quiet, *args, *link_mode(python)],
        timeout=timeout,
        env=env,
        progress=progress,
    )


FICLONE = 0x40049409  # linux/fs.h: make the target share the source's blocks, copy-on-write


def link_mode(python: Path) -> list[str]:
    """uv's --link-mode for an environment provision builds: one whose files are its own, so that a file patched in
    place never changes uv's cache or another environment built from it (uv hard-links from its cache by default,
    and falls back from clone to hard links). `clone` where the file systems share blocks copy-on-write, else
    `copy`; none where the user chose one in UV_LINK_MODE (uv reads it)."""
    if check_settings().get("UV_LINK_MODE"):
        return []
    return ["--link-mode", "clone" if _reflinks(Path(cache_dir()), python.parent) else "copy"]


def check_settings() -> dict[str, str]:
    """The caller's uv settings provision honours (UV_LINK_MODE, UV_CACHE_DIR, UV_HTTP_TIMEOUT...), each checked by uv's
    own rule: an InputError naming the variable (exit 2) before anything runs, where uv would fail later naming its
    option instead (exit 6); and the CA bundle provision's own requests would trust (urls.check_ca_bundle)."""
    from provision.stacks import uvsettings

    urls.check_ca_bundle()
    return uvsettings.honoured()


def _reflinks(source_dir: Path, target_dir: Path) -> bool:
    """Whether a file in `source_dir` can be cloned into `target_dir` (FICLONE): XFS and btrfs, not ext4."""
    import fcntl
    import tempfile

    try:
        source_dir.mkdir(parents=True, exist_ok=True)
        with (
            tempfile.TemporaryFile(dir=source_dir) as source,
            tempfile.TemporaryFile(dir=target_dir) as target,
        ):
            source.write(b"provision")
            source.flush()
            fcntl.ioctl(target.fileno(), FICLONE, source.fileno())
            return True
    except OSError:
        return False


# what begins a line of uv's message: an error, a cause (old and new spellings, plain and drawn), a hint, a warning;
# with their colons, since a wrapped cause runs on with any word ("HTTP status client" / "error (404 Not Found)")
_STARTS = ("error:", "×", "Caused by:", "cause:", "╰─▶", "├─▶", "hint:", "warning:")


def _unwrapped(text: str) -> list[str]:
    """uv's lines, stripped, each wrapped one joined to what it ran onto. uv wraps an error, cause or hint line at the
    width COLUMNS gives it and indents the rest below its words (or behind `│`); left apart, the URL or package name
    that ran on was dropped from the one line said, and words looked for (`no wheels with a matching`) split in two.
    A line indented deeper than the line it would continue is its continuation, unless it begins a line of its own."""
    lines: list[str] = []
    indent = 0
    joining = False  # the line above is one of uv's error, cause or hint lines, or runs on from one
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped:
            joining = False  # a blank line ends it: what follows (a build's output) is no part of it
            continue
        depth = len(raw) - len(raw.lstrip())
        if joining and not stripped.strip("^~"):
            continue  # uv's carets under the requirement it could not parse: they point at nothing in one line
        if joining and (stripped.startswith("│") or (depth > indent and not stripped.startswith(_STARTS))):
            lines[-1] += " " + stripped.lstrip("│ ")
            continue
        lines.append(stripped)
        indent, joining = depth, stripped.startswith(_STARTS)
    return lines


DISK_ERROR = re.compile(r"\(os error (28|30|122)\)")  # ENOSPC, EROFS, EDQUOT: how uv's Rust names them


def failure(stderr: str) -> ProvisionError:
    """Turn uv's error text into one line and a hint, credentials redacted."""
    lines = _unwrapped(urls.redact_text(stderr))
    text = "\n".join(lines)  # the words looked for below, whole where uv wrapped them
    errors = [re.sub(r"^(error|×)\s*:?\s*", "", line) for line in lines if line.startswith(("error", "×"))]
    causes = [
        line.removeprefix("Caused by:").removeprefix("cause:").strip()
        for line in lines
        if line.startswith(("Caused by", "cause:", "╰─▶", "├─▶"))
    ]
    body = [
        line.lstrip("╰─▶├│ ").strip() for line in lines if not line.startswith(("error", "hint", "warning"))
    ]
    hints = [line.removeprefix("hint:").strip() for line in lines if line.startswith("hint")]
    message = "; ".join(dict.fromkeys(errors + causes)) or (lines[-1] if lines else "uv failed")
    detail = " ".join(body)[:600]
    disk = DISK_ERROR.search(text)
    if disk:  # the file uv could not write is in its message: no pin and no index is to blame
        what = "make that folder writable" if disk.group(1) == "30" else "free space on that disk"
        return ProvisionError(message[:700], f"{what} (uv's cache is UV_CACHE_DIR) and run it again")
    if "no wheels with a matching" in text:
        explanation = " ".join(
            line.removeprefix("cause:").strip() for line in body if "Because" in line or "no wheels" in line
        )
        return ResolveError(
            f"no wheel fits the target Python and platform: {(explanation or detail)[:500]}",
            hints[0] if hints else "choose --python/--platform that the package publishes wheels for",
        )
    if "No solution found" in text or "unsatisfiable" in text:
        from provision.stacks import pinpairs

        # sglang-kernel's exact torch, SGLang beside vLLM: the pair and what to do
        known = pinpairs.named(text)
        if known is not None:
            return known
        explanation = " ".join(
            line.removeprefix("cause:").strip()
            for line in body
            if "Because" in line or "we can conclude" in line or "depends on" in line
        )
        return ResolveError(
            f"the pins cannot all hold: {(explanation or detail)[:700]}",
            hints[0] if hints else "relax one of the versions named above in the profile",
        )
    if "ash mismatch" in text:
        return ResolveError(
            f"hash mismatch: {detail[:500]}",
            "the file changed on the index since it was hashed; re-lock, and check the index",
        )
    if any(
        marker in text
        for marker in (
            "Failed to fetch",
            "Request failed",
            "error sending request",
            "HTTP status",
            "timed out",
            "operation timed out",
        )
    ):
        return IndexUnreachable(
            f"index request failed: {message[:500]}",
            hints[0] if hints else "check that the index is up, or use --index NAME=URL for a mirror",
        )
    return ResolveError(
        message[:700], hints[0] if hints else "run again with -v to see uv's command and its full message"
    )


def cache_dir() -> str:
    """uv's cache folder, as uv reports it; asked once per process for what decides it here (a `create` asked twice).
    UV_CACHE_DIR, where set, is uv's answer as it stands: uv takes it as its --cache-dir, before any configuration file,
    and prints it unchanged (and the uv provision runs gets no UV_NO_CACHE: `environment`); no process is started for it."""
    chosen = os.environ.get("UV_CACHE_DIR")
    if chosen:
        return chosen
    try:
        cwd: str | None = os.getcwd()
    # the shell's folder was removed (a build `provision remove` took): uv is asked all the same
    except OSError:
        cwd = None
    with _ASKING:  # lock's early RECORD reads ask from a thread of their own, beside the main thread: uv once
        return _cache_dir(
            cwd,
            *(
                os.environ.get(name)
                for name in (
                    "UV_CACHE_DIR",
                    "XDG_CACHE_HOME",
                    "HOME",
                    "UV_NO_CACHE",
                    "UV_CONFIG_FILE",
                    "XDG_CONFIG_HOME",
                )
            ),
        )


_ASKING = threading.Lock()


@cache
def _cache_dir(cwd: str | None, *variables: str | None) -> str:
    done = proc.run([binary(), "cache", "dir"], timeout=30, env=environment())
    return done.stdout.strip() or os.environ.get("UV_CACHE_DIR", "")
