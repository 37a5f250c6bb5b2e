"""What `lock` says about the indexes before and after resolving, so that a user learns it in a second rather than after
uv's half minute: a mirror given for one index that also serves what the profile takes from the default index (the
default index's mirror must then be named too), and, when an index cannot be reached, whether the default index has the
same build of what the profile takes from it (`torch 2.14.1+cu130` is on the default registry too)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from provision.errors import ProvisionError
from provision.stacks import urls
from provision.stacks.profiles import DEFAULT_INDEX, Profile


def mirror_note(profile: Profile, indexes: Mapping[str, str | None]) -> str:
    """One line when an index is given another URL than the profile's (a mirror, by --index or PROVISION_INDEX_NAME)
    and that mirror also lists a package the profile takes from the default index, whose URL is not named: uv would take
    it from the mirror, and provision could not bind it to the default index after resolving. "" otherwise."""
    if indexes.get(DEFAULT_INDEX):
        return ""
    plain = [p.name for p in profile.packages if p.index == DEFAULT_INDEX and not p.from_source]
    for name, url in indexes.items():
        if name == DEFAULT_INDEX or not url or not plain or url == profile.indexes.get(name):
            continue
        # loaded where a mirror is asked: a lock loads it after uv starts, if at all
        from provision.stacks import index

        try:
            listed = bool(index.project_files(url, plain[0]))
        except ProvisionError:
            continue  # unreachable: uv will say so, naming it
        if listed:
            variable = "PROVISION_INDEX_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()
            return (
                f"the mirror given for index {name} (--index {name}=... or {variable}) also serves {plain[0]}, which "
                f"profile {profile.name} takes from the default index: give the default index's mirror too "
                "(--index default=URL or PROVISION_INDEX_DEFAULT), or the lock stops after resolving"
            )
    return ""


def same_build_hint(
    profile: Profile,
    indexes: Mapping[str, str | None],
    failure: ProvisionError,
    python: str,
    platform: str | None,
    folder: Path,
) -> str:
    """When uv could not reach an index: which package the profile binds to it has the same build (`==X+cuNNN`) on the
    default index, asked of uv with the default index alone (uv's own default unless the profile or a flag names one);
    "" when none does or it cannot be told."""
    from provision.stacks import uvtool

    said = urls.redact_text(failure.message)
    down = [
        n
        for n, u in indexes.items()
        if n != DEFAULT_INDEX and u and urls.strip_credentials(u).rstrip("/") in said
    ]
    label = "cu" + profile.cuda.replace(".", "")
    for package in profile.packages:
        if package.index not in down or package.from_source:
            continue
        try:
            pins = [s.version for s in SpecifierSet(package.version) if s.operator in ("==", "===")]
        except InvalidSpecifier:
            pins = []
        if len(pins) != 1 or "+" in pins[0] or "*" in pins[0]:
            continue
        wanted = f"{package.name}=={pins[0]}+{label}"
        (folder / "same-build.in").write_text(wanted + "\n")
        args = [
            "pip",
            "compile",
            "same-build.in",
            "--no-deps",
            "--no-config",
            "--quiet",
            "--no-header",
            "--python-version",
            python,
            "-o",
            "same-build.txt",
        ] + (["--python-platform", platform] if platform else [])
        try:
            uvtool.run(
                args,
                cwd=folder,
                timeout=60,
                env=uvtool.index_options({DEFAULT_INDEX: indexes.get(DEFAULT_INDEX)})[1],
            )
        except ProvisionError:
            continue
        return (
            f"index {package.index} cannot be reached, but the default index has {wanted.replace('==', ' ')}: bind "
            f'{package.name} to it (drop index = "{package.index}" from it in a copy of the profile), or point '
            f"--index {package.index}=URL at a mirror"
        )
    return ""
