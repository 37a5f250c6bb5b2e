"""What `adopt` pins is proven (issue 39, item 2): the bytes whose sha256 the lock records are the bytes whose RECORD
matched. A hostile index on 127.0.0.1 that answers range requests from the genuine wheel and the full GET with
another one (its page listing the other's sha256) gets nothing pinned; nor does a wheel of other content that carries
a copy of the genuine RECORD. The genuine wheel, served honestly by range requests, is still matched."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

from test_adopt import Setup


def _other_content_same_record(genuine: Path, target: Path) -> bytes:
    """The genuine wheel with beta/__init__.py changed and its RECORD kept as it was."""
    with zipfile.ZipFile(genuine) as source, zipfile.ZipFile(target, "w") as forged:
        for info in source.infolist():
            data = source.read(info)
            forged.writestr(info.filename, b"X = 666\n" if info.filename == "beta/__init__.py" else data)
    return target.read_bytes()


def test_adopt_never_pins_a_wheel_whose_ranges_and_full_get_differ(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    genuine = index_server.index("genuine")
    genuine.add("alpha", "1.0")
    wheel = genuine.add("beta", "2.0", files={"beta/__init__.py": b"X = 1\n"})
    setup = Setup(tmp_path, provision_bin)
    setup.build(genuine.url, "alpha==1.0", "beta==2.0")
    hostile = index_server.index("hostile")
    hostile.ranges = True
    hostile.add("alpha", "1.0")
    hostile.add("beta", "2.0", files={"beta/__init__.py": b"X = 1\n"})
    other = index_server.index("other").add("beta", "2.0", files={"beta/__init__.py": b"X = 666\n"})
    hostile.swapped[wheel.name] = other.read_bytes()
    empty_cache = {"UV_CACHE_DIR": str(tmp_path / "empty-cache")}  # the RECORDs come from the index

    adopted = setup.json("adopt", "old", str(setup.venv), index=hostile.url, **empty_cache)
    pinned = {m["name"]: m for m in adopted["matched"]}
    assert "beta" not in pinned, pinned["beta"]
    assert hashlib.sha256(other.read_bytes()).hexdigest() not in Path(adopted["lock"]).read_text()
    (beta,) = adopted["unmatched"]
    assert "another build" in beta["reason"], beta
    # honest ranges: then proven whole
    assert pinned["alpha"]["record_from"] == "download" and hostile.range_requests > 0

    forged = index_server.index("forged")
    forged.ranges = True
    forged.add("alpha", "1.0")
    (forged.root / "beta").mkdir()
    _other_content_same_record(wheel, forged.root / "beta" / wheel.name)
    adopted = setup.json(
        "adopt", "again", str(setup.venv), index=forged.url, **{"UV_CACHE_DIR": str(tmp_path / "cold")}
    )
    assert [m["name"] for m in adopted["matched"]] == ["alpha"], adopted["matched"]
    (beta,) = adopted["unmatched"]
    assert "beta/__init__.py does not match its RECORD" in beta["reason"], beta


def test_a_wheel_with_a_member_twice_is_not_pinned(tmp_path: Path, index_server, provision_bin: str) -> None:
    """Two RECORDs in one wheel (the first the genuine one): which one an installer keeps is its own choice."""
    import warnings

    genuine = index_server.index("genuine")
    wheel = genuine.add("beta", "2.0", files={"beta/__init__.py": b"X = 1\n"})
    setup = Setup(tmp_path, provision_bin)
    setup.build(genuine.url, "beta==2.0")
    twice = index_server.index("twice")
    (twice.root / "beta").mkdir(parents=True)
    with (
        zipfile.ZipFile(wheel) as source,
        zipfile.ZipFile(twice.root / "beta" / wheel.name, "w") as forged,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name: the attack
        for info in source.infolist():
            forged.writestr(info.filename, source.read(info))
        forged.writestr("beta-2.0.dist-info/RECORD", b"beta/__init__.py,,\n")
    adopted = setup.json(
        "adopt", "old", str(setup.venv), index=twice.url, **{"UV_CACHE_DIR": str(tmp_path / "cold")}
    )
    assert adopted["matched"] == [], adopted["matched"]
    (beta,) = adopted["unmatched"]
    assert "a member is in the wheel twice" in beta["reason"], beta


def test_a_wheel_larger_than_its_page_says_is_not_read_past_that_size(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    """The page gives a size (PEP 700) and the file served is larger (another file, its sha256 on the page): the
    download stops at the size the page gave, and the wheel is not pinned."""
    import os

    genuine = index_server.index("genuine")
    wheel = genuine.add("beta", "2.0", files={"beta/__init__.py": b"X = 1\n"})
    setup = Setup(tmp_path, provision_bin)
    setup.build(genuine.url, "beta==2.0")
    lying = index_server.index("lying")
    lying.sizes = True
    lying.add("beta", "2.0", files={"beta/__init__.py": b"X = 1\n"})
    larger = index_server.index("larger").add(
        "beta", "2.0", files={"beta/__init__.py": b"X = 1\n", "beta/pad.bin": os.urandom(1 << 20)}
    )
    lying.swapped[wheel.name] = larger.read_bytes()
    adopted = setup.json(
        "adopt", "old", str(setup.venv), index=lying.url, UV_CACHE_DIR=str(tmp_path / "cold")
    )
    assert adopted["matched"] == [], adopted["matched"]
    (beta,) = adopted["unmatched"]
    assert f"larger than the {wheel.stat().st_size:,} bytes" in beta["reason"], beta


def test_a_small_lone_wheel_whose_download_is_not_what_its_page_says_is_not_pinned(
    tmp_path: Path, index_server, provision_bin: str
) -> None:
    """Downloaded at once (sizes on the page, the only wheel of its tags): a sha256 on the page that the bytes do not
    have is one line for that distribution, nothing pinned, the others matched."""
    genuine = index_server.index("genuine")
    genuine.add("alpha", "1.0")
    wheel = genuine.add("beta", "2.0", files={"beta/__init__.py": b"X = 1\n"})
    setup = Setup(tmp_path, provision_bin)
    setup.build(genuine.url, "alpha==1.0", "beta==2.0")
    sized = index_server.index("sized")
    sized.sizes = sized.ranges = True
    sized.add("alpha", "1.0")
    sized.add("beta", "2.0", files={"beta/__init__.py": b"X = 1\n"})
    sized.wrong_hash.add(wheel.name)
    adopted = setup.json(
        "adopt", "old", str(setup.venv), index=sized.url, UV_CACHE_DIR=str(tmp_path / "cold")
    )
    assert [m["name"] for m in adopted["matched"]] == ["alpha"], adopted["matched"]
    (beta,) = adopted["unmatched"]
    assert "could not be read" in beta["reason"] and "sha256" in beta["reason"], beta
    assert sized.ranged == []  # both downloaded at once
