//! The input of the `ops_crash` fuzz target (`ops.rs` runs it): a
//! [`Plan`] is a geometry, a crash mode, a crash countdown and up to
//! [`MAX_OPS`] operations ([`Op`]) on a fixed set of names ([`At`]).
//!
//! Every byte string decodes to a plan ([`Plan::decode`]; a byte missing
//! from a short input reads as zero), so that libFuzzer's mutations all
//! mean something, and [`Plan::encode`] is its inverse, so that
//! `fuzz/examples/gen_corpus.rs` writes seeds from plans. The operations
//! and their fields are one list (`ops!`), from which the type, the
//! opcodes, the decoder and the encoder are all made.
//!
//! Like `ops.rs`, it depends only on `lfs` and std, and the fuzz crate
//! compiles it with `#[path]`.

use lfs::blockdev::CrashMode;

/// The geometries a plan chooses from: (block size, blocks per segment).
/// 1 KiB blocks put the double indirect tree 138 KiB into a file, inside
/// [`MAX_FILE`]; 16 blocks is the smallest segment mkfs makes.
pub const GEOMETRIES: [(u32, u32); 4] = [(4096, 32), (1024, 16), (1024, 64), (4096, 16)];
/// Most operations a plan runs.
pub const MAX_OPS: usize = 64;
/// No file offset or size goes past this.
pub const MAX_FILE: u64 = 1 << 20;

/// The directories operations happen in: the root, `/a` to `/d` and
/// their subdirectories `/a/a` to `/d/d` (when they exist).
const DIR_NAMES: [&[u8]; 4] = [b"a", b"b", b"c", b"d"];
/// Names in a directory: the four short ones, and long ones so that a
/// directory grows past a block.
const NAMES: usize = 32;
/// Length of the long names.
const LONG_NAME: usize = 200;

/// Where an operation happens: a directory of the fixed set and a name
/// in it, each chosen by a byte (modulo the choices).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At {
    /// Selects the directory: the root, `/x` or `/x/y` for x, y in a to d.
    pub dir: u8,
    /// Selects the name: a to d, or a long one.
    pub name: u8,
}

impl At {
    /// `/name` for a short name index below 4, in the root.
    pub const fn root(name: u8) -> At {
        At { dir: 0, name }
    }

    /// The components of the directory path.
    pub fn dir_path(self) -> Vec<&'static [u8]> {
        let d = usize::from(self.dir) % (1 + 4 + 16);
        match d {
            0 => vec![],
            1..=4 => vec![DIR_NAMES[d - 1]],
            _ => vec![DIR_NAMES[(d - 5) / 4], DIR_NAMES[(d - 5) % 4]],
        }
    }

    /// The name's bytes.
    pub fn name(self) -> Vec<u8> {
        let n = usize::from(self.name) % NAMES;
        match DIR_NAMES.get(n) {
            Some(short) => short.to_vec(),
            None => {
                let mut v = vec![b'l'; LONG_NAME];
                v[..2].copy_from_slice(format!("{n:02}").as_bytes());
                v
            }
        }
    }
}

