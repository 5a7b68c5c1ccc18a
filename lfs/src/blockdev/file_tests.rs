//! Tests of [`FileDevice`](super::FileDevice), kept beside `file.rs` so
//! that file stays readable.

use std::io::{self, IoSlice};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::*;

const MIB: u64 = 1 << 20;

/// A fresh image of `len` zero bytes in a temporary directory under `base`.
fn image_in(base: &Path, len: u64) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir_in(base).unwrap();
    let path = dir.path().join("dev.img");
    let f = File::create(&path).unwrap();
    f.set_len(len).unwrap();
    (dir, path)
}

fn image(len: u64) -> (tempfile::TempDir, PathBuf) {
    image_in(&std::env::temp_dir(), len)
}

fn ro() -> OpenOptions {
    OpenOptions {
        read_only: true,
        ..OpenOptions::default()
    }
}

/// Read-only without a lock, as fsctl inspects a device in use.
fn inspect() -> OpenOptions {
    OpenOptions {
        read_only: true,
        exclusive: false,
        ..OpenOptions::default()
    }
}

fn direct() -> OpenOptions {
    OpenOptions {
        direct: true,
        ..OpenOptions::default()
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn default_options_are_rw_buffered_exclusive() {
    assert_eq!(
        OpenOptions::default(),
        OpenOptions {
            read_only: false,
            direct: false,
            exclusive: true
        }
    );
}

#[test]
fn size_of_image_file_comes_from_metadata() {
    let (_dir, path) = image(3 * MIB + 512);
    let dev = FileDevice::open(&path, OpenOptions::default()).unwrap();
    assert_eq!(dev.len(), 3 * MIB + 512);
    assert!(!dev.is_block_device());
    assert_eq!(dev.path(), path);
    assert_eq!(dev.options(), OpenOptions::default());
    assert!(format!("{dev:?}").contains("dev.img"));
}

#[test]
fn vectored_write_reads_back_and_reaches_file() {
    let (_dir, path) = image(MIB);
    let dev = FileDevice::open(&path, OpenOptions::default()).unwrap();
    let a = pattern(1000, 1);
    let b = pattern(24, 2);
    let c = pattern(3000, 3);
    let bufs = [
        IoSlice::new(&a),
        IoSlice::new(&[]),
        IoSlice::new(&b),
        IoSlice::new(&c),
    ];
    dev.write_at(&bufs, 12345).unwrap();
    let expected = [a, b, c].concat();
    let mut got = vec![0u8; expected.len()];
    dev.read_at(&mut got, 12345).unwrap();
    assert_eq!(got, expected);
    dev.flush().unwrap();
    let on_disk = std::fs::read(&path).unwrap();
    assert_eq!(on_disk.len() as u64, MIB, "writes never change the size");
    assert_eq!(&on_disk[12345..12345 + expected.len()], &expected[..]);
}

#[test]
fn more_slices_than_iov_max_are_written() {
    let (_dir, path) = image(MIB);
    let dev = FileDevice::open(&path, OpenOptions::default()).unwrap();
    let pieces: Vec<Vec<u8>> = (0..IOV_MAX + 300).map(|i| vec![i as u8; 3]).collect();
    let bufs: Vec<IoSlice<'_>> = pieces.iter().map(|p| IoSlice::new(p)).collect();
    dev.write_at(&bufs, 7).unwrap();
    let mut got = vec![0u8; pieces.len() * 3];
    dev.read_at(&mut got, 7).unwrap();
    assert_eq!(got, pieces.concat());
}

#[test]
fn access_past_the_end_is_invalid_input() {
    let (_dir, path) = image(8192);
    let dev = FileDevice::open(&path, OpenOptions::default()).unwrap();
    let mut buf = [0u8; 16];
    let err = dev.read_at(&mut buf, 8190).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("dev.img"), "{err}");
    let err = dev.write_all_at(&buf, 8180).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    let err = dev.write_all_at(&buf, u64::MAX - 1).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    let err = dev.discard(4096, 8192).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 8192);
    dev.write_all_at(&buf, 8176).unwrap();
}

