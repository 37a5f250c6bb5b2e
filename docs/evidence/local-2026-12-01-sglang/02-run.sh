#!/bin/bash
P=/work/wt/sglang/.venv/bin/provision
export UV_CACHE_DIR=/tmp/sg-stack/uv PROVISION_HOME=/tmp/sg-stack/home XDG_CACHE_HOME=/tmp/sg-stack/xdg
cd /tmp/sg-stack
date -u
/usr/bin/time -f "create --no-checks (uv cache warm): %e s" $P create ./today.toml --lock /tmp/sg-stack/pylock.today.toml --python /root/.pyenv/versions/3.12.1/bin/python3.12 --no-checks --json > create2.json
echo "rc $?"
date -u
V=$(ls -d /tmp/sg-stack/home/builds/today-*/venv | head -1)
/usr/bin/time -f "import sglang.launch_server: %e s" timeout 900 $V/bin/python -X importtime -c "import sglang.launch_server" 2> importtime.txt; echo "import rc $?"
/usr/bin/time -f "import http_server: %e s" timeout 900 $V/bin/python -c "import sglang.srt.entrypoints.http_server" > http.txt 2>&1; echo "http rc $?"
date -u