/// A field of an operation as the input holds it.
trait Field: Sized {
    fn read(r: &mut Reader<'_>) -> Self;
    fn write(&self, out: &mut Vec<u8>);
}

impl Field for u8 {
    fn read(r: &mut Reader<'_>) -> u8 {
        r.u8()
    }
    fn write(&self, out: &mut Vec<u8>) {
        out.push(*self);
    }
}

impl Field for u16 {
    fn read(r: &mut Reader<'_>) -> u16 {
        u16::from_le_bytes([r.u8(), r.u8()])
    }
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl Field for u32 {
    fn read(r: &mut Reader<'_>) -> u32 {
        u32::from_le_bytes([r.u8(), r.u8(), r.u8(), r.u8()])
    }
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

/// One byte; its low bit.
impl Field for bool {
    fn read(r: &mut Reader<'_>) -> bool {
        r.u8() & 1 == 1
    }
    fn write(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
}

/// Two bytes: the directory, then the name.
impl Field for At {
    fn read(r: &mut Reader<'_>) -> At {
        At {
            dir: r.u8(),
            name: r.u8(),
        }
    }
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[self.dir, self.name]);
    }
}

/// Declares [`Op`] and, from the same list, [`OP_NAMES`], [`Op::code`]
/// and the decoder and encoder: an operation is its opcode (its index in
/// the list) followed by its fields in order.
macro_rules! ops {
    ($($(#[$doc:meta])* $name:literal $op:ident $({ $($field:ident: $ty:ty),* })?,)*) => {
        /// One engine operation. Selectors are bytes taken modulo their
        /// choices.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Op {
            $($(#[$doc])* $op $({ $($field: $ty),* })?,)*
        }

        /// Every operation's name: its index here is its opcode.
        pub const OP_NAMES: &[&str] = &[$($name),*];

        impl Op {
            /// The opcode: the index of its name in [`OP_NAMES`].
            pub fn code(&self) -> u8 {
                let mut code = 0;
                $(
                    if matches!(self, Op::$op { .. }) {
                        return code;
                    }
                    code += 1;
                )*
                unreachable!("every operation is listed, {code} of them")
            }

            fn decode(r: &mut Reader<'_>) -> Op {
                let mut code = usize::from(r.u8()) % OP_NAMES.len();
                $(
                    if code == 0 {
                        return Op::$op $({ $($field: <$ty>::read(r)),* })?;
                    }
                    code -= 1;
                )*
                unreachable!("the opcode is taken modulo the operations")
            }

            fn encode(&self, out: &mut Vec<u8>) {
                out.push(self.code());
                match self {
                    $(Op::$op $({ $($field),* })? => {
                        $($($field.write(out);)*)?
                    })*
                }
            }
        }
    };
}

ops! {
    /// create(2) of a regular file (a FIFO for perm 7 mod 8).
    "create" Create { at: At, perm: u8 },
    /// mkdir(2).
    "mkdir" Mkdir { at: At },
    /// symlink(2), to one of four targets (up to 1,000 bytes).
    "symlink" Symlink { at: At, target: u8 },
    /// pwrite(2) of `len` pattern bytes (from `seed`) at `offset` mod
    /// [`MAX_FILE`]: sub-block, unaligned, across blocks, past the end.
    "write" Write { at: At, offset: u32, len: u16, seed: u8 },
    /// truncate(2) to `size` mod [`MAX_FILE`] + 1.
    "truncate" Truncate { at: At, size: u32 },
    /// fallocate(2) PUNCH_HOLE | KEEP_SIZE.
    "punch" Punch { at: At, offset: u32, len: u32 },
    /// rename(2)/renameat2(2): flags 0 none, 1 NOREPLACE, 2 EXCHANGE.
    "rename" Rename { from: At, to: At, flags: u8 },
    /// unlink(2).
    "unlink" Unlink { at: At },
    /// rmdir(2).
    "rmdir" Rmdir { at: At },
    /// link(2) of `from` as `to`.
    "link" Link { from: At, to: At },
    /// setxattr(2) of a `len` × 8 byte value; flags 0, CREATE, REPLACE.
    "setxattr" SetXattr { at: At, name: u8, len: u8, flags: u8 },
    /// removexattr(2).
    "removexattr" RemoveXattr { at: At, name: u8 },
    /// chmod (what 0), chown (1), an explicit mtime (2), mtime now (3).
    "setattr" SetAttr { at: At, what: u8, value: u8 },
    /// open(2) of a regular file, held until [`Op::Close`] or a remount.
    "open" Open { at: At },
    /// pwrite(2) through an open file (which may have been unlinked).
    "write_open" WriteOpen { handle: u8, offset: u32, len: u16, seed: u8 },
    /// close(2) of an open file; the last close of an unlinked one frees
    /// it.
    "close" Close { handle: u8 },
    /// fsync(2) or fdatasync(2) of a name (the root's if it is missing).
    "fsync" Fsync { at: At, datasync: bool },
    /// sync(2).
    "sync" Sync,
    /// `fsctl mkcp [-s]`.
    "make_checkpoint" MakeCheckpoint { snapshot: bool },
    /// Turns the newest snapshot still held back into a plain checkpoint.
    "unsnapshot" Unsnapshot,
    /// Deletes every plain checkpoint but the latest.
    "delete_checkpoints" DeleteCheckpoints,
    /// A cleaning pass over the 1 to 3 emptiest segments in use
    /// (`segments % 3 + 1`), with the placement the other bits choose:
    /// the first victim warm (`/ 3 % 2`), writes separated by lifespan
    /// (`/ 6 % 2`), young moved blocks warm (`/ 12 % 2`).
    "clean" Clean { segments: u8 },
    /// FIFREEZE then FITHAW.
    "freeze" Freeze,
    /// Closes every open file, unmounts and mounts again.
    "remount" Remount,
    /// Opens a snapshot read-only and compares it with the tree it was
    /// made from.
    "check_snapshot" CheckSnapshot { which: u8 },
}

/// A whole input: what to run and how to crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Index into [`GEOMETRIES`] (modulo its length).
    pub geometry: u8,
    /// What survives the crash.
    pub mode: CrashMode,
    /// Crash during this device write, counted from the first mount's
    /// (0: after the last operation).
    pub crash_at: u8,
    /// At most [`MAX_OPS`].
    pub ops: Vec<Op>,
}

/// Reads an input; a byte past the end reads as zero.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
}

/// The bytes of a crash mode: a selector and a parameter.
fn mode_bytes(mode: CrashMode) -> (u8, u32) {
    match mode {
        CrashMode::DropAll => (0, 0),
        CrashMode::KeepAll => (1, 0),
        CrashMode::KeepPrefix(k) => (2, k as u32),
        CrashMode::TearLast { sectors } => (3, sectors as u32 - 1),
        CrashMode::Random { seed } => (4, seed as u32),
    }
}

fn mode_of(sel: u8, param: u32) -> CrashMode {
    match sel % 5 {
        0 => CrashMode::DropAll,
        1 => CrashMode::KeepAll,
        2 => CrashMode::KeepPrefix(param as usize % 16),
        // Up to 144 sectors: inside and past a log's first blocks.
        3 => CrashMode::TearLast {
            sectors: 1 + param as usize % 144,
        },
        _ => CrashMode::Random {
            seed: u64::from(param),
        },
    }
}

impl Plan {
    /// Decodes any bytes into a plan: a 7-byte header (geometry, crash
    /// mode selector, mode parameter u32 LE, crash write), then
    /// operations, each an opcode byte (an index into [`OP_NAMES`],
    /// modulo) and its fields in order (`At` is two bytes, numbers
    /// little-endian), until the input or [`MAX_OPS`] ends.
    pub fn decode(data: &[u8]) -> Plan {
        let mut r = Reader(data);
        let geometry = r.u8();
        let sel = r.u8();
        let param = u32::read(&mut r);
        let crash_at = r.u8();
        let mut ops = Vec::new();
        while !r.0.is_empty() && ops.len() < MAX_OPS {
            ops.push(Op::decode(&mut r));
        }
        Plan {
            geometry,
            mode: mode_of(sel, param),
            crash_at,
            ops,
        }
    }

    /// The bytes [`Plan::decode`] turns back into this plan (a crash
    /// mode's parameter must be in the range it decodes to).
    pub fn encode(&self) -> Vec<u8> {
        let (sel, param) = mode_bytes(self.mode);
        let mut out = vec![self.geometry, sel];
        out.extend_from_slice(&param.to_le_bytes());
        out.push(self.crash_at);
        for op in &self.ops {
            op.encode(&mut out);
        }
        out
    }
}
