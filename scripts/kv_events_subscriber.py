#!/usr/bin/env python3
"""Prints the KV events a pagoda replica (or a vLLM one) publishes, decoded, one batch a line.

  apt-get install python3-zmq python3-msgpack
  scripts/kv_events_subscriber.py tcp://replica:5557 --replay tcp://replica:5558

Connects a SUB socket to the replica's EngineConfig::kv_events_endpoint (or, with --bind, binds
one for replicas that connect, as llm-d's indexer does). With --replay it asks the replay
socket for the batches it missed whenever a sequence number is skipped.
"""

import argparse
import sys

import msgpack
import zmq

# vLLM's field order of each event, after its tag (msgspec array_like).
FIELDS = {
    "BlockStored": ["block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id",
                    "medium", "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind",
                    "kv_cache_spec_sliding_window"],
    "BlockRemoved": ["block_hashes", "medium", "group_idx"],
    "AllBlocksCleared": [],
}
END_OF_REPLAY = b"\xff" * 8


def describe(event):
    """An event as a dict: positional ones (tag first) named, map-encoded ones as they are."""
    if isinstance(event, dict):
        return event
    tag, *values = event
    return {"type": tag, **dict(zip(FIELDS.get(tag, []), values))}


def show(seq, payload):
    ts, events, *rank = msgpack.unpackb(payload, raw=False)
    print(f"#{seq} ts={ts:.6f} dp_rank={rank[0] if rank else None}")
    for event in events:
        print("   ", describe(event))
    sys.stdout.flush()


def replay(socket, start):
    """Shows what the replay socket still has from `start` on; returns the sequence after it."""
    socket.send_multipart([b"", start.to_bytes(8, "big")])
    while True:
        _, seq_bytes, payload = socket.recv_multipart()
        if seq_bytes == END_OF_REPLAY:
            return start
        seq = int.from_bytes(seq_bytes, "big")
        show(seq, payload)
        start = seq + 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("endpoint", nargs="?", default="tcp://localhost:5557")
    parser.add_argument("--bind", action="store_true", help="bind the SUB socket instead of connecting")
    parser.add_argument("--topic", default="", help="only topics starting with this")
    parser.add_argument("--replay", help="the replay endpoint, to fetch skipped batches")
    parser.add_argument("--count", type=int, default=0, help="stop after this many batches (0: never)")
    args = parser.parse_args()

    context = zmq.Context()
    sub = context.socket(zmq.SUB)
    (sub.bind if args.bind else sub.connect)(args.endpoint)
    sub.setsockopt_string(zmq.SUBSCRIBE, args.topic)
    dealer = None
    if args.replay:
        dealer = context.socket(zmq.DEALER)
        dealer.connect(args.replay)

    expected = None
    seen = 0
    while not args.count or seen < args.count:
        _, seq_bytes, payload = sub.recv_multipart()
        seq = int.from_bytes(seq_bytes, "big")
        if dealer is not None and expected is not None and seq > expected:
            expected = replay(dealer, expected)
        if expected is None or seq >= expected:
            show(seq, payload)
            expected = seq + 1
        seen += 1


if __name__ == "__main__":
    main()
