//! `fsctl dumpseg [TARGET] SEGNUM`: every log in a segment with its
//! header, flags, sequence number, checksum status and block entries,
//! through the fsd serving the target or from the device (`source`).
//!
//! Both ways fill the same [`Segment`], which alone is printed, so the
//! output cannot differ by where it came from.

use std::path::Path;

use anyhow::{Context, Result};
use lfs::format::{
    BlockKind, LOG_FLAG_DATA_SYNC, LOG_FLAG_GC, LOG_FLAG_SUPER_ROOT, LOG_FLAG_SYNC_END,
};
use lfs::inspect::{check_segment, dump_segment, SegmentDump};
use lfs_proto::msg::{GetSegSummary, SegSummary, SUPER_ROOT_DAMAGED, SUPER_ROOT_VALID};
use serde_json::{json, Value};

use super::source::Source;
use crate::Exit;

/// A segment as printed.
struct Segment {
    segno: u64,
    start_block: u64,
    nblocks: u64,
    logs: Vec<Log>,
    end: String,
}

/// One log as printed.
struct Log {
    block: u64,
    nblocks: u32,
    nsummary_blocks: u32,
    flags: u16,
    seq: u64,
    cno: u64,
    ctime_ns: u64,
    next_segment: u64,
    summary_crc: u32,
    body_crc: u32,
    body_ok: bool,
    body_error: Option<String>,
    /// None without a super root; its (checkpoint, sequence) or why it
    /// does not verify.
    super_root: Option<Result<(u64, u64), String>>,
    /// (inode, offset, virtual block, kind name).
    entries: Vec<(u64, u64, u64, &'static str)>,
}

impl Segment {
    fn from_device(d: &SegmentDump) -> Segment {
        let logs = d
            .logs
            .iter()
            .map(|l| {
                let h = &l.summary.header;
                Log {
                    block: l.block,
                    nblocks: h.nblocks,
                    nsummary_blocks: h.nsummary_blocks,
                    flags: h.flags,
                    seq: h.seq,
                    cno: h.cno,
                    ctime_ns: h.ctime_ns,
                    next_segment: h.next_segment,
                    summary_crc: h.summary_crc,
                    body_crc: h.body_crc,
                    body_ok: l.body_ok,
                    body_error: l.body_error.as_ref().map(|e| e.to_string()),
                    super_root: l.super_root.as_ref().map(|r| match r {
                        Ok(sr) => Ok((sr.cno, sr.seq)),
                        Err(e) => Err(e.to_string()),
                    }),
                    entries: l
                        .summary
                        .entries
                        .iter()
                        .map(|e| (e.ino, e.offset, e.vblock, e.kind.name()))
                        .collect(),
                }
            })
            .collect();
        Segment {
            segno: d.segno,
            start_block: d.start_block,
            nblocks: d.nblocks,
            logs,
            end: d.end.clone(),
        }
    }

