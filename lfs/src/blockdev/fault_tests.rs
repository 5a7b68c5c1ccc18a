//! Tests of [`FaultDevice`](super::FaultDevice), kept beside `fault.rs` so
//! that file stays readable.

use std::io::{self, IoSlice};
use std::sync::Arc;

use super::*;
use crate::blockdev::MemDevice;

const S: usize = SECTOR_SIZE;
const DEV_SECTORS: usize = 16;

/// A device whose durable medium holds `0xEE` everywhere.
fn dev() -> FaultDevice<MemDevice> {
    FaultDevice::new(MemDevice::from_vec(vec![0xEE; DEV_SECTORS * S]))
}

fn durable(d: &FaultDevice<MemDevice>) -> Vec<u8> {
    d.durable().snapshot()
}

fn read(d: &FaultDevice<MemDevice>, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    d.read_at(&mut buf, offset).unwrap();
    buf
}

fn assert_crashed_error(err: &io::Error) {
    assert!(is_simulated_fault(err), "{err}");
    assert_eq!(err.to_string(), "device crashed (simulated)");
}

fn assert_injected_error(err: &io::Error) {
    assert!(is_simulated_fault(err), "{err}");
    assert!(err.to_string().contains("EIO"), "{err}");
}

#[test]
fn reads_see_pending_writes_in_order_but_medium_does_not() {
    let d = dev();
    d.write_all_at(&[1; 100], 10).unwrap();
    d.write_at(&[IoSlice::new(&[2; 20]), IoSlice::new(&[3; 20])], 50)
        .unwrap();
    let got = read(&d, 0, 120);
    assert!(got[..10].iter().all(|&b| b == 0xEE));
    assert!(got[10..50].iter().all(|&b| b == 1));
    assert!(got[50..70].iter().all(|&b| b == 2), "later write wins");
    assert!(got[70..90].iter().all(|&b| b == 3));
    assert!(got[90..110].iter().all(|&b| b == 1));
    assert!(got[110..].iter().all(|&b| b == 0xEE));
    assert_eq!(durable(&d), vec![0xEE; DEV_SECTORS * S]);
    assert_eq!(d.pending_writes(), 2);
    let p = d.pending();
    assert_eq!((p[0].seq, p[0].offset, p[0].data.len()), (1, 10, 100));
    assert_eq!((p[1].seq, p[1].offset, p[1].data.len()), (2, 50, 40));
}

#[test]
fn flush_applies_pending_writes_in_order() {
    let d = dev();
    d.write_all_at(&[1; 64], 0).unwrap();
    d.write_all_at(&[2; 32], 16).unwrap();
    d.flush().unwrap();
    assert_eq!(d.pending_writes(), 0);
    let img = durable(&d);
    assert!(img[..16].iter().all(|&b| b == 1));
    assert!(img[16..48].iter().all(|&b| b == 2));
    assert!(img[48..64].iter().all(|&b| b == 1));
    assert_eq!(read(&d, 0, 64), img[..64]);
}

#[test]
fn discard_is_a_pending_write_of_zeros() {
    let d = dev();
    d.discard(S as u64, S as u64).unwrap();
    assert_eq!(d.pending_writes(), 1);
    assert_eq!(read(&d, S as u64, S), vec![0; S]);
    assert!(durable(&d)[S..2 * S].iter().all(|&b| b == 0xEE));
    d.flush().unwrap();
    assert!(durable(&d)[S..2 * S].iter().all(|&b| b == 0));
    assert_eq!(d.discards(), 1);
    assert_eq!(d.writes(), 0, "discard is not a write_at call");
}

#[test]
fn counters_count_calls() {
    let d = dev();
    d.write_all_at(b"a", 0).unwrap();
    d.write_all_at(b"b", 1).unwrap();
    let _ = read(&d, 0, 2);
    d.flush().unwrap();
    d.flush().unwrap();
    d.flush().unwrap();
    assert_eq!((d.writes(), d.reads(), d.flushes()), (2, 1, 3));
    // Argument errors are not counted.
    assert!(d.write_all_at(b"x", u64::MAX).is_err());
    assert_eq!(d.writes(), 2);
    assert!(format!("{d:?}").contains("writes: 2"));
}