#[test]
fn file_truncated_behind_our_back_reads_unexpected_eof() {
    let (_dir, path) = image(8192);
    let dev = FileDevice::open(&path, ro()).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(4096)
        .unwrap();
    let mut buf = [0u8; 512];
    let err = dev.read_at(&mut buf, 7680).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    assert!(err.to_string().contains("dev.img"), "{err}");
}

#[test]
fn read_only_device_reads_but_refuses_writes() {
    let (_dir, path) = image(8192);
    std::fs::write(&path, pattern(8192, 9)).unwrap();
    let dev = FileDevice::open(&path, ro()).unwrap();
    let mut buf = [0u8; 100];
    dev.read_at(&mut buf, 50).unwrap();
    assert_eq!(&buf[..], &pattern(8192, 9)[50..150]);
    let err = dev.write_all_at(&buf, 0).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
    assert!(err.to_string().contains("read-only"), "{err}");
    let err = dev.discard(0, 4096).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
    dev.flush().unwrap();
}

#[test]
fn open_errors_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.img");
    let err = FileDevice::open(&missing, OpenOptions::default()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
    assert!(err.to_string().contains("missing.img"), "{err}");
    let err = FileDevice::open(dir.path(), OpenOptions::default()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("neither"), "{err}");
}

#[test]
fn flush_succeeds_and_data_survives_reopen() {
    let (_dir, path) = image(MIB);
    {
        let dev = FileDevice::open(&path, OpenOptions::default()).unwrap();
        dev.write_all_at(b"durable", 4096).unwrap();
        dev.flush().unwrap();
    }
    let dev = FileDevice::open(&path, ro()).unwrap();
    let mut buf = [0u8; 7];
    dev.read_at(&mut buf, 4096).unwrap();
    assert_eq!(&buf, b"durable");
}

#[test]
fn discard_punches_a_hole_of_zeros() {
    let (_dir, path) = image(MIB);
    let dev = FileDevice::open(&path, OpenOptions::default()).unwrap();
    let data = pattern(256 * 1024, 5);
    dev.write_all_at(&data, 0).unwrap();
    dev.flush().unwrap();
    let blocks_before = std::fs::metadata(&path).unwrap().blocks();
    dev.discard(64 * 1024, 128 * 1024).unwrap();
    let mut got = vec![0u8; data.len()];
    dev.read_at(&mut got, 0).unwrap();
    assert_eq!(&got[..64 * 1024], &data[..64 * 1024]);
    assert!(got[64 * 1024..192 * 1024].iter().all(|&b| b == 0));
    assert_eq!(&got[192 * 1024..], &data[192 * 1024..]);
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.len(), MIB, "KEEP_SIZE: the file keeps its length");
    assert!(meta.blocks() < blocks_before, "space was released");
    dev.discard(0, 0).unwrap();
}

#[test]
fn second_read_write_open_is_refused_while_locked() {
    let (_dir, path) = image(MIB);
    let first = FileDevice::open(&path, OpenOptions::default()).unwrap();
    let err = FileDevice::open(&path, OpenOptions::default()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ResourceBusy);
    assert_eq!(
        err.to_string(),
        format!("{} is in use by another process (locked)", path.display())
    );
    // An exclusive read-only open waits for no writer: it is refused.
    let err = FileDevice::open(&path, ro()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ResourceBusy);
    assert_eq!(
        err.to_string(),
        format!(
            "{} is open read-write by another process (locked)",
            path.display()
        )
    );
    // Read-only opens that are not exclusive take no lock and coexist
    // with the writer.
    let reader = FileDevice::open(&path, inspect()).unwrap();
    first.write_all_at(b"seen", 0).unwrap();
    let mut buf = [0u8; 4];
    reader.read_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"seen");
    // Opting out of exclusivity skips the lock.
    let shared = OpenOptions {
        exclusive: false,
        ..OpenOptions::default()
    };
    drop(FileDevice::open(&path, shared).unwrap());
    // Closing the writer releases the lock.
    drop(first);
    drop(FileDevice::open(&path, OpenOptions::default()).unwrap());
}

