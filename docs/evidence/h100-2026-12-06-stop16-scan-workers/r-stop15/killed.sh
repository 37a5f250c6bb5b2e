# $1: the signal; the scan in a session of its own, signalled once its workers run, then its survivors counted
# (the workers are forks of the scan: the same command line)
scan="$(dirname "$0")/scan.py"
XDG_CACHE_HOME=/tmp/stop15-$1 setsid python3 "$scan" "$1" "$2" > /dev/null 2>&1 &
leader=$!
for i in $(seq 1 200); do
  [ "$(pgrep -f "$scan $1" | wc -l)" -gt 2 ] && break
  sleep 0.05
done
echo "workers before: $(pgrep -f "$scan $1" | grep -vc "^$leader\$")"
if [ "$1" = KILL ]; then kill -KILL "$leader"; else kill -INT -- "-$leader"; fi
for i in $(seq 1 20); do
  sleep 0.5
  left=$(pgrep -f "$scan $1" | wc -l)
  [ "$left" = 0 ] && break
done
echo "left running $(python3 -c "print(0.5 * $i)") s after SIG$1: $left"
wait "$leader" 2>/dev/null; echo "scan's exit: $?"
[ "$left" = 0 ]
