//! Commands answered by a running fsd through its control socket.

use std::path::Path;

use anyhow::{Context, Result};
use lfs_proto::msg::*;
use serde_json::json;

use super::utc;
use crate::target::connect;
use crate::Exit;

const NS: u64 = 1_000_000_000;

/// `fsctl lssu`: segment usage.
pub fn lssu(
    target: Option<&Path>,
    all: bool,
    latest: bool,
    index: u64,
    lines: Option<u64>,
    as_json: bool,
) -> Result<Exit> {
    let mut c = connect(target)?;
    let st = c.call(&GetSustat).context("GET_SUSTAT")?;
    let mut items = Vec::new();
    let mut start = index;
    while start < st.nsegs {
        let batch = c
            .call(&GetSuinfo { start, count: 4096 })
            .context("GET_SUINFO")?
            .items;
        let Some(last) = batch.last() else { break };
        start = last.segnum + 1;
        items.extend(batch.into_iter().filter(|u| all || u.flags != 0));
        if lines.is_some_and(|n| items.len() as u64 >= n) {
            break;
        }
    }
    if let Some(n) = lines {
        items.truncate(n as usize);
    }
    let bps = u64::from(st.blocks_per_segment);
    if as_json {
        let v: Vec<_> = items
            .iter()
            .map(|u| {
                json!({"segnum": u.segnum, "last_mod": u.last_mod, "flags": stat_flags(u.flags),
                       "nblocks": u.nblocks, "nlive": u.nlive,
                       "live_percent": pct(u64::from(u.nlive), bps)})
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"segments": v, "blocks_per_segment": bps}))?
        );
        return Ok(Exit::Ok);
    }
    if latest {
        println!(
            "{:>10} {:>10} {:>8} {:>4} {:>8} {:>12} {:>5}",
            "SEGNUM", "DATE", "TIME", "STAT", "NBLOCKS", "NLIVEBLOCKS", "LIVE%"
        );
    } else {
        println!(
            "{:>10} {:>10} {:>8} {:>4} {:>8} {:>12}",
            "SEGNUM", "DATE", "TIME", "STAT", "NBLOCKS", "NLIVEBLOCKS"
        );
    }
    for u in &items {
        let when = utc(u.last_mod);
        let (date, time) = split_when(&when);
        if latest {
            println!(
                "{:>10} {:>10} {:>8} {:>4} {:>8} {:>12} {:>4}%",
                u.segnum,
                date,
                time,
                stat_flags(u.flags),
                u.nblocks,
                u.nlive,
                pct(u64::from(u.nlive), bps)
            );
        } else {
            println!(
                "{:>10} {:>10} {:>8} {:>4} {:>8} {:>12}",
                u.segnum,
                date,
                time,
                stat_flags(u.flags),
                u.nblocks,
                u.nlive
            );
        }
    }
    Ok(Exit::Ok)
}

fn split_when(s: &str) -> (String, String) {
    let mut it = s.split(' ');
    (
        it.next().unwrap_or("").to_string(),
        it.next().unwrap_or("").to_string(),
    )
}

fn pct(part: u64, whole: u64) -> u64 {
    (part * 100).checked_div(whole).unwrap_or(0)
}

/// nilfs-style segment flags: a(ctive) d(irty) e(rror).
fn stat_flags(f: u32) -> String {
    let c = |bit: u32, ch: char| if f & bit != 0 { ch } else { '-' };
    format!(
        "{}{}{}",
        c(SUINFO_ACTIVE, 'a'),
        c(SUINFO_DIRTY, 'd'),
        c(SUINFO_ERROR, 'e')
    )
}

/// `fsctl lscp`: checkpoints.
pub fn lscp(
    target: Option<&Path>,
    all: bool,
    snapshots: bool,
    reverse: bool,
    index: u64,
    lines: Option<u64>,
    as_json: bool,
) -> Result<Exit> {
    let mut c = connect(target)?;
    let listed = super::checkpoints::checkpoints_from(&mut c, index, snapshots)?;
    // The latest checkpoint is always listed, minor or not (timer
    // checkpoints are minor: without it an idle filesystem listed none).
    let latest = listed.last().map(|e| e.cno);
    let mut items: Vec<Cpinfo> = listed
        .into_iter()
        .filter(|e| all || snapshots || e.flags & CPINFO_MINOR == 0 || Some(e.cno) == latest)
        .collect();
    if reverse {
        items.reverse();
    }
    if let Some(n) = lines {
        items.truncate(n as usize);
    }
    if as_json {
        let v: Vec<_> = items
            .iter()
            .map(|e| {
                json!({"cno": e.cno, "ctime_ns": e.ctime_ns, "mode": mode(e.flags), "minor": e.flags & CPINFO_MINOR != 0,
                       "blocks_written": e.nblk_inc, "blocks": e.blocks_count, "inodes": e.inodes_count})
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"checkpoints": v}))?
        );
        return Ok(Exit::Ok);
    }
    println!(
        "{:>10} {:>10} {:>8} {:>4} {:>3} {:>10} {:>10}",
        "CNO", "DATE", "TIME", "MODE", "FLG", "BLKCNT", "ICNT"
    );
    for e in &items {
        let (date, time) = split_when(&utc(e.ctime_ns / NS));
        let flg = if e.flags & CPINFO_MINOR != 0 {
            "i"
        } else {
            "-"
        };
        println!(
            "{:>10} {:>10} {:>8} {:>4} {:>3} {:>10} {:>10}",
            e.cno,
            date,
            time,
            mode(e.flags),
            flg,
            e.blocks_count,
            e.inodes_count
        );
    }
    Ok(Exit::Ok)
}

