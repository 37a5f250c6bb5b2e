"""A project page reached through a redirect: its relative links are relative to where the page came from (as pip
and uv join them), not to the URL asked; the credentials of the URL asked go with them on the same host only."""

from __future__ import annotations

import hashlib
import json

from hostile_http import JSON_TYPE, HostileServer, Route

from provision.stacks import index, urls

SHA = hashlib.sha256(b"x").hexdigest()


def test_relative_links_of_a_redirected_page_are_relative_to_where_it_came_from(
    hostile: HostileServer,
) -> None:
    hostile.routes["/simple/alpha/"] = Route(status=301, headers={"Location": "/mirror/simple/alpha/"})
    hostile.routes["/mirror/simple/alpha/"] = Route(
        body=f'<a href="../../files/alpha-1.0-py3-none-any.whl#sha256={SHA}">alpha-1.0-py3-none-any.whl</a>'.encode(),
        content_type="text/html",
    )
    hostile.routes["/simple/beta/"] = Route(status=302, headers={"Location": "/mirror/simple/beta/"})
    hostile.routes["/mirror/simple/beta/"] = Route(
        body=json.dumps(
            {
                "meta": {"api-version": "1.0"},
                "name": "beta",
                "files": [
                    {
                        "filename": "beta-1.0-py3-none-any.whl",
                        "url": "../../files/beta-1.0-py3-none-any.whl",
                        "hashes": {"sha256": SHA},
                    }
                ],
            }
        ).encode(),
        content_type=JSON_TYPE,
    )
    for project in ("alpha", "beta"):
        (found,) = index.project_files(hostile.url + "/simple", project)
        # not /files/...
        assert found.url == f"{hostile.url}/mirror/files/{project}-1.0-py3-none-any.whl", found
        assert found.sha256 == SHA
    with_password = hostile.url.replace("http://", "http://alice:s3cret@")
    (found,) = index.project_files(with_password + "/simple", "alpha")
    # the same host: its credentials
    assert found.url == f"{with_password}/mirror/files/alpha-1.0-py3-none-any.whl"


def test_credentials_follow_a_redirect_on_the_same_host_only() -> None:
    asked = "https://alice:s3cret@mirror.example/simple/x/"
    assert (
        urls.page_base(asked, "https://mirror.example/other/simple/x/")
        == "https://alice:s3cret@mirror.example/other/simple/x/"
    )
    assert urls.page_base(asked, "https://cdn.example/simple/x/") == "https://cdn.example/simple/x/"
    # not to http
    assert urls.page_base(asked, "http://mirror.example/simple/x/") == "http://mirror.example/simple/x/"
    assert (
        urls.page_base(asked, "https://mirror.example:8443/simple/x/")
        == "https://mirror.example:8443/simple/x/"
    )
    assert (
        urls.page_base("https://mirror.example/simple/x/", "https://mirror.example/y/")
        == "https://mirror.example/y/"
    )
    assert urls.page_base(asked, "") == asked
