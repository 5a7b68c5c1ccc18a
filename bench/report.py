#!/usr/bin/env python3
"""Writes the benchmark report from a results directory of bench/run.sh.

  report.py RESULTS_DIR OUT.md

Beside OUT.md it writes OUT.json (every figure used) and the plots
OUT-ratios.svg, OUT-latency.svg and OUT-lfs-timeline.svg. Standard library
only. Every figure comes from a file of the run; a figure that is missing is
reported as missing, never estimated.
"""

import csv
import html
import json
import math
import os
import re
import subprocess
import sys

MiB = 1 << 20
GiB = 1 << 30
FS_ORDER = ["lfs", "lfs-nbd", "ext4", "xfs", "btrfs"]
# lfs itself on an NBD export: compared with lfs on the local file, not a peer.
NBD = "lfs-nbd"
# Headroom over the configured cache allowed by issue 7's RSS target.
RSS_HEADROOM = 64 * MiB

# What each seed metric is; seed-workloads.sh's header says the same.
METRICS = {
    "seqw10_MiBps": ("W1 (seed 000): 10 sync writers, 2 MiB O_DIRECT sequential writes, aggregate", "MiB/s", "higher"),
    "randrw_512_qd32_iops": ("W2 (seed 001): 512 B random read/write, libaio QD32, O_DIRECT, read+write", "IOPS", "higher"),
    "randrw_4k_qd32_iops": ("W2 (seed 001): 4 KiB random read/write, libaio QD32, O_DIRECT, read+write", "IOPS", "higher"),
    "randwrite64k_qd1_lat_us": ("W3 (seed 002): 64 KiB random writes, QD1, write latency", "µs", "lower"),
    "randwrite64k_qd16_lat_us": ("W3 (seed 002): 64 KiB random writes, QD16, write latency", "µs", "lower"),
    "fsync64k_files_per_s": ("W4 (seed 003): 200 files of 64 KiB written and fsync'd, one writer", "files/s", "higher"),
    "W4x4_files_per_s": ("W4x4 (harness extra, same seed): W4's job split over 4 concurrent fio jobs, each writing and fsyncing its own files of 64 KiB", "files/s", "higher"),
}



def cleaning_section(root):
    """The cleaning benchmark's verdicts, quoted from bench/RESULTS-cleaning.md
    (bench/cleaning.py, a separate run), so that RESULTS.md holds them."""
    path = os.path.join(root, "bench", "RESULTS-cleaning.md")
    out = ["## Cleaning (issue 6)", ""]
    if not os.path.exists(path):
        return out + ["No `bench/RESULTS-cleaning.md`: run `bench/cleaning.py --full` to measure.", ""]
    lines = open(path).read().splitlines()
    date = next((l.split("|")[2].split(",")[0].strip() for l in lines if l.startswith("| date (UTC) |")), "?")
    out += [f"From `bench/RESULTS-cleaning.md` (written by `bench/cleaning.py`, not by this run; seed 004 of {date}); "
            "the tables, plots and every run are there.", ""]
    out += [l for l in lines if l.startswith("**Target**")]
    out += [""] + [l for l in lines if l.startswith(("- random: ", "- sequential: "))]
    return out + [""]

