"""The Python package against the C++ engine on the same job, and what a Python callback costs.

    PYTHONPATH=build/release/python python3 bench/bench_python.py \
        --model build/release/models/s15m.gguf --loadgen build/release/examples/pagoda-loadgen

One run of each, in one process, one after the other:
  1. pagoda-loadgen, the job all at once: N requests of BOS and --prompt-len random ids and exactly --output-len new tokens each (EOS ignored), greedy;
  2. Engine.generate on the same shape of job (same lengths, same engine settings);
  3. the same job through submit(on_token=...) with a callback that does nothing, then (2) again
     on the same, now warm, engine: the callback run's extra wall time over that, per generated
     token, is what a Python stream callback costs (it runs on the engine's scheduler thread,
     taking the GIL, so it delays the whole batch's next step);
  4. with --stream-model, the same callback's cost one request at a time (16 x 400 tokens), where
     it sits on every step's critical path: without, with, and without again.
"""

import argparse
import json
import os
import random
import subprocess
import tempfile
import time

import pagoda


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run_loadgen(args, kv_pages: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "loadgen.json")
        subprocess.run([args.loadgen, "-m", args.model, "-n", str(args.requests), "-c", str(args.requests),
                        "--rate", "inf", "--prompt-len", str(args.prompt_len), "--output-len", str(args.output_len),
                        "-t", str(args.threads), "--kv-pages", str(kv_pages), "--json", out],
                       check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)["runs"]["continuous"]["tokens_per_s"]


def run_python(engine: pagoda.Engine, prompts, params, callback) -> float:
    """Seconds for the whole job."""
    start = time.perf_counter()
    if callback is None:
        completions = engine.generate(prompts, params)
    else:
        handles = [engine.submit(p, params, on_token=callback) for p in prompts]
        completions = [h.result() for h in handles]
    seconds = time.perf_counter() - start
    assert all(len(c.token_ids) == params.max_tokens for c in completions)
    return seconds


def single_stream_cost(model: str, threads: int) -> tuple[float, float, int]:
    """Seconds a token with and without a no-op callback, one request at a time: the callback on
    every step's critical path, where a small model's step is short enough to show it."""
    params = pagoda.SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)
    with pagoda.Engine(model, threads=threads) as engine:
        prompt = engine.tokenize("Once upon a time")

        def run(callback) -> float:
            start = time.perf_counter()
            for _ in range(16):
                engine.submit(prompt, params, on_token=callback).result()
            return time.perf_counter() - start

        run(None)  # warm
        plain_before = run(None)
        with_callback = run(lambda delta: None)
        plain_after = run(None)
    tokens = 16 * params.max_tokens
    return (plain_before + plain_after) / 2 / tokens, with_callback / tokens, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--loadgen", required=True, help="the pagoda-loadgen program")
    parser.add_argument("-n", "--requests", type=int, default=64)
    parser.add_argument("--prompt-len", type=int, default=63, help="prompt tokens after BOS")
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("--stream-model", help="a small model (stories260K) for the single-stream callback cost")
    args = parser.parse_args()

    pages_per_request = -(-(1 + args.prompt_len + args.output_len) // 16)
    need = pages_per_request * args.requests
    kv_pages = need + need // 50 + 1  # pagoda-loadgen's default: every request at once, nothing preempted
    print(f"load average before: {loadavg()}")
    cpp = run_loadgen(args, kv_pages)

    params = pagoda.SamplingParams(temperature=0, max_tokens=args.output_len, ignore_eos=True)
    with pagoda.Engine(args.model, threads=args.threads, n_ctx=kv_pages * 16) as engine:
        rng = random.Random(1)
        bos = engine.tokenize("", add_bos=engine.add_bos)  # as pagoda-loadgen builds its prompts
        prompts = [bos + [rng.randrange(engine.vocab_size) for _ in range(args.prompt_len)]
                   for _ in range(args.requests)]
        tokens = args.requests * args.output_len
        plain = run_python(engine, prompts, params, None)  # a fresh engine, as pagoda-loadgen's
        calls = 0

        def on_token(delta):
            nonlocal calls
            calls += 1

        with_callback = run_python(engine, prompts, params, on_token)
        warm = run_python(engine, prompts, params, None)  # the callback's baseline: the same warm engine
    if args.stream_model:
        plain_token, callback_token, stream_tokens = single_stream_cost(args.stream_model, args.threads)
    print(f"load average after: {loadavg()}")
    py = tokens / plain
    print(f"job: {args.requests} x ({args.prompt_len} + {args.output_len}) tokens, {args.threads} threads, "
          f"{os.path.basename(args.model)}")
    print(f"pagoda-loadgen (C++):        {cpp:10.1f} tokens/s")
    print(f"Engine.generate (Python):    {py:10.1f} tokens/s = {py / cpp:.3f} x C++")
    print(f"Engine.generate again:       {tokens / warm:10.1f} tokens/s")
    print(f"submit(on_token=...):        {tokens / with_callback:10.1f} tokens/s; a Python callback costs "
          f"{(with_callback - warm) / calls * 1e6:.2f} us a token ({calls} calls)")

    if args.stream_model:
        print(f"single stream, {os.path.basename(args.stream_model)}, {stream_tokens} tokens each way: "
              f"{plain_token * 1e6:.2f} us a token, {callback_token * 1e6:.2f} with a callback "
              f"(+{(callback_token - plain_token) * 1e6:.2f} us)")


if __name__ == "__main__":
    main()
