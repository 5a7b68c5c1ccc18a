//! Freezing the engine (FIFREEZE/FITHAW): changes wait (cleaning is
//! refused with Busy), reads go on, the
//! device is not written while frozen, and what was written before the
//! freeze is durable.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use lfs::blockdev::{BlockDevice, FaultDevice, MemDevice};
use lfs::format::ROOT_INO;
use lfs::fs::{Fs, MountOptions};
use lfs::mkfs::{format, MkfsOptions};
use lfs::Error;

/// Long enough for a change that does not wait at the gate to finish.
const SETTLE: Duration = Duration::from_millis(400);

fn fresh() -> Arc<FaultDevice<MemDevice>> {
    let mem = MemDevice::new(32 << 20);
    let mut o = MkfsOptions::new([3; 16], 0x1234, 1_700_000_000, 0);
    o.blocks_per_segment = 64;
    o.discard = false;
    format(&mem, &o).unwrap();
    Arc::new(FaultDevice::new(mem))
}

fn mount(dev: &Arc<FaultDevice<MemDevice>>) -> Arc<Fs> {
    let d: Arc<dyn BlockDevice> = dev.clone();
    let opts = MountOptions {
        // Short, so that a timer that did not skip its turns while frozen
        // would be caught writing.
        checkpoint_interval: Duration::from_millis(50),
        ..MountOptions::default()
    };
    Fs::mount(d, opts).unwrap()
}

/// Runs `f` on a thread; the flag is set when it returns.
fn spawn<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> (thread::JoinHandle<T>, Arc<AtomicBool>) {
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    let h = thread::spawn(move || {
        let r = f();
        flag.store(true, Ordering::SeqCst);
        r
    });
    (h, done)
}

#[test]
fn writers_wait_while_frozen_and_readers_do_not() {
    let dev = fresh();
    let fs = mount(&dev);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    let before: Vec<u8> = (0..50_000u32).map(|i| (i % 253) as u8).collect();
    fs.write(f.ino, 0, &before).unwrap();
    let cno_before = fs.cpstat().0;

    let cno = fs.freeze().unwrap();
    assert!(cno > cno_before, "the freeze wrote no checkpoint");
    assert_eq!(dev.pending_writes(), 0, "the freeze left unflushed writes");
    assert!(fs.is_frozen());
    let writes = dev.writes();

    let after = vec![0xa5u8; 20_000];
    let (writer, written) = {
        let (fs, after) = (fs.clone(), after.clone());
        spawn(move || fs.write(f.ino, 100_000, &after))
    };
    let (mkdir, made) = {
        let fs = fs.clone();
        spawn(move || fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0))
    };
    let (mkcp, checkpointed) = {
        let fs = fs.clone();
        spawn(move || fs.make_checkpoint(false))
    };
    thread::sleep(SETTLE);
    assert!(!written.load(Ordering::SeqCst), "a write passed the freeze");
    assert!(!made.load(Ordering::SeqCst), "a mkdir passed the freeze");
    assert!(
        !checkpointed.load(Ordering::SeqCst),
        "mkcp passed the freeze"
    );

    // Reads, queries and fsync go on.
    assert_eq!(fs.read(f.ino, 0, 50_000).unwrap(), before);
    assert_eq!(fs.getattr(f.ino).unwrap().size, 50_000);
    assert!(matches!(fs.lookup(ROOT_INO, b"d"), Err(Error::NotFound)));
    assert_eq!(fs.cpstat().0, cno);
    fs.fsync(f.ino, false).unwrap();
    assert_eq!(dev.writes(), writes, "the device was written while frozen");

    assert!(matches!(fs.freeze(), Err(Error::Busy(_))));
    // Cleaning is refused at once rather than kept waiting.
    assert!(matches!(
        fs.clean_segments(&[], Duration::ZERO),
        Err(Error::Busy(_))
    ));
    fs.thaw().unwrap();
    assert!(!fs.is_frozen());
    assert!(matches!(fs.thaw(), Err(Error::InvalidArgument(_))));

    assert_eq!(writer.join().unwrap().unwrap(), 20_000);
    mkdir.join().unwrap().unwrap();
    assert!(mkcp.join().unwrap().unwrap() > cno);
    assert_eq!(fs.read(f.ino, 0, 50_000).unwrap(), before);
    assert_eq!(fs.read(f.ino, 100_000, 20_000).unwrap(), after);
    fs.unmount().unwrap();
    drop(fs);

    let fs = mount(&dev);
    assert_eq!(fs.read(f.ino, 0, 50_000).unwrap(), before);
    assert_eq!(fs.read(f.ino, 100_000, 20_000).unwrap(), after);
    fs.lookup(ROOT_INO, b"d").unwrap();
    fs.unmount().unwrap();
}

#[test]
fn the_device_of_a_frozen_filesystem_is_a_clean_image_of_its_checkpoint() {
    let dev = fresh();
    let fs = mount(&dev);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    let data = vec![0x3cu8; 70_000];
    fs.write(f.ino, 0, &data).unwrap();
    let cno = fs.freeze().unwrap();
    // What a backup tool copies while the filesystem is frozen: the
    // durable medium (nothing is pending, so it is all there is).
    let copy = Arc::new(MemDevice::from_vec(dev.durable().snapshot()));
    let c: Arc<dyn BlockDevice> = copy.clone();
    // The superblock names the frozen checkpoint: no log scan is needed
    // to find it.
    let pair = lfs::inspect::read_superblocks(copy.as_ref()).unwrap();
    assert_eq!(pair.current().unwrap().last_cno, cno);
    let report = lfs::fsck::fsck(c.clone()).unwrap();
    assert!(report.is_clean(), "fsck of the copy: {:#?}", report.errors);
    let other = Fs::mount(c, MountOptions::default()).unwrap();
    assert_eq!(other.recovery_report().cno, cno);
    let g = other.lookup(ROOT_INO, b"f").unwrap();
    assert_eq!(other.read(g.ino, 0, 70_000).unwrap(), data);
    other.unmount().unwrap();
    fs.thaw().unwrap();
    fs.unmount().unwrap();
}

#[test]
fn unmounting_a_frozen_filesystem_thaws_it_first() {
    let dev = fresh();
    let fs = mount(&dev);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    fs.freeze().unwrap();
    let (writer, written) = {
        let fs = fs.clone();
        spawn(move || fs.write(f.ino, 0, b"late"))
    };
    thread::sleep(SETTLE);
    assert!(!written.load(Ordering::SeqCst), "a write passed the freeze");
    let (tx, rx) = std::sync::mpsc::channel();
    let unmounter = {
        let fs = fs.clone();
        thread::spawn(move || tx.send(fs.unmount()).unwrap())
    };
    let r = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("unmount of a frozen filesystem hangs");
    r.unwrap();
    unmounter.join().unwrap();
    assert!(!fs.is_frozen());
    assert_eq!(writer.join().unwrap().unwrap(), 4);
}

#[test]
fn a_freeze_of_a_filesystem_with_nothing_new_writes_no_checkpoint() {
    let dev = fresh();
    let fs = mount(&dev);
    let cno = fs.cpstat().0;
    assert_eq!(fs.freeze().unwrap(), cno);
    fs.thaw().unwrap();
    // Thawed, changes pass again without waiting.
    fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap();
    fs.sync().unwrap();
    assert_eq!(fs.cpstat().0, cno + 1);
    fs.unmount().unwrap();
}
