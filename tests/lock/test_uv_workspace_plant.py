"""A pyproject.toml planted above the folder provision locks in (adversary of issue 39, round three): `lock` writes
its project into a temporary folder (under $TMPDIR, /tmp by default: every local user may write there) and runs uv
there. uv looks for a workspace root in every parent folder, and a root that lists the folder as a member (`members =
["*"]`) brings its own [tool.uv] settings and sources: another user's override, source or index would bend the lock
past the profile's index rules without a word, as the inherited UV_* variables did (issue 39, item 10)."""

from __future__ import annotations

from pathlib import Path

import tiny

from provision import toml


def test_a_workspace_root_planted_in_tmpdir_does_not_bend_the_lock(
    index_server, provision_bin: str, tmp_path: Path
) -> None:
    served = tiny.index(index_server)
    evil = index_server.index("evil")
    evil.add("alpha", "1.0", files={"alpha/__init__.py": b"EVIL = 1\n"})
    evil.add("beta", "1.0", files={"beta/__init__.py": b"EVIL = 1\n"})
    shared = tmp_path / "tmp"
    shared.mkdir()
    (shared / "pyproject.toml").write_text(
        '[project]\nname = "planted"\nversion = "0"\n'
        '[tool.uv]\noverride-dependencies = ["alpha==2.0"]\nconstraint-dependencies = ["alpha==2.0"]\n'
        '[tool.uv.workspace]\nmembers = ["*"]\n'
        '[tool.uv.sources]\nalpha = { index = "evil" }\nbeta = { index = "evil" }\n'
        f'[[tool.uv.index]]\nname = "evil"\nurl = "{evil.url}"\nexplicit = true\n'
    )
    (shared / "uv.toml").write_text('override-dependencies = ["alpha==2.0"]\n')
    tool = tiny.make_tool(tmp_path, provision_bin, served, ("two", 'alpha = "==1.0"\nbeta = "==1.0"'))
    output = tmp_path / "pylock.two.toml"
    done = tool("lock", "two", "-o", str(output), check=False, env={"TMPDIR": str(shared)})
    assert done.returncode == 0, done.stderr
    packages = {p["name"]: p for p in toml.loads(output.read_text())["packages"]}
    assert packages["alpha"]["version"] == "1.0"
    assert all("/evil/" not in w["url"] for p in packages.values() for w in p.get("wheels", [])), packages
    assert not evil.requests