#[test]
fn out_of_range_is_invalid_input_not_a_fault() {
    let d = dev();
    let len = d.len();
    let err = d.write_all_at(&[1; 2], len - 1).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(!is_simulated_fault(&err));
    let err = d.read_at(&mut [0; 2], len - 1).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    let err = d.discard(len, 1).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert_eq!(d.pending_writes(), 0);
}

/// Flushes `0x11` over sectors 0..2, then leaves three unflushed writes:
/// sectors 2..4 of `0x22`, 4..6 of `0x33`, 6..8 of `0x44`.
fn three_pending() -> FaultDevice<MemDevice> {
    let d = dev();
    d.write_all_at(&[0x11; 2 * S], 0).unwrap();
    d.flush().unwrap();
    d.write_all_at(&[0x22; 2 * S], 2 * S as u64).unwrap();
    d.write_all_at(&[0x33; 2 * S], 4 * S as u64).unwrap();
    d.write_all_at(&[0x44; 2 * S], 6 * S as u64).unwrap();
    d
}

/// The byte each of the first 8 sectors of `img` is filled with; panics
/// if a sector is not uniform.
fn sector_fill(img: &[u8]) -> Vec<u8> {
    img.chunks(S)
        .take(8)
        .map(|s| {
            assert!(s.iter().all(|&b| b == s[0]), "sector not uniform");
            s[0]
        })
        .collect()
}

#[test]
fn crash_drop_all_keeps_only_flushed_data() {
    let d = three_pending();
    d.set_crash_mode(CrashMode::DropAll);
    d.crash_now().unwrap();
    assert!(d.is_crashed());
    assert_eq!(d.pending_writes(), 0);
    let img = durable(&d);
    assert_eq!(
        sector_fill(&img),
        [0x11, 0x11, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE]
    );
    assert!(img[8 * S..].iter().all(|&b| b == 0xEE));
}

#[test]
fn crash_keep_all_lands_everything_in_order() {
    let d = three_pending();
    d.write_all_at(&[0x55; S], 3 * S as u64).unwrap(); // overlaps 0x22
    d.set_crash_mode(CrashMode::KeepAll);
    assert_eq!(d.crash_mode(), CrashMode::KeepAll);
    d.crash_now().unwrap();
    assert_eq!(
        sector_fill(&durable(&d)),
        [0x11, 0x11, 0x22, 0x55, 0x33, 0x33, 0x44, 0x44]
    );
}

#[test]
fn crash_keep_prefix_lands_the_first_k() {
    for (k, expected) in [
        (0, [0x11, 0x11, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE]),
        (2, [0x11, 0x11, 0x22, 0x22, 0x33, 0x33, 0xEE, 0xEE]),
        (9, [0x11, 0x11, 0x22, 0x22, 0x33, 0x33, 0x44, 0x44]),
    ] {
        let d = three_pending();
        d.set_crash_mode(CrashMode::KeepPrefix(k));
        d.crash_now().unwrap();
        assert_eq!(sector_fill(&durable(&d)), expected, "k = {k}");
    }
}

