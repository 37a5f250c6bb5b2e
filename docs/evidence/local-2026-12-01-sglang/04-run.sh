#!/bin/bash
# report --lock of the SGLang 0.5.23 lock, its profile not findable (it names profile "today"), uv's cache holding every
# wheel unpacked (from run 1), then the same lock with cuda-python 12.6.2.post1 forced in (only that wheel fetched).
P=/work/wt/sglang/.venv/bin/provision
export UV_CACHE_DIR=/tmp/sg-stack/uv XDG_CACHE_HOME=/tmp/sg-stack/xdg4
cd /tmp
M=/work/wt/sglang/docs/machines
date -u
/usr/bin/time -f "report --lock (wheels in uv's cache): %e s" $P report --lock /tmp/sg-stack/pylock.today.toml --machine $M/h200.probe.json --machine $M/rtx-pro-6000-x8.probe.json --json > /tmp/sg-stack/report-lock.json
echo "rc $?"
/usr/bin/time -f "report --lock forced (cuda-python 12.6): %e s" $P report --lock /tmp/sg-stack/pylock.forced.toml --machine $M/h200.probe.json > /tmp/sg-stack/report-forced.txt
echo "rc $?"
date -u
