//! Blocks cut while their checkpoint (or data-sync log) is being written.
//!
//! A checkpoint is built under the state lock and written without it; the
//! data of its blocks stays readable from memory until the write is done.
//! A truncate, punch or unlink that comes meanwhile must hide that data:
//! it was the bug of issue 22, where fsx read back (and later wrote to
//! disk) the bytes of a range it had cut, whenever a background
//! checkpoint fell between the cut and the read.
//!
//! These tests need no timing luck: the device blocks the checkpoint's
//! first write until the test has made its change.

use std::io::IoSlice;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use lfs::blockdev::{BlockDevice, MemDevice};
use lfs::format::ROOT_INO;
use lfs::fs::{Fs, MountOptions, SetAttr, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE};
use lfs::mkfs::{format, MkfsOptions};

const BS: usize = 4096;

/// A device whose next write, once armed, waits until released.
#[derive(Debug)]
struct GateDevice {
    inner: MemDevice,
    gate: Mutex<Option<Gate>>,
}

#[derive(Debug)]
struct Gate {
    /// Told when a write reaches the gate.
    stuck: Sender<()>,
    /// Waited on by that write.
    release: Receiver<()>,
}

/// The test's side of an armed gate.
struct Armed {
    stuck: Receiver<()>,
    release: Sender<()>,
}

impl Armed {
    fn wait_stuck(&self) {
        self.stuck
            .recv_timeout(Duration::from_secs(30))
            .expect("no write reached the gate");
    }
    fn release(self) {
        let _ = self.release.send(());
    }
}

impl GateDevice {
    fn arm(&self) -> Armed {
        let (stuck_tx, stuck_rx) = channel();
        let (rel_tx, rel_rx) = channel();
        *self.gate.lock().unwrap() = Some(Gate {
            stuck: stuck_tx,
            release: rel_rx,
        });
        Armed {
            stuck: stuck_rx,
            release: rel_tx,
        }
    }
}

