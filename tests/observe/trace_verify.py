#!/usr/bin/env python3
"""Check a merged GX_TRACE of observe_check's two ring all-reduces
(observe_test.sh ring): the file follows the trace-event format; on every
rank each all-reduce's traced steps are exactly the steps the schedule
builder makes (index, kind, peer, bytes, message number; expected-r<N>.txt
from observe_check); and in causal order: every receive ends after its
matching send (same collective, the two ranks swapped, same message number)
began.

usage: trace_verify.py MERGED.json EXPECTED_DIR RANKS
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_format  # noqa: E402

BYTES = [1000 * 4, 262144 * 4]


def main():
    path, expdir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    doc = trace_format.load(path)
    problems = trace_format.check(doc, path)
    if problems:
        print("\n".join(problems[:20]))
        return 1
    ev = doc["traceEvents"]
    ends = {(e["pid"], e["cat"], e["id"]): e["ts"] for e in ev if e["ph"] == "e"}
    # Each call's sequence number per rank, from its all-reduce span.
    seqs = {}
    for e in ev:
        if e["ph"] == "b" and e["name"] == "allreduce" and e["args"]["comm"] == 1 \
                and e["args"]["bytes"] in BYTES:
            call = BYTES.index(e["args"]["bytes"])
            if e["args"]["algorithm"] != "ring":
                print(f"rank {e['pid']}: call {call} ran {e['args']['algorithm']}, not ring")
                return 1
            seqs[(e["pid"], call)] = e["args"]["seq"]
    for r in range(n):
        for call in range(2):
            if (r, call) not in seqs:
                print(f"rank {r}: the trace has no all-reduce span for call {call}")
                return 1
            if seqs[(r, call)] != seqs[(0, call)]:
                print(f"call {call}: sequence {seqs[(r, call)]} on rank {r}, "
                      f"{seqs[(0, call)]} on rank 0")
                return 1
    # The traced steps: (rank, call) -> {index: (kind, peer, bytes, msg)}.
    traced, begin, end = {}, {}, {}
    for e in ev:
        a = e.get("args", {})
        if e["ph"] not in ("b", "X") or e.get("cat") not in ("step", "kernel") \
                or a.get("comm") != 1:
            continue
        call = next((c for c in range(2) if seqs[(e["pid"], c)] == a["seq"]), None)
        if call is None:
            continue
        is_msg = e["name"] in ("send", "recv")
        if is_msg and a["msg"] == -1:
            continue  # the descriptor the engine adds before the schedule
        step = (e["name"], a["peer"] if is_msg else -1, a["bytes"], a["msg"] if is_msg else -1)
        steps = traced.setdefault((e["pid"], call), {})
        if a["step"] in steps:
            print(f"rank {e['pid']} call {call}: step {a['step']} traced twice")
            return 1
        steps[a["step"]] = step
        if is_msg:
            key = (e["pid"], call, e["name"], a["peer"], a["msg"])
            begin[key] = e["ts"]
            end[key] = ends[(e["pid"], e["cat"], e["id"])]
    total = 0
    for r in range(n):
        want = {}
        with open(os.path.join(expdir, f"expected-r{r}.txt")) as f:
            for line in f:
                c, i, kind, peer, nbytes, msg = line.split()
                want.setdefault(int(c), {})[int(i)] = (kind.replace("_", " "), int(peer),
                                                       int(nbytes), int(msg))
        for call in range(2):
            got = traced.get((r, call), {})
            exp = want.get(call, {})
            if got != exp:
                missing = sorted(set(exp) - set(got))[:5]
                extra = sorted(set(got) - set(exp))[:5]
                diff = [i for i in sorted(set(got) & set(exp)) if got[i] != exp[i]][:5]
                print(f"rank {r} call {call}: traced {len(got)} steps, the schedule has "
                      f"{len(exp)}; missing {missing}, extra {extra}, different "
                      f"{[(i, got[i], exp[i]) for i in diff]}")
                return 1
            total += len(got)
    pairs = 0
    for (r, call, kind, peer, msg), t_end in end.items():
        if kind != "recv":
            continue
        send = (peer, call, "send", r, msg)
        if send not in begin:
            print(f"rank {r} call {call}: receive of message {msg} from rank {peer} has no send")
            return 1
        if t_end < begin[send]:
            print(f"rank {r} call {call}: receive of message {msg} from rank {peer} ended at "
                  f"{t_end} us, before the send began at {begin[send]} us")
            return 1
        pairs += 1
    if pairs == 0:
        print("no receive was checked")
        return 1
    print(f"PASS: {total} steps on {n} ranks match the schedules; {pairs} receives end after "
          f"their sends began")
    return 0


if __name__ == "__main__":
    sys.exit(main())
