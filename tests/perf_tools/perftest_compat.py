#!/usr/bin/env python3
"""gx-bw read as perftest's ib_write_bw output is read (test tools.gx-bw.perftest).

perftest_compat.py GX_RUN GX_BW

Checks, against the format of perftest 4.5 (Debian 12's ib_write_bw and
ib_write_lat): the banner between 87-dash lines ("RDMA_Write BW Test",
"Number of qps", "Transport type"), the column header, each row exactly as
perftest's printf renders it (tab-separated before MsgRate), the closing
dashed line; BW peak >= BW average; --report_gbits, -b, -D, -a, -F, -d, -x, -q,
-s, -n, --lat; and that a client with no server fails at once naming the
address.
"""
import re
import socket
import subprocess
import sys
import time

RUN, BW = sys.argv[1], sys.argv[2]
DASHES = "-" * 87
HDR_MB = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
HDR_GB = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
HDR_LAT = (" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
           "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ")
fails = []


def fail(msg):
    fails.append(msg)
    print("FAIL:", msg)


def gx_bw(args, timeout=120):
    p = subprocess.run([RUN, "-n", "2", "--timeout", "100", BW] + args, capture_output=True,
                       text=True, timeout=timeout)
    if p.returncode != 0:
        fail("gx-bw %s: exit %d\n%s%s" % (" ".join(args), p.returncode, p.stdout[-1500:],
                                          p.stderr[-1500:]))
    return p.stdout


def bw_rows(out, args, header=HDR_MB, title="RDMA_Write BW Test", qps=2):
    lines = out.splitlines()
    try:
        top = lines.index(DASHES)
    except ValueError:
        fail("%s: no perftest dashed line:\n%s" % (args, out))
        return []
    if lines[top + 1] != " " * 20 + title:
        fail("%s: title line %r, perftest prints %r" % (args, lines[top + 1], " " * 20 + title))
    banner = lines[top + 2:]
    end = banner.index(DASHES) if DASHES in banner else -1
    want = " Number of qps   : %d\t\tTransport type : " % qps
    if end < 0 or not any(l.startswith(want) for l in banner[:end]):
        fail("%s: banner lacks %r" % (args, want))
    rest = banner[end + 1:]
    if not rest or rest[0] != header:
        fail("%s: header %r, perftest prints %r" % (args, rest[:1], header))
        return []
    rows = []
    for line in rest[1:]:
        if line == DASHES:
            break
        f = line.split()
        if header == HDR_LAT:
            vals = [int(f[0]), int(f[1])] + [float(x) for x in f[2:]]
            again = (" %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t"
                     "%-7.2f\t\t%-7.2f \t\t%-7.2f" % tuple(vals))
        else:
            vals = (int(f[0]), int(f[1]), float(f[2]), float(f[3]), float(f[4]))
            again = " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f" % vals
        if line != again:
            fail("%s: row %r is not perftest's rendering %r" % (args, line, again))
        rows.append(vals)
    else:
        fail("%s: no closing dashed line after the rows" % args)
    return rows


args = ["-s", "64K", "-n", "600"]
rows = bw_rows(gx_bw(args), args)
if len(rows) != 1 or rows[0][:2] != (65536, 600):
    fail("-s 64K -n 600: rows %r" % rows)
for r in rows:
    if r[2] < r[3]:
        fail("BW peak %.2f below BW average %.2f" % (r[2], r[3]))

args = ["-a", "-n", "20", "--report_gbits", "-F"]
rows = bw_rows(gx_bw(args), args, header=HDR_GB)
if [r[0] for r in rows] != [2 << k for k in range(23)]:
    fail("-a: sizes %r, expected 2 .. 8388608" % [r[0] for r in rows])

args = ["-b", "-s", "4K", "-n", "400", "-q", "3", "-d", "lo", "-x", "0"]
rows = bw_rows(gx_bw(args), args, title="RDMA_Write Bidirectional BW Test", qps=3)
if len(rows) != 1 or rows[0][1] != 400:
    fail("-b: rows %r" % rows)

args = ["-D", "1", "-s", "16K"]
t0 = time.time()
rows = bw_rows(gx_bw(args), args)
# -D runs "about S seconds": the count comes from the warm-up's pace, so the
# run may end a little early (it ended at 0.98 s once in CI).
if time.time() - t0 < 0.8 or len(rows) != 1 or rows[0][1] < 10:
    fail("-D 1: %.1f s, rows %r" % (time.time() - t0, rows))

args = ["--lat", "-n", "200"]
rows = bw_rows(gx_bw(args), args, header=HDR_LAT, title="RDMA_Write Latency Test")
if len(rows) != 1 or rows[0][:2] != [2, 200]:
    fail("--lat: rows %r" % rows)

# A client with no server: at once, naming the address. "At once" is judged
# against gx-bw's shortest deadline (30 s to connect the fabric): a client
# that retried until a deadline would take at least that; a third of it is
# the bound (docs/testing.md, "Timed assertions").
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
t0 = time.time()
p = subprocess.run([BW, "-p", str(port), "127.0.0.1"], capture_output=True, text=True, timeout=30)
took = time.time() - t0
if p.returncode == 0 or took > 10 or "127.0.0.1:%d" % port not in p.stderr:
    fail("client with no server: exit %d after %.1f s, stderr %r" % (p.returncode, took, p.stderr))

# Server and client by hand, as perftest is run: both print the table.
srv = subprocess.Popen([BW, "-p", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
time.sleep(0.5)
p = subprocess.run([BW, "-p", str(port), "-s", "8K", "-n", "300", "127.0.0.1"],
                   capture_output=True, text=True, timeout=60)
sout = srv.communicate(timeout=60)[0]
if p.returncode != 0 or srv.returncode != 0:
    fail("server/client run: exits %d/%d: %s" % (p.returncode, srv.returncode, p.stderr))
crow = bw_rows(p.stdout, "client")
if "Waiting for client to connect" not in sout:
    fail("server does not say it waits for a client")
srow = bw_rows(sout[sout.index(DASHES):] if DASHES in sout else sout, "server")
if crow != srow:
    fail("server and client print different rows: %r %r" % (srow, crow))

if fails:
    print("%d failure(s)" % len(fails))
    sys.exit(1)
print("gx-bw reads as perftest's output; flags and the no-server failure ok")
