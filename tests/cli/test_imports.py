"""Every module imports on its own in a fresh interpreter (no import cycle hides behind an import order; pip-tools'
tests/test_circular_imports.py is the model), and imports point one way between the layers of docs/architecture.md."""

from __future__ import annotations

import ast
import functools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT

PACKAGE = ROOT / "provision"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(module_name(p) for p in PACKAGE.rglob("*.py") if "payloads" not in p.parts)


# One process imports what provision's modules import from outside provision (found by a first child that imports
# them all), then forks a child per module, which imports that module alone: a cycle shows as an ImportError naming a
# partly initialized module, as it would in an interpreter of its own, since no provision module is in the parent.
# Starting ~100 interpreters that each import click, rich and requests again cost 16 s of CPU; this costs a second.
ALONE = """
import importlib, json, os, sys, traceback

def forked(work):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            said = work()
        except BaseException as error:
            said = ["failed", traceback.format_exception_only(error)[-1].strip()]
        os.write(write, json.dumps(said).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(text) if text else ["failed", "the child died"]

modules = sys.argv[1:]
own = {name.partition(".")[0] for name in modules}
before = set(sys.modules)

def everything():
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException:
            pass
    return [m for m in sys.modules if m not in before and m.partition(".")[0] not in own]

for dependency in forked(everything):
    try:
        importlib.import_module(dependency)
    except BaseException:
        pass
assert not [m for m in sys.modules if m.partition(".")[0] in own], "a dependency imported a module under test"
results = {name: forked(lambda: (importlib.import_module(name), ["ok"])[1]) for name in modules}
print(json.dumps({name: said[1] for name, said in results.items() if said[0] != "ok"}))
"""


