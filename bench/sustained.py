#!/usr/bin/env python3
"""W5, sustained overwrite (issue 23; see docs/BENCHMARKS.md). As root:

    bench/sustained.py [--quick|--full|--smoke] [--out FILE] [--workdir DIR]
                       [--no-build] [--debug] [--cells SIZE/LIVE/SKEW,...]

For each cell (image size x live share x skew): a fresh image made by
`mkfs.lfs --size SIZE` with no other option, mounted by `fsd IMG MNT` on
the shipped defaults (fsd starts cleanerd with the shipped
conf/cleanerd.conf; an fsd.toml of built-in defaults), is filled with
files to LIVE % of its size, then overwritten at random in 64 KiB
chunks, SKEW (80/20 or 90/10) of the writes going to the other share of
the chunks, with an fsync every 64 writes, until ten times its free
space has been written. Measured: every ENOSPC (none expected), the
latency of every write(2) (p99, p99.9, max) and fsync(2), device bytes
over user bytes during the overwrites (write amplification, from `fsctl
stat`: data, metadata and cleaning copies), and what fsd and cleanerd
did (space waits, checkpoints deleted for space, passes). At the end
every chunk is read back and compared, fsd is unmounted and the image
checked by `fsctl fsck`.

Writes FILE (default bench/RESULTS-sustained.md) and FILE.json.
Exit status: 0 report written (a cell may still have failed: see the
report), 1 error, 2 bad usage.
"""

import argparse
import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CHUNK = 64 << 10
FSYNC_EVERY = 64
FILE_BYTES = 64 << 20
ROUNDS = 10  # free space overwritten this many times
SKEWS = {"80/20": (0.8, 0.2), "90/10": (0.9, 0.1)}
MODES = {
    "full": dict(sizes=[512 << 20, 4 << 30], lives=[60, 85], skews=["80/20", "90/10"], rounds=ROUNDS),
    "quick": dict(sizes=[512 << 20], lives=[60, 85], skews=["80/20", "90/10"], rounds=ROUNDS),
    # bench/smoke.sh: seconds; no figure from it means anything.
    "smoke": dict(sizes=[128 << 20], lives=[60], skews=["90/10"], rounds=1),
}
MAX_ENOSPC = 64  # a cell stops after this many


def say(msg):
    print(f"[sustained {time.monotonic() - T0:6.0f}s] {msg}", file=sys.stderr, flush=True)


class Fail(Exception):
    pass


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise Fail(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()[-500:]}")
    return r.stdout


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def chunk_bytes(base, c, v):
    """Chunk `c` at version `v`: a header naming both, then the base
    pattern rotated by them, so that every byte depends on (c, v)."""
    off = (c * 131 + v * 8191) % CHUNK
    head = c.to_bytes(8, "little") + v.to_bytes(8, "little")
    body = base[off:off + CHUNK - 16]
    return head + body


def percentile(sorted_ns, q):
    if not sorted_ns:
        return None
    i = min(len(sorted_ns) - 1, max(0, int(round(q * (len(sorted_ns) - 1)))))
    return sorted_ns[i]


