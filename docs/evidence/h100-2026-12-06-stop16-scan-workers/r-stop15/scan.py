# `provision scan --json WHEEL` with Ctrl-C's default (a background job of a script starts with SIGINT ignored)
import runpy, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.argv = ["provision", "scan", "--json", sys.argv[2]]
runpy.run_module("provision", run_name="__main__", alter_sys=True)
