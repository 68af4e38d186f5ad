#!/usr/bin/env python3
"""A traced DDP run (examples/ddp_mlp): on every rank, every bucket's
all-reduce is on the timeline once per iteration, each inside its
iteration's step (it ends before the next backward starts), and in some
iteration a bucket's all-reduce began while the backward pass was still
running: the overlap a reader looks for.

usage: ddp_overlap.py MERGED.json RANKS
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_format  # noqa: E402


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    doc = trace_format.load(path)
    bad = trace_format.check(doc, path)
    if bad:
        print("\n".join(bad[:10]))
        return 1
    ev = doc["traceEvents"]
    ends = {(e["pid"], e["id"]): e["ts"] for e in ev if e["ph"] == "e" and e["cat"] == "ddp"}
    for r in range(n):
        backward = {e["args"]["iteration"]: (e["ts"], e["ts"] + e["dur"]) for e in ev
                    if e["pid"] == r and e["name"] == "backward"}
        buckets = [(e["args"]["iteration"], e["args"]["bucket"], e["ts"], ends[(r, e["id"])])
                   for e in ev if e["pid"] == r and e["ph"] == "b"
                   and e["name"] == "bucket all-reduce"]
        if not backward or not buckets:
            print(f"rank {r}: {len(backward)} backward spans, {len(buckets)} bucket spans")
            return 1
        per_iter = {}
        for it, b, t0, t1 in buckets:
            per_iter.setdefault(it, set()).add(b)
        nb = max(len(s) for s in per_iter.values())
        if sorted(per_iter) != sorted(backward) or any(len(s) != nb for s in per_iter.values()):
            print(f"rank {r}: buckets per iteration {per_iter}, backward iterations "
                  f"{sorted(backward)}")
            return 1
        overlapped = 0
        for it, b, t0, t1 in buckets:
            bw0, bw1 = backward[it]
            nxt = backward.get(it + 1)
            if nxt and t1 > nxt[0]:
                print(f"rank {r}: bucket {b} of iteration {it} ends after the next backward began")
                return 1
            if bw0 <= t0 < bw1:
                overlapped += 1
        if overlapped == 0:
            print(f"rank {r}: no bucket all-reduce began during a backward pass")
            return 1
        print(f"rank {r}: {len(backward)} iterations, {nb} buckets each; {overlapped} of "
              f"{len(buckets)} bucket all-reduces began during backward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
