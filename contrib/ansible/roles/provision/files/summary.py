"""The fleet summary of a rollout (upgrade.yml's last play, run by the controller's own Python): per host, the decision
of its `provision upgrade --json` (kept as FLEET/HOST.upgrade.json) and both medians, as a table on stdout and in
FLEET/upgrade.txt, and as JSON in FLEET/upgrade.json.

    python summary.py FLEET_DIR '["host", ...]'

A host without a record is listed as such (not reached, or it stopped the rollout before upgrade printed anything);
a record that cannot be read is named, never a traceback."""

from __future__ import annotations

import json
import os
import sys
import tempfile


def row(fleet: str, host: str) -> dict[str, object]:
    path = os.path.join(fleet, f"{host}.upgrade.json")
    try:
        with open(path, encoding="utf-8") as handle:
            said = json.load(handle)
    except FileNotFoundError:
        return {"host": host, "decision": None, "reason": "no upgrade record (not reached)"}
    except (OSError, ValueError) as exc:
        return {"host": host, "decision": None, "reason": f"{path}: not readable ({exc})"}
    if "error" in said:
        return {
            "host": host,
            "decision": None,
            "reason": f"did not finish: {said['error'].get('message', '')}",
        }
    measured = said.get("baseline") or {}
    return {
        "host": host,
        "decision": said.get("decision"),
        "from": said.get("from"),
        "to": said.get("to"),
        "from_median": (measured.get("from") or {}).get("median"),
        "to_median": (measured.get("to") or {}).get("median"),
        "change": measured.get("change"),
        "unit": measured.get("unit"),
        "reason": said.get("reason", ""),
    }


def line(entry: dict[str, object]) -> str:
    def shown(value: object) -> str:
        return f"{value:.2f}" if isinstance(value, (int, float)) else "-"

    change = entry.get("change")
    medians = (
        f"{entry.get('from') or '-'} {shown(entry.get('from_median'))} -> {entry.get('to') or '-'} "
        f"{shown(entry.get('to_median'))} {entry.get('unit') or ''}".rstrip()
        + (f" ({change * 100:+.1f}%)" if isinstance(change, (int, float)) else "")
    )
    return f"{entry['host']}: {entry.get('decision') or 'no decision'}; {medians}; {entry.get('reason', '')}"


def write(path: str, text: str) -> None:
    folder = os.path.dirname(path) or "."
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".summary-")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(temp, 0o644)
    os.replace(temp, path)


def main(fleet: str, hosts: list[str]) -> None:
    entries = [row(fleet, host) for host in hosts]
    counts = {d: sum(e.get("decision") == d for e in entries) for d in ("activated", "kept")}
    lines = [
        f"Fleet upgrade: {counts['activated']} activated, {counts['kept']} kept, "
        f"{len(entries) - sum(counts.values())} without a decision, of {len(entries)} hosts"
    ]
    lines += [line(entry) for entry in entries]
    text = "\n".join(lines) + "\n"
    write(os.path.join(fleet, "upgrade.txt"), text)
    write(os.path.join(fleet, "upgrade.json"), json.dumps({"hosts": entries}, indent=1) + "\n")
    sys.stdout.write(text)


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