class Mount:
    """A fresh image on the shipped defaults, mounted by fsd."""

    def __init__(self, bin_dir, work, name, size):
        self.bin = bin_dir
        self.dir = os.path.join(work, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.img = os.path.join(self.dir, "img")
        self.mnt = os.path.join(self.dir, "mnt")
        self.sock = os.path.join(self.dir, "fsd.sock")
        os.makedirs(self.mnt)
        run([f"{bin_dir}/mkfs-lfs", "-q", "--size", str(size), self.img])
        conf = os.path.join(self.dir, "fsd.toml")
        with open(conf, "w") as f:
            f.write("# bench/sustained.py: fsd built-in defaults\n")
        self.log = open(os.path.join(self.dir, "fsd.log"), "w")
        gc = os.path.join(ROOT, "conf", "cleanerd.conf")
        self.fsd = subprocess.Popen([f"{bin_dir}/fsd", "--config", conf, "--socket", self.sock,
                                     "-o", f"gcconf={gc}", self.img, self.mnt],
                                    stdout=self.log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        deadline = time.monotonic() + 60
        while not (os.path.exists(self.sock) and os.path.ismount(self.mnt)):
            if self.fsd.poll() is not None:
                raise Fail(f"fsd exited with {self.fsd.returncode} (log {self.log.name})")
            if time.monotonic() > deadline:
                raise Fail("fsd did not mount within 60 s")
            time.sleep(0.1)

    def fsctl(self, *args):
        return run([f"{self.bin}/fsctl", *args])

    def df(self):
        return json.loads(self.fsctl("df", "--json", self.sock))

    def counters(self):
        return json.loads(self.fsctl("stat", "--json", self.sock))["counters"]

    def close(self, keep):
        if self.fsd.poll() is None:
            self.fsd.send_signal(signal.SIGTERM)
            try:
                self.fsd.wait(300)
            except subprocess.TimeoutExpired:
                subprocess.run(["umount", "-l", self.mnt])
                self.fsd.kill()
                self.fsd.wait()
        fsck = subprocess.run([f"{self.bin}/fsctl", "fsck", self.img], capture_output=True, text=True)
        exit_ok = self.fsd.returncode == 0
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)
        return exit_ok, fsck.returncode == 0, (fsck.stdout + fsck.stderr).strip()[-400:]


def device_bytes(c):
    return (c.get("device_data_bytes_written", 0) + c.get("device_meta_bytes_written", 0)
            + c.get("device_gc_bytes_written", 0))


def cell(bin_dir, work, size, live, skew, rounds, keep):
    name = f"{human(size).replace(' ', '')}-{live}-{skew.replace('/', '_')}"
    say(f"{name}: mkfs.lfs --size {size}; fsd on the shipped defaults")
    m = Mount(bin_dir, work, name, size)
    res = dict(size=size, live=live, skew=skew, enospc=0, verified=False)
    try:
        total = m.df()["total_bytes"]
        nchunks = total * live // 100 // CHUNK
        per_file = FILE_BYTES // CHUNK
        nfiles = -(-nchunks // per_file)
        rnd = random.Random(f"{size}/{live}/{skew}")
        base = bytes(rnd.getrandbits(8) for _ in range(CHUNK)) * 2
        fds = []
        for i in range(nfiles):
            fds.append(os.open(os.path.join(m.mnt, f"f{i:04d}"), os.O_RDWR | os.O_CREAT, 0o644))
        version = [0] * nchunks
        t = time.monotonic()
        for c in range(nchunks):
            os.pwrite(fds[c // per_file], chunk_bytes(base, c, 0), (c % per_file) * CHUNK)
        for fd in fds:
            os.fsync(fd)
        res["fill_s"] = round(time.monotonic() - t, 1)
        free = total - nchunks * CHUNK
        writes = rounds * free // CHUNK
        share_w, share_c = SKEWS[skew]
        hot = max(1, int(nchunks * share_c))
        say(f"{name}: {nchunks} chunks live ({live} % of {human(total)}); {writes} overwrites "
            f"({rounds}x the {human(free)} free), {skew}")
        before = m.counters()
        lat, fsync_lat = [], []
        t = time.monotonic()
        for i in range(writes):
            c = rnd.randrange(hot) if rnd.random() < share_w else hot + rnd.randrange(nchunks - hot)
            v = version[c] + 1
            fd = fds[c // per_file]
            t0 = time.perf_counter_ns()
            try:
                os.pwrite(fd, chunk_bytes(base, c, v), (c % per_file) * CHUNK)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                res["enospc"] += 1
                if res["enospc"] >= MAX_ENOSPC:
                    say(f"{name}: {MAX_ENOSPC} ENOSPC, stopping the cell")
                    break
                continue
            lat.append(time.perf_counter_ns() - t0)
            version[c] = v
            if i % FSYNC_EVERY == FSYNC_EVERY - 1:
                t0 = time.perf_counter_ns()
                os.fsync(fd)
                fsync_lat.append(time.perf_counter_ns() - t0)
        for fd in fds:
            os.fsync(fd)
        res["overwrite_s"] = round(time.monotonic() - t, 1)
        after = m.counters()
        user = after["user_bytes_written"] - before["user_bytes_written"]
        dev = device_bytes(after) - device_bytes(before)
        res["user_bytes"] = user
        res["wa"] = round(dev / user, 3) if user else None
        res["mib_per_s"] = round(user / (1 << 20) / max(res["overwrite_s"], 1e-9), 1)
        for k in ("space_waits", "checkpoints_expired_for_space", "space_passes", "gc_passes",
                  "throttle_waits", "throttle_sleeps"):
            res[k] = after.get(k, 0) - before.get(k, 0)
        lat.sort()
        fsync_lat.sort()
        res["writes"] = len(lat)
        res["lat_us"] = {q: round(percentile(lat, p) / 1e3, 1) if lat else None
                         for q, p in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999), ("max", 1.0))}
        res["fsync_us"] = {q: round(percentile(fsync_lat, p) / 1e3, 1) if fsync_lat else None
                           for q, p in (("p99", 0.99), ("max", 1.0))}
        # Every byte.
        bad = 0
        for c in range(nchunks):
            got = os.pread(fds[c // per_file], CHUNK, (c % per_file) * CHUNK)
            if got != chunk_bytes(base, c, version[c]):
                bad += 1
        res["bad_chunks"] = bad
        res["verified"] = bad == 0
        for fd in fds:
            os.close(fd)
        res["df_end"] = m.df()
    finally:
        exit_ok, fsck_ok, fsck_out = m.close(keep)
        res["fsd_exit_ok"] = exit_ok
        res["fsck_clean"] = fsck_ok
        if not fsck_ok:
            res["fsck"] = fsck_out
    ok = res["enospc"] == 0 and res["verified"] and res["fsck_clean"] and res["fsd_exit_ok"]
    res["verdict"] = "pass" if ok else "FAIL"
    say(f"{name}: {res['verdict']}: {res['enospc']} ENOSPC, write p99 {res['lat_us']['p99']} us, "
        f"max {res['lat_us']['max']} us, WA {res['wa']}")
    return res


def fmt(x):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.1f}" if x >= 100 else f"{x:.2f}"
    return f"{x:,}"


def report(out, mode, rows, meta):
    lines = ["# W5: sustained overwrite on the shipped defaults", "",
             f"Generated by `bench/sustained.py --{mode}` ({meta['date']}, git {meta['git']}, "
             f"{meta['cpus']} CPUs, kernel {meta['kernel']}). See docs/BENCHMARKS.md.", "",
             "Each cell: a fresh image (`mkfs.lfs --size SIZE`, nothing else), mounted by `fsd IMG MNT` on the "
             "shipped defaults (fsd starts cleanerd with `conf/cleanerd.conf`), filled with files to the live "
             f"share of its size, then overwritten at random in 64 KiB chunks with an fsync every {FSYNC_EVERY} "
             "writes until ten times the free space is written. Latency is of each write(2) call; write "
             "amplification is device bytes (data, metadata, cleaning copies) over user bytes during the "
             "overwrites. Targets: 0 ENOSPC, every byte verified, fsck clean, max write latency ≤ 500 ms.", "",
             "| image | live | skew | verdict | ENOSPC | verified | fsck | write p99 | p99.9 | max | fsync p99 | fsync max | WA | MiB/s | space waits | ckpts expired for space | fsd's passes | cleanerd passes |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {human(r['size'])} | {r['live']} % | {r['skew']} | ERROR: {r['error']} |" + " |" * 14)
            continue
        lat, fl = r["lat_us"], r["fsync_us"]
        maxms = (lat["max"] or 0) / 1e3
        verdict = r["verdict"] + ("" if maxms <= 500 else " (max > 500 ms)")
        lines.append(
            f"| {human(r['size'])} | {r['live']} % | {r['skew']} | {verdict} | {r['enospc']} | "
            f"{'yes' if r['verified'] else 'NO (' + str(r.get('bad_chunks')) + ' chunks)'} | "
            f"{'clean' if r['fsck_clean'] else 'ERRORS'} | {fmt(lat['p99'])} µs | {fmt(lat['p99.9'])} µs | "
            f"{fmt(maxms)} ms | {fmt(fl['p99'])} µs | {fmt((fl['max'] or 0) / 1e3)} ms | {fmt(r['wa'])} | "
            f"{fmt(r['mib_per_s'])} | {r['space_waits']} | {r['checkpoints_expired_for_space']} | "
            f"{r['space_passes']} | {r['gc_passes'] - r['space_passes']} |")
    lines.append("")
    with open(out, "w") as f:
        f.write("\n".join(lines))
    with open(out + ".json", "w") as f:
        json.dump(dict(meta=meta, mode=mode, cells=rows), f, indent=1)


def main():
    global T0
    T0 = time.monotonic()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_const", dest="mode", const="quick")
    g.add_argument("--full", action="store_const", dest="mode", const="full")
    g.add_argument("--smoke", action="store_const", dest="mode", const="smoke")
    p.add_argument("--out", default=os.path.join(HERE, "RESULTS-sustained.md"))
    p.add_argument("--workdir", default=os.environ.get("LFS_BENCH_DIR", "/var/tmp/lfs-bench"))
    p.add_argument("--no-build", action="store_true")
    p.add_argument("--debug", action="store_true")
    p.add_argument("--keep", action="store_true", help="leave each cell's directory behind")
    p.add_argument("--cells", help="only these cells, as MiB/LIVE/SKEW: 512M/85/90_10,4096M/60/80_20")
    a = p.parse_args()
    mode = a.mode or "quick"
    if os.geteuid() != 0:
        print("bench/sustained.py needs root (FUSE mounts)", file=sys.stderr)
        return 2
    profile = "dev" if a.debug else "release"
    bin_dir = os.path.join(ROOT, "target", "debug" if a.debug else "release")
    if not a.no_build:
        say(f"building ({profile})")
        subprocess.run(["cargo", "build", "--profile", profile, "-p", "fsd", "-p", "mkfs", "-p",
                        "fsctl", "-p", "cleanerd"], cwd=ROOT, check=True)
    m = MODES[mode]
    cells = [(s, l, k) for s in m["sizes"] for l in m["lives"] for k in m["skews"]]
    if a.cells:
        want = set(a.cells.split(","))
        name = lambda c: f"{c[0] >> 20}M/{c[1]}/{c[2].replace('/', '_')}"
        unknown = sorted(want - {name(c) for c in cells})
        if unknown:
            print(f"sustained.py: --cells {','.join(unknown)}: no such cell in --{mode} "
                  f"(its cells: {','.join(name(c) for c in cells)})", file=sys.stderr)
            return 2
        cells = [c for c in cells if name(c) in want]
    work = os.path.join(a.workdir, "sustained")
    os.makedirs(work, exist_ok=True)
    meta = dict(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                git=subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                                   capture_output=True, text=True).stdout.strip(),
                cpus=os.cpu_count(), kernel=os.uname().release)
    rows = []
    for size, live, skew in cells:
        try:
            rows.append(cell(bin_dir, work, size, live, skew, m["rounds"], a.keep))
        except (Fail, OSError) as e:
            say(f"cell {size}/{live}/{skew}: {e}")
            rows.append(dict(size=size, live=live, skew=skew, error=str(e)[:200]))
        report(a.out, mode, rows, meta)
    say(f"report: {a.out}")
    return 0


T0 = 0.0
if __name__ == "__main__":
    sys.exit(main())
