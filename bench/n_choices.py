#!/usr/bin/env python3
"""OpenAI's `n` through pagoda-server: does a request with n = 8 cost about one prefill?

Starts build/release/examples/pagoda-server on MODEL, then times (twice each) a 960-token
prompt with n = 1, the same with n = 8 (its prefix-cache hit tokens read from /metrics), and
eight different prompts sent at once: eight prefills.
  python3 bench/n_choices.py MODEL.gguf [PORT]
"""
import concurrent.futures
import json
import pathlib
import random
import re
import subprocess
import sys
import time
import urllib.request

SERVER = pathlib.Path(__file__).resolve().parent.parent / "build/release/examples/pagoda-server"
model = sys.argv[1]
port = sys.argv[2] if len(sys.argv) > 2 else "8399"
url = f"http://127.0.0.1:{port}"


def post(body):
    req = urllib.request.Request(f"{url}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))


def prefix_hits():
    text = urllib.request.urlopen(f"{url}/metrics").read().decode()
    return float(re.search(r"^pagoda_prefix_cache_hit_tokens_total (\S+)$", text, re.M).group(1))


def prompt():
    return [1] + [random.randrange(3, 32000) for _ in range(959)]


def timed(body):
    start = time.time()
    reply = post(body)
    return time.time() - start, reply


server = subprocess.Popen([str(SERVER), "-m", model, "--port", port, "-t", "2"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(300):
        try:
            urllib.request.urlopen(f"{url}/health")
            break
        except OSError:
            time.sleep(0.2)
    random.seed(1)
    sampled = {"max_tokens": 4, "temperature": 0.8, "seed": 1}
    post({"prompt": prompt(), "max_tokens": 1})  # warm-up
    print("load", open("/proc/loadavg").read().strip())
    for rep in range(2):
        one, _ = timed({"prompt": prompt(), **sampled})
        before = prefix_hits()
        eight, reply = timed({"prompt": prompt(), **sampled, "n": 8})
        hits = prefix_hits() - before
        prompts = [prompt() for _ in range(8)]
        start = time.time()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda p: post({"prompt": p, **sampled}), prompts))
        distinct = time.time() - start
        print(f"rep {rep}: n=1 {one:.2f} s; n=8 {eight:.2f} s ({eight / one:.2f}x, {len(reply['choices'])} choices, "
              f"prefix-cache hit tokens +{hits:.0f}, usage {reply['usage']}); "
              f"8 different prompts at once {distinct:.2f} s ({distinct / one:.2f}x)")
    print("load", open("/proc/loadavg").read().strip())
finally:
    server.terminate()
    server.wait()