#[test]
fn crash_tear_last_tears_at_sector_boundaries() {
    let d = three_pending();
    d.set_crash_mode(CrashMode::TearLast { sectors: 1 });
    d.crash_now().unwrap();
    assert_eq!(
        sector_fill(&durable(&d)),
        [0x11, 0x11, 0x22, 0x22, 0x33, 0x33, 0x44, 0xEE]
    );

    // Zero sectors: the last write is lost entirely.
    let d = three_pending();
    d.set_crash_mode(CrashMode::TearLast { sectors: 0 });
    d.crash_now().unwrap();
    assert_eq!(
        sector_fill(&durable(&d)),
        [0x11, 0x11, 0x22, 0x22, 0x33, 0x33, 0xEE, 0xEE]
    );

    // An unaligned write tears at device sector boundaries: its first
    // piece is the rest of sector 0, the second is sector 1.
    let d = dev();
    d.write_all_at(&[7; 1500], 100).unwrap();
    d.set_crash_mode(CrashMode::TearLast { sectors: 2 });
    d.crash_now().unwrap();
    let img = durable(&d);
    assert!(img[..100].iter().all(|&b| b == 0xEE));
    assert!(img[100..2 * S].iter().all(|&b| b == 7));
    assert!(img[2 * S..].iter().all(|&b| b == 0xEE));
}

#[test]
fn crash_tear_last_with_nothing_pending_is_harmless() {
    let d = dev();
    d.set_crash_mode(CrashMode::TearLast { sectors: 3 });
    d.crash_now().unwrap();
    assert_eq!(durable(&d), vec![0xEE; DEV_SECTORS * S]);
}

/// Durable `0xEE`; pending: A = sectors 0..4 of 1, B = sectors 2..6 of 2
/// (overlapping A), C = sectors 8..12 of 3, D = 1000 bytes of 4 at an
/// unaligned offset in sector 12.
const D_OFFSET: usize = 12 * S + 100;
fn random_setup(seed: u64) -> FaultDevice<MemDevice> {
    let d = dev();
    d.write_all_at(&[1; 4 * S], 0).unwrap();
    d.write_all_at(&[2; 4 * S], 2 * S as u64).unwrap();
    d.write_all_at(&[3; 4 * S], 8 * S as u64).unwrap();
    d.write_all_at(&[4; 1000], D_OFFSET as u64).unwrap();
    d.set_crash_mode(CrashMode::Random { seed });
    d.crash_now().unwrap();
    d
}

/// Every sector must be the old sector, or the old sector with exactly
/// one pending write's piece of it laid over (whole sectors for aligned
/// writes): never a byte mix inside a piece.
fn assert_sector_granular(img: &[u8]) {
    let writes: [(usize, usize, u8); 4] = [
        (0, 4 * S, 1),
        (2 * S, 6 * S, 2),
        (8 * S, 12 * S, 3),
        (D_OFFSET, D_OFFSET + 1000, 4),
    ];
    for (i, sector) in img.chunks(S).enumerate() {
        let (lo, hi) = (i * S, (i + 1) * S);
        let mut candidates = vec![vec![0xEE; S]];
        for &(start, end, fill) in &writes {
            let (from, to) = (start.max(lo), end.min(hi));
            if from < to {
                let mut c = vec![0xEE; S];
                c[from - lo..to - lo].fill(fill);
                candidates.push(c);
            }
        }
        assert!(
            candidates.iter().any(|c| c == sector),
            "sector {i} is not a sector-granular outcome: {:?}",
            &sector[..8]
        );
    }
}

#[test]
fn crash_random_is_deterministic_for_a_seed() {
    for seed in [0, 1, 42, u64::MAX] {
        assert_eq!(
            durable(&random_setup(seed)),
            durable(&random_setup(seed)),
            "seed {seed}"
        );
    }
    let distinct: std::collections::HashSet<Vec<u8>> =
        (0..32).map(|s| durable(&random_setup(s))).collect();
    assert!(distinct.len() > 1, "different seeds give different images");
}

#[test]
fn crash_random_only_mixes_whole_sectors_and_does_drop_tear_reorder() {
    let (mut dropped, mut torn, mut whole) = (false, false, false);
    for seed in 0..256 {
        let img = durable(&random_setup(seed));
        assert_sector_granular(&img);
        // Write C (sectors 8..12, nothing overlaps it) shows the outcomes.
        let c: Vec<bool> = (8..12).map(|s| img[s * S] == 3).collect();
        dropped |= c.iter().all(|&x| !x);
        whole |= c.iter().all(|&x| x);
        torn |= c.iter().any(|&x| x) && !c.iter().all(|&x| x);
    }
    assert!(dropped && torn && whole, "{dropped} {torn} {whole}");
}

