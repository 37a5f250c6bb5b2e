"""A stand-in for `python -m sglang.launch_server` that behaves as SGLang's does where the sglang-serve check looks:
it parses its flags, starts a worker process (as SGLang starts its scheduler and detokenizer) in its process group,
answers /health after a delay, and /generate by token ids. FAKE_SGLANG chooses a failure: dies, hangs, short,
canary; escapes (a worker in a session of its own, out of the payload's process group, double-forked so that it is
no child of the server either); nested (/generate answers a JSON array nested 100,000 deep); redirect (/health
answers 302 to FAKE_SGLANG_REDIRECT, another server). It writes its argv and
its workers' pids to FAKE_SGLANG_TRACE."""

import argparse
import json
import os
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
for flag in (
    "--model-path",
    "--load-format",
    "--host",
    "--port",
    "--tp-size",
    "--mem-fraction-static",
    "--sampling-backend",
    "--kv-canary",
):
    parser.add_argument(flag)
parser.add_argument("--skip-tokenizer-init", action="store_true")
parser.add_argument("--cuda-graph-backend-prefill")
args = parser.parse_args()
mode = os.environ.get("FAKE_SGLANG", "ok")
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])  # the scheduler, say
workers = [os.getpid(), worker.pid]
# setsid, then fork again and leave: the grandchild is nobody's child and in no group of ours
if mode == "escapes":
    escaped = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
            "print(child.pid)",
        ],
        start_new_session=True,
        capture_output=True,
        text=True,
        check=True,
    )
    workers.append(int(escaped.stdout))
with open(os.environ["FAKE_SGLANG_TRACE"], "w") as trace:
    json.dump(
        {
            "argv": sys.argv[1:],
            "workers": workers,
            "env": {k: v for k, v in os.environ.items() if k.startswith("SGLANG_")},
        },
        trace,
    )
with open(os.path.join(args.model_path, "config.json")) as file:
    config = json.load(file)
print("Loading dummy weights", flush=True)
time.sleep(1.5)
if mode == "dies":
    print("Traceback (most recent call last):\nKeyError: 12", flush=True)
    sys.exit(1)
if mode == "hangs":
    time.sleep(3600)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *_):
        pass

    def do_GET(self):
        if mode == "redirect":
            self.send_response(302)
            self.send_header("Location", os.environ["FAKE_SGLANG_REDIRECT"])
            self.end_headers()
            return
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        wanted = body["sampling_params"]["max_new_tokens"] - (1 if mode == "short" else 0)
        answers = [
            {
                "output_ids": [(len(p) + i) % config["vocab_size"] for i in range(wanted)],
                "meta_info": {"completion_tokens": wanted},
            }
            for p in body["input_ids"]
        ]
        if mode == "canary":
            print("kv_canary violation: slot 3 expected 17 got 0", flush=True)
        data = json.dumps(answers).encode() if mode != "nested" else b"[" * 100000 + b"]" * 100000
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


server = ThreadingHTTPServer((args.host, int(args.port)), Handler)
# uvicorn's line, as SGLang's log has it
print(f"Uvicorn running on http://{args.host}:{args.port}", flush=True)
print("The server is fired up and ready to roll!", flush=True)
server.serve_forever()
