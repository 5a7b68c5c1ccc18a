//! Writes the seed corpus of the `proto_frame` fuzz target,
//! `fuzz/corpus/proto_frame/`: valid frame streams (`good-*`) and broken
//! ones (`bad-<kind>-*`, kind as `lfs_proto::targets::error_kind`). Each
//! input is checked against its name before it is written; files it does
//! not make (regressions) are left alone.
//!
//! ```text
//! cargo run -p lfs-proto --example gen_corpus
//! ```

use std::fs;
use std::path::Path;

use lfs_proto::codes;
use lfs_proto::frame::{Frame, MAX_PAYLOAD};
use lfs_proto::msg::*;
use lfs_proto::targets::{error_kind, proto_frame};

fn frame(f: Frame) -> Vec<u8> {
    f.encode().expect("corpus frames fit")
}

fn req<R: Request>(id: u64, r: &R) -> Vec<u8> {
    frame(Frame::request(R::CODE, id, r.encode()))
}

fn rep<R: Request>(id: u64, r: &R::Reply) -> Vec<u8> {
    frame(Frame::reply(R::CODE, id, r.encode()))
}

/// `bytes` with `v` written over it at offset `at`.
fn patch(mut bytes: Vec<u8>, at: usize, v: &[u8]) -> Vec<u8> {
    bytes[at..at + v.len()].copy_from_slice(v);
    bytes
}

fn seg_summary() -> SegSummary {
    SegSummary {
        segnum: 3,
        start_block: 6144,
        nblocks: 2048,
        logs: vec![
            LogInfo {
                block: 6144,
                seq: 41,
                cno: 7,
                ctime_ns: 1_700_000_000_000_000_000,
                next_segment: 3,
                flags: 2,
                nblocks: 3,
                nsummary_blocks: 1,
                summary_crc: 0x1234_5678,
                body_crc: 0x9abc_def0,
                body_ok: 1,
                entries: vec![
                    EntryInfo {
                        ino: 12,
                        offset: 0,
                        vblock: 99,
                        kind: 1,
                    },
                    EntryInfo {
                        ino: 12,
                        offset: 1,
                        vblock: 100,
                        kind: 2,
                    },
                ],
                super_root: SUPER_ROOT_VALID,
                sr_cno: 7,
                sr_seq: 41,
                ..LogInfo::default()
            },
            LogInfo {
                block: 6147,
                seq: 42,
                cno: 8,
                ctime_ns: 1_700_000_001_000_000_000,
                next_segment: 3,
                flags: 1,
                nblocks: 2,
                nsummary_blocks: 1,
                summary_crc: 0x0bad_cafe,
                body_crc: 0x0123_4567,
                body_ok: 0,
                super_root: SUPER_ROOT_DAMAGED,
                body_error: "log body: checksum mismatch".to_string(),
                sr_error: "super root: checksum mismatch".to_string(),
                ..LogInfo::default()
            },
        ],
        end: "block 6149 is unwritten (all zeros)".to_string(),
    }
}

fn stats() -> Stats {
    Stats {
        counters: vec![
            ("user_bytes".to_string(), 1 << 30),
            ("dev_data_bytes".to_string(), 3 << 29),
            ("fsyncs".to_string(), 12),
        ],
        histograms: vec![Histogram {
            name: "fsync_latency".to_string(),
            bucket_upper_ns: vec![1000, 2000, 4000, u64::MAX],
            counts: vec![0, 5, 6, 1],
        }],
    }
}

