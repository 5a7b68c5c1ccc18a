#!/usr/bin/env python3
"""Measurements bench/run.sh takes of fsd and of an lfs image.

  probe.py snapshot PID IMAGE       one JSON sample of fsd and the image
  probe.py timeline PID IMAGE CSV   sample every 0.5 s until PID exits or SIGTERM
  probe.py writes < perf-script     fsd's device writes from `perf script
                                    -F tid,time,event,trace` as JSON
  probe.py extents FSCTL IMAGE INODES SINCE_NS
                                    extents of the files listed in INODES
                                    (`stat -c '%i %s %n'` lines), from
                                    `fsctl dumpseg --json` of every segment,
                                    counting only logs written after SINCE_NS
                                    (ns since the epoch: inode numbers are
                                    reused, older logs may hold blocks of a
                                    deleted file with the same number)

Standard library only.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time


def proc_sample(pid):
    """write_bytes etc. from /proc/PID/io, CPU seconds, VmHWM/VmRSS (KiB)."""
    s = {}
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            k, v = line.split(":")
            s[k.strip()] = int(v)
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    # utime and stime: fields 14 and 15 of the line, 12 and 13 after ")".
    s["cpu_s"] = (int(rest[11]) + int(rest[12])) / ticks
    s["threads"] = int(rest[17])
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmHWM:", "VmRSS:")):
                k, v = line.split(":")
                s[k.strip().lower() + "_kib"] = int(v.split()[0])
    return s


def snapshot(pid, image):
    s = {"t": time.monotonic(), "fsd": proc_sample(pid)}
    s["image_alloc_bytes"] = os.stat(image).st_blocks * 512
    return s


def cmd_snapshot(pid, image):
    json.dump(snapshot(pid, image), sys.stdout)
    print()


def cmd_timeline(pid, image, path):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with open(path, "w", buffering=1) as f:
        f.write("t,vmrss_kib,write_bytes,cpu_s,image_alloc_bytes\n")
        while not stop:
            try:
                s = snapshot(pid, image)
            except (OSError, ValueError, IndexError):
                break
            p = s["fsd"]
            f.write(f"{s['t']:.3f},{p.get('vmrss_kib', 0)},{p['write_bytes']},"
                    f"{p['cpu_s']:.2f},{s['image_alloc_bytes']}\n")
            time.sleep(0.5)


# perf script lines, e.g.
#   12345  5351.096307: syscalls:sys_enter_pwritev2: fd: 0x00000007, vec: 0x..., vlen: 0x00000003, pos_l: 0x00001000, pos_h: 0x00000000, flags: 0x00000000
#   12345  5351.096324: syscalls:sys_exit_pwritev2: 0x3000
LINE = re.compile(r"^\s*(\d+)\s+([\d.]+):\s+syscalls:sys_(enter|exit)_(\w+):\s*(.*)$")


def cmd_writes():
    """Pairs enter/exit events per thread: [t, fd, offset, bytes] per write."""
    pending = {}
    writes = []
    failed = 0
    for line in sys.stdin:
        m = LINE.match(line)
        if not m:
            continue
        tid, t, kind, call, rest = m.groups()
        if kind == "enter":
            fields = dict(kv.split(": ", 1) for kv in rest.split(", ") if ": " in kv)
            try:
                fd = int(fields["fd"], 16)
                pos = int(fields["pos"] if call == "pwrite64" else fields["pos_l"], 16)
            except (KeyError, ValueError):
                continue
            pending[tid] = (float(t), fd, pos)
        else:
            start = pending.pop(tid, None)
            if start is None:
                continue
            ret = int(rest.strip(), 16)
            if ret >= 1 << 63:
                failed += 1
                continue
            writes.append([start[0], start[1], start[2], ret])
    writes.sort()
    json.dump({"writes": writes, "failed": failed}, sys.stdout)
    print()


def cmd_extents(fsctl, image, inodes_path, since_ns):
    files = {}
    with open(inodes_path) as f:
        for line in f:
            parts = line.split(None, 2)
            if len(parts) == 3 and parts[0].isdigit():
                files[int(parts[0])] = {"name": parts[2].strip(), "size": int(parts[1])}
    sup = subprocess.run([fsctl, "super", image], capture_output=True, text=True, check=True).stdout
    nseg = int(re.search(r"^segments\s+(\d+)", sup, re.M).group(1))
    bps = int(re.search(r"^segment size\s+(\d+) blocks", sup, re.M).group(1))
    bs = int(re.search(r"^block size\s+(\d+)", sup, re.M).group(1))
    # (ino, offset) -> (log sequence, device block); the newest log wins.
    where = {}
    errors = 0
    for seg in range(nseg):
        p = subprocess.run([fsctl, "dumpseg", "--json", image, str(seg)],
                           capture_output=True, text=True, check=False)
        if p.returncode != 0:
            errors += 1
            continue
        for log in json.loads(p.stdout).get("logs", []):
            if (log.get("ctime_ns") or 0) < since_ns:
                continue
            for e in log.get("entries", []):
                if e.get("kind") != "data" or e.get("ino") not in files:
                    continue
                key = (e["ino"], e["offset"])
                if key not in where or where[key][0] < log["seq"]:
                    where[key] = (log["seq"], e["block"])
    result = []
    for ino, info in sorted(files.items()):
        blocks = sorted((off, blk) for (i, off), (_seq, blk) in where.items() if i == ino)
        extents = 0
        prev = None
        for off, blk in blocks:
            if prev is None or off != prev[0] + 1 or blk != prev[1] + 1:
                extents += 1
            prev = (off, blk)
        # A segment starts with a summary block, so a file cannot have fewer
        # extents than segments it needs; one more if it starts mid-segment.
        need = -(-len(blocks) // (bps - 1)) if blocks else 0
        result.append({"ino": ino, "name": info["name"], "size": info["size"],
                       "blocks_found": len(blocks), "extents": extents,
                       "min_possible": need})
    json.dump({"files": result, "block_size": bs, "blocks_per_segment": bps,
               "segments": nseg, "dumpseg_errors": errors}, sys.stdout)
    print()


def main():
    a = sys.argv[1:]
    if a[:1] == ["snapshot"] and len(a) == 3:
        cmd_snapshot(a[1], a[2])
    elif a[:1] == ["timeline"] and len(a) == 4:
        cmd_timeline(a[1], a[2], a[3])
    elif a[:1] == ["writes"] and len(a) == 1:
        cmd_writes()
    elif a[:1] == ["extents"] and len(a) == 5:
        cmd_extents(a[1], a[2], a[3], int(a[4]))
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
