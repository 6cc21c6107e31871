"""Embedding throughput: pagoda's Engine.embed beside llama.cpp's llama-embedding, same file, same inputs.

    PYTHONPATH=build/release/python python3 bench/bench_embed.py --model bert-base-q8_0.gguf \\
        --llama-embedding /tmp/llama.cpp/build/bin/llama-embedding

N inputs of exactly --tokens tokens each (special tokens included, as both tokenize them: the
WordPiece tokenizer is llama.cpp's), generated from a fixed seed. pagoda gets them as one
Engine.embed call, so they are N concurrent requests that the encoder scheduler batches;
llama-embedding gets them as one prompt file and batches them itself (-b/-ub tokens per batch,
each setting in --llama-batch tried, its best kept). Rounds alternate between the two, so both
see the same minutes; the figure is the compute only (llama.cpp's "prompt eval time", pagoda's
wall time of the call), model loading excluded. Prints tokens per second, the median ratio and
the load average.
"""

import argparse
import os
import random
import re
import statistics
import subprocess
import tempfile
import time

import pagoda


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def make_inputs(engine: pagoda.Engine, n: int, tokens: int, seed: int) -> list[str]:
    """n texts of exactly `tokens` tokens, words drawn from the vocabulary's whole-word pieces."""
    rng = random.Random(seed)
    pieces = (engine.token_text(i).decode("utf-8", "replace") for i in range(min(engine.vocab_size, 5000)))
    words = [w for w in pieces
             if w.isalpha() and w.islower() and len(w) > 2]
    if len(words) < 10:
        words = "time people year way day thing world life hand part child eye place week case point".split()
    out = []
    while len(out) < n:
        text = []
        while True:
            text.append(rng.choice(words))
            count = len(engine.tokenize(" ".join(text), True))
            if count >= tokens:
                break
        if count == tokens:
            out.append(" ".join(text))
    return out


def run_llama(binary: str, model: str, prompt_file: str, threads: int, batch: int) -> tuple[float, int]:
    result = subprocess.run([binary, "-m", model, "-f", prompt_file, "-t", str(threads), "-c", str(batch),
                             "-b", str(batch), "-ub", str(batch), "--embd-output-format", "array"],
                            capture_output=True, text=True, check=True)
    m = re.search(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens", result.stderr)
    if not m:
        raise RuntimeError("llama-embedding printed no prompt eval time:\n" + result.stderr[-2000:])
    return float(m.group(1)) / 1000.0, int(m.group(2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--llama-embedding", help="llama.cpp's llama-embedding program (omit: pagoda only)")
    parser.add_argument("-n", "--inputs", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--llama-batch", default="128,512,2048", help="llama.cpp -b/-ub settings to try")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    engine = pagoda.Engine(args.model, threads=args.threads)
    inputs = make_inputs(engine, args.inputs, args.tokens, args.seed)
    total = args.inputs * args.tokens
    engine.embed(inputs[:8])  # warm: the packed weights paged in, the arena's threads up
    with tempfile.TemporaryDirectory() as tmp:
        prompt_file = os.path.join(tmp, "inputs.txt")
        with open(prompt_file, "w") as f:
            f.write("\n".join(inputs) + "\n")
        ours, theirs = [], {}
        for _ in range(args.rounds):
            start = time.perf_counter()
            vectors = engine.embed(inputs)
            ours.append(total / (time.perf_counter() - start))
            assert len(vectors) == args.inputs
            if args.llama_embedding:
                for batch in (int(b) for b in args.llama_batch.split(",")):
                    seconds, counted = run_llama(args.llama_embedding, args.model, prompt_file, args.threads, batch)
                    if counted != total:
                        raise RuntimeError(f"llama-embedding counted {counted} tokens, pagoda {total}")
                    theirs.setdefault(batch, []).append(total / seconds)
    print(f"{args.inputs} inputs x {args.tokens} tokens, {args.threads} threads, model {os.path.basename(args.model)}")
    print(f"pagoda Engine.embed: {statistics.median(ours):.0f} tokens/s (rounds: "
          + ", ".join(f"{x:.0f}" for x in ours) + ")")
    if theirs:
        for batch, rates in theirs.items():
            print(f"llama-embedding -b/-ub {batch}: {statistics.median(rates):.0f} tokens/s (rounds: "
                  + ", ".join(f"{x:.0f}" for x in rates) + ")")
        best = max(statistics.median(r) for r in theirs.values())
        print(f"ratio pagoda / llama.cpp's best: {statistics.median(ours) / best:.2f}x")
    print(f"load average: {loadavg()}")


if __name__ == "__main__":
    main()
