#!/usr/bin/env python3
"""Mutated specs (bytes changed, cut, duplicated) never crash gx-accept's
spec reader: every run exits 0 (still valid) or 2 with an error naming the file.

    spec_fuzz.py GX_ACCEPT VALID_SPEC WORK_DIR
"""
import random
import subprocess
import sys

ALPHABET = b'{}[]",:\\-0123456789.eEtfnu \n\x00\xff'


def mutate(rng, seed):
    b = bytearray(seed)
    for _ in range(rng.randint(1, 4)):
        op, at = rng.randint(0, 3), rng.randrange(len(b))
        if op == 0:
            b[at] = rng.choice(ALPHABET)
        elif op == 1:
            del b[at:at + rng.randint(1, 20)]
        elif op == 2:
            b[at:at] = b[rng.randrange(len(b)):][:rng.randint(1, 40)]
        else:
            b = b[:at]
        if not b:
            b = bytearray(b"{")
    return bytes(b)


def main():
    gxaccept, seed_file, work = sys.argv[1], sys.argv[2], sys.argv[3]
    seed = open(seed_file, "rb").read()
    rng = random.Random(16)
    bad = 0
    for i in range(150):
        data = mutate(rng, seed)
        path = "%s/fuzz.json" % work
        with open(path, "wb") as f:
            f.write(data)
        r = subprocess.run([gxaccept, "--check-spec", path], capture_output=True, timeout=30,
                           check=False)
        if r.returncode not in (0, 2) or (r.returncode == 2 and b"fuzz.json:" not in r.stderr):
            print("FAIL fuzz case %d: exit %d: %r" % (i, r.returncode, r.stderr[-300:]))
            with open("%s/crash-%d.json" % (work, i), "wb") as f:
                f.write(data)
            bad += 1
    print("fuzz: 150 mutated specs, %d crashes or unnamed errors" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