#[test]
fn crash_plan_random_reorders_writes() {
    let pending: Vec<PendingWrite> = (0..4u64)
        .map(|i| PendingWrite {
            seq: i + 1,
            offset: i * S as u64,
            data: vec![i as u8; S],
        })
        .collect();
    let reordered = (0..256).any(|seed| {
        let order: Vec<usize> = crash_plan(CrashMode::Random { seed }, &pending)
            .into_iter()
            .map(|(i, _)| i)
            .collect();
        order.windows(2).any(|w| w[0] > w[1])
    });
    assert!(reordered);
}

#[test]
fn sector_pieces_follow_device_boundaries() {
    assert_eq!(sector_pieces(0, 0), Vec::<Range<usize>>::new());
    assert_eq!(sector_pieces(0, 2 * S), vec![0..S, S..2 * S]);
    assert_eq!(
        sector_pieces(100, 1500),
        vec![0..412, 412..924, 924..1436, 1436..1500]
    );
    assert_eq!(sector_pieces(S as u64 + 1, 10), vec![0..10]);
}

#[test]
fn crash_at_write_fires_at_the_nth_write_and_then_everything_fails() {
    for (mode, third_lands) in [(CrashMode::KeepAll, true), (CrashMode::DropAll, false)] {
        let d = dev();
        d.set_crash_mode(mode);
        d.crash_at_write(3);
        d.write_all_at(&[1; S], 0).unwrap();
        d.flush().unwrap();
        d.write_all_at(&[2; S], S as u64).unwrap();
        assert!(!d.is_crashed());
        let err = d.write_all_at(&[3; S], 2 * S as u64).unwrap_err();
        assert_crashed_error(&err);
        assert!(d.is_crashed());
        assert_eq!(d.writes(), 3);

        let img = durable(&d);
        assert_eq!(img[0], 1, "flushed before the crash");
        assert_eq!(img[S] == 2, third_lands, "{mode:?}");
        assert_eq!(img[2 * S] == 3, third_lands, "{mode:?}");

        assert_crashed_error(&d.read_at(&mut [0; 4], 0).unwrap_err());
        assert_crashed_error(&d.write_all_at(&[9], 0).unwrap_err());
        assert_crashed_error(&d.flush().unwrap_err());
        assert_crashed_error(&d.discard(0, 1).unwrap_err());
        assert_eq!((d.writes(), d.reads(), d.flushes()), (3, 0, 1));
        assert_eq!(durable(&d), img, "nothing changes after the crash");
    }
}

#[test]
fn crashing_write_can_be_torn() {
    let d = dev();
    d.set_crash_mode(CrashMode::TearLast { sectors: 1 });
    d.crash_at_write(1);
    assert_crashed_error(&d.write_all_at(&[5; 3 * S], 0).unwrap_err());
    assert_eq!(sector_fill(&durable(&d))[..4], [5, 0xEE, 0xEE, 0xEE]);
}

#[test]
fn crash_image_can_be_remounted() {
    let d = three_pending();
    d.set_crash_mode(CrashMode::KeepPrefix(1));
    d.crash_now().unwrap();
    d.crash_now().unwrap(); // idempotent
    let image = d.into_inner();
    let remounted = FaultDevice::new(MemDevice::from_vec(image.snapshot()));
    assert!(!remounted.is_crashed());
    assert_eq!(read(&remounted, 2 * S as u64, 1), [0x22]);
    assert_eq!(read(&remounted, 4 * S as u64, 1), [0xEE]);
}

