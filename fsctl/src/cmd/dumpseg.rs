//! `fsctl dumpseg DEVICE SEGNUM`: every log in a segment with its header,
//! flags, sequence number, checksum status and block entries.

use std::path::Path;

use anyhow::Result;
use lfs::format::{LogHeader, LOG_FLAG_DATA_SYNC, LOG_FLAG_GC, LOG_FLAG_SUPER_ROOT};
use lfs::inspect::{dump_segment, LogDump};
use serde_json::{json, Value};

use super::{current_superblock, open_read_only};
use crate::Exit;

/// Runs the command.
pub fn run(path: &Path, segnum: u64, as_json: bool) -> Result<Exit> {
    let dev = open_read_only(path)?;
    let (_, sb) = current_superblock(&*dev, path)?;
    let seg = dump_segment(&*dev, &sb, segnum)?;
    let damaged = seg
        .logs
        .iter()
        .any(|l| !l.body_ok || matches!(l.super_root, Some(Err(_))));
    if as_json {
        let logs: Vec<Value> = seg.logs.iter().map(log_json).collect();
        let v = json!({
            "device": path.display().to_string(),
            "segment": seg.segno,
            "start_block": seg.start_block,
            "blocks": seg.nblocks,
            "logs": logs,
            "end": seg.end,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
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
    Ok(if damaged { Exit::Damaged } else { Exit::Ok })
}

fn flag_names(h: &LogHeader) -> Vec<&'static str> {
    [
        (LOG_FLAG_SUPER_ROOT, "super-root"),
        (LOG_FLAG_DATA_SYNC, "data-sync"),
        (LOG_FLAG_GC, "gc"),
    ]
    .iter()
    .filter(|(f, _)| h.flags & f != 0)
    .map(|(_, n)| *n)
    .collect()
}

/// "ok" or the error, for checksum lines.
fn status(err: Option<String>) -> String {
    err.unwrap_or_else(|| "ok".into())
}

fn print_log(l: &LogDump) {
    let h = &l.summary.header;
    let flags = flag_names(h);
    println!(
        "log at block {}: {} blocks ({} summary, {} entries{}), sequence {}, checkpoint {}, next segment {}",
        l.block,
        h.nblocks,
        h.nsummary_blocks,
        h.nentries,
        if h.has_super_root() { ", super root" } else { "" },
        h.seq,
        h.cno,
        h.next_segment
    );
    println!(
        "  flags {}; summary crc {:#010x} ok; body crc {:#010x} {}",
        if flags.is_empty() {
            "none".to_string()
        } else {
            flags.join(",")
        },
        h.summary_crc,
        h.body_crc,
        status(l.body_error.as_ref().map(|e| e.to_string()))
    );
    let first = l.block + u64::from(h.nsummary_blocks);
    for (i, e) in l.summary.entries.iter().enumerate() {
        println!(
            "  block {:>10}  ino {:>8}  offset {:>10}  vblock {:>10}  {}",
            first + i as u64,
            e.ino,
            e.offset,
            e.vblock,
            e.kind.name()
        );
    }
    if let Some(sr) = &l.super_root {
        match sr {
            Ok(sr) => println!(
                "  super root at block {}: checkpoint {}, ok",
                l.block + u64::from(h.nblocks) - 1,
                sr.cno
            ),
            Err(e) => println!(
                "  super root at block {}: BAD: {e}",
                l.block + u64::from(h.nblocks) - 1
            ),
        }
    }
}

fn log_json(l: &LogDump) -> Value {
    let h = &l.summary.header;
    let first = l.block + u64::from(h.nsummary_blocks);
    let entries: Vec<Value> = l
        .summary
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            json!({"block": first + i as u64, "ino": e.ino, "offset": e.offset,
                   "vblock": e.vblock, "kind": e.kind.name()})
        })
        .collect();
    json!({
        "block": l.block,
        "nblocks": h.nblocks,
        "nsummary_blocks": h.nsummary_blocks,
        "nentries": h.nentries,
        "flags": flag_names(h),
        "seq": h.seq,
        "cno": h.cno,
        "ctime_ns": h.ctime_ns,
        "next_segment": h.next_segment,
        "summary_crc": h.summary_crc,
        "summary_ok": true,
        "body_crc": h.body_crc,
        "body_ok": l.body_ok,
        "body_error": l.body_error.as_ref().map(|e| e.to_string()),
        "super_root": l.super_root.as_ref().map(|r| match r {
            Ok(sr) => json!({"ok": true, "cno": sr.cno, "seq": sr.seq}),
            Err(e) => json!({"ok": false, "error": e.to_string()}),
        }),
        "entries": entries,
    })
}
