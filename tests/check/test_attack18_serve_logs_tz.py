"""The sglang-serve check's server logs (BUILD/logs/sglang-serve-STAMP-XXXXXXXX.log, the newest 10 kept) are named by
the UTC time, so that their names sort by age whatever TZ each run had. They were named by the local time: after runs
from a shell 14 hours ahead of UTC (TZ=Pacific/Kiritimati), a service's run in UTC named its log 14 hours earlier,
and the next run removed that log, the newest but one, first (the one a failed check points at), keeping the older."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_sglang_serve import make_env, serve


@pytest.mark.slow  # 11 runs of the check, about 2 s each
def test_the_log_of_the_run_before_stays_whatever_tz_the_runs_had(tmp_path: Path) -> None:
    build = make_env(tmp_path / "build", mock=True)
    for number in range(9):
        result, _ = serve(build, tmp_path / f"shell-{number}", "ok", TZ="Pacific/Kiritimati")
        assert result.status == "pass", result
    service, _ = serve(build, tmp_path / "service", "ok", TZ="UTC")
    log = Path(str(service.details.to_json()["log"]))
    assert log.is_file()
    later, _ = serve(build, tmp_path / "later", "ok", TZ="UTC")
    assert later.status == "pass" and log.is_file(), sorted(p.name for p in log.parent.iterdir())
    assert len(list(log.parent.glob("sglang-serve-*.log"))) == 10
