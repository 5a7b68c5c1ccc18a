//! The engine's limits, called directly (issue 8 item 5): names no path
//! can carry (with `/` or NUL), "." and "..", directories thousands of
//! levels deep, the largest file size, and statfs against `df` at the
//! edge of full. The kernel answers most of these itself before fsd
//! sees the call (tests/tests/limits.rs checks what reaches a mount);
//! here each gets, from the engine, the error Linux gives, a refused
//! call changes nothing, and the image stays consistent.
//!
//! Name length limits are in model.rs (`name_and_target_length_limits`).

use std::sync::Arc;

use lfs::blockdev::{BlockDevice, MemDevice};
use lfs::format::ROOT_INO;
use lfs::fs::{Fs, MountOptions, RenameFlags, SetAttr, CHECKPOINT_MARGIN_BLOCKS};
use lfs::mkfs::{format, MkfsOptions};
use lfs::Error;

/// The block size of every image here but the 1 KiB one.
const BS: u64 = 4096;

fn fresh(len: u64, block_size: u32, blocks_per_segment: u32) -> Arc<MemDevice> {
    let dev = Arc::new(MemDevice::new(len));
    let mut o = MkfsOptions::new([3; 16], 0x1157, 1_700_000_000, 0);
    o.block_size = block_size;
    o.blocks_per_segment = blocks_per_segment;
    o.discard = false;
    format(dev.as_ref(), &o).unwrap();
    dev
}

fn mount(dev: &Arc<MemDevice>) -> Arc<Fs> {
    let d: Arc<dyn BlockDevice> = dev.clone();
    Fs::mount(d, MountOptions::default()).unwrap()
}

/// Unmounts, asserts fsck finds the image consistent, and mounts again.
#[track_caller]
fn remount_checked(dev: &Arc<MemDevice>, fs: Arc<Fs>) -> Arc<Fs> {
    fs.unmount().unwrap();
    drop(fs);
    let d: Arc<dyn BlockDevice> = dev.clone();
    let r = lfs::fsck::fsck(d).unwrap();
    assert!(r.is_clean(), "fsck: {:#?}", r.errors);
    mount(dev)
}

fn names(fs: &Fs, dir: u64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut cookie = 0;
    loop {
        let batch = fs.readdir(dir, cookie).unwrap();
        let Some(last) = batch.last() else { break };
        cookie = last.cookie;
        out.extend(batch.into_iter().map(|e| e.name));
    }
    out
}

/// The error kinds these tests expect, by name (for the failure message).
fn kind(r: &lfs::Result<()>) -> &'static str {
    match r {
        Ok(()) => "Ok",
        Err(Error::InvalidArgument(_)) => "InvalidArgument",
        Err(Error::Exists) => "Exists",
        Err(Error::NotFound) => "NotFound",
        Err(Error::IsDir) => "IsDir",
        Err(Error::NotEmpty) => "NotEmpty",
        Err(Error::Busy(_)) => "Busy",
        Err(Error::NameTooLong) => "NameTooLong",
        Err(Error::FileTooLarge) => "FileTooLarge",
        Err(_) => "another error",
    }
}