def test_every_module_imports_alone_in_a_fresh_process() -> None:
    done = subprocess.run(
        [sys.executable, "-c", ALONE, *MODULES], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr
    failures = json.loads(done.stdout)
    assert len(MODULES) > 40 and not failures, failures


def test_a_cycle_is_found(tmp_path: Path) -> None:
    """The check above fails where a module can only be imported after another (a cycle), as it must."""
    package = tmp_path / "cycle"
    package.mkdir()
    (package / "__init__.py").write_text("import json\n")
    (package / "a.py").write_text("from cycle.b import B\nA = 1\n")
    (package / "b.py").write_text("from cycle.a import A\nB = 2\n")
    (package / "c.py").write_text("import click\n")
    done = subprocess.run(
        [sys.executable, "-c", ALONE, "cycle", "cycle.a", "cycle.b", "cycle.c"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    failures = json.loads(done.stdout)
    assert set(failures) == {"cycle.a", "cycle.b"}, failures
    assert "partially initialized module 'cycle.a'" in failures["cycle.a"]
    assert "partially initialized module 'cycle.b'" in failures["cycle.b"]


# Higher imports lower, never the other way (docs/architecture.md), with no exception: the records every layer reads
# (the check registry, what checks answer, the bench's runs) are a room of their own, provision/records/, below them all.
LAYERS = {
    "provision.__main__": 10,
    "provision.cli": 9,
    "provision.views": 8,
    "provision.commands": 7,
    "provision.report": 6,
    "provision.checks": 5,
    "provision.envs": 4,
    "provision.stacks": 3,
    "provision.scan": 2,
    "provision.machine": 2,
    "provision.proc": 1,
    "provision.log": 1,
    "provision.atomic": 1,
    "provision.regular": 1,
    "provision.wheelfacts": 1,
    "provision.records": 1,
    "provision.errors": 0,
    "provision.knowledge": 0,
    "provision.toml": 0,
    "provision.status": 0,
    "provision": 0,
}


def room(module: str) -> str:
    while module not in LAYERS:
        module = module.rpartition(".")[0]
    return module


def layer(module: str) -> int:
    return LAYERS[room(module)]


def imported(path: Path) -> set[str]:
    """Every provision module `path` imports, at the top or inside a function; annotations-only imports excepted."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for node in ast.walk(block)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "provision":
            # `from provision.envs import records` imports the module provision.envs.records
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "provision")
    return found


@pytest.mark.parametrize(
    "path", sorted(p for p in PACKAGE.rglob("*.py") if "payloads" not in p.parts), ids=module_name
)
def test_imports_point_down_the_layers(path: Path) -> None:
    importer = module_name(path)
    upward = [
        f"{importer} (layer {layer(importer)}) imports {target} (layer {layer(target)})"
        for target in sorted(imported(path))
        if layer(target) > layer(importer)
    ]
    assert not upward, upward


def test_no_circle_between_rooms() -> None:
    """Rooms of one floor (scan and machine; proc, log, records...) may import each other only one way: the rooms'
    graph, every import counted (at the top or inside a function), has no circle."""
    arrows: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if "payloads" not in path.parts:
            importer = room(module_name(path))
            arrows.setdefault(importer, set()).update(room(t) for t in imported(path) if room(t) != importer)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(
            step == goal or (step not in seen and not seen.add(step) and reaches(step, goal, seen))
            for step in arrows.get(start, ())
        )

    circles = sorted(f"{a} -> {b} -> ... -> {a}" for a in arrows for b in arrows[a] if reaches(b, a, set()))
    assert not circles, circles


def test_the_command_families_do_not_import_each_other() -> None:
    families = [
        m
        for m in MODULES
        if m.startswith("provision.cli.") and m not in ("provision.cli.main", "provision.cli.options")
    ]
    for family in families:
        others = {m for m in imported(ROOT / (family.replace(".", "/") + ".py")) if m in families}
        assert not others, (family, others)


def test_payloads_import_nothing_from_provision() -> None:
    for path in (PACKAGE / "checks" / "payloads").glob("*.py"):
        assert not imported(path), path


def test_one_toml_reader_and_one_progress_type() -> None:
    """The tomllib/tomli choice stood in six modules and `Progress = Callable[[str], None]` in three: one each now."""
    readers, progress = set(), set()
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if {n.split(".")[0] for n in names} & {"tomllib", "tomli"}:
                readers.add(module_name(path))
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "Progress" for t in node.targets
            ):
                progress.add(module_name(path))
            if isinstance(node, ast.arg) and node.arg == "progress" and node.annotation is not None:
                assert "Callable" not in ast.unparse(node.annotation), (
                    f"{path}: progress typed again; use provision.log.Progress"
                )
    assert readers == {"provision.toml"} and progress == {"provision.log"}, (readers, progress)


# What a command loads, run for real as a whole process: probe and scan have 0.15 s and 0.1 s on the GPU machine,
# envs and check start in thousands of test processes (docs/performance.md). Each may load what it runs, no more.
LOADED = (
    "import sys\nfrom provision.cli.main import main\nsys.argv = ['provision', *sys.argv[1:]]\n"
    "try:\n    main(sys.argv[1:])\nexcept SystemExit as exc:\n    print('exit', exc.code)\nprint(' '.join(sorted(sys.modules)))"
)


@functools.cache
def by_click() -> frozenset[str]:
    """What `import click` loads on this Python: never a command's doing (3.10's click loads subprocess, through uuid
    and platform; 3.11's does not)."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys, click; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return frozenset(done.stdout.split())


HEAVY = {
    "dataclasses",
    "rich",
    "requests",
    "packaging",
    "tomlkit",
    "elftools",
    "html",
    "hashlib",
    "zipfile",
    "email",
    "importlib.metadata",
    "statistics",
    "concurrent.futures",
    "provision.stacks.index",
}


@pytest.mark.parametrize(
    ("argv", "code", "also_forbidden"),
    [
        (
            ["scan", "--json", "/bin/true"],
            0,
            {"subprocess", "pathlib", "provision.machine", "provision.stacks", "provision.envs"},
        ),
        (["probe", "--json"], 0, {"pathlib", "provision.scan", "provision.stacks", "provision.envs"}),
        (["envs", "--json", "--home", "HOME"], 0, {"provision.checks.runner", "provision.scan"}),
        (["check", "nope", "--home", "HOME"], 7, {"provision.envs.drift", "provision.checks.staleness"}),
        (
            ["create", "tiny", "--name", "../x", "--home", "HOME"],
            2,
            {
                "provision.envs.lifecycle",
                "provision.stacks",
                "provision.checks",
                "provision.records",
                "provision.views.envs",
            },
        ),
    ],
    ids=["scan", "probe", "envs", "check", "create-refused"],
)
def test_a_command_loads_what_it_runs(
    argv: list[str], code: int, also_forbidden: set[str], tmp_path: Path
) -> None:
    argv = [str(tmp_path / "home") if word == "HOME" else word for word in argv]
    done = subprocess.run([sys.executable, "-c", LOADED, *argv], capture_output=True, text=True, timeout=120)
    *_, exited, modules = done.stdout.splitlines()
    assert exited == f"exit {code}", (argv, done.stdout[-500:], done.stderr[-2000:])
    loaded = set(modules.split()) - by_click()
    # env.json's records and the check registry are dataclasses; `check` reads them before it runs anything
    forbidden = HEAVY - ({"dataclasses"} if argv[0] in ("envs", "check") else set()) | also_forbidden
    found = {
        m
        for m in loaded
        if m in forbidden or m.rpartition(".")[0] in forbidden or m.split(".")[0] in forbidden
    }
    assert not found, (argv, sorted(found))


def test_switch_and_rollback_load_no_pathlib(tmp_path: Path) -> None:
    """An emergency switch must start in about the time of `import click` (issue 23: within 1.25x): it works on HOME's
    folder as a str path (envs/links.py) and loads neither pathlib (7 ms on the GPU machine, with urllib.parse and
    ipaddress) nor home.py, records or rich. On two environments adopted for real, the way a user makes them."""
    home = tmp_path / "home"
    for name in ("a", "b"):
        venv = tmp_path / f"venv-{name}"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        adopted = subprocess.run(
            [sys.executable, "-m", "provision", "adopt", name, str(venv), "--no-lock", "--home", str(home)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert adopted.returncode == 0, adopted.stderr
    forbidden = HEAVY | {
        "pathlib",
        "provision.envs.home",
        "provision.envs.records",
        "provision.stacks",
        "provision.machine",
    }
    steps = (
        (["switch", "b"], "active: b (was none)"),
        (["switch", "a"], "active: a (was b)"),
        (["rollback", "--json"], '"active": "b"'),
        (["rollback"], "active: a (was b)"),
    )
    for argv, said in steps:
        done = subprocess.run(
            [sys.executable, "-c", LOADED, *argv, "--home", str(home)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        *_, exited, modules = done.stdout.splitlines()
        assert exited == "exit 0" and said in done.stdout + done.stderr, (
            argv,
            done.stdout[-500:],
            done.stderr[-2000:],
        )
        loaded = set(modules.split())
        found = {
            m
            for m in loaded
            if m in forbidden or m.rpartition(".")[0] in forbidden or m.split(".")[0] in forbidden
        }
        assert not found, (argv, sorted(found))


# The `provision` script's own entry (provision.cli:main, as `provision` and `python -m provision` run it), which for
# `lock` starts the uv of a lock made again before anything else is loaded (stacks/ahead): what it loaded, once the
# command ended (the exit functions run before the process ends).
ENTRY = (
    "import atexit, sys\natexit.register(lambda: print('loaded', ' '.join(sorted(sys.modules))))\n"
    "from provision.cli import main\nsys.argv = ['provision', *sys.argv[1:]]\nmain()"
)


@pytest.mark.parametrize(
    ("argv", "ahead"),
    [
        (["check", "lock", "--home", "HOME"], False),
        (["run", "lock", "--home", "HOME", "--", "git", "lock"], False),
        (["--home", "lock", "envs", "--json"], False),
        (["-v", "--home", "HOME", "lock", "nope"], True),
        (["lock", "nope", "--home", "HOME"], True),
    ],
    ids=["an-environment-named-lock", "a-word-after-run", "a-home-named-lock", "after-group-options", "lock"],
)
def test_only_the_lock_command_loads_what_starts_uv_ahead(
    argv: list[str], ahead: bool, tmp_path: Path
) -> None:
    """A command line that names `lock` without being the lock command (an environment named so, a word given to
    `run`) loaded the record's reader, hashlib and the cache's module before its own command: 5-7 ms more of a
    `check` (switch too: the emergency command)."""
    argv = [str(tmp_path / "home") if word == "HOME" else word for word in argv]
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, *argv], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    loaded = set(done.stdout.rpartition("loaded ")[2].split())
    assert loaded, (done.stdout[-500:], done.stderr[-2000:])
    found = loaded & {"provision.stacks.ahead", "hashlib", "provision.wheelfacts"}
    assert ("provision.stacks.ahead" in found) == ahead and (ahead or not found), (argv, sorted(found))


def test_probe_json_parses_no_toml() -> None:
    """probe names each GPU's architecture from knowledge.json: no tomllib (its import and parse were about 5 ms of
    probe's CPU). On a recorded H200, so that a GPU is named on every machine."""
    env = {**os.environ, "PROVISION_NVML_REPLAY": str(ROOT / "tests" / "data" / "h200.nvml.json")}
    done = subprocess.run(
        [sys.executable, "-c", LOADED, "probe", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    *shown, exited, modules = done.stdout.splitlines()
    assert exited == "exit 0" and '"architecture": "Hopper"' in "\n".join(shown), (
        done.stdout[-500:],
        done.stderr[-2000:],
    )
    loaded = set(modules.split())
    found = loaded & ({"tomllib", "tomli", "provision.toml"} | HEAVY)
    assert not found, sorted(found)


# The heavy commands on a real home, made by the real commands from the tests' own index (the `tiny` profile): each
# loads what its path runs. Which of them loaded what (issue 23): create loaded tomlkit, pyelftools (the FlashInfer
# staleness scan, for every payload check) and importlib.metadata; check pyelftools and importlib.metadata (kept, never
# read, beside each distribution drift reads); restore tomlkit and the wheel matcher (adopt's lock writer); adopt
# --no-lock tomlkit, zipfile, email and the profile parser with no profile named; gc importlib.metadata, email,
# zipfile and the drift check (to find that no killed restore left anything); run and shell-env the profile parser
# (packaging, tomllib, hashlib) for the one function that fills an [env] table; and every piped line drew rich.
@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    import tiny
    from wheelhouse import IndexServer

    folder = tmp_path_factory.mktemp("loads")
    server = IndexServer(folder / "indexes")
    try:
        served = tiny.index(server)
        (folder / "profiles").mkdir()
        tiny.profile(folder / "profiles")
        env = {
            **os.environ,
            "PROVISION_HOME": str(folder / "home"),
            "PROVISION_PROFILES": str(folder / "profiles"),
            "PROVISION_INDEX_DEFAULT": served.url,
        }
        bare = folder / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
        for argv in (
            ["create", "tiny", "--python", sys.executable],
            ["lock", "tiny", "-o", str(folder / "pylock.tiny.toml")],
            ["adopt", "mine", str(bare), "--no-lock"],
        ):
            done = subprocess.run(
                [sys.executable, "-m", "provision", *argv],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
            )
            assert done.returncode == 0, (argv, done.stderr[-2000:])
        yield {**env, "FOLDER": str(folder)}
    finally:
        server.close()


@pytest.mark.parametrize(
    ("argv", "said", "forbidden"),
    [
        (
            [
                "create",
                "tiny",
                "--name",
                "again",
                "--lock",
                "FOLDER/pylock.tiny.toml",
                "--python",
                sys.executable,
                "--json",
            ],
            '"name": "again"',
            {
                "requests",
                "urllib3",
                "tomlkit",
                "elftools",
                "rich",
                "importlib.metadata",
                "zipfile",
                "provision.stacks.index",
                "provision.checks.staleness",
                "provision.scan",
            },
        ),
        (
            ["check", "tiny", "--json"],
            '"status": "pass"',
            {
                "requests",
                "tomlkit",
                "elftools",
                "rich",
                "importlib.metadata",
                "zipfile",
                "provision.stacks.index",
                "provision.checks.staleness",
                "provision.scan",
            },
        ),
        (
            ["restore", "tiny", "--json"],
            '"name": "tiny"',
            {
                "requests",
                "tomlkit",
                "elftools",
                "rich",
                "importlib.metadata",
                "zipfile",
                "provision.stacks.match",
                "provision.stacks.index",
            },
        ),
        (
            ["adopt", "other", "FOLDER/venv", "--no-lock"],
            "adopted ",
            {
                "requests",
                "tomlkit",
                "rich",
                "importlib.metadata",
                "zipfile",
                "email",
                "concurrent.futures",
                "packaging",
                "tomllib",
                "provision.stacks.profiles",
                "provision.stacks.match",
            },
        ),
        (
            ["gc", "--json"],
            '"removed"',
            {
                "requests",
                "tomlkit",
                "elftools",
                "rich",
                "importlib.metadata",
                "zipfile",
                "email",
                "concurrent.futures",
                "provision.stacks.index",
                "provision.envs.drift",
                "provision.envs.restore",
            },
        ),
        (
            ["profiles", "--json"],
            '"name": "tiny"',
            {
                "requests",
                "tomlkit",
                "elftools",
                "rich",
                "importlib.metadata",
                "zipfile",
                "email",
                "concurrent.futures",
                "provision.stacks.index",
                "provision.envs",
            },
        ),
        (
            ["report", "--json", "--machine", str(ROOT / "docs/machines/rtx-pro-6000-x8.probe.json")],
            '"verdict"',
            {
                "requests",
                "tomlkit",
                "elftools",
                "rich",
                "importlib.metadata",
                "zipfile",
                "email",
                "concurrent.futures",
            },
        ),
        (
            ["shell-env", "tiny"],
            "export VIRTUAL_ENV=",
            {"requests", "tomlkit", "rich", "packaging", "hashlib", "tomllib", "provision.stacks"},
        ),
    ],
    ids=["create-lock", "check", "restore", "adopt", "gc", "profiles", "report-machine", "shell-env"],
)
def test_a_heavy_command_loads_what_it_runs(
    argv: list[str], said: str, forbidden: set[str], made: dict[str, str]
) -> None:
    argv = [word.replace("FOLDER", made["FOLDER"]) for word in argv]
    done = subprocess.run(
        [sys.executable, "-c", LOADED, *argv], capture_output=True, text=True, env=made, timeout=300
    )
    *shown, exited, modules = done.stdout.splitlines()
    assert exited == "exit 0" and said in "\n".join(shown), (argv, done.stdout[-1500:], done.stderr[-2000:])
    loaded = set(modules.split())
    found = {
        m
        for m in loaded
        if m in forbidden or m.rpartition(".")[0] in forbidden or m.split(".")[0] in forbidden
    }
    assert not found, (argv, sorted(found))


# `lock` as a whole process is uv's resolution plus what provision loads around it (a 3-wheel lock: uv 0.2 s, and
# provision's imports were most of the rest, issue 41): what the lock writes and checks with, and the rendering, is
# loaded while uv resolves, in a thread; before uv starts only what leads to uv's input is loaded.
BEFORE_UV = (
    "import atexit, subprocess, sys\nseen = []\nstart = subprocess.Popen.__init__\n"
    "def popen(self, args, *rest, **options):\n"
    "    if list(args[1:3]) == ['pip', 'compile'] and not seen:\n        seen.append(' '.join(sorted(sys.modules)))\n"
    "    start(self, args, *rest, **options)\n"
    "subprocess.Popen.__init__ = popen\n"
    "atexit.register(lambda: print(seen[0] if seen else 'uv never ran'))\nsys.argv = ['provision', *sys.argv[1:]]\n"
)
ENTRIES = {
    # the command line's own function, as a caller's main() and the tests' fork server run it
    "main": "from provision.cli.main import main\nmain(sys.argv[1:])",
    # the provision script's (provision.cli:main), which first looks for how this lock ran uv last time (stacks/ahead):
    # here there is none, the lock's -o being another
    "script": "from provision.cli import main\nmain()",
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_lock_starts_uv_before_loading_what_it_needs_after(
    entry: str, made: dict[str, str], tmp_path: Path
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            BEFORE_UV + ENTRIES[entry],
            "lock",
            "tiny",
            "-o",
            str(tmp_path / "pylock.tiny.toml"),
        ],
        capture_output=True,
        text=True,
        env=made,
        timeout=300,
    )
    *_, modules = done.stdout.splitlines()
    assert done.returncode == 0 and (tmp_path / "pylock.tiny.toml").is_file(), (
        done.stdout[-1500:],
        done.stderr[-2000:],
    )
    forbidden = {
        "packaging.pylock",
        "packaging.markers",
        "tomlkit",
        "rich",
        "requests",
        "provision.stacks.index",
        # the fourteenth stop: what reads the RECORDs, the lock in place and the results, the view, and hashlib
        # (OpenSSL's 2 ms) load once uv runs
        "provision.stacks.wheelrecords",
        "provision.stacks.lockcheck",
        "provision.stacks.relock",
        "provision.records.results",
        "provision.views.stacks",
        "hashlib",
        "concurrent",
    }
    found = {m for m in modules.split() if m in forbidden or m.split(".")[0] in forbidden}
    assert not found, sorted(found)