fn inputs() -> Vec<(&'static str, Vec<u8>)> {
    let mut requests = Vec::new();
    requests.extend(req(1, &GetSustat));
    requests.extend(req(
        2,
        &GetSuinfo {
            start: 0,
            count: 64,
        },
    ));
    requests.extend(req(3, &GetCpstat));
    requests.extend(req(
        4,
        &GetCpinfo {
            start_cno: 1,
            count: 16,
            flags: GET_CPINFO_SNAPSHOTS_ONLY,
        },
    ));
    requests.extend(req(
        5,
        &Sync {
            flags: SYNC_FORCE_CHECKPOINT,
        },
    ));
    requests.extend(req(
        6,
        &GetVinfo {
            vblocks: vec![1, 2, 99],
        },
    ));
    requests.extend(req(7, &GetSegSummary { segnum: 3 }));
    requests.extend(req(8, &GetStats));
    requests.extend(req(9, &GetDf));
    requests.extend(req(
        10,
        &ChangeCpmode {
            cno: 4,
            mode: CPMODE_SNAPSHOT,
            flags: 0,
        },
    ));
    requests.extend(req(11, &DeleteCheckpoint { cno: 3 }));
    requests.extend(req(
        12,
        &CleanSegments {
            protection_s: 3600,
            segments: vec![7, 8],
            warm: vec![8],
            flags: 1,
        },
    ));
    requests.extend(req(
        13,
        &SetSuinfo {
            items: vec![SuUpdate {
                segnum: 7,
                last_mod: 1_700_000_000,
            }],
        },
    ));

    requests.extend(req(
        14,
        &MountCheckpoint {
            cno: 4,
            path: "/mnt/snap".into(),
        },
    ));
    requests.extend(req(
        15,
        &UmountCheckpoint {
            path: "/mnt/snap".into(),
        },
    ));

    requests.extend(req(
        16,
        &GetDiff {
            old_cno: 3,
            new_cno: 0,
            path: "/".into(),
            after: String::new(),
        },
    ));
    requests.extend(req(17, &Freeze));
    requests.extend(req(18, &Thaw));
    requests.extend(req(19, &GetSuper));

    let mut replies = Vec::new();
    replies.extend(rep::<GetSustat>(
        1,
        &Sustat {
            nsegs: 128,
            nclean: 100,
            ndirty: 27,
            npending: 1,
            nreserved: 8,
            blocks_per_segment: 2048,
            block_size: 4096,
            last_cno: 9,
            ctime_ns: 1_700_000_000_000_000_000,
            nongc_ctime_ns: 1_600_000_000_000_000_000,
            prot_seq: 77,
            space_waiters: 0,
        },
    ));
    replies.extend(rep::<GetSuinfo>(
        2,
        &SuinfoList {
            items: (0..3)
                .map(|s| Suinfo {
                    segnum: s,
                    last_mod: 1_700_000_000 + s,
                    nblocks: 2048,
                    nlive: 1000 * s as u32,
                    flags: if s == 2 {
                        SUINFO_ACTIVE | SUINFO_DIRTY
                    } else {
                        SUINFO_DIRTY
                    },
                })
                .collect(),
        },
    ));
    replies.extend(rep::<GetCpstat>(
        3,
        &Cpstat {
            last_cno: 9,
            ncheckpoints: 4,
            nsnapshots: 1,
        },
    ));
    replies.extend(rep::<GetCpinfo>(
        4,
        &CpinfoList {
            items: vec![Cpinfo {
                cno: 5,
                flags: CPINFO_SNAPSHOT,
                ctime_ns: 1_700_000_000_000_000_000,
                nblk_inc: 17,
                inodes_count: 40,
                blocks_count: 5000,
            }],
        },
    ));
    replies.extend(rep::<Sync>(5, &SyncReply { cno: 10 }));
    replies.extend(rep::<GetVinfo>(
        6,
        &VinfoList {
            items: vec![
                Vinfo {
                    vblock: 1,
                    phys: 6145,
                    start_cno: 1,
                    end_cno: u64::MAX,
                },
                Vinfo {
                    vblock: 2,
                    phys: 0,
                    start_cno: 0,
                    end_cno: 0,
                },
            ],
        },
    ));
    replies.extend(rep::<GetSegSummary>(7, &seg_summary()));
    replies.extend(rep::<GetStats>(8, &stats()));
    replies.extend(rep::<GetDf>(
        9,
        &Df {
            block_size: 4096,
            total_blocks: 262_144,
            free_blocks: 200_000,
            reserved_blocks: 16_384,
            live_blocks: 40_000,
            snapshot_blocks: 10,
            protected_blocks: 20,
            reclaimable_blocks: 5_000,
            booked_blocks: 12,
            checkpoints_expired_for_space: 2,
        },
    ));

    replies.extend(rep::<ChangeCpmode>(10, &Done));
    replies.extend(rep::<DeleteCheckpoint>(11, &Done));
    replies.extend(rep::<CleanSegments>(
        12,
        &CleanReply {
            blocks_moved: 100,
            segments_freed: 2,
            bytes_written: 409_600,
            checkpoints_deleted: 5,
            blocks_freed: 900,
        },
    ));
    replies.extend(rep::<SetSuinfo>(13, &Done));
    replies.extend(rep::<MountCheckpoint>(14, &Done));
    replies.extend(rep::<UmountCheckpoint>(15, &Done));
    replies.extend(rep::<Freeze>(17, &Done));
    replies.extend(rep::<Thaw>(18, &Done));
    replies.extend(rep::<GetSuper>(
        19,
        &Super {
            current: SUPER_CURRENT_PRIMARY,
            device_bytes: 1 << 28,
            primary_offset: 0,
            secondary_offset: (1 << 28) - 4096,
            device: "/dev/vdb".to_string(),
            primary: vec![0x4c; 512],
            secondary: vec![0x46; 512],
        },
    ));
    replies.extend(rep::<GetDiff>(
        16,
        &DiffList {
            more: false,
            items: vec![
                DiffItem {
                    change: DIFF_CREATED,
                    path: "/a".into(),
                },
                DiffItem {
                    change: DIFF_MODIFIED,
                    path: "/b".into(),
                },
            ],
        },
    ));

    let sustat_reply = rep::<GetSustat>(1, &Sustat::default());
    let suinfo = req(2, &GetSuinfo { start: 0, count: 1 });
    let mut short_sustat = sustat_reply.clone();
    short_sustat.truncate(short_sustat.len() - 1);
    let short_sustat = patch(short_sustat, 12, &79u32.to_le_bytes());
    let trailing_sync = frame(Frame::request(codes::SYNC, 1, vec![1, 0, 0, 0, 0]));
    let mut bad_utf8 = seg_summary();
    bad_utf8.end = "xx".to_string();
    let mut bad_utf8 = rep::<GetSegSummary>(1, &bad_utf8);
    let n = bad_utf8.len();
    bad_utf8[n - 2..].copy_from_slice(&[0xc3, 0x28]);
    let mut histo = stats();
    histo.histograms[0].counts.pop();
    let mut with_payload_lie = suinfo.clone();
    with_payload_lie.truncate(32 + 5);

    vec![
        ("good-requests", requests),
        ("good-replies", replies),
        (
            "good-error-replies",
            [
                frame(Frame::error(0x8000_4cff, 1, 25)),
                frame(Frame::error(codes::SYNC, 2, 1)),
                frame(Frame::error(codes::GET_SUINFO, 3, 22)),
            ]
            .concat(),
        ),
        (
            "good-seg-summary-reply",
            rep::<GetSegSummary>(1, &seg_summary()),
        ),
        (
            "good-empty-lists",
            [
                rep::<GetSuinfo>(1, &SuinfoList::default()),
                rep::<GetCpinfo>(2, &CpinfoList::default()),
                req(3, &GetVinfo::default()),
                rep::<GetStats>(4, &Stats::default()),
            ]
            .concat(),
        ),
        (
            "bad-magic-http",
            b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec(),
        ),
        (
            "bad-magic-after-a-frame",
            [req(1, &GetDf), vec![0xff; 32]].concat(),
        ),
        (
            "bad-version-2",
            patch(req(1, &GetDf), 4, &2u16.to_le_bytes()),
        ),
        (
            "bad-toolarge-u32max",
            patch(req(1, &GetDf), 12, &u32::MAX.to_le_bytes()),
        ),
        (
            "bad-toolarge-limit-plus-one",
            patch(req(1, &GetDf), 12, &(MAX_PAYLOAD as u32 + 1).to_le_bytes()),
        ),
        ("bad-truncated-header", req(1, &GetDf)[..20].to_vec()),
        ("bad-truncated-payload", with_payload_lie),
        (
            "bad-header-kind",
            patch(req(1, &GetDf), 6, &2u16.to_le_bytes()),
        ),
        (
            "bad-header-reserved",
            patch(req(1, &GetDf), 28, &[1, 0, 0, 0]),
        ),
        (
            "bad-code-unknown",
            frame(Frame::request(0x1234_5678, 1, vec![])),
        ),
        (
            // 'L' 0x9f without a direction: not assigned.
            "bad-code-unassigned-l9f",
            frame(Frame::request(0x0000_4c9f, 1, vec![])),
        ),
        ("bad-short-sustat-reply", short_sustat),
        ("bad-trailing-sync", trailing_sync),
        (
            "bad-count-suinfo-request",
            req(
                1,
                &GetSuinfo {
                    start: 0,
                    count: GetSuinfo::MAX_COUNT + 1,
                },
            ),
        ),
        (
            "bad-count-vinfo-billion",
            frame(Frame::request(
                codes::GET_VINFO,
                1,
                1_000_000_000u32.to_le_bytes().to_vec(),
            )),
        ),
        ("bad-utf8-seg-summary-end", bad_utf8),
        (
            "bad-field-cpinfo-flags",
            req(
                1,
                &GetCpinfo {
                    start_cno: 1,
                    count: 1,
                    flags: 2,
                },
            ),
        ),
        ("bad-field-histogram-lengths", rep::<GetStats>(1, &histo)),
    ]
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/proto_frame");
    fs::create_dir_all(&dir).expect("creating the corpus directory");
    for (name, data) in inputs() {
        let verdict = proto_frame(&data);
        let mut parts = name.split('-');
        match (parts.next(), parts.next(), &verdict) {
            (Some("good"), _, Ok(())) => {}
            (Some("bad"), Some(kind), Err(e)) if error_kind(e) == kind => {}
            _ => panic!("{name}: decodes to {verdict:?}, not what its name says"),
        }
        let path = dir.join(name);
        fs::write(&path, &data).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        println!("{name}: {} bytes", data.len());
    }
}
