# start `try` (SIGINT as it is given: default, or ignored as a script's background job), SIGTERM it 2 s into its runs
import os, signal, subprocess, sys, time
marker, ignore_int, argv = sys.argv[1], sys.argv[2] == "ignored", sys.argv[3:]
child = subprocess.Popen(argv, preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_int else None)
deadline = time.time() + 120
while time.time() < deadline and not os.path.exists(marker) and child.poll() is None:
    time.sleep(0.1)
print("marker seen in the venv during the trial:", os.path.exists(marker), flush=True)
time.sleep(2)
child.send_signal(signal.SIGTERM)
print("try exit code:", child.wait(), flush=True)