#[test]
fn fail_write_at_fails_once_with_no_effect() {
    let d = dev();
    d.fail_write_at(2);
    d.write_all_at(&[1; 8], 0).unwrap();
    assert_injected_error(&d.write_all_at(&[2; 8], 8).unwrap_err());
    assert_eq!(d.pending_writes(), 1, "the failed write left nothing");
    assert_eq!(read(&d, 8, 8), [0xEE; 8]);
    d.write_all_at(&[3; 8], 8).unwrap();
    d.flush().unwrap();
    assert_eq!(durable(&d)[8..16], [3; 8]);
    assert!(!d.is_crashed());
}

#[test]
fn fail_read_at_fails_once() {
    let d = dev();
    d.fail_read_at(d.reads() + 2);
    d.read_at(&mut [0; 4], 0).unwrap();
    assert_injected_error(&d.read_at(&mut [0; 4], 0).unwrap_err());
    d.read_at(&mut [0; 4], 0).unwrap();
    assert_eq!(d.reads(), 3);
}

#[test]
fn fail_flush_at_fails_once_and_keeps_writes_pending() {
    let d = dev();
    d.fail_flush_at(1);
    d.write_all_at(&[1; 8], 0).unwrap();
    assert_injected_error(&d.flush().unwrap_err());
    assert_eq!(d.pending_writes(), 1);
    assert_eq!(durable(&d)[0], 0xEE, "nothing became durable");
    d.flush().unwrap();
    assert_eq!(durable(&d)[..8], [1; 8]);
}

#[test]
fn fail_reads_in_range_until_cleared() {
    let d = dev();
    d.fail_reads_in(100..200);
    for _ in 0..3 {
        assert_injected_error(&d.read_at(&mut [0; 10], 195).unwrap_err());
        assert_injected_error(&d.read_at(&mut [0; 500], 0).unwrap_err());
    }
    d.read_at(&mut [0; 100], 0).unwrap(); // ends where the range starts
    d.read_at(&mut [0; 10], 200).unwrap(); // starts where it ends
    d.read_at(&mut [], 150).unwrap(); // empty reads touch nothing
    d.write_all_at(&[1; 10], 150).unwrap(); // writes are unaffected
    d.clear_faults();
    assert_eq!(read(&d, 150, 10), [1; 10]);
}

#[test]
fn fail_writes_in_range_until_cleared() {
    let d = dev();
    d.fail_writes_in(S as u64..2 * S as u64);
    assert_injected_error(&d.write_all_at(&[1; 10], S as u64 - 5).unwrap_err());
    assert_injected_error(&d.write_all_at(&[1; 10], S as u64 + 5).unwrap_err());
    assert_injected_error(&d.discard(0, 2 * S as u64).unwrap_err());
    assert_eq!(d.pending_writes(), 0);
    d.write_all_at(&[2; S], 0).unwrap();
    d.write_all_at(&[2; S], 2 * S as u64).unwrap();
    let _ = read(&d, S as u64, 10); // reads are unaffected
    d.clear_faults();
    d.write_all_at(&[3; 10], S as u64).unwrap();
    d.flush().unwrap();
    assert_eq!(durable(&d)[S..S + 10], [3; 10]);
}

#[test]
fn shared_across_threads_while_faults_are_armed() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<FaultDevice<MemDevice>>();
    let d = Arc::new(dev());
    let engine: Arc<dyn BlockDevice> = d.clone();
    let handles: Vec<_> = (0..4u8)
        .map(|i| {
            let dev = Arc::clone(&engine);
            std::thread::spawn(move || {
                for j in 0..8u64 {
                    dev.write_all_at(&[i; 16], (u64::from(i) * 8 + j) * 16)?;
                }
                dev.flush()
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap().unwrap();
    }
    assert_eq!(d.writes(), 32);
    d.crash_now().unwrap();
    assert_crashed_error(&engine.flush().unwrap_err());
    let img = durable(&d);
    for i in 0..4u8 {
        assert!(img[usize::from(i) * 128..][..128].iter().all(|&b| b == i));
    }
}