fn mode(flags: u32) -> &'static str {
    if flags & CPINFO_SNAPSHOT != 0 {
        "ss"
    } else {
        "cp"
    }
}

/// `fsctl df`: where the space went.
pub fn df(target: Option<&Path>, as_json: bool) -> Result<Exit> {
    let mut c = connect(target)?;
    let d = c.call(&GetDf).context("GET_DF")?;
    let b = u64::from(d.block_size);
    let rows = [
        ("size", d.total_blocks),
        ("free", d.free_blocks),
        ("reserved for cleaning", d.reserved_blocks),
        ("live in the current state", d.live_blocks),
        ("held by snapshots", d.snapshot_blocks),
        ("held by older checkpoints", d.protected_blocks),
        ("reclaimable by cleaning", d.reclaimable_blocks),
        ("booked for a DAT merge", d.booked_blocks),
    ];
    if as_json {
        let v: serde_json::Map<String, serde_json::Value> = [
            ("block_size", u64::from(d.block_size)),
            ("total_bytes", d.total_blocks * b),
            ("free_bytes", d.free_blocks * b),
            ("reserved_bytes", d.reserved_blocks * b),
            ("live_bytes", d.live_blocks * b),
            ("snapshot_bytes", d.snapshot_blocks * b),
            ("protected_bytes", d.protected_blocks * b),
            ("reclaimable_bytes", d.reclaimable_blocks * b),
            ("booked_bytes", d.booked_blocks * b),
            (
                "checkpoints_expired_for_space",
                d.checkpoints_expired_for_space,
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(Exit::Ok);
    }
    for (name, blocks) in rows {
        println!(
            "{name:<32} {:>14} bytes  {:>10}  {:>3}%",
            blocks * b,
            lfs_common::units::human_bytes(blocks * b),
            pct(blocks, d.total_blocks)
        );
    }
    // History yields to space (fsd(8), CLEANING): say when it did.
    if d.checkpoints_expired_for_space > 0 {
        println!(
            "{} plain checkpoint(s) deleted since mount because space ran short",
            d.checkpoints_expired_for_space
        );
    }
    Ok(Exit::Ok)
}

/// A latency histogram: its buckets (upper bound in ns, count) and the
/// figures `fsctl stat` shows of it (bucket upper bounds, ns).
struct Latency {
    name: String,
    count: u64,
    p50: Option<u64>,
    p99: Option<u64>,
    max: Option<u64>,
    buckets: Vec<(u64, u64)>,
}

/// `fsctl stat`: the engine's counters and latencies.
pub fn stat(target: Option<&Path>, as_json: bool) -> Result<Exit> {
    let mut c = connect(target)?;
    let s = c.call(&GetStats).context("GET_STATS")?;
    let get = |n: &str| {
        s.counters
            .iter()
            .find(|(k, _)| k == n)
            .map_or(0, |(_, v)| *v)
    };
    let user = get("user_bytes_written");
    let dev = get("device_data_bytes_written") + get("device_meta_bytes_written");
    let wa = if user == 0 {
        0.0
    } else {
        dev as f64 / user as f64
    };
    let lat: Vec<Latency> = s
        .histograms
        .iter()
        .map(|h| {
            let buckets: Vec<(u64, u64)> = h
                .bucket_upper_ns
                .iter()
                .copied()
                .zip(h.counts.iter().copied())
                .collect();
            Latency {
                name: h.name.clone(),
                count: h.counts.iter().sum(),
                p50: lfs::stats::quantile(&buckets, 0.5),
                p99: lfs::stats::quantile(&buckets, 0.99),
                max: lfs::stats::quantile(&buckets, 1.0),
                buckets,
            }
        })
        .collect();
    if as_json {
        let counters: serde_json::Map<String, serde_json::Value> = s
            .counters
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let l: Vec<_> = lat
            .iter()
            .map(|h| {
                // Every bucket, so that a benchmark can take the
                // difference of two readings (a phase's own histogram).
                let buckets: Vec<_> = h
                    .buckets
                    .iter()
                    .map(|&(below, n)| json!({"below_ns": below, "count": n}))
                    .collect();
                json!({"name": h.name, "count": h.count, "p50_ns_below": h.p50, "p99_ns_below": h.p99, "max_ns_below": h.max, "buckets": buckets})
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"counters": counters, "write_amplification": wa, "latency": l})
            )?
        );
        return Ok(Exit::Ok);
    }
    for (k, v) in &s.counters {
        println!("{k:<28} {v:>16}");
    }
    println!("{:<28} {wa:>16.3}", "write_amplification");
    println!(
        "{:<28} {:>8} {:>12} {:>12} {:>12}",
        "latency (bucket bounds)", "count", "p50 <", "p99 <", "max <"
    );
    let show = |v: &Option<u64>| {
        v.map_or("-".to_string(), |ns| {
            if ns == u64::MAX {
                "inf".into()
            } else {
                format!("{}us", ns / 1000)
            }
        })
    };
    for h in &lat {
        println!(
            "{:<28} {:>8} {:>12} {:>12} {:>12}",
            h.name,
            h.count,
            show(&h.p50),
            show(&h.p99),
            show(&h.max)
        );
    }
    Ok(Exit::Ok)
}
