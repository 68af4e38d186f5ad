#!/usr/bin/env python3
"""What does a connector that never proves the job key receive?

Usage: probe_challenge.py N NAME=PORT [NAME=PORT ...]
Connects N times to each job's bootstrap listener, reads everything it is
sent before the listener waits for a hello (50 ms of silence), closes, and
checks that none of it can be a function of the job key:
  - exactly one 32-byte challenge, nothing more;
  - the fixed header (magic, version) is the same for every job;
  - the job id is constant within a job but differs between two jobs with the
    SAME key (so it is random, not derived from the key);
  - every nonce is fresh.
Jobs named A1 and A2 must share a key; any other job has another key.
"""
import socket
import sys
import time


def connect(port, wait_s=30.0):
    """The job's rank 0 may not listen yet on a loaded machine: retry a
    refused connection for as long as its own init would wait for peers."""
    end = time.monotonic() + wait_s
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=2)
        except ConnectionRefusedError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


def capture(port):
    s = connect(port)
    data = b""
    deadline = time.monotonic() + 2
    try:
        while time.monotonic() < deadline:
            # after the challenge, 50 ms of silence: the listener waits for a hello
            s.settimeout(0.05 if len(data) >= 32 else max(0.01, deadline - time.monotonic()))
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    s.close()
    return data


def main():
    n = int(sys.argv[1])
    jobs = dict(arg.split("=") for arg in sys.argv[2:])
    caps = {name: [capture(int(port)) for _ in range(n)] for name, port in jobs.items()}
    bad = []
    headers, ids, nonces = set(), {}, set()
    for name, cs in caps.items():
        for c in cs:
            if len(c) != 32:
                bad.append(f"{name}: received {len(c)} bytes before proving the key, want 32")
                continue
            headers.add(c[:8])
            ids.setdefault(name, set()).add(c[8:16])
            nonces.add(c[16:32])
        print(f"{name}: {len(cs)} probes, job ids {sorted(i.hex() for i in ids.get(name, ()))}")
    if len(headers) != 1:
        bad.append(f"the header differs between jobs: {sorted(h.hex() for h in headers)}")
    for name, s in ids.items():
        if len(s) != 1:
            bad.append(f"{name}: the job id changes between connections")
    if "A1" in ids and "A2" in ids and ids["A1"] == ids["A2"]:
        bad.append("two jobs with the same key sent the same job id: it is a key fingerprint")
    if len(nonces) != sum(len(cs) for cs in caps.values()):
        bad.append("a nonce repeated")
    for b in bad:
        print("FAIL:", b)
    print("nothing received depends on the key" if not bad else "the challenge leaks the key")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