def read(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def read_json(path):
    text = read(path)
    if text is None:
        return None
    start = text.find("{")
    if start < 0:
        return None
    try:
        return json.loads(text[start:])
    except ValueError:
        return None


def env_file(path):
    d = {}
    for line in (read(path) or "").splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            d[k] = v
    return d


def run(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
        return (p.stdout or p.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "unavailable"


def size_bytes(text):
    m = re.fullmatch(r"\s*(\d+)\s*([KMGTP]?)i?B?\s*", str(text), re.I)
    if not m:
        return None
    return int(m.group(1)) * 1024 ** ("KMGTP".find(m.group(2).upper()) + 1) if m.group(2) else int(m.group(1))


def fmt(x, nd=1):
    if x is None:
        return "—"
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return "—"
    if abs(x) >= 100 or float(x).is_integer():
        return f"{x:,.0f}"
    return f"{x:,.{nd}f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fr(r):
    return "—" if r is None else f"{r:.2f}×"


def mib(b):
    return None if b is None else b / MiB


# ---------------------------------------------------------------- parsing

def parse_lines(path):
    """[(workload, metric, value or dict or None, failure reason)] in order."""
    out = []
    for line in (read(path) or "").splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        _label, w, metric = parts[:3]
        rest = parts[3:]
        if rest[0] == "FAILED:":
            out.append((w, metric, None, " ".join(rest[1:]) or "no reason given"))
        elif len(rest) == 1:
            try:
                out.append((w, metric, float(rest[0]), None))
            except ValueError:
                out.append((w, metric, None, "unparsable: " + " ".join(rest)))
        else:
            try:
                out.append((w, metric, {rest[i]: float(rest[i + 1]) for i in range(0, len(rest) - 1, 2)}, None))
            except ValueError:
                out.append((w, metric, None, "unparsable: " + " ".join(rest)))
    return out


def arg(args, name):
    v = None
    for a in args:
        if a.startswith("--" + name + "="):
            v = a.split("=", 1)[1]
    return v


def run_figures(rec):
    """User bytes, device bytes and fsd figures of one shim record."""
    f = {"user_bytes": None, "device_bytes": None, "cpu_s": None, "peak_rss": None,
         "t0": rec.get("before", {}).get("t"), "t1": rec.get("after", {}).get("t"),
         "errors": rec.get("sample_errors", []), "rec": rec}
    jobs = rec.get("jobs")
    if jobs is not None and rec.get("rc") == 0:
        f["write_io_bytes"] = sum(j.get("write_io_bytes") or 0 for j in jobs)
        f["layout_bytes"] = rec.get("layout_bytes", 0)
        f["user_bytes"] = f["write_io_bytes"] + f["layout_bytes"]
    b, a = rec.get("before", {}), rec.get("after", {})
    if "fsd" in b and "fsd" in a:
        f["device_bytes"] = a["fsd"]["write_bytes"] - b["fsd"]["write_bytes"]
        f["cpu_s"] = a["fsd"]["cpu_s"] - b["fsd"]["cpu_s"]
        f["peak_rss"] = a["fsd"].get("vmhwm_kib", 0) * 1024
    elif "dev_sectors_written" in b and "dev_sectors_written" in a:
        f["device_bytes"] = (a["dev_sectors_written"] - b["dev_sectors_written"]) * 512
    if "image_alloc_bytes" in b and "image_alloc_bytes" in a:
        f["image_alloc_delta"] = a["image_alloc_bytes"] - b["image_alloc_bytes"]
    f["wa"] = ratio(f["device_bytes"], f["user_bytes"])
    return f


def sequentiality(writes, t0, t1, skip_offsets):
    """Share of writes (and of bytes) that start where the previous ended."""
    sel = [w for w in writes if (t0 is None or w[0] >= t0) and (t1 is None or w[0] <= t1)]
    res = {}
    for name, ws in (("all", sel), ("log", [w for w in sel if w[2] not in skip_offsets])):
        n = seq = 0
        nb = seqb = 0
        prev_end = None
        for _t, _fd, off, ln in ws:
            if prev_end is not None:
                n += 1
                nb += ln
                if off == prev_end:
                    seq += 1
                    seqb += ln
            prev_end = off + ln
        res[name] = {"writes": len(ws), "pairs": n, "sequential": seq,
                     "share": ratio(seq, n), "bytes_share": ratio(seqb, nb),
                     "bytes": sum(w[3] for w in ws)}
    return res


# ---------------------------------------------------------------- SVG

def svg_doc(w, h, body):
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">\n'
            f'<rect width="{w}" height="{h}" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n")


def text(x, y, s, anchor="start", size=12, weight="normal", fill="#222"):
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" '
            f'font-weight="{weight}" fill="{fill}">{html.escape(str(s))}</text>')


COLORS = {"ext4": "#4e79a7", "xfs": "#f28e2b", "btrfs": "#59a14f", "lfs": "#e15759", NBD: "#b07aa1",
          "avg": "#4e79a7", "p99": "#f28e2b", "max": "#e15759"}


def plot_ratios(rows, peers, path, title):
    """Horizontal bars of lfs's advantage over each peer (log2 axis)."""
    if not rows or not peers:
        return False
    left, right, top, bar, gap = 330, 40, 60, 12, 12
    width = 900
    group = bar * len(peers) + gap
    height = top + group * len(rows) + 70
    lo, hi = -5, 3  # 1/32x .. 8x
    plot_w = width - left - right

    def x(v):
        v = min(max(math.log2(v), lo), hi)
        return left + (v - lo) / (hi - lo) * plot_w

    body = [text(width / 2, 22, title, "middle", 15, "bold"),
            text(width / 2, 40, "bar > 1×: lfs ahead (throughput lfs ÷ peer; latency peer ÷ lfs); log scale", "middle", 11, fill="#555")]
    for e in range(lo, hi + 1):
        xx = left + (e - lo) / (hi - lo) * plot_w
        body.append(f'<line x1="{xx:.1f}" y1="{top - 5}" x2="{xx:.1f}" y2="{height - 50}" stroke="{"#000" if e == 0 else "#ddd"}"/>')
        label = f"{2 ** e:g}×" if e >= 0 else f"1/{2 ** -e}×"
        body.append(text(xx, height - 36, label, "middle", 10))
    for i, (label, vals) in enumerate(rows):
        y0 = top + i * group
        body.append(text(left - 8, y0 + group / 2, label, "end", 11))
        for j, p in enumerate(peers):
            v = vals.get(p)
            yy = y0 + j * bar
            if v is None or v <= 0:
                body.append(text(left + 4, yy + bar - 2, f"{p}: no figure", size=9, fill="#999"))
                continue
            x1, x0 = x(v), x(1)
            body.append(f'<rect x="{min(x0, x1):.1f}" y="{yy:.1f}" width="{abs(x1 - x0):.1f}" height="{bar - 2}" fill="{COLORS.get(p, "#888")}"/>')
            body.append(text(max(x0, x1) + 3, yy + bar - 3, f"{v:.2f}", size=9))
    for j, p in enumerate(peers):
        body.append(f'<rect x="{left + j * 90}" y="{height - 22}" width="12" height="12" fill="{COLORS.get(p, "#888")}"/>')
        body.append(text(left + j * 90 + 16, height - 12, f"vs {p}", size=11))
    with open(path, "w") as f:
        f.write(svg_doc(width, height, body))
    return True


def plot_latency(lat, fss, path):
    """Grouped bars of avg, p99, max latency per filesystem and queue depth (log axis)."""
    metrics = [m for m in ("randwrite64k_qd1_lat_us", "randwrite64k_qd16_lat_us") if any(lat.get((fs, m)) for fs in fss)]
    if not metrics:
        return False
    vals = [v for m in metrics for fs in fss for v in (lat.get((fs, m)) or {}).values() if v and v > 0]
    lo = math.floor(math.log10(min(vals)))
    hi = math.ceil(math.log10(max(vals)))
    if hi == lo:
        hi += 1
    left, top, bottom = 70, 50, 70
    bw = 14
    gw = bw * 3 + 14
    width = max(640, left + 30 + len(metrics) * (gw * len(fss) + 40))
    height = 420
    ph = height - top - bottom

    def y(v):
        return top + ph - (math.log10(v) - lo) / (hi - lo) * ph

    body = [text(width / 2, 22, "W3: 64 KiB random write latency, µs (log scale, lower is better)", "middle", 14, "bold")]
    for e in range(lo, hi + 1):
        yy = y(10 ** e)
        body.append(f'<line x1="{left}" y1="{yy:.1f}" x2="{width - 20}" y2="{yy:.1f}" stroke="#ddd"/>')
        body.append(text(left - 6, yy + 4, f"{10 ** e:g}", "end", 10))
    x0 = left + 20
    for m in metrics:
        qd = re.search(r"qd(\d+)", m).group(1)
        body.append(text(x0 + gw * len(fss) / 2, height - bottom + 38, f"QD{qd}", "middle", 12, "bold"))
        for fs in fss:
            d = lat.get((fs, m)) or {}
            for k, key in enumerate(("avg", "p99", "max")):
                v = d.get(key)
                if v and v > 0:
                    body.append(f'<rect x="{x0 + k * bw:.1f}" y="{y(v):.1f}" width="{bw - 2}" height="{top + ph - y(v):.1f}" fill="{COLORS[key]}"/>')
            body.append(text(x0 + bw * 1.5, height - bottom + 16, fs if d else fs + " (failed)", "middle", 11))
            x0 += gw
        x0 += 40
    for k, key in enumerate(("avg", "p99", "max")):
        body.append(f'<rect x="{left + k * 70}" y="{height - 20}" width="12" height="12" fill="{COLORS[key]}"/>')
        body.append(text(left + k * 70 + 16, height - 10, key, size=11))
    with open(path, "w") as f:
        f.write(svg_doc(width, height, body))
    return True


def nice(v):
    """The smallest of 1, 2, 4, 5 or 8 times a power of ten that is at least v."""
    e = 10 ** math.floor(math.log10(v))
    return next(m * e for m in (1, 2, 4, 5, 8, 10) if m * e >= v)


def plot_timeline(rows, spans, limit_mib, path):
    """fsd's RSS and device write rate over the lfs run, workloads shaded."""
    if len(rows) < 3:
        return False
    t0 = rows[0][0]
    ts = [r[0] - t0 for r in rows]
    rss = [r[1] / 1024 for r in rows]
    rate = [0.0] + [max(0.0, (rows[i][2] - rows[i - 1][2]) / MiB / max(rows[i][0] - rows[i - 1][0], 1e-6)) for i in range(1, len(rows))]
    width, height, left, right, top = 960, 440, 70, 70, 50
    ph = height - top - 60
    pw = width - left - right
    tmax = max(ts[-1], 1)
    rmax = nice(max(max(rss), limit_mib or 0) * 1.05 or 1)
    wmax = nice(max(rate) * 1.05 or 1)

    def x(t):
        return left + t / tmax * pw

    body = [text(width / 2, 22, "fsd during the lfs run: resident memory and device write rate (0.5 s samples)", "middle", 14, "bold")]
    for k, (name, a, b) in enumerate(spans):
        a, b = a - t0, b - t0
        body.append(f'<rect x="{x(a):.1f}" y="{top}" width="{max(x(b) - x(a), 1):.1f}" height="{ph}" fill="{"#f3f3f3" if k % 2 else "#e8eef7"}"/>')
        body.append(f'<text transform="translate({x(a) + 10:.1f},{top + 4}) rotate(90)" font-size="10" fill="#555">{html.escape(name)}</text>')
    for i in range(5):
        yy = top + ph - i / 4 * ph
        body.append(f'<line x1="{left}" y1="{yy:.1f}" x2="{left + pw}" y2="{yy:.1f}" stroke="#ddd"/>')
        body.append(text(left - 6, yy + 4, f"{rmax * i / 4:.0f}", "end", 10, fill=COLORS["lfs"]))
        body.append(text(left + pw + 6, yy + 4, f"{wmax * i / 4:.0f}", "start", 10, fill=COLORS["ext4"]))
    if limit_mib:
        yy = top + ph - limit_mib / rmax * ph
        body.append(f'<line x1="{left}" y1="{yy:.1f}" x2="{left + pw}" y2="{yy:.1f}" stroke="{COLORS["lfs"]}" stroke-dasharray="6,4"/>')
        body.append(text(left + 4, yy - 4, f"RSS target: dirty limit + 64 MiB = {limit_mib:.0f} MiB", size=10, fill=COLORS["lfs"]))

    def poly(vals, vmax, color):
        pts = " ".join(f"{x(t):.1f},{top + ph - v / vmax * ph:.1f}" for t, v in zip(ts, vals))
        return f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.5"/>'

    body.append(poly(rate, wmax, COLORS["ext4"]))
    body.append(poly(rss, rmax, COLORS["lfs"]))
    for i in range(6):
        t = tmax * i / 5
        body.append(text(x(t), top + ph + 16, f"{t:.0f}", "middle", 10))
    body.append(text(left + pw / 2, top + ph + 34, "seconds since mount", "middle", 11))
    body.append(text(left, height - 8, "red: VmRSS (MiB, left axis)   blue: device writes (MiB/s, right axis, /proc/PID/io write_bytes)", size=11))
    with open(path, "w") as f:
        f.write(svg_doc(width, height, body))
    return True


# ---------------------------------------------------------------- report

def machine(meta):
    mem = re.search(r"MemTotal:\s+(\d+)", read("/proc/meminfo", ""))
    cpu = re.search(r"model name\s*:\s*(.*)", read("/proc/cpuinfo", ""))
    wd = meta.get("workdir", "/var/tmp")
    src = run(["findmnt", "-no", "SOURCE,FSTYPE,OPTIONS", "-T", wd])
    disk = src.split()[0] if src != "unavailable" else ""
    dname = os.path.basename(disk)
    rota = read(f"/sys/block/{dname}/queue/rotational", "").strip()
    dsize = read(f"/sys/block/{dname}/size", "").strip()
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu.group(1).strip() if cpu else "unknown",
        "memory_gib": round(int(mem.group(1)) / (1 << 20), 1) if mem else None,
        "kernel": os.uname().release,
        "workdir_mount": src,
        "disk": f"{disk} ({int(dsize) * 512 / GiB:.0f} GiB, {'rotational' if rota == '1' else 'non-rotational' if rota == '0' else 'rotational flag unknown'} per sysfs)" if dsize else disk,
    }


def versions(meta):
    return {
        "rustc": meta.get("rustc") or run(["rustc", "--version"]),
        "fio": run(["fio", "--version"]),
        "fsd": meta.get("fsd_version", "unknown"),
        "mke2fs": run(["mke2fs", "-V"]),
        "mkfs.xfs": run(["mkfs.xfs", "-V"]),
        "mkfs.btrfs": run(["mkfs.btrfs", "--version"]),
        "perf": run(["perf", "--version"]),
        "python3": sys.version.split()[0],
    }


def fsd_settings(R, root):
    """The fsd settings in force: conf/fsd.toml's commented defaults, overlaid
    by the configuration file the run used."""
    s = {}
    for line in (read(os.path.join(root, "conf", "fsd.toml")) or "").splitlines():
        m = re.match(r"#(\w+)\s*=\s*(.+)$", line.strip())
        if m:
            s[m.group(1)] = m.group(2).strip().strip('"')
    for line in (read(os.path.join(R, "fsd.toml")) or "").splitlines():
        m = re.match(r"(\w+)\s*=\s*(.+)$", line.strip())
        if m:
            s[m.group(1)] = m.group(2).strip().strip('"')
    return s


def nbd_cost(add, fss, order, workload_of, results, val, R):
    """The section on lfs over NBD against lfs on its local image file."""
    add("## lfs over NBD against lfs on a local file")
    add("")
    add("`lfs-nbd` is the same lfs, its image served by qemu-nbd on a Unix socket (writeback cache, an image file on the "
        "same disk) and opened by fsd as `nbd+unix:///lfs?socket=...`: the difference is the cost of the NBD block layer "
        "(a socket round trip per request, a copy of each write kept for replay until the next flush). "
        "Cost = lfs-nbd ÷ lfs for throughput (below 1 is slower over NBD) and for latency (above 1 is slower over NBD). "
        "Its device bytes are qemu-nbd's writes into the image.")
    add("")
    if "lfs" not in fss:
        add("lfs on a local file was not run (`--fs` without `lfs`): no cost to compute.")
        add("")
        return
    add("| workload | metric | lfs | lfs-nbd | lfs-nbd ÷ lfs |")
    add("|---|---|---|---|---|")
    for metric in order:
        better = METRICS.get(metric, (metric, "", "higher"))[2]
        keys = ("avg", "p99", "max") if better == "lower" else (None,)
        for k in keys:
            shown = metric + (f" {k}" if k else "")
            r = results.get((NBD, metric))
            if r and r["value"] is None:
                add(f"| {workload_of[metric]} | {shown} | {fmt(val('lfs', metric, k))} | FAILED: {r['failed']} | |")
                continue
            a, b = val("lfs", metric, k), val(NBD, metric, k)
            add(f"| {workload_of[metric]} | {shown} | {fmt(a)} | {fmt(b)} | {fr(ratio(b, a))} |")
    fsck = (read(os.path.join(R, "lfs-nbd-fsck.exit")) or "").strip()
    exit_ = (read(os.path.join(R, "fsd-nbd.exit")) or "").strip()
    add("")
    add(f"After the lfs-nbd pass: fsd exited with status {exit_ or '?'}; `fsctl fsck` of the export exited {fsck or '?'}"
        f" ({'clean' if fsck == '0' else 'see lfs-nbd-fsck.txt in the results directory'}).")
    add("")


def main():
    R, out = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    base = out[:-3] if out.endswith(".md") else out
    outdir = os.path.dirname(out)
    meta = env_file(os.path.join(R, "meta.env"))
    fss = [fs for fs in meta.get("fslist", " ".join(FS_ORDER)).split()]
    peers = [fs for fs in fss if fs not in ("lfs", NBD)]
    has_lfs = "lfs" in fss

    # Results of the workload script, per filesystem, matched to the shim's
    # records: the script runs fio exactly once per line it prints.
    recs = [json.loads(line) for line in (read(os.path.join(R, "fio-runs.jsonl")) or "").splitlines() if line.strip()]
    results = {}   # (fs, metric) -> {"value": ..., "failed": ..., "run": figures}
    order = []     # metrics in the order of the script
    workload_of = {}
    for fs in fss:
        lines = parse_lines(os.path.join(R, f"{fs}.lines"))
        seed_recs = [r for r in recs if r.get("label") == fs and not r.get("tag")]
        for i, (w, metric, value, failed) in enumerate(lines):
            if metric not in order:
                order.append(metric)
            workload_of[metric] = w
            fig = run_figures(seed_recs[i]) if i < len(seed_recs) and len(seed_recs) == len(lines) else None
            results[(fs, metric)] = {"value": value, "failed": failed, "run": fig}
        # W4x4: four writers, files/s over the longest job.
        for r in recs:
            if r.get("label") == fs and r.get("tag") == "W4x4":
                jobs = r.get("jobs")
                value = failed = None
                if jobs and r.get("rc") == 0 and all(j.get("error") == 0 for j in jobs):
                    files = int(arg(r["args"], "nrfiles")) * int(arg(r["args"], "numjobs"))
                    value = round(files / (max(j["runtime_ms"] for j in jobs) / 1000), 1)
                else:
                    failed = "fio failed: " + (r.get("output_head", "") or f"exit {r.get('rc')}").splitlines()[0][:120]
                results[(fs, "W4x4_files_per_s")] = {"value": value, "failed": failed, "run": run_figures(r)}
                if "W4x4_files_per_s" not in order:
                    order.append("W4x4_files_per_s")
                workload_of["W4x4_files_per_s"] = "W4x4"

    def val(fs, metric, key=None):
        r = results.get((fs, metric))
        if not r or r["value"] is None:
            return None
        v = r["value"]
        if key is not None:
            return v.get(key) if isinstance(v, dict) else None
        return v if not isinstance(v, dict) else None

    # Raw limit.
    raw = {}
    for qd in (1, 16):
        d = read_json(os.path.join(R, f"raw-qd{qd}.json"))
        try:
            raw[qd] = d["jobs"][0]["write"]["bw"] / 1024 if d and d["jobs"][0]["error"] == 0 else None
        except (KeyError, IndexError, TypeError):
            raw[qd] = None
    raw_limit = max((v for v in raw.values() if v), default=None)

    # lfs-only figures.
    settings = fsd_settings(R, root)
    dirty_limit = size_bytes(settings.get("dirty_limit", "")) if settings.get("dirty_limit") else None
    rss_limit = dirty_limit + RSS_HEADROOM if dirty_limit else None
    start = read_json(os.path.join(R, "lfs-start.json"))
    end = read_json(os.path.join(R, "lfs-end.json"))
    timeline = []
    tl_text = read(os.path.join(R, "lfs-timeline.csv"))
    if tl_text:
        for row in list(csv.reader(tl_text.splitlines()))[1:]:
            try:
                timeline.append((float(row[0]), int(row[1]), int(row[2]), float(row[3]), int(row[4])))
            except (ValueError, IndexError):
                pass
    fsd_log = read(os.path.join(R, "fsd.log"), "")
    engine = {}
    m = re.search(r"statistics: (.*)$", fsd_log, re.M)
    if m:
        for kv in m.group(1).split():
            k, _, v = kv.partition("=")
            if v.isdigit():
                engine[k] = int(v)
    fsd_exit = (read(os.path.join(R, "fsd.exit")) or "").strip()
    fsck_exit = (read(os.path.join(R, "lfs-fsck.exit")) or "").strip()
    fsck_text = (read(os.path.join(R, "lfs-fsck.txt")) or "").strip()
    final_alloc = (read(os.path.join(R, "lfs-image-final-alloc")) or "").strip()
    writes_d = read_json(os.path.join(R, "lfs-writes.json"))
    writes = writes_d["writes"] if writes_d else None
    trace_why = (read(os.path.join(R, "trace-unavailable")) or "").strip()
    if writes:
        fds = {}
        for w in writes:
            fds[w[1]] = fds.get(w[1], 0) + w[3]
        dev_fd = max(fds, key=fds.get)
        writes = [w for w in writes if w[1] == dev_fd]
    sup = read(os.path.join(R, "lfs-super.txt"), "")
    skip = {0}
    m2 = re.search(r"secondary superblock at byte (\d+)", sup)
    if m2:
        skip.add(int(m2.group(1)))
    extents = read_json(os.path.join(R, "lfs-extents.json"))
    w1keep = next((r for r in recs if r.get("label") == "lfs" and r.get("tag") == "W1-extents"), None)

    seq_by_metric = {}
    if writes is not None and has_lfs:
        for metric in order:
            fig = (results.get(("lfs", metric)) or {}).get("run")
            if fig and fig["t0"] is not None:
                seq_by_metric[metric] = sequentiality(writes, fig["t0"], fig["t1"], skip)
        seq_total = sequentiality(writes, start["t"] if start else None, end["t"] if end else None, skip)
    else:
        seq_total = None

    L = []
    add = L.append
    add("# lfs benchmark results")
    add("")
    add(f"Generated by `{meta.get('command', 'bench/run.sh')}` (run from the repository root, as root); "
        "see [docs/BENCHMARKS.md](../docs/BENCHMARKS.md) for what each figure means and its caveats. "
        "Every figure below comes from this one run; a figure that could not be measured says so.")
    add("")
    mach = machine(meta)
    ver = versions(meta)
    add("## Run")
    add("")
    add("| | |")
    add("|---|---|")
    add(f"| date (UTC) | {meta.get('start', '?')}, {meta.get('elapsed_s', '?')} s in all |")
    add(f"| command | `{meta.get('command', '?')}` |")
    add(f"| mode | {meta.get('mode')}: images of {meta.get('size')} each, RT={meta.get('rt')} s per timed run, binaries: {meta.get('profile')} profile"
        + (" (--small: the harness's own runs shrunk)" if meta.get("small") == "1" else "") + " |")
    add(f"| filesystems, in run order | {', '.join(fss)} |")
    add(f"| workloads | `{os.path.relpath(meta.get('workloads', '?'), root)}` (unchanged), each fio call through `bench/shim/fio`; plus W4x4 and the lfs W1 extent run |")
    add(f"| git | {meta.get('git_head', '?')[:12]}, {meta.get('git_dirty_files', '?')} uncommitted file(s) in the working tree |")
    add(f"| machine | {mach['nproc']} CPUs ({mach['cpu']}), {mach['memory_gib']} GiB RAM, kernel {mach['kernel']} |")
    add(f"| work directory | `{meta.get('workdir')}` on {mach['workdir_mount']}; disk {mach['disk']} |")
    add(f"| load average | {meta.get('loadavg_start', '?')} at the start, {meta.get('loadavg_end', '?')} at the end (shared machine) |")
    add(f"| versions | {'; '.join(f'{k}: {v}' for k, v in ver.items())} |")
    fsd_set = ", ".join(f"{k} = {v}" for k, v in settings.items() if k not in ("socket", "log_level"))
    add(f"| fsd settings | {fsd_set or 'unknown'} (built-in defaults unless --fsd-config was given) |")
    add("")
    add("Kernel filesystems run on loop devices over image files (`losetup`, buffered), "
        "lfs on an image file that fsd opens itself (buffered, not O_DIRECT): both go through the host page cache of the same disk. "
        "Between fio runs the harness flushes the filesystem under test (`sync -f`, or for lfs an fsync, which writes a checkpoint) outside fio's timing.")
    add("")

    add("## Raw limit")
    add("")
    add(f"Sequential 1 MiB O_DIRECT writes (fio, libaio) onto a plain {meta.get('raw_size')} file in the work directory on the host filesystem, "
        f"{meta.get('rt')} s each, with a final fsync: **QD1 {fmt(raw.get(1))} MiB/s, QD16 {fmt(raw.get(16))} MiB/s**. "
        f"The larger, {fmt(raw_limit)} MiB/s, is the physical limit used below.")
    add("")

    add("## Seed workloads")
    add("")
    add("Every ratio is **lfs ÷ peer** of the figure in its column. For throughput, IOPS and files/s "
        "higher is better, so a ratio above 1 means lfs is ahead; for latency lower is better, so a ratio "
        "**below** 1 means lfs is ahead.")
    add("")
    add("### Summary of ratios (lfs ÷ peer)")
    add("")
    add("| metric | better | " + " | ".join(f"lfs ÷ {p}" for p in peers) + " |")
    add("|---|---|" + "---|" * len(peers))
    plot_rows = []
    for metric in order:
        desc, unit, better = METRICS.get(metric, (metric, "", "higher"))
        if better == "lower":
            for key in ("avg", "p99", "max"):
                rs = {p: ratio(val("lfs", metric, key), val(p, metric, key)) for p in peers}
                add(f"| {workload_of[metric]} {metric} {key} | lower | " + " | ".join(fr(rs[p]) for p in peers) + " |")
                if key != "avg":
                    plot_rows.append((f"{workload_of[metric]} {metric.replace('randwrite64k_', '').replace('_lat_us', '')} {key}",
                                      {p: (1 / rs[p]) if rs[p] else None for p in peers}))
        else:
            rs = {p: ratio(val("lfs", metric), val(p, metric)) for p in peers}
            add(f"| {workload_of[metric]} {metric} | higher | " + " | ".join(fr(rs[p]) for p in peers) + " |")
            plot_rows.append((f"{workload_of[metric]} {metric}", rs))
    add("")
    ratios_svg = base + "-ratios.svg"
    lat_svg = base + "-latency.svg"
    tl_svg = base + "-lfs-timeline.svg"
    if has_lfs and plot_ratios(plot_rows, peers, ratios_svg, "lfs against each peer, per workload"):
        add(f"![lfs's advantage over each peer per workload]({os.path.relpath(ratios_svg, outdir)})")
        add("")
    lat = {(fs, m): results.get((fs, m), {}).get("value") for fs in fss for m in order if METRICS.get(m, ("", "", ""))[2] == "lower"}
    lat = {k: v for k, v in lat.items() if isinstance(v, dict)}

    for metric in order:
        desc, unit, better = METRICS.get(metric, (metric, "", "higher"))
        add(f"### {workload_of[metric]} `{metric}`")
        add("")
        add(f"{desc}; {unit}, {better} is better.")
        add("")
        if better == "lower":
            add("| fs | avg | p99 | max | lfs ÷ fs avg | lfs ÷ fs p99 | lfs ÷ fs max |")
            add("|---|---|---|---|---|---|---|")
            for fs in fss:
                r = results.get((fs, metric))
                if not r:
                    add(f"| {fs} | not run | | | | | |")
                elif r["value"] is None:
                    add(f"| {fs} | FAILED: {r['failed']} | | | | | |")
                else:
                    cells = [fmt(val(fs, metric, k)) for k in ("avg", "p99", "max")]
                    rs = [fr(ratio(val("lfs", metric, k), val(fs, metric, k))) if fs != "lfs" else "" for k in ("avg", "p99", "max")]
                    add(f"| {fs} | " + " | ".join(cells) + " | " + " | ".join(rs) + " |")
        else:
            add(f"| fs | {unit} | lfs ÷ fs |")
            add("|---|---|---|")
            for fs in fss:
                r = results.get((fs, metric))
                if not r:
                    add(f"| {fs} | not run | |")
                elif r["value"] is None:
                    add(f"| {fs} | FAILED: {r['failed']} | |")
                else:
                    add(f"| {fs} | {fmt(val(fs, metric))} | {fr(ratio(val('lfs', metric), val(fs, metric))) if fs != 'lfs' else ''} |")
        if better == "lower":
            add("")
            add("As seed-workloads.sh computes them, avg and max are fio's total latency (`lat`: submission + completion) "
                "and p99 is the completion latency's (`clat`) 99th percentile, so p99 can be below avg: with buffered "
                "libaio writes the write is done inside `io_submit`, i.e. in the submission part. The parts, from the same runs "
                "(fio JSON kept by the shim; µs):")
            add("")
            add("| fs | slat avg | slat max | clat avg | clat p99 | clat max | lat avg | lat max |")
            add("|---|---|---|---|---|---|---|---|")
            for fs in fss:
                rec_ = ((results.get((fs, metric)) or {}).get("run") or {}).get("rec") or {}
                j = (rec_.get("jobs") or [{}])[0]
                sl, cl, lt = (j.get("write_" + k) or {} for k in ("slat_ns", "clat_ns", "lat_ns"))
                us = lambda d, k: fmt(d[k] / 1e3) if d.get(k) is not None else "—"
                add(f"| {fs} | {us(sl, 'mean')} | {us(sl, 'max')} | {us(cl, 'mean')} | {us(cl, 'p99')} | {us(cl, 'max')} | {us(lt, 'mean')} | {us(lt, 'max')} |")
        if metric == "seqw10_MiBps" and raw_limit:
            add("")
            add("Share of the raw limit: " + ", ".join(f"{fs} {fmt(100 * val(fs, metric) / raw_limit)} %" for fs in fss if val(fs, metric) is not None) + ". "
                "A filesystem can pass 100 %: the raw figure is O_DIRECT on the host filesystem, while W1's O_DIRECT writes on a "
                "loop-mounted peer (or on lfs, whose fsd writes its image buffered) land in the host page cache and reach the disk "
                "at the flush after the run, outside fio's timing.")
        add("")
    if plot_latency(lat, fss, lat_svg):
        add(f"![W3 latency: avg, p99 and max per filesystem]({os.path.relpath(lat_svg, outdir)})")
        add("")

    if NBD in fss:
        nbd_cost(add, fss, order, workload_of, results, val, R)

    # Write amplification for every filesystem.
    add("## Write amplification per workload")
    add("")
    add("User bytes = the fio jobs' write `io_bytes` (fio's JSON, exact) plus the bytes fio laid out before a reading job "
        "(W2's first run fills its 256 MiB file; measured as the growth of the job directory). Device bytes: lfs = fsd's "
        "`/proc/PID/io` write_bytes (bytes fsd dirtied in the host page cache, i.e. sent towards the disk); kernel filesystems = "
        "sectors written to their loop device (`/sys/block/loopN/stat`). Both include the flush after the run. "
        "WA = device ÷ user bytes.")
    add("")
    add("| workload | user MiB | lfs device MiB | " + " | ".join(f"{fs} WA" for fs in fss) + " |")
    add("|---|---|---|" + "---|" * len(fss))
    for metric in order:
        lr = (results.get(("lfs", metric)) or {}).get("run") or {}
        cells = []
        for fs in fss:
            fr_ = (results.get((fs, metric)) or {}).get("run") or {}
            cells.append(fmt(fr_.get("wa"), 2) if fr_.get("wa") is not None else "—")
        users = [((results.get((fs, metric)) or {}).get("run") or {}).get("user_bytes") for fs in fss]
        user = next((u for u in users if u is not None), None)
        add(f"| {workload_of[metric]} {metric} | {fmt(mib(lr.get('user_bytes', user)))} | {fmt(mib(lr.get('device_bytes')))} | " + " | ".join(cells) + " |")
    add("")
    add("User bytes differ between filesystems for the time-based runs (W2, W3): each did as much work as it could in RT seconds.")
    add("")

    # lfs-only figures.
    lfs_runs = {m: (results.get(("lfs", m)) or {}).get("run") for m in order}
    if has_lfs:
        add("## lfs-only figures")
        add("")
        add("Per fio run of the lfs pass. CPU = fsd's utime+stime (`/proc/PID/stat`); peak RSS = fsd's VmHWM, reset before each run "
            "(`echo 5 > /proc/PID/clear_refs`) so it is that run's peak; sequential = share of fsd's device writes "
            "(`pwrite*` syscalls traced with `perf record` on the syscall tracepoints) that start where the previous write ended, "
            "counting log writes only (superblock writes at their two fixed offsets left out; all writes in brackets).")
        add("")
        add("| workload | user MiB | device MiB | WA | fsd CPU s | CPU s per user GiB | peak RSS MiB | sequential writes | sequential bytes |")
        add("|---|---|---|---|---|---|---|---|---|")
        for metric in order:
            fg = lfs_runs.get(metric) or {}
            sq = seq_by_metric.get(metric)
            if sq:
                s_w = f"{fmt(100 * sq['log']['share']) if sq['log']['share'] is not None else '—'} % of {sq['log']['pairs']} ({fmt(100 * sq['all']['share']) if sq['all']['share'] is not None else '—'} %)"
                s_b = f"{fmt(100 * sq['log']['bytes_share']) if sq['log']['bytes_share'] is not None else '—'} %"
            else:
                s_w = s_b = "not measured"
            cpg = ratio(fg.get("cpu_s"), (fg.get("user_bytes") or 0) / GiB) if fg.get("user_bytes") else None
            add(f"| {workload_of[metric]} {metric} | {fmt(mib(fg.get('user_bytes')))} | {fmt(mib(fg.get('device_bytes')))} | "
                f"{fmt(fg.get('wa'), 2)} | {fmt(fg.get('cpu_s'), 2)} | {fmt(cpg, 2)} | {fmt(mib(fg.get('peak_rss')))} | {s_w} | {s_b} |")
        add("")
        # Totals over the seed workloads and W4x4 (lfs-start to lfs-end).
        if start and end:
            s, e = start["fsd"], end["fsd"]
            user_total = sum((fg or {}).get("user_bytes") or 0 for fg in lfs_runs.values())
            dev_total = e["write_bytes"] - s["write_bytes"]
            cpu_total = e["cpu_s"] - s["cpu_s"]
            peak = max([(fg or {}).get("peak_rss") or 0 for fg in lfs_runs.values()] + [e.get("vmhwm_kib", 0) * 1024])
            add("Whole lfs pass (seed workloads and W4x4, from just after the mount to just before SIGTERM):")
            add("")
            add(f"- user bytes written (sum of the runs above): **{fmt(mib(user_total))} MiB**; fsd device bytes written: "
                f"**{fmt(mib(dev_total))} MiB**; write amplification **{fmt(ratio(dev_total, user_total), 2)}** "
                "(includes the between-run `rm -rf` of the workload script).")
            add(f"- fsd CPU time **{fmt(cpu_total, 1)} s** (utime+stime), **{fmt(ratio(cpu_total, user_total / GiB), 2)} s per GiB** of user writes; "
                f"fsd threads at the end: {e.get('threads', '?')}.")
            add(f"- fsd peak RSS **{fmt(mib(peak))} MiB** (largest per-run VmHWM; RSS at the end {fmt(e.get('vmrss_kib', 0) / 1024)} MiB).")
            add(f"- image file allocation: {fmt(mib(start.get('image_alloc_bytes')))} MiB after the mount, "
                f"{fmt(mib(end.get('image_alloc_bytes')))} MiB at the end, {fmt(mib(int(final_alloc)) if final_alloc.isdigit() else None)} MiB after unmount "
                "(`stat -c %b`: blocks the image holds, never shrinks without discard; a coarse cross-check only).")
            if seq_total:
                lg, al = seq_total["log"], seq_total["all"]
                add(f"- device log sequentiality over the pass: {fmt(100 * lg['share']) if lg['share'] is not None else '—'} % of {lg['pairs']} log writes "
                    f"continue the previous write ({fmt(100 * al['share']) if al['share'] is not None else '—'} % counting superblock writes); "
                    f"{fmt(100 * lg['bytes_share']) if lg['bytes_share'] is not None else '—'} % by bytes.")
            add("")
        if engine:
            eu = engine.get("user_bytes_written")
            ed = (engine.get("device_data_bytes_written") or 0) + (engine.get("device_meta_bytes_written") or 0)
            add("The engine's own counters, logged by fsd at unmount (whole mount: every run above, the extent run and the final checkpoint): "
                + ", ".join(f"{k} = {v:,}" for k, v in engine.items())
                + f". Engine write amplification (data + metadata device bytes ÷ user bytes): **{fmt(ratio(ed, eu), 2)}**.")
            add("")
        else:
            add("fsd logged no statistics line at unmount (fsd.log has none), so the engine's own counters are missing.")
            add("")
        add(f"fsd exit status after SIGTERM: {fsd_exit or 'unknown'}. `fsctl fsck` of the image afterwards: exit {fsck_exit or '?'}"
            + (f" — `{fsck_text.splitlines()[-1]}`" if fsck_text else "") + ".")
        add("")
        if extents and extents.get("files"):
            fl = extents["files"]
            ex = [f["extents"] for f in fl]
            add(f"Extents after W1 (the W1 job run again into a new directory with its files kept, then unmounted; extents counted from "
                f"`fsctl dumpseg --json` of all {extents['segments']} segments, newest log entry per file block): "
                f"{len(fl)} files of {fmt(mib(fl[0]['blocks_found'] * extents['block_size']))} MiB written each; "
                f"extents per file min {min(ex)}, mean {sum(ex) / len(ex):.1f}, max {max(ex)}; "
                f"the fewest a file of that size can have is {max(f['min_possible'] for f in fl)} "
                f"(one more if it starts mid-segment)."
                + (f" {extents['dumpseg_errors']} segment(s) could not be read." if extents.get("dumpseg_errors") else ""))
            if w1keep:
                j = (w1keep.get("jobs") or [{}])[0]
                if j.get("write_bw_kib"):
                    add(f"That run's W1 throughput (on the filesystem as the earlier runs left it): {fmt(j['write_bw_kib'] / 1024)} MiB/s.")
            add("")
        if timeline and plot_timeline(timeline, [(f"{workload_of[m]} {m}", lfs_runs[m]["t0"], lfs_runs[m]["t1"]) for m in order if lfs_runs.get(m) and lfs_runs[m]["t0"]],
                                      mib(rss_limit) if rss_limit else None, tl_svg):
            add(f"![fsd memory and device write rate over the lfs run]({os.path.relpath(tl_svg, outdir)})")
            add("")

    # Targets of issue 7.
    add("## Issue 7 targets")
    add("")
    add("| target | figures used | verdict |")
    add("|---|---|---|")
    targets = []

    def target(name, figures, verdict):
        targets.append({"target": name, "figures": figures, "verdict": verdict})
        add(f"| {name} | {figures} | **{verdict}** |")

    def verdict(ok):
        return "MET" if ok else "NOT MET"

    l1 = val("lfs", "seqw10_MiBps")
    peer1 = {p: val(p, "seqw10_MiBps") for p in peers if val(p, "seqw10_MiBps") is not None}
    if l1 is None or not peer1 or "ext4" not in peer1:
        target("W1 throughput ≥ 0.5× best peer and ≥ 1× ext4", f"lfs {fmt(l1)}, peers {peer1 or 'none'} MiB/s", "NOT MEASURED")
    else:
        best = max(peer1, key=peer1.get)
        target("W1 throughput ≥ 0.5× best peer and ≥ 1× ext4",
               f"lfs {fmt(l1)} MiB/s; best peer {best} {fmt(peer1[best])} (ratio {fr(ratio(l1, peer1[best]))}); ext4 {fmt(peer1['ext4'])} (ratio {fr(ratio(l1, peer1['ext4']))})",
               verdict(l1 >= 0.5 * peer1[best] and l1 >= peer1["ext4"]))
    if extents and extents.get("files"):
        fl = extents["files"]
        worst = max(fl, key=lambda f: f["extents"] - f["min_possible"])
        target("W1: every file in as few extents as its size allows",
               f"extents per file {min(f['extents'] for f in fl)}–{max(f['extents'] for f in fl)}; fewest possible {worst['min_possible']} (+1 if a file starts mid-segment)",
               verdict(all(f["extents"] <= f["min_possible"] + 1 for f in fl)))
    else:
        target("W1: every file in as few extents as its size allows", "extent count unavailable (see the lfs-only figures)", "NOT MEASURED")
    sq1 = seq_by_metric.get("seqw10_MiBps")
    if sq1 and sq1["log"]["share"] is not None:
        target("W1: device log ≥ 95 % sequential",
               f"{fmt(100 * sq1['log']['share'])} % of {sq1['log']['pairs']} log writes continue the previous one ({fmt(100 * sq1['all']['share'])} % with superblock writes; {fmt(100 * sq1['log']['bytes_share'])} % by bytes)",
               verdict(sq1["log"]["share"] >= 0.95))
    else:
        target("W1: device log ≥ 95 % sequential", "no write trace: " + (trace_why or "W1 did not run on lfs"), "NOT MEASURED")
    l512, l4k = val("lfs", "randrw_512_qd32_iops"), val("lfs", "randrw_4k_qd32_iops")
    if l512 is None or l4k is None:
        target("W2: 512 B IOPS ≥ 0.8× lfs's own 4 KiB IOPS", f"lfs 512 B {fmt(l512)}, 4 KiB {fmt(l4k)}", "NOT MEASURED")
    else:
        target("W2: 512 B IOPS ≥ 0.8× lfs's own 4 KiB IOPS", f"lfs 512 B {fmt(l512)} IOPS, 4 KiB {fmt(l4k)} IOPS (ratio {fr(ratio(l512, l4k))})", verdict(l512 >= 0.8 * l4k))
    b512 = val("btrfs", "randrw_512_qd32_iops")
    if l512 is None or b512 is None:
        target("W2: 512 B IOPS ≥ btrfs", f"lfs {fmt(l512)}, btrfs {fmt(b512)}", "NOT MEASURED")
    else:
        target("W2: 512 B IOPS ≥ btrfs", f"lfs {fmt(l512)} IOPS, btrfs {fmt(b512)} IOPS (ratio {fr(ratio(l512, b512))})", verdict(l512 >= b512))
    for metric in ("randwrite64k_qd1_lat_us", "randwrite64k_qd16_lat_us"):
        qd = re.search(r"qd(\d+)", metric).group(1)
        lm = val("lfs", metric, "max")
        pm = {p: val(p, metric, "max") for p in peers if val(p, metric, "max") is not None}
        name = f"W3 QD{qd}: max latency below every peer's max"
        missing = [p for p in peers if p not in pm]
        if lm is None or not pm:
            target(name, f"lfs max {fmt(lm)} µs, peers {pm or 'none'}", "NOT MEASURED")
        else:
            figs = f"lfs max {fmt(lm)} µs (p99 {fmt(val('lfs', metric, 'p99'))}); " + ", ".join(f"{p} max {fmt(v)} (p99 {fmt(val(p, metric, 'p99'))})" for p, v in pm.items())
            if missing:
                figs += f"; no figure for {', '.join(missing)}"
            target(name, figs, verdict(all(lm < v for v in pm.values())))
    l4, e4 = val("lfs", "fsync64k_files_per_s"), val("ext4", "fsync64k_files_per_s")
    if l4 is None or e4 is None:
        target("W4: files/s ≥ ext4", f"lfs {fmt(l4)}, ext4 {fmt(e4)}", "NOT MEASURED")
    else:
        target("W4: files/s ≥ ext4", f"lfs {fmt(l4)} files/s, ext4 {fmt(e4)} (ratio {fr(ratio(l4, e4))})", verdict(l4 >= e4))
    l44 = val("lfs", "W4x4_files_per_s")
    if l44 is None or l4 is None:
        target("W4: 4 concurrent fsyncing writers ≥ 2× lfs's single-writer rate", f"lfs W4x4 {fmt(l44)}, W4 {fmt(l4)}", "NOT MEASURED")
    else:
        target("W4: 4 concurrent fsyncing writers ≥ 2× lfs's single-writer rate", f"lfs 4 writers {fmt(l44)} files/s, 1 writer {fmt(l4)} (ratio {fr(ratio(l44, l4))})", verdict(l44 >= 2 * l4))
    peaks = {f"{workload_of[m]} {m}": (lfs_runs.get(m) or {}).get("peak_rss") for m in order}
    if w1keep:
        peaks["W1 extent run"] = run_figures(w1keep).get("peak_rss")
    known = {k: v for k, v in peaks.items() if v}
    if not known or not rss_limit:
        target("fsd RSS under configured cache + 64 MiB in every workload", "no RSS samples" if not known else "dirty_limit unknown", "NOT MEASURED")
    else:
        worst = max(known, key=known.get)
        figs = (f"limit = dirty_limit {fmt(mib(dirty_limit))} MiB + 64 MiB = {fmt(mib(rss_limit))} MiB; highest per-run peak {fmt(mib(known[worst]))} MiB ({worst})"
                + (f"; {len(peaks) - len(known)} run(s) without a sample" if len(known) < len(peaks) else ""))
        if any(v > rss_limit for v in known.values()):
            rss_verdict = "NOT MET"
        elif len(known) < len(peaks):
            rss_verdict = "NOT MEASURED"
        else:
            rss_verdict = "MET"
        target("fsd RSS under configured cache + 64 MiB in every workload", figs, rss_verdict)
    add("")
    add("fsd has no cache setting besides `dirty_limit` (the dirty file data it may hold); metadata (DAT, segment usage, "
        "inode blocks, block maps, directories) is held in memory while mounted with no eviction yet (docs/ARCHITECTURE.md), "
        "so the RSS target is checked against dirty_limit + 64 MiB.")
    add("")

    add("## Not measured, and why")
    add("")
    add("- **Online statistics through `fsctl`** (`fsctl stat`, `fsctl df`, DESIGN §8): fsd serves them now, but the harness "
        "does not query them per run yet. Per-run device bytes come "
        "from `/proc/PID/io` of fsd, and the engine's own counters only as the totals fsd logs at unmount (above).")
    add("- **Device bytes by kind (data, metadata, cleaning) per workload**: only the whole-mount totals from the unmount log line. "
        "No cleaning happens in this run: cleanerd is not started, and the seed workloads never fill the image. Cleaning "
        "is measured by `bench/cleaning.py` (below).")
    add("- **`/proc/PID/io` write_bytes caveat**: fsd writes its image through the host page cache, and write_bytes counts a page "
        "when fsd dirties it; a page rewritten while still dirty counts once. The flush after each run bounds this, and the engine's "
        "unmount counters give the exact whole-mount figure for comparison.")
    if trace_why:
        add(f"- **Log sequentiality**: not traced ({trace_why}).")
    if not (extents and extents.get("files")):
        add("- **Extents per file after W1**: the extent run or its `fsctl dumpseg` walk did not produce a result in this run.")
    add("- **W1 extents from the seed run itself**: seed-workloads.sh deletes W1's files as soon as fio ends, and FUSE has no FIEMAP, "
        "so the extents are counted on a second W1 run whose files are kept (same fio job, later in the same mount).")
    add("")
    for line in cleaning_section(root):
        add(line)
    # The profile is a separate, repeatable measurement (instruction
    # counts, bench/profile.sh), quoted here so that RESULTS.md holds it.
    prof = os.path.join(root, "bench", "RESULTS-profile.md")
    add("## Profiles (issue 7 item 4)")
    add("")
    if os.path.exists(prof):
        lines = read(prof, "").splitlines()
        add(f"From `bench/RESULTS-profile.md` (written by `bench/profile.sh`, not by this run); see docs/BENCHMARKS.md, Profiles, for the off-CPU profiles behind each fix.")
        add("")
        for line in lines[1:]:
            add(line)
    else:
        add("No `bench/RESULTS-profile.md`: run `bench/profile.sh` to measure.")
    add("")
    add("Raw data of this run (fio JSON per run, samples, fsd log) stay in the work directory's `results/` until the next run; "
        f"every figure used above is also in `{os.path.basename(base)}.json`.")

    with open(out, "w") as f:
        f.write("\n".join(L) + "\n")
    dump = {
        "meta": meta, "machine": mach, "versions": ver, "fsd_settings": settings,
        "raw_limit_MiBps": raw,
        "results": {f"{fs} {m}": r for (fs, m), r in results.items()},
        "lfs": {"start": start, "end": end, "engine_unmount_counters": engine, "fsd_exit": fsd_exit,
                "fsck_exit": fsck_exit, "extents": extents, "sequentiality": seq_by_metric, "sequentiality_total": seq_total,
                "trace_unavailable": trace_why},
        "targets": targets,
    }
    with open(base + ".json", "w") as f:
        json.dump(dump, f, indent=1, default=str)
        f.write("\n")


if __name__ == "__main__":
    main()
