//! `fsctl super [TARGET]`: both superblocks, which is current, geometry
//! and state, through the fsd serving the target or from the device
//! (`source`). A bad copy is named with its error and the other one is
//! shown.

use std::path::Path;

use anyhow::Result;
use lfs::format::{DecodeError, Superblock};
use lfs::inspect::SbCopy;
use lfs_common::units::human_bytes;
use serde_json::{json, Value};

use super::source::Source;
use super::{reason, utc};
use crate::Exit;

/// Runs the command.
pub fn run(target: Option<&Path>, as_json: bool) -> Result<Exit> {
    let source = Source::open(target)?;
    let device = source.device_name();
    let (pair, current, sb) = source.superblocks()?;
    let both_ok = pair.primary.is_ok() && pair.secondary.is_ok();
    let copies = [
        (SbCopy::Primary, Some(0), &pair.primary),
        (SbCopy::Secondary, pair.secondary_offset, &pair.secondary),
    ];
    if as_json {
        let copies: Vec<Value> = copies
            .iter()
            .map(|(c, off, r)| copy_json(*c, *off, r, current == Some(*c)))
            .collect();
        let v = json!({
            "device": device,
            "copies": copies,
            "current": current.map(SbCopy::name),
            "superblock": sb_json(&sb),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("device {device}");
        for (c, off, r) in &copies {
            let at = off.map_or("unknown offset".to_string(), |o| format!("byte {o}"));
            let mark = if current == Some(*c) {
                " [current]"
            } else {
                ""
            };
            match r {
                Ok(s) => println!(
                    "{:<9} superblock at {at}: valid, generation {}{mark}",
                    c.name(),
                    s.generation
                ),
                Err(e) => println!("{:<9} superblock at {at}: BAD: {e}", c.name()),
            }
        }
        print_text(&sb);
    }
    if !both_ok {
        let bad = if pair.primary.is_err() {
            "primary"
        } else {
            "secondary"
        };
        eprintln!(
            "fsctl: {device}: the {bad} superblock is damaged ({}); the other copy was used",
            if pair.primary.is_err() {
                reason(&pair.primary)
            } else {
                reason(&pair.secondary)
            }
        );
        return Ok(Exit::Damaged);
    }
    Ok(Exit::Ok)
}

fn copy_json(c: SbCopy, off: Option<u64>, r: &Result<Superblock, DecodeError>, cur: bool) -> Value {
    json!({
        "copy": c.name(),
        "offset": off,
        "valid": r.is_ok(),
        "error": r.as_ref().err().map(|e| e.to_string()),
        "generation": r.as_ref().ok().map(|s| s.generation),
        "current": cur,
    })
}

fn sb_json(sb: &Superblock) -> Value {
    json!({
        "version": format!("{}.{}", sb.version_major, sb.version_minor),
        "state": sb.state.name(),
        "label": sb.label_str(),
        "uuid": sb.uuid_str(),
        "feature_compat": sb.feature_compat,
        "feature_ro_compat": sb.feature_ro_compat,
        "feature_incompat": sb.feature_incompat,
        "read_only": sb.read_only_only(),
        "block_size": sb.block_size,
        "blocks_per_segment": sb.blocks_per_segment,
        "segment_bytes": u64::from(sb.block_size) * u64::from(sb.blocks_per_segment),
        "total_blocks": sb.total_blocks,
        "device_bytes": sb.total_blocks * u64::from(sb.block_size),
        "nsegments": sb.nsegments,
        "first_data_block": sb.first_data_block,
        "reserved_percent": sb.reserved_percent,
        "reserved_segments": sb.reserved_segments(),
        "ctime": sb.ctime,
        "wtime": sb.wtime,
        "last_log_block": sb.last_log_block,
        "last_seq": sb.last_seq,
        "last_cno": sb.last_cno,
        "seq_floor": sb.seq_floor,
        "mount_count": sb.mount_count,
        "generation": sb.generation,
        "crc_seed": sb.crc_seed,
    })
}

fn print_text(sb: &Superblock) {
    let seg_bytes = u64::from(sb.block_size) * u64::from(sb.blocks_per_segment);
    let label = sb.label_str();
    println!(
        "format version      {}.{}",
        sb.version_major, sb.version_minor
    );
    println!("state               {}", sb.state.name());
    println!(
        "label               {}",
        if label.is_empty() { "(none)" } else { &label }
    );
    println!("uuid                {}", sb.uuid_str());
    println!(
        "features            compat {:#x}, ro-compat {:#x}, incompat {:#x}",
        sb.feature_compat, sb.feature_ro_compat, sb.feature_incompat
    );
    if sb.read_only_only() {
        println!("                    unknown ro-compat features: read-only mounts only");
    }
    println!("block size          {} bytes", sb.block_size);
    println!(
        "segment size        {} blocks ({})",
        sb.blocks_per_segment,
        human_bytes(seg_bytes)
    );
    println!(
        "segments            {} ({}), first at block {}",
        sb.nsegments,
        lfs::format::describe_reserve(sb.nsegments, sb.reserved_percent),
        sb.first_data_block
    );
    println!(
        "device blocks       {} ({})",
        sb.total_blocks,
        human_bytes(sb.total_blocks * u64::from(sb.block_size))
    );
    println!(
        "last checkpoint     {} in the log at block {} (sequence {})",
        sb.last_cno, sb.last_log_block, sb.last_seq
    );
    println!("created             {}", utc(sb.ctime));
    println!("written             {}", utc(sb.wtime));
    println!("sequence floor      {}", sb.seq_floor);
    println!("mount count         {}", sb.mount_count);
    println!("crc seed            {:#010x}", sb.crc_seed);
}
