//! What a hostile length costs in memory: a counting global allocator
//! records the largest single allocation made on the current thread while
//! frames and payloads that announce huge sizes are read.
//!
//! The only unsafe code of lfs-proto is here, in this test binary: a
//! `GlobalAlloc` must be an `unsafe impl`. The library itself is
//! `#![forbid(unsafe_code)]`.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::thread;

use lfs_proto::frame::{decode_frame, read_frame, Frame, FrameError, MAX_PAYLOAD};
use lfs_proto::msg::{GetVinfo, Message, SegSummary, Stats};
use lfs_proto::server::{serve_connection, Closed, Handler, Peer};
use lfs_proto::{codes, DecodeError};

struct Counting;

thread_local! {
    /// Largest allocation (bytes) on this thread since the last `measure`.
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: the slot may be gone while the thread exits.
    let _ = PEAK.try_with(|p| p.set(p.get().max(size)));
}

// SAFETY: every call is forwarded unchanged to the system allocator, which
// upholds GlobalAlloc's contract; `note` neither allocates nor unwinds
// (a const-initialised thread-local Cell).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract is passed on to System unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from System through this allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f` and returns its result and the largest allocation it made.
fn measure<T>(f: impl FnOnce() -> T) -> (T, usize) {
    PEAK.with(|p| p.set(0));
    let v = f();
    (v, PEAK.with(Cell::get))
}

/// A frame header announcing `len` payload bytes.
fn header(code: u32, len: u32) -> Vec<u8> {
    let mut h = Frame::request(code, 1, vec![]).encode().unwrap();
    h[12..16].copy_from_slice(&len.to_le_bytes());
    h
}

/// Slack for incidental allocations (error values, formatting).
const SMALL: usize = 4096;

#[test]
fn an_oversized_length_allocates_nothing_for_the_payload() {
    let bytes = header(codes::GET_DF, u32::MAX);
    let (r, peak) = measure(|| decode_frame(&bytes));
    assert!(matches!(r, Err(FrameError::TooLarge { .. })));
    assert!(peak < SMALL, "{peak} bytes");
}

#[test]
fn a_lying_length_costs_one_read_chunk_not_the_announced_size() {
    let mut bytes = header(codes::GET_DF, MAX_PAYLOAD as u32);
    bytes.extend_from_slice(&[0; 100]);
    let (r, peak) = measure(|| read_frame(&mut &bytes[..]));
    assert!(matches!(r, Err(FrameError::Truncated { got: 100, .. })));
    assert!(peak <= 64 << 10, "{peak} bytes");
}

#[test]
fn the_largest_frame_allocates_its_payload_once() {
    let frame = Frame::request(codes::GET_DF, 1, vec![7; MAX_PAYLOAD]);
    let bytes = frame.encode().unwrap();
    let (r, peak) = measure(|| read_frame(&mut &bytes[..]));
    assert_eq!(r.unwrap().payload.len(), MAX_PAYLOAD);
    assert!(peak <= MAX_PAYLOAD, "{peak} bytes");
}

#[test]
fn huge_counts_in_payloads_allocate_nothing() {
    let vinfo = u32::MAX.to_le_bytes();
    let (r, peak) = measure(|| GetVinfo::decode(&vinfo));
    assert!(matches!(r, Err(DecodeError::BadCount { .. })));
    assert!(peak < SMALL, "{peak} bytes");

    // Nested: a summary whose one log announces 65536 entries, and a
    // string length of 4 GiB.
    let mut seg = vec![0u8; 24];
    seg.extend_from_slice(&1u32.to_le_bytes());
    // The log's fixed fields and two empty error strings.
    seg.extend_from_slice(&[0; 76 + 4 + 4]);
    seg.extend_from_slice(&65536u32.to_le_bytes());
    let (r, peak) = measure(|| SegSummary::decode(&seg));
    assert!(matches!(
        r,
        Err(DecodeError::BadCount {
            field: "entries",
            ..
        })
    ));
    assert!(peak < SMALL, "{peak} bytes");
    let mut stats = 1u32.to_le_bytes().to_vec();
    stats.extend_from_slice(&u32::MAX.to_le_bytes());
    let (r, peak) = measure(|| Stats::decode(&stats));
    assert!(matches!(r, Err(DecodeError::BadCount { .. })));
    assert!(peak < SMALL, "{peak} bytes");
}

struct Never;

impl Handler for Never {
    fn handle(&self, _: u32, _: &[u8], _: &Peer) -> Result<Vec<u8>, i32> {
        Err(nix::libc::EIO)
    }
}

#[test]
fn the_server_answers_an_oversized_length_without_allocating_it() {
    let (server, client) = UnixStream::pair().unwrap();
    let writer = thread::spawn(move || {
        (&client)
            .write_all(&header(codes::GET_VINFO, u32::MAX))
            .unwrap();
        let reply = read_frame(&mut &client).unwrap();
        (reply.id, reply.status)
    });
    // The connection is served on this thread, where allocations count.
    let (why, peak) = measure(|| serve_connection(server, &Never));
    assert!(
        matches!(why, Closed::Malformed(FrameError::TooLarge { len, .. }) if len == u64::from(u32::MAX)),
        "{why:?}"
    );
    assert!(peak < SMALL, "{peak} bytes");
    assert_eq!(writer.join().unwrap(), (1, nix::libc::EINVAL));
}