#[test]
fn inspecting_open_does_not_block_a_writer() {
    let (_dir, path) = image(MIB);
    let _reader = FileDevice::open(&path, inspect()).unwrap();
    let _writer = FileDevice::open(&path, OpenOptions::default()).unwrap();
}

#[test]
fn exclusive_readers_share_the_device_and_keep_writers_out() {
    let (_dir, path) = image(MIB);
    let a = FileDevice::open(&path, ro()).unwrap();
    let b = FileDevice::open(&path, ro()).unwrap();
    let err = FileDevice::open(&path, OpenOptions::default()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ResourceBusy, "{err}");
    drop((a, b));
    drop(FileDevice::open(&path, OpenOptions::default()).unwrap());
}

#[test]
fn set_len_resizes_an_image_opened_read_write() {
    let (_dir, path) = image(MIB);
    let mut dev = FileDevice::open(&path, OpenOptions::default()).unwrap();
    dev.set_len(2 * MIB).unwrap();
    assert_eq!(dev.len(), 2 * MIB);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 2 * MIB);
    let mut reader = FileDevice::open(&path, inspect()).unwrap();
    let err = reader.set_len(MIB).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
}

/// Exercises an `O_DIRECT` device, or checks the refusal is reported as
/// "not supported" when the filesystem under `base` refuses `O_DIRECT`.
/// Returns whether the device opened.
fn check_direct_io_in(base: &Path) -> bool {
    let (_dir, path) = image_in(base, 4 * MIB);
    let dev = match FileDevice::open(&path, direct()) {
        Ok(dev) => dev,
        Err(err) => {
            assert_eq!(err.kind(), io::ErrorKind::Unsupported, "{err}");
            let msg = err.to_string();
            assert!(msg.contains("O_DIRECT is not supported"), "{msg}");
            assert!(msg.contains("dev.img"), "{msg}");
            return false;
        }
    };
    assert!(dev.options().direct);

    // Aligned memory goes straight to the kernel.
    let mut aligned = AlignedBuf::zeroed(2 * DIRECT_IO_ALIGN);
    aligned.copy_from_slice(&pattern(2 * DIRECT_IO_ALIGN, 1));
    dev.write_all_at(&aligned, 0).unwrap();
    let mut back = AlignedBuf::zeroed(2 * DIRECT_IO_ALIGN);
    dev.read_at(&mut back, 0).unwrap();
    assert_eq!(&back[..], &aligned[..]);

    // Unaligned memory, several slices and more than one bounce buffer.
    let total = DIRECT_BOUNCE_MAX + 3 * DIRECT_IO_ALIGN;
    let data = pattern(total + 1, 7);
    let data = &data[1..]; // almost surely misaligned
    let (x, rest) = data.split_at(100);
    let (y, z) = rest.split_at(DIRECT_BOUNCE_MAX);
    let offset = 4 * DIRECT_IO_ALIGN as u64;
    dev.write_at(&[IoSlice::new(x), IoSlice::new(y), IoSlice::new(z)], offset)
        .unwrap();
    let mut got = vec![0u8; total + 1];
    dev.read_at(&mut got[1..], offset).unwrap();
    assert_eq!(&got[1..], data);
    dev.flush().unwrap();
    // What went around the page cache is what a buffered reader sees.
    let on_disk = std::fs::read(&path).unwrap();
    assert_eq!(&on_disk[..2 * DIRECT_IO_ALIGN], &aligned[..]);
    assert_eq!(&on_disk[offset as usize..][..total], data);
    dev.discard(0, DIRECT_IO_ALIGN as u64).unwrap();
    true
}

#[test]
fn direct_io_on_a_disk_filesystem() {
    // /var/tmp is on disk on every supported system (not tmpfs).
    assert!(
        check_direct_io_in(Path::new("/var/tmp")),
        "/var/tmp refused O_DIRECT"
    );
}