/// Names with `/` or NUL, and the empty name, are refused by every call
/// that makes a name (InvalidArgument) and found by none; "." and ".."
/// get what Linux's VFS answers for them: creating or linking either is
/// EEXIST, unlinking EISDIR, rmdir EINVAL and ENOTEMPTY, renaming from
/// or onto them EBUSY (EEXIST onto them with RENAME_NOREPLACE). Nothing
/// refused leaves a trace: the listing, the free space and, after a
/// remount, fsck say so.
#[test]
fn names_no_path_can_carry_and_dot_names_get_linux_errors() {
    let dev = fresh(16 << 20, BS as u32, 32);
    let fs = mount(&dev);
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap();
    fs.mkdir(d.ino, b"sub", 0o755, 0, 0).unwrap();
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap();
    fs.sync().unwrap();
    let before = (
        names(&fs, ROOT_INO),
        names(&fs, d.ino),
        fs.statfs().unwrap(),
    );
    let plain = RenameFlags::default();
    let noreplace = RenameFlags {
        noreplace: true,
        exchange: false,
    };
    let exchange = RenameFlags {
        noreplace: false,
        exchange: true,
    };
    const FIFO: u32 = 0o010644;

    let mut wrong = Vec::new();
    let mut checked = 0;
    let mut check = |what: String, want: &str, got: lfs::Result<()>| {
        checked += 1;
        if kind(&got) != want {
            wrong.push(format!("{what}: expected {want}, got {got:?}"));
        }
    };
    let bad: [&[u8]; 6] = [b"a/b", b"/", b"x/", b"a\0b", b"\0", b""];
    for name in bad {
        let n = String::from_utf8_lossy(name).into_owned();
        for (call, r) in [
            ("create", fs.create(d.ino, name, 0o644, 0, 0, 0).map(drop)),
            ("mknod", fs.create(d.ino, name, FIFO, 0, 0, 0).map(drop)),
            ("mkdir", fs.mkdir(d.ino, name, 0o755, 0, 0).map(drop)),
            ("symlink", fs.symlink(d.ino, name, b"t", 0, 0).map(drop)),
            ("link", fs.link(f.ino, d.ino, name).map(drop)),
            ("rename onto", fs.rename(ROOT_INO, b"f", d.ino, name, plain)),
        ] {
            check(format!("{call} {n:?}"), "InvalidArgument", r);
        }
        for (call, r) in [
            ("lookup", fs.lookup(d.ino, name).map(drop)),
            ("unlink", fs.unlink(d.ino, name)),
            ("rmdir", fs.rmdir(d.ino, name)),
            ("rename from", fs.rename(d.ino, name, ROOT_INO, b"g", plain)),
        ] {
            check(format!("{call} {n:?}"), "NotFound", r);
        }
    }
    for name in [&b"."[..], b".."] {
        let n = String::from_utf8_lossy(name).into_owned();
        for (call, want, r) in [
            (
                "create",
                "Exists",
                fs.create(d.ino, name, 0o644, 0, 0, 0).map(drop),
            ),
            (
                "mknod",
                "Exists",
                fs.create(d.ino, name, FIFO, 0, 0, 0).map(drop),
            ),
            (
                "mkdir",
                "Exists",
                fs.mkdir(d.ino, name, 0o755, 0, 0).map(drop),
            ),
            (
                "symlink",
                "Exists",
                fs.symlink(d.ino, name, b"t", 0, 0).map(drop),
            ),
            ("link", "Exists", fs.link(f.ino, d.ino, name).map(drop)),
            ("unlink", "IsDir", fs.unlink(d.ino, name)),
            (
                "rmdir",
                if name == b"." {
                    "InvalidArgument"
                } else {
                    "NotEmpty"
                },
                fs.rmdir(d.ino, name),
            ),
            (
                "rename from",
                "Busy",
                fs.rename(d.ino, name, ROOT_INO, b"g", plain),
            ),
            (
                "rename onto",
                "Busy",
                fs.rename(ROOT_INO, b"f", d.ino, name, plain),
            ),
            (
                "rename of a directory onto",
                "Busy",
                fs.rename(d.ino, b"sub", d.ino, name, plain),
            ),
            (
                "RENAME_NOREPLACE onto",
                "Exists",
                fs.rename(ROOT_INO, b"f", d.ino, name, noreplace),
            ),
            (
                "RENAME_EXCHANGE with",
                "Busy",
                fs.rename(ROOT_INO, b"f", d.ino, name, exchange),
            ),
            ("lookup", "Ok", fs.lookup(d.ino, name).map(drop)),
        ] {
            check(format!("{call} {n:?}"), want, r);
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let calls = checked;

    let after = (
        names(&fs, ROOT_INO),
        names(&fs, d.ino),
        fs.statfs().unwrap(),
    );
    assert_eq!(before, after, "refused calls changed the filesystem");
    let fs = remount_checked(&dev, fs);
    assert_eq!(names(&fs, ROOT_INO), before.0);
    assert_eq!(names(&fs, d.ino), before.1);
    fs.unmount().unwrap();
    println!(
        "limits (engine), names: {calls} calls with names holding / or NUL, empty, . and .., \
         each the error Linux gives, none leaving a trace"
    );
}

/// Nests `depth` directories named `d` under `top`; returns their inodes,
/// outermost first.
fn nest(fs: &Fs, top: u64, depth: usize) -> Vec<u64> {
    let mut inos = Vec::with_capacity(depth);
    let mut cur = top;
    for _ in 0..depth {
        cur = fs.mkdir(cur, b"d", 0o755, 0, 0).unwrap().ino;
        inos.push(cur);
    }
    inos
}

/// Levels of the deep tree: more than the 4096 the rename check used to
/// follow.
const DEEP: usize = 5000;
/// The stack the deep tree's diff runs on: far less than a test thread's
/// 2 MiB, so a walk that recursed per level would overflow it at any
/// optimisation level.
const DIFF_STACK: usize = 256 << 10;

/// A directory 5000 levels deep: moving its top into its bottom is
/// refused (the check stopped after 4096 parents and let the rename make
/// a cycle no path reaches), as is exchanging them; `diff` between
/// checkpoints lists every level without recursing (it overflowed fsd's
/// control thread and aborted the daemon); the tree survives a remount
/// and fsck finds it consistent.
#[test]
fn a_tree_thousands_of_directories_deep() {
    let dev = fresh(64 << 20, BS as u32, 256);
    let fs = mount(&dev);
    let before = fs.make_checkpoint(true).unwrap();
    let top = fs.mkdir(ROOT_INO, b"top", 0o755, 0, 0).unwrap().ino;
    let inos = nest(&fs, top, DEEP);
    let bottom = *inos.last().unwrap();
    let leaf = fs.create(bottom, b"leaf", 0o644, 0, 0, 0).unwrap();
    fs.write(leaf.ino, 0, b"at the bottom").unwrap();

    let exchange = RenameFlags {
        noreplace: false,
        exchange: true,
    };
    let r = fs.rename(ROOT_INO, b"top", bottom, b"top", RenameFlags::default());
    assert!(
        matches!(r, Err(Error::InvalidArgument(_))),
        "moving a directory {DEEP} levels into itself: {r:?}"
    );
    fs.mkdir(bottom, b"side", 0o755, 0, 0).unwrap();
    let r = fs.rename(ROOT_INO, b"top", bottom, b"side", exchange);
    assert!(
        matches!(r, Err(Error::InvalidArgument(_))),
        "exchanging a directory with one {DEEP} levels below it: {r:?}"
    );
    fs.rmdir(bottom, b"side").unwrap();
    assert_eq!(fs.lookup(ROOT_INO, b"top").unwrap().ino, top);
    assert!(matches!(fs.lookup(bottom, b"side"), Err(Error::NotFound)));
    fs.sync().unwrap();

    let diff = {
        let fs = Arc::clone(&fs);
        std::thread::Builder::new()
            .stack_size(DIFF_STACK)
            .spawn(move || fs.diff_checkpoints(before, 0, b"/"))
            .unwrap()
            .join()
            .expect("the diff thread panicked")
            .unwrap()
    };
    // The top, its DEEP levels and the leaf are created; the root is
    // modified.
    assert_eq!(diff.len(), DEEP + 3, "first entries: {:?}", &diff[..4]);
    let created = diff
        .iter()
        .filter(|(c, _)| *c == lfs::fs::diff::Change::Created)
        .count();
    assert_eq!(created, DEEP + 2);
    let deepest = diff.iter().map(|(_, p)| p.len()).max().unwrap();
    assert_eq!(deepest, "/top".len() + 2 * DEEP + "/leaf".len());

    let fs = remount_checked(&dev, fs);
    let mut cur = fs.lookup(ROOT_INO, b"top").unwrap().ino;
    for want in &inos {
        let a = fs.lookup(cur, b"d").unwrap();
        assert_eq!(a.ino, *want);
        assert_eq!(fs.lookup(a.ino, b"..").unwrap().ino, cur);
        cur = a.ino;
    }
    let leaf = fs.lookup(cur, b"leaf").unwrap();
    assert_eq!(fs.read(leaf.ino, 0, 100).unwrap(), b"at the bottom");
    fs.unmount().unwrap();
    println!(
        "limits (engine), deep tree: {DEEP} levels; moving the top into the bottom refused, \
         the diff of every level on a {} KiB stack",
        DIFF_STACK >> 10
    );
}

/// The largest file: `(12 + P + P² + P³)` blocks, `P = (block size − 16)
/// / 8` pointers per indirect block (lfs(5), LIMITS).
fn max_file_bytes(bs: u64) -> u64 {
    let p = (bs - 16) / 8;
    (12 + p + p * p + p * p * p) * bs
}

/// At the largest file size, for 4 KiB and 1 KiB blocks: the last byte
/// can be written and read; a write at or past the limit is
/// FileTooLarge (EFBIG) and writes nothing; one that crosses it writes
/// what fits and says so (a short count, as POSIX asks; it was refused
/// whole); truncate to the limit works and past it is FileTooLarge;
/// fallocate past it is FileTooLarge (it set the size past the limit).
/// Everything survives a remount with fsck clean.
#[test]
fn the_largest_file_size_and_beyond() {
    for (bs, bps) in [(BS, 256), (1024, 1024)] {
        let dev = fresh(16 << 20, bs as u32, bps);
        let fs = mount(&dev);
        let max = max_file_bytes(bs);
        let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap().ino;
        let at = |what: &str| format!("{what} ({bs}-byte blocks, largest file {max} bytes)");

        assert_eq!(
            fs.write(f, max - 1, b"z").unwrap(),
            1,
            "{}",
            at("last byte")
        );
        assert_eq!(fs.getattr(f).unwrap().size, max);
        for off in [max, max + 1, max + bs, 1 << 40, 1 << 62, u64::MAX - 1] {
            let r = fs.write(f, off, b"x").map(drop);
            assert_eq!(
                kind(&r),
                "FileTooLarge",
                "{}: {r:?}",
                at(&format!("write at {off}"))
            );
        }
        let g = fs.create(ROOT_INO, b"g", 0o644, 0, 0, 0).unwrap().ino;
        let n = fs.write(g, max - 3, b"abcdef").unwrap();
        assert_eq!(n, 3, "{}", at("a write across the limit"));
        assert_eq!(fs.getattr(g).unwrap().size, max);
        assert_eq!(fs.read(g, max - 3, 10).unwrap(), b"abc");

        let h = fs.create(ROOT_INO, b"h", 0o644, 0, 0, 0).unwrap().ino;
        let size = |s| SetAttr {
            size: Some(s),
            ..SetAttr::default()
        };
        assert_eq!(fs.setattr(h, &size(max)).unwrap().size, max);
        let r = fs.setattr(h, &size(max + 1)).map(drop);
        assert_eq!(kind(&r), "FileTooLarge", "{}: {r:?}", at("truncate past"));
        let e = fs.create(ROOT_INO, b"e", 0o644, 0, 0, 0).unwrap().ino;
        for (off, len) in [(max - bs, 2 * bs), (1 << 50, bs)] {
            for mode in [0, lfs::fs::FALLOC_FL_KEEP_SIZE] {
                let r = fs.fallocate(e, off, len, mode);
                assert_eq!(
                    kind(&r),
                    "FileTooLarge",
                    "{}: {r:?}",
                    at(&format!("fallocate mode {mode} of {len} at {off}"))
                );
            }
        }
        assert_eq!(fs.getattr(e).unwrap().size, 0);
        fs.fallocate(e, max - bs, bs, 0).unwrap();
        assert_eq!(fs.getattr(e).unwrap().size, max);

        let fs = remount_checked(&dev, fs);
        assert_eq!(fs.read(f, max - 1, 10).unwrap(), b"z");
        assert_eq!(fs.read(f, 1 << 30, 4).unwrap(), [0; 4]);
        assert_eq!(fs.read(g, max - 4, 10).unwrap(), b"\0abc");
        assert_eq!(fs.getattr(h).unwrap().size, max);
        fs.unmount().unwrap();
        println!(
            "limits (engine), file size, {bs}-byte blocks: the byte before {max} written, \
             FileTooLarge at and past it, a write across it short, truncate and fallocate \
             past it refused"
        );
    }
}

/// Asserts that statfs counts the space `df` shows, with nothing
/// waiting to be written: its total is df's size, its free blocks df's
/// free less the checkpoint margin and any blocks booked for a due DAT
/// merge, its available blocks that less the cleaning reserve. Returns (free, reserved) as statfs and df see them.
#[track_caller]
fn assert_statfs_is_df(fs: &Fs, when: &str) -> (u64, u64) {
    fs.sync().unwrap();
    let (df, st) = (fs.df(), fs.statfs().unwrap());
    let at = format!("{when}: {df:?} {st:?}");
    assert_eq!(st.blocks, df.total_blocks, "{at}");
    assert_eq!(st.bsize, df.block_size, "{at}");
    let bfree = df
        .free_blocks
        .saturating_sub(CHECKPOINT_MARGIN_BLOCKS + df.booked_blocks);
    assert_eq!(st.bfree, bfree, "{at}");
    assert_eq!(st.bavail, bfree.saturating_sub(df.reserved_blocks), "{at}");
    (st.bfree, df.reserved_blocks)
}

/// statfs against `df` from empty to full and on: the checkpoints of
/// unlinks on a full filesystem (with no cleaner, nothing is given back)
/// eat into the cleaning reserve, and statfs's free blocks then fall
/// below it (they were reported as the whole reserve, blocks in use
/// included).
#[test]
fn statfs_counts_the_space_df_shows_down_to_full() {
    let dev = fresh(16 << 20, BS as u32, 32);
    // No space thread: df and statfs are compared with nothing changing
    // in between (a change out of space still makes room itself).
    let d: Arc<dyn BlockDevice> = dev.clone();
    let opts = MountOptions {
        background_space: false,
        ..MountOptions::default()
    };
    let fs = Fs::mount(d, opts).unwrap();
    let small: Vec<Vec<u8>> = (0..32).map(|i| format!("s{i}").into_bytes()).collect();
    for name in &small {
        let s = fs.create(ROOT_INO, name, 0o644, 0, 0, 0).unwrap().ino;
        fs.write(s, 0, &[1u8; BS as usize]).unwrap();
    }
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0, 0).unwrap().ino;
    let mut off = 0u64;
    let mut chunk = 1u64 << 20;
    loop {
        assert_statfs_is_df(&fs, &format!("after {off} bytes"));
        match fs.write(f, off, &vec![9u8; chunk as usize]) {
            Ok(n) => off += u64::from(n),
            Err(Error::NoSpace) if chunk > BS => chunk /= 2,
            Err(Error::NoSpace) => break,
            Err(e) => panic!("write at {off}: {e}"),
        }
    }
    assert_eq!(fs.statfs().unwrap().bavail, 0, "full");
    let mut below = 0;
    for name in &small {
        match fs.unlink(ROOT_INO, name) {
            Ok(()) | Err(Error::NoSpace) => {}
            Err(e) => panic!("unlink: {e}"),
        }
        let (bfree, reserved) = assert_statfs_is_df(&fs, "unlinking on a full filesystem");
        below += usize::from(bfree < reserved);
    }
    assert!(below > 0, "the free blocks never fell below the reserve");
    fs.unmount().unwrap();
    println!(
        "limits (engine), statfs: equal to df at every step from empty to full and on \
         ({below} steps below the reserve)"
    );
}
