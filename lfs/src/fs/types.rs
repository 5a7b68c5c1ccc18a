//! Types of the engine's public interface.

use std::time::{Duration, SystemTime};

use crate::format::FileType;

/// How to mount.
#[derive(Debug, Clone)]
pub struct MountOptions {
    /// Refuse every change.
    pub read_only: bool,
    /// Write a checkpoint at least this often when something changed.
    pub checkpoint_interval: Duration,
    /// Dirty data above which writers wait for a checkpoint.
    pub dirty_limit_bytes: u64,
    /// How long a change that finds no space waits, in all, for cleaning
    /// passes already running (cleanerd's) before it gets NoSpace; the
    /// engine's own steps toward space are bounded by their progress
    /// (`fs/space.rs`).
    pub space_wait: Duration,
    /// The device's name (its path), for the engine's log lines.
    pub device: String,
    /// Run the space thread, which deletes old history and cleans in the
    /// background when space runs low (`fs/space.rs`). Only tests that
    /// choose every checkpoint turn it off (they also stop the timer);
    /// changes that find no space still make room themselves.
    pub background_space: bool,
}

/// Default checkpoint interval.
pub const DEFAULT_CHECKPOINT_INTERVAL: Duration = Duration::from_secs(5);
/// Default dirty-data limit: writers wait above it. Small enough that the
/// checkpoint a writer may wait for is short (32 MiB is about a tenth of a
/// second of a disk's sequential bandwidth), large enough to batch.
pub const DEFAULT_DIRTY_LIMIT: u64 = 32 << 20;
/// Default longest wait of a change out of space for cleaning passes
/// already running: a pass takes well under a second; this only bounds
/// pathological cases (a pass stuck on a slow device).
pub const DEFAULT_SPACE_WAIT: Duration = Duration::from_secs(30);

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            read_only: false,
            checkpoint_interval: DEFAULT_CHECKPOINT_INTERVAL,
            dirty_limit_bytes: DEFAULT_DIRTY_LIMIT,
            space_wait: DEFAULT_SPACE_WAIT,
            device: "the device".into(),
            background_space: true,
        }
    }
}

/// Attributes of an inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    /// Inode number.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Allocated space in 512-byte units.
    pub blocks: u64,
    /// Access time.
    pub atime: SystemTime,
    /// Modification time.
    pub mtime: SystemTime,
    /// Change time.
    pub ctime: SystemTime,
    /// Creation time.
    pub crtime: SystemTime,
    /// st_mode, type bits included.
    pub mode: u32,
    /// Hard links.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Device number.
    pub rdev: u32,
    /// Generation.
    pub generation: u32,
}

/// How to set a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeSet {
    /// The current time.
    Now,
    /// A given time.
    At(SystemTime),
}

/// Attribute changes; `None` leaves a field alone.
#[derive(Debug, Clone, Default)]
pub struct SetAttr {
    /// Permission bits (07777).
    pub mode: Option<u32>,
    /// Owner.
    pub uid: Option<u32>,
    /// Group.
    pub gid: Option<u32>,
    /// Size (truncate or extend).
    pub size: Option<u64>,
    /// Access time.
    pub atime: Option<TimeSet>,
    /// Modification time.
    pub mtime: Option<TimeSet>,
    /// Change time.
    pub ctime: Option<SystemTime>,
}

/// rename(2) flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RenameFlags {
    /// RENAME_NOREPLACE.
    pub noreplace: bool,
    /// RENAME_EXCHANGE.
    pub exchange: bool,
}

/// One directory entry returned by readdir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirItem {
    /// Inode.
    pub ino: u64,
    /// Pass back to continue after this entry.
    pub cookie: u64,
    /// Type.
    pub kind: FileType,
    /// Name.
    pub name: Vec<u8>,
}

/// statfs(2) figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatFs {
    /// Total blocks.
    pub blocks: u64,
    /// Free blocks.
    pub bfree: u64,
    /// Free blocks for ordinary writes (reserve excluded).
    pub bavail: u64,
    /// Inodes (an upper bound).
    pub files: u64,
    /// Free inodes.
    pub ffree: u64,
    /// Block size.
    pub bsize: u32,
    /// Longest name.
    pub namelen: u32,
}

/// fallocate(2) mode bits.
pub const FALLOC_FL_KEEP_SIZE: i32 = 1;
/// fallocate(2): deallocate the range (with KEEP_SIZE).
pub const FALLOC_FL_PUNCH_HOLE: i32 = 2;
/// setxattr(2): fail if the attribute exists.
pub const XATTR_CREATE: i32 = 1;
/// setxattr(2): fail if the attribute does not exist.
pub const XATTR_REPLACE: i32 = 2;