impl BlockDevice for GateDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> std::io::Result<()> {
        let gate = self.gate.lock().unwrap().take();
        if let Some(g) = gate {
            let _ = g.stuck.send(());
            let _ = g.release.recv();
        }
        self.inner.write_at(bufs, offset)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.inner.flush()
    }
    fn discard(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.inner.discard(offset, len)
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

fn fresh() -> Arc<GateDevice> {
    let dev = MemDevice::new(16 << 20);
    let mut o = MkfsOptions::new([9; 16], 0x1f1, 1_700_000_000, 0);
    o.blocks_per_segment = 32;
    o.discard = false;
    format(&dev, &o).unwrap();
    Arc::new(GateDevice {
        inner: dev,
        gate: Mutex::new(None),
    })
}

fn mount(dev: &Arc<GateDevice>) -> Arc<Fs> {
    let opts = MountOptions {
        // Only the tests' own syncs write.
        checkpoint_interval: Duration::from_secs(3600),
        ..MountOptions::default()
    };
    Fs::mount(dev.clone(), opts).unwrap()
}

/// Asserts `got == want`, naming the first differing byte (not printing
/// blocks of bytes).
fn same(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: byte {i} is {:#x}, expected {:#x}", got[i], want[i]);
    }
}

fn remount(dev: &Arc<GateDevice>, fs: Arc<Fs>) -> Arc<Fs> {
    fs.unmount().unwrap();
    drop(fs);
    let d: Arc<dyn BlockDevice> = dev.clone();
    let r = lfs::fsck::fsck(d).unwrap();
    assert!(r.is_clean(), "fsck: {:#?}", r.errors);
    mount(dev)
}

/// A file of three blocks of `old`, durable, whose block 1 is then
/// overwritten with `new` (dirty: the next checkpoint writes it).
fn file_with_dirty_block(fs: &Fs, name: &[u8]) -> u64 {
    let f = fs.create(ROOT_INO, name, 0o644, 0, 0, 0).unwrap().ino;
    fs.write(f, 0, &[0xaa; 3 * BS]).unwrap();
    fs.sync().unwrap();
    fs.write(f, BS as u64, &[0xbb; BS]).unwrap();
    f
}

/// Starts `what` on another thread and returns once its first device
/// write is stuck at the gate.
fn stuck_in_write(
    dev: &Arc<GateDevice>,
    fs: &Arc<Fs>,
    what: fn(&Fs, u64),
    ino: u64,
) -> (Armed, JoinHandle<()>) {
    let armed = dev.arm();
    let fs2 = fs.clone();
    let h = std::thread::spawn(move || what(&fs2, ino));
    armed.wait_stuck();
    (armed, h)
}

fn checkpoint(fs: &Fs, _ino: u64) {
    fs.sync().unwrap();
}

fn data_sync(fs: &Fs, ino: u64) {
    fs.fsync(ino, true).unwrap();
}

fn truncate(fs: &Fs, ino: u64, size: u64) {
    let set = SetAttr {
        size: Some(size),
        ..SetAttr::default()
    };
    fs.setattr(ino, &set).unwrap();
}

fn punch(fs: &Fs, ino: u64, off: u64, len: u64) {
    fs.fallocate(ino, off, len, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)
        .unwrap();
}

/// Cut block 1 (truncate to one block, or punch it) while the write that
/// carries its new contents is in flight, regrow the file and read: the
/// block must read as zeros, before and after that write ends, and after
/// a remount.
fn cut_then_read(write: fn(&Fs, u64), cut_by_punch: bool) {
    let dev = fresh();
    let fs = mount(&dev);
    let f = file_with_dirty_block(&fs, b"f");
    let (armed, h) = stuck_in_write(&dev, &fs, write, f);
    if cut_by_punch {
        punch(&fs, f, BS as u64, BS as u64);
    } else {
        truncate(&fs, f, BS as u64);
        truncate(&fs, f, 3 * BS as u64);
    }
    let zeros = vec![0u8; BS];
    same(
        &fs.read(f, BS as u64, BS as u32).unwrap(),
        &zeros,
        "block 1, cut while its write was in flight",
    );
    armed.release();
    h.join().unwrap();
    same(
        &fs.read(f, BS as u64, BS as u32).unwrap(),
        &zeros,
        "block 1 after the write",
    );
    let fs = remount(&dev, fs);
    let mut want = vec![0xaa; 3 * BS];
    if cut_by_punch {
        want[BS..2 * BS].fill(0);
    } else {
        want[BS..].fill(0);
    }
    same(
        &fs.read(f, 0, 3 * BS as u32).unwrap(),
        &want,
        "after remount",
    );
    fs.unmount().unwrap();
}

#[test]
fn truncated_block_reads_as_zeros_while_its_checkpoint_is_written() {
    cut_then_read(checkpoint, false);
}

#[test]
fn punched_block_reads_as_zeros_while_its_checkpoint_is_written() {
    cut_then_read(checkpoint, true);
}

#[test]
fn truncated_block_reads_as_zeros_while_its_data_sync_log_is_written() {
    cut_then_read(data_sync, false);
}

#[test]
fn punched_block_reads_as_zeros_while_its_data_sync_log_is_written() {
    cut_then_read(data_sync, true);
}

/// Cut, regrow, then write one byte into the cut block while its old
/// contents are still being written: the rest of the block must be zeros,
/// in memory and on disk (a read-modify-write must not start from the
/// bytes in flight).
fn cut_then_partial_write(write: fn(&Fs, u64)) {
    let dev = fresh();
    let fs = mount(&dev);
    let f = file_with_dirty_block(&fs, b"f");
    let (armed, h) = stuck_in_write(&dev, &fs, write, f);
    truncate(&fs, f, 100);
    truncate(&fs, f, 3 * BS as u64);
    fs.write(f, BS as u64 + 10, b"x").unwrap();
    armed.release();
    h.join().unwrap();
    let mut want = vec![0u8; 3 * BS];
    want[..100].fill(0xaa);
    want[BS + 10] = b'x';
    same(&fs.read(f, 0, 3 * BS as u32).unwrap(), &want, "the file");
    fs.sync().unwrap();
    let fs = remount(&dev, fs);
    same(&fs.read(f, 0, 3 * BS as u32).unwrap(), &want, "the file");
    fs.unmount().unwrap();
}

#[test]
fn partial_write_into_a_regrown_block_starts_from_zeros_under_a_checkpoint() {
    cut_then_partial_write(checkpoint);
}

#[test]
fn partial_write_into_a_regrown_block_starts_from_zeros_under_a_data_sync_log() {
    cut_then_partial_write(data_sync);
}

/// The same with the file unlinked and a new file made at the same
/// offsets meanwhile (it may even get the same inode number): the new
/// file's holes must not show the old file's bytes in flight.
#[test]
fn a_file_recreated_while_its_predecessor_is_in_flight_reads_its_own_bytes() {
    let dev = fresh();
    let fs = mount(&dev);
    let f = file_with_dirty_block(&fs, b"f");
    let (armed, h) = stuck_in_write(&dev, &fs, checkpoint, f);
    fs.unlink(ROOT_INO, b"f").unwrap();
    let g = fs.create(ROOT_INO, b"g", 0o644, 0, 0, 0).unwrap().ino;
    truncate(&fs, g, 3 * BS as u64);
    fs.write(g, BS as u64 + 1, b"y").unwrap();
    let mut want = vec![0u8; 3 * BS];
    want[BS + 1] = b'y';
    same(&fs.read(g, 0, 3 * BS as u32).unwrap(), &want, "the file");
    armed.release();
    h.join().unwrap();
    same(&fs.read(g, 0, 3 * BS as u32).unwrap(), &want, "the file");
    let fs = remount(&dev, fs);
    same(&fs.read(g, 0, 3 * BS as u32).unwrap(), &want, "the file");
    fs.unmount().unwrap();
}

/// A block overwritten while its previous contents are in flight reads
/// the new contents; the old ones are what the checkpoint records.
#[test]
fn overwrite_while_in_flight_reads_the_new_bytes() {
    let dev = fresh();
    let fs = mount(&dev);
    let f = file_with_dirty_block(&fs, b"f");
    let (armed, h) = stuck_in_write(&dev, &fs, checkpoint, f);
    fs.write(f, BS as u64 + 5, b"zz").unwrap();
    let mut want = vec![0xaa; 3 * BS];
    want[BS..2 * BS].fill(0xbb);
    want[BS + 5..BS + 7].copy_from_slice(b"zz");
    same(&fs.read(f, 0, 3 * BS as u32).unwrap(), &want, "the file");
    armed.release();
    h.join().unwrap();
    same(&fs.read(f, 0, 3 * BS as u32).unwrap(), &want, "the file");
    let fs = remount(&dev, fs);
    same(&fs.read(f, 0, 3 * BS as u32).unwrap(), &want, "the file");
    fs.unmount().unwrap();
}

/// Checkpoint file blocks are read on demand (listing checkpoints,
/// opening one). One being rewritten (a checkpoint made a snapshot) must
/// be read as rewritten while its write is in flight, not from the
/// device address it has not reached yet.
#[test]
fn checkpoint_file_block_being_rewritten_is_read_from_memory() {
    let dev = fresh();
    let fs = mount(&dev);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap().ino;
    fs.write(f, 0, b"first").unwrap();
    let first = fs.make_checkpoint(false).unwrap();
    // Enough checkpoints after it that its entry is not in the last
    // checkpoint file block (which is also kept in memory).
    for i in 0..300u32 {
        fs.write(f, 0, &i.to_le_bytes()).unwrap();
        fs.make_checkpoint(false).unwrap();
    }
    let armed = dev.arm();
    let h = {
        let fs = fs.clone();
        std::thread::spawn(move || fs.change_cpmode(first, true).unwrap())
    };
    armed.wait_stuck();
    let listed = fs.cpinfo(first, 1, false).unwrap();
    assert_eq!(listed.len(), 1, "checkpoint {first} listed");
    assert_eq!(listed[0].cno, first);
    let view = fs.open_checkpoint(first).unwrap();
    assert_eq!(view.read(f, 0, 100).unwrap(), b"first");
    drop(view);
    armed.release();
    h.join().unwrap();
    let fs = remount(&dev, fs);
    let view = fs.open_checkpoint(first).unwrap();
    assert_eq!(view.read(f, 0, 100).unwrap(), b"first");
    drop(view);
    fs.unmount().unwrap();
}