    fn from_daemon(s: SegSummary) -> Segment {
        let logs = s
            .logs
            .into_iter()
            .map(|l| Log {
                block: l.block,
                nblocks: l.nblocks,
                nsummary_blocks: l.nsummary_blocks,
                flags: l.flags,
                seq: l.seq,
                cno: l.cno,
                ctime_ns: l.ctime_ns,
                next_segment: l.next_segment,
                summary_crc: l.summary_crc,
                body_crc: l.body_crc,
                body_ok: l.body_ok != 0,
                body_error: Some(l.body_error).filter(|e| !e.is_empty()),
                super_root: match l.super_root {
                    SUPER_ROOT_VALID => Some(Ok((l.sr_cno, l.sr_seq))),
                    SUPER_ROOT_DAMAGED => Some(Err(l.sr_error)),
                    _ => None,
                },
                entries: l
                    .entries
                    .iter()
                    .map(|e| {
                        let kind = BlockKind::from_raw(e.kind).map_or("unknown", BlockKind::name);
                        (e.ino, e.offset, e.vblock, kind)
                    })
                    .collect(),
            })
            .collect();
        Segment {
            segno: s.segnum,
            start_block: s.start_block,
            nblocks: s.nblocks,
            logs,
            end: s.end,
        }
    }
}

/// Runs the command on each of `segnums`, in order (one JSON object for
/// one segment, an array of them for several).
pub fn run(target: Option<&Path>, segnums: &[u64], as_json: bool) -> Result<Exit> {
    let mut source = Source::open(target)?;
    let device = source.device_name();
    let (_, _, sb) = source.superblocks()?;
    for &segnum in segnums {
        check_segment(&sb, segnum)?;
    }
    let mut damaged = false;
    let mut objects = Vec::new();
    for &segnum in segnums {
        let seg = match &mut source {
            Source::Offline { dev, .. } => {
                Segment::from_device(&dump_segment(dev.as_ref(), &sb, segnum)?)
            }
            Source::Live { client, .. } => Segment::from_daemon(
                client
                    .call(&GetSegSummary { segnum })
                    .context("reading the segment through fsd (GET_SEG_SUMMARY)")?,
            ),
        };
        damaged |= seg
            .logs
            .iter()
            .any(|l| !l.body_ok || matches!(l.super_root, Some(Err(_))));
        if as_json {
            let logs: Vec<Value> = seg.logs.iter().map(log_json).collect();
            objects.push(json!({
                "device": device,
                "segment": seg.segno,
                "start_block": seg.start_block,
                "blocks": seg.nblocks,
                "logs": logs,
                "end": seg.end,
            }));
        } else {
            print_segment(&seg);
        }
    }
    if as_json {
        let v = match <[Value; 1]>::try_from(objects) {
            Ok([one]) => one,
            Err(many) => Value::Array(many),
        };
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(if damaged { Exit::Damaged } else { Exit::Ok })
}

fn print_segment(seg: &Segment) {
    println!(
        "segment {} (blocks {} to {}): {} log(s)",
        seg.segno,
        seg.start_block,
        seg.start_block + seg.nblocks - 1,
        seg.logs.len()
    );
    for l in &seg.logs {
        print_log(l);
    }
    println!("end: {}", seg.end);
}

fn flag_names(flags: u16) -> Vec<&'static str> {
    [
        (LOG_FLAG_SUPER_ROOT, "super-root"),
        (LOG_FLAG_DATA_SYNC, "data-sync"),
        (LOG_FLAG_GC, "gc"),
        (LOG_FLAG_SYNC_END, "sync-end"),
    ]
    .iter()
    .filter(|(f, _)| flags & f != 0)
    .map(|(_, n)| *n)
    .collect()
}

fn print_log(l: &Log) {
    let flags = flag_names(l.flags);
    println!(
        "log at block {}: {} blocks ({} summary, {} entries{}), sequence {}, checkpoint {}, next segment {}",
        l.block,
        l.nblocks,
        l.nsummary_blocks,
        l.entries.len(),
        if l.flags & LOG_FLAG_SUPER_ROOT != 0 {
            ", super root"
        } else {
            ""
        },
        l.seq,
        l.cno,
        l.next_segment
    );
    println!(
        "  flags {}; summary crc {:#010x} ok; body crc {:#010x} {}",
        if flags.is_empty() {
            "none".to_string()
        } else {
            flags.join(",")
        },
        l.summary_crc,
        l.body_crc,
        l.body_error.as_deref().unwrap_or("ok")
    );
    let first = l.block + u64::from(l.nsummary_blocks);
    for (i, (ino, offset, vblock, kind)) in l.entries.iter().enumerate() {
        println!(
            "  block {:>10}  ino {ino:>8}  offset {offset:>10}  vblock {vblock:>10}  {kind}",
            first + i as u64,
        );
    }
    let sr_block = l.block + u64::from(l.nblocks) - 1;
    match &l.super_root {
        Some(Ok((cno, _))) => println!("  super root at block {sr_block}: checkpoint {cno}, ok"),
        Some(Err(e)) => println!("  super root at block {sr_block}: BAD: {e}"),
        None => {}
    }
}

fn log_json(l: &Log) -> Value {
    let first = l.block + u64::from(l.nsummary_blocks);
    let entries: Vec<Value> = l
        .entries
        .iter()
        .enumerate()
        .map(|(i, (ino, offset, vblock, kind))| {
            json!({"block": first + i as u64, "ino": ino, "offset": offset,
                   "vblock": vblock, "kind": kind})
        })
        .collect();
    json!({
        "block": l.block,
        "nblocks": l.nblocks,
        "nsummary_blocks": l.nsummary_blocks,
        "nentries": l.entries.len(),
        "flags": flag_names(l.flags),
        "seq": l.seq,
        "cno": l.cno,
        "ctime_ns": l.ctime_ns,
        "next_segment": l.next_segment,
        "summary_crc": l.summary_crc,
        "summary_ok": true,
        "body_crc": l.body_crc,
        "body_ok": l.body_ok,
        "body_error": l.body_error,
        "super_root": l.super_root.as_ref().map(|r| match r {
            Ok((cno, seq)) => json!({"ok": true, "cno": cno, "seq": seq}),
            Err(e) => json!({"ok": false, "error": e}),
        }),
        "entries": entries,
    })
}
