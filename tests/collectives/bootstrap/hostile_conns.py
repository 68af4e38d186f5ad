#!/usr/bin/env python3
"""Open N hostile connections to a gx listener, in turn: garbage, a probe
(connect, read the challenge, close) and a hello with the right magic but a
MAC made without the key. Usage: hostile_conns.py PORT N"""
import os
import socket
import struct
import sys
import time

HELLO_MAGIC, VERSION = 0x4C485847, 2


def one(port, kind):
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    try:
        if kind == 0:
            s.sendall(os.urandom(100))
        elif kind == 1:
            s.recv(32)
        else:
            s.recv(32)
            hello = struct.pack("<IHHiIQ", HELLO_MAGIC, VERSION, 2, 1, 0, 0) + os.urandom(48)
            s.sendall(hello)
            s.settimeout(0.5)
            s.recv(40)  # the listener drops us
    except OSError:
        pass
    s.close()


def wait_listening(port):
    # the job may be slow to start (sanitizers): wait up to 20 s for the port
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return
        except OSError:
            time.sleep(0.1)


def main():
    port, n = int(sys.argv[1]), int(sys.argv[2])
    wait_listening(port)  # this probe is one more refused connection: n + 1 in all
    for i in range(n):
        one(port, i % 3)
    print(f"sent {n} hostile connections")


if __name__ == "__main__":
    main()