#[test]
fn direct_io_on_tmpfs_works_or_says_unsupported() {
    // tmpfs gained O_DIRECT in Linux 6.6; either outcome must be clean.
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        check_direct_io_in(shm);
    }
    check_direct_io_in(&std::env::temp_dir());
}

#[test]
fn unaligned_direct_io_is_rejected_with_the_alignment() {
    let (_dir, path) = image_in(Path::new("/var/tmp"), MIB);
    let dev = FileDevice::open(&path, direct()).unwrap();
    let mut buf = AlignedBuf::zeroed(2 * DIRECT_IO_ALIGN);
    let cases: [(u64, usize); 3] = [(512, DIRECT_IO_ALIGN), (0, 100), (4096, 4097)];
    for (offset, len) in cases {
        let err = dev.read_at(&mut buf[..len], offset).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("aligned to 4096"), "{err}");
        let err = dev.write_all_at(&buf[..len], offset).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("aligned to 4096"), "{err}");
    }
    // Out of range wins over alignment: it is the more basic mistake.
    let err = dev.read_at(&mut buf[..100], MIB).unwrap_err();
    assert!(err.to_string().contains("outside the device"), "{err}");
}

#[test]
fn gather_copies_across_slice_boundaries() {
    let bufs = [
        IoSlice::new(b"abc"),
        IoSlice::new(b""),
        IoSlice::new(b"defgh"),
        IoSlice::new(b"i"),
    ];
    let mut g = Gather::new(&bufs);
    let mut out = [0u8; 4];
    g.fill(&mut out);
    assert_eq!(&out, b"abcd");
    g.fill(&mut out);
    assert_eq!(&out, b"efgh");
    let mut last = [0u8; 1];
    g.fill(&mut last);
    assert_eq!(&last, b"i");
}

/// A loop device over an image, detached on drop even if the test fails.
#[test]
fn loop_block_device_size_io_discard_and_exclusivity() {
    use lfs_e2e::LoopDevice;
    let len = 8 * MIB;
    let (_dir, img) = image_in(Path::new("/var/tmp"), len);
    let lo = LoopDevice::attach(&img);

    let dev = FileDevice::open(&lo.node, OpenOptions::default()).unwrap();
    assert!(dev.is_block_device());
    assert_eq!(dev.len(), len, "BLKGETSIZE64");
    let data = pattern(64 * 1024, 4);
    dev.write_at(
        &[IoSlice::new(&data[..1000]), IoSlice::new(&data[1000..])],
        0,
    )
    .unwrap();
    dev.flush().unwrap();
    let mut got = vec![0u8; data.len()];
    dev.read_at(&mut got, 0).unwrap();
    assert_eq!(got, data);
    dev.discard(0, 4096).unwrap();
    let err = dev.write_all_at(&data, len - 10).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);

    // A second read-write opener is refused: O_EXCL claims the device
    // before the flock is even tried.
    let err = FileDevice::open(&lo.node, OpenOptions::default()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ResourceBusy, "{err}");
    let msg = err.to_string();
    assert!(msg.contains("in use"), "{msg}");
    assert!(msg.contains(&*lo.node.to_string_lossy()), "{msg}");

    // Inspecting read-only opens are allowed alongside.
    let reader = FileDevice::open(&lo.node, inspect()).unwrap();
    assert_eq!(reader.len(), len);
    let mut head = vec![0u8; 4096];
    reader.read_at(&mut head, 4096).unwrap();
    assert_eq!(&head[..], &data[4096..8192]);
    drop(reader);
    drop(dev);

    // Released on close; O_DIRECT works on a block device too.
    let dev = FileDevice::open(&lo.node, direct()).unwrap();
    let mut buf = AlignedBuf::zeroed(DIRECT_IO_ALIGN);
    dev.read_at(&mut buf, 8192).unwrap();
    assert_eq!(&buf[..], &data[8192..8192 + DIRECT_IO_ALIGN]);
}
