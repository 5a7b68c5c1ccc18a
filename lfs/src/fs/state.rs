//! The mounted filesystem's state, as one structure under one lock.
//!
//! Everything the namespace and the checkpoint writer need lives here:
//! the superblock, the log head, the DAT, segment usage, the checkpoint
//! file's header, the inode file and the per-inode block maps, directories
//! and dirty data. The `Fs` front (`fs/mod.rs`) owns the locks; this module
//! only has the data and the helpers that read it from the device.
//!
//! Invariants:
//! * An inode is authoritative in `ifile_blocks` once loaded; a change
//!   marks its inode file block dirty.
//! * A dirty data block is in its node's `dirty` map until a checkpoint
//!   (or a data-sync log) gives it a virtual block and an address.
//! * No read reaches the device at an address the write in flight (a
//!   checkpoint's or a data-sync log's) covers: `inflight` holds that
//!   write's blocks by address until they are on the device, and
//!   [`State::read_phys`] and [`State::source_of`], the only ways from
//!   an address to its contents, look there first. An address is not
//!   reused before the checkpoint that freed it is durable, when
//!   `inflight` is empty again, so an entry is always what its address
//!   will hold. Reads reach addresses only through block maps and the
//!   DAT, so whatever stops a file from mapping a block (truncate, punch,
//!   unlink, rename over, an overwrite) hides it without touching
//!   `inflight`, and a block cleaning moves is read at its new address
//!   from memory until its copy lands. (Keyed by file and offset instead,
//!   an entry outlived a truncate or punch while its checkpoint was
//!   written, and reads of the regrown file returned the cut bytes; and
//!   checkpoint file blocks were read from the device before their
//!   rewrite reached it: issue 22.)
//! * Deleting checkpoints lowers segments' live counts at once; a segment
//!   left empty becomes free only at the next checkpoint.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::blockdev::BlockDevice;
use crate::format::{
    CpFileHeader, Inode, MetaBlockHeader, MetaKind, Superblock, Writer, INODE_SIZE,
    META_HEADER_SIZE,
};
use crate::fs::bmap::BlockMap;
use crate::fs::dir::Directory;
use crate::inspect::SbCopy;
use crate::log::dat::Dat;
use crate::log::layout::Head;
use crate::log::segments::Segments;
use crate::{Error, Result};

/// Per-inode state beyond the inode record.
#[derive(Debug)]
pub(crate) struct Node {
    /// The file's block map (virtual block numbers).
    pub bmap: BlockMap,
    /// Blocks written since the last checkpoint.
    pub dirty: BTreeMap<u64, Vec<u8>>,
    /// The directory index, for directories.
    pub dir: Option<Directory>,
    /// Extended attributes, once loaded.
    pub xattrs: Option<BTreeMap<Vec<u8>, Vec<u8>>>,
    /// Extended attributes changed since the last checkpoint.
    pub xattr_dirty: bool,
}

impl Node {
    /// The node of a new, empty inode (a directory if `dir`).
    pub fn new_empty(bs: usize, dir: bool) -> Node {
        Node {
            bmap: BlockMap::new(bs),
            dirty: BTreeMap::new(),
            dir: dir.then(|| Directory::new(bs)),
            xattrs: Some(BTreeMap::new()),
            xattr_dirty: false,
        }
    }
}

/// The whole in-memory state of a mounted filesystem.
pub(crate) struct State {
    pub dev: Arc<dyn BlockDevice>,
    pub sb: Superblock,
    /// Generations of the primary and secondary copies on disk.
    pub sb_gens: [u64; 2],
    pub bs: usize,
    pub seed: u32,
    /// Number of the last checkpoint built.
    pub cno: u64,
    /// Sequence number of the next log.
    pub seq: u64,
    pub head: Head,
    pub dat: Dat,
    pub dat_map: BlockMap,
    /// The DAT journal's blocks (physical addresses).
    pub datj_map: BlockMap,
    pub segs: Segments,
    pub su_map: BlockMap,
    pub cp_header: CpFileHeader,
    pub cp_map: BlockMap,
    /// The checkpoint file block last written, so the next entry can be
    /// added without a read.
    pub cp_last_block: Option<(u64, Vec<u8>)>,
    pub ifile: Inode,
    pub ifile_map: BlockMap,
    pub ifile_blocks: HashMap<u64, Vec<Inode>>,
    pub ifile_dirty: BTreeSet<u64>,
    /// One past the highest inode number ever used.
    pub next_ino: u64,
    pub free_inos: BTreeSet<u64>,
    pub pending_inos: Vec<u64>,
    pub nodes: HashMap<u64, Node>,
    /// Every payload block of the checkpoint or data-sync log being
    /// written, by address, until it is on the device (module doc).
    pub inflight: HashMap<u64, Arc<Vec<u8>>>,
    /// Log bodies that fail their checksum (`fs/damage.rs`).
    pub damaged: crate::fs::damage::DamageMap,
    /// The valid checkpoints (snapshots included).
    pub history: crate::checkpoint::history::History,
    /// Make the next checkpoint a snapshot.
    pub next_is_snapshot: bool,
    /// The last checkpoint built as a snapshot by `next_is_snapshot`.
    pub last_snapshot_built: u64,
    /// The side log heads (`fs::clean::COLD_HEAD`, `WARM_HEAD`,
    /// `LONG_HEAD`), where cleaning writes moved blocks and checkpoints
    /// long-lived file data (none until first used after mount).
    pub gc_heads: [Option<Head>; crate::fs::clean::SIDE_HEADS],
    /// The cleaner asked for file data to be separated by lifespan
    /// (`fs::clean::Placement`).
    pub separate_writes: bool,
    /// Running mean of how many checkpoints overwritten blocks lived.
    pub lifespan: f64,
    /// Blocks cleaning read, for the next checkpoint to move.
    pub gc_queue: Vec<crate::fs::clean::GcBlock>,
    /// Open counts of files (fsd's open/create and release).
    pub open_files: HashMap<u64, u32>,
    /// Inodes the orphan directory names (`fs/orphans.rs`).
    pub orphans: std::collections::HashSet<u64>,
    /// Checkpoint file blocks cleaning asked to rewrite.
    pub cp_force: BTreeSet<u64>,
    /// For a read-only view of an older checkpoint while the filesystem is
    /// mounted: the live filesystem, which translates virtual blocks (its
    /// DAT follows cleaning).
    pub source: Option<Arc<crate::fs::Fs>>,
    /// Incremented by every change; a checkpoint covers the value it saw.
    pub mods: u64,
    /// `mods` covered by the last durable checkpoint.
    pub durable_mods: u64,
    /// Dirty blocks not yet handed to a checkpoint.
    pub dirty_blocks: u64,
    pub inodes_count: u64,
    /// Why the filesystem went read-only, if it did.
    pub read_only: Option<String>,
    pub nongc_ctime_ns: u64,
    /// Checkpoint named by the superblock copy last written.
    pub sb_written_cno: u64,
    /// Incremented whenever freed segments become reusable: a block read
    /// without the lock is only trusted if this did not change meanwhile.
    pub reuse_epoch: u64,
    /// Creation time of the last checkpoint built (ns).
    pub last_ctime_ns: u64,
    /// Inodes changed since the last checkpoint in ways a data-sync log
    /// cannot carry (anything but data, size and times; new inodes):
    /// their fdatasync writes a checkpoint instead.
    pub meta_dirty: std::collections::HashSet<u64>,
    /// Data blocks data-sync logs placed since the last checkpoint: their
    /// DAT and indirect blocks are still to be written, so they count in
    /// the metadata the next checkpoint is booked for.
    pub dsync_placed: u64,
    /// Inodes whose size or times changed since the last checkpoint or
    /// data-sync log that covered them (their data: `Node::dirty`).
    pub dsync_dirty: std::collections::HashSet<u64>,
    /// Inodes whose fdatasync waits for the checkpoint lock: whoever takes
    /// it writes one data-sync log for all of them (group commit).
    pub dsync_waiting: std::collections::HashSet<u64>,
}

/// What a [`State`] is made from: the metadata of one checkpoint, read
/// from the device at mount, or (for a view of an older checkpoint)
/// borrowed from the live state.
pub(crate) struct Loaded {
    pub dev: Arc<dyn BlockDevice>,
    pub sb: Superblock,
    pub cno: u64,
    pub dat: Dat,
    pub dat_map: BlockMap,
    pub datj_map: BlockMap,
    pub segs: Segments,
    pub su_map: BlockMap,
    pub cp_header: CpFileHeader,
    pub cp_map: BlockMap,
    pub cp_last_block: Option<(u64, Vec<u8>)>,
    pub ifile: Inode,
    pub history: crate::checkpoint::history::History,
    pub inodes_count: u64,
    pub nongc_ctime_ns: u64,
    pub last_ctime_ns: u64,
}

impl State {
    /// A state over `l` with nothing changed, nothing cached and the
    /// inode file's block map still to load ([`State::load_bmap`]).
    pub(crate) fn from_loaded(l: Loaded) -> State {
        let bs = l.sb.block_size as usize;
        State {
            seed: l.sb.crc_seed,
            dev: l.dev,
            sb: l.sb,
            sb_gens: [0, 0],
            bs,
            cno: l.cno,
            seq: 0,
            head: Head {
                seg: 0,
                block: 0,
                next_seg: 0,
            },
            dat: l.dat,
            dat_map: l.dat_map,
            datj_map: l.datj_map,
            segs: l.segs,
            su_map: l.su_map,
            cp_header: l.cp_header,
            cp_map: l.cp_map,
            cp_last_block: l.cp_last_block,
            next_ino: next_ino_of(&l.ifile),
            ifile: l.ifile,
            ifile_map: BlockMap::new(bs),
            ifile_blocks: HashMap::new(),
            ifile_dirty: BTreeSet::new(),
            free_inos: BTreeSet::new(),
            pending_inos: Vec::new(),
            nodes: HashMap::new(),
            inflight: HashMap::new(),
            damaged: Default::default(),
            history: l.history,
            next_is_snapshot: false,
            last_snapshot_built: 0,
            gc_heads: [None; crate::fs::clean::SIDE_HEADS],
            separate_writes: false,
            lifespan: 0.0,
            gc_queue: Vec::new(),
            open_files: HashMap::new(),
            orphans: Default::default(),
            cp_force: BTreeSet::new(),
            source: None,
            mods: 0,
            durable_mods: 0,
            dirty_blocks: 0,
            inodes_count: l.inodes_count,
            read_only: None,
            nongc_ctime_ns: l.nongc_ctime_ns,
            sb_written_cno: l.cno,
            reuse_epoch: 0,
            last_ctime_ns: l.last_ctime_ns,
            meta_dirty: Default::default(),
            dsync_placed: 0,
            dsync_dirty: Default::default(),
            dsync_waiting: Default::default(),
        }
    }
}

/// One past the highest inode number the inode file `ifile` can hold.
pub(crate) fn next_ino_of(ifile: &Inode) -> u64 {
    (ifile.size / INODE_SIZE as u64).max(crate::format::FIRST_USER_INO)
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("cno", &self.cno)
            .field("seq", &self.seq)
            .field("head", &self.head)
            .finish_non_exhaustive()
    }
}

impl State {
    /// The superblock copy to overwrite next: the older one.
    pub fn next_sb_copy(&self) -> SbCopy {
        if self.sb_gens[0] <= self.sb_gens[1] {
            SbCopy::Primary
        } else {
            SbCopy::Secondary
        }
    }

    /// Whether virtual block `v` was written fewer checkpoints before the
    /// next one than the running mean lifespan of overwritten blocks: by
    /// its age, more likely hot than cold. Unknown (no lifespan measured
    /// yet, or `v` not placed by a checkpoint) is not young.
    pub fn is_young(&self, v: u64) -> bool {
        let start = self.dat.entry(v).start_cno;
        start != 0 && ((self.cno + 1).saturating_sub(start) as f64) < self.lifespan
    }

    /// Whether segment `s` is where a log head writes or will write next
    /// (the main head's or a side head's).
    pub fn is_head(&self, s: u64) -> bool {
        [&self.head]
            .into_iter()
            .chain(self.gc_heads.iter().flatten())
            .any(|h| h.seg == s || h.next_seg == s)
    }

    /// Segment of physical block `p`.
    pub fn seg_of(&self, p: u64) -> Option<u64> {
        self.sb.segment_of(p)
    }

    /// Reads physical block `p`: from memory while the write in flight
    /// carries it (module doc), else from the device.
    pub fn read_phys(&self, p: u64) -> Result<Vec<u8>> {
        match self.inflight.get(&p) {
            Some(b) => Ok(b.to_vec()),
            None => read_block(self.dev.as_ref(), p, self.bs),
        }
    }

    /// Reads and verifies a metadata block of `kind` at physical `p`.
    pub fn read_meta(&self, p: u64, kind: MetaKind) -> Result<Vec<u8>> {
        let b = self.read_phys(p)?;
        MetaBlockHeader::verify(&b, kind, self.seed).map_err(|source| Error::Corrupted {
            what: "metadata block",
            location: format!("block {p}"),
            reason: source,
        })?;
        Ok(b)
    }

    /// Where the contents of virtual block `v` (mapped by a file, not 0)
    /// can be read now: memory while the write in flight carries it, else
    /// its address on the device, read by the caller without the state
    /// lock. A view of an older checkpoint asks the live filesystem.
    /// `Corrupted` if that address lies in a log whose body fails its
    /// checksum (`fs/damage.rs`).
    pub fn source_of(&self, v: u64) -> Result<crate::fs::Source> {
        if let Some(live) = &self.source {
            return live.source_for_view(v);
        }
        let p = self.dat.phys(v);
        if let Some(b) = self.inflight.get(&p) {
            return Ok(crate::fs::Source::Mem(b.to_vec()));
        }
        self.check_undamaged(p)?;
        Ok(crate::fs::Source::Dev(p))
    }

    /// Keeps every payload block of `runs`, about to be written, readable
    /// by address until [`State::landed`] (module doc); returns the
    /// addresses.
    pub(crate) fn hold_in_flight(&mut self, runs: &[crate::checkpoint::build::Run]) -> Vec<u64> {
        let mut out = Vec::new();
        for r in runs {
            for (a, b) in r.addressed_blocks(self.bs) {
                self.inflight.insert(a, b.clone());
                out.push(a);
            }
        }
        out
    }

    /// The write of `addrs` (from [`State::hold_in_flight`]) is on the
    /// device: reads go there again.
    pub(crate) fn landed(&mut self, addrs: &[u64]) {
        for a in addrs {
            self.inflight.remove(a);
        }
    }

    /// Reads the block that virtual block `v` maps to.
    pub fn read_virtual(&self, v: u64) -> Result<Vec<u8>> {
        if let Some(live) = &self.source {
            return live.read_virtual_for_view(v);
        }
        let p = self.dat.phys(v);
        if p == 0 || p == u64::MAX {
            return Err(Error::Corrupted {
                what: "block map",
                location: format!("virtual block {v}"),
                reason: crate::format::DecodeError::InvalidField {
                    what: "DAT entry",
                    field: "physical block",
                    value: p,
                },
            });
        }
        self.read_phys(p)
    }

    /// Loads the block map of an inode with slots `root`.
    pub fn load_bmap(&self, inode: &Inode) -> Result<BlockMap> {
        let mut read = |v: u64| {
            let b = self.read_virtual(v)?;
            MetaBlockHeader::verify(&b, MetaKind::Node, self.seed).map_err(|source| {
                Error::Corrupted {
                    what: "indirect block",
                    location: format!("inode {} virtual block {v}", inode.ino),
                    reason: source,
                }
            })?;
            Ok(b)
        };
        BlockMap::load(self.bs, &inode.bmap, &mut read)
    }

    fn ifile_per_block(&self) -> u64 {
        MetaKind::Ifile.per_block(self.bs) as u64
    }

    /// Loads inode file block `b` into memory if needed.
    fn ifile_block(&mut self, b: u64) -> Result<&mut Vec<Inode>> {
        if !self.ifile_blocks.contains_key(&b) {
            let per = self.ifile_per_block() as usize;
            let v = self.ifile_map.get(b);
            let recs = if v == 0 {
                vec![Inode::default(); per]
            } else {
                let blk = self.read_virtual(v)?;
                let corrupt = |source| Error::Corrupted {
                    what: "inode file block",
                    location: format!("inode file block {b}"),
                    reason: source,
                };
                MetaBlockHeader::verify(&blk, MetaKind::Ifile, self.seed).map_err(corrupt)?;
                (0..per)
                    .map(|i| {
                        let o = META_HEADER_SIZE + i * INODE_SIZE;
                        Inode::decode(&blk[o..o + INODE_SIZE]).map_err(corrupt)
                    })
                    .collect::<Result<Vec<_>>>()?
            };
            self.ifile_blocks.insert(b, recs);
        }
        Ok(self.ifile_blocks.get_mut(&b).expect("inserted above"))
    }

    /// The inode record `ino` (possibly free).
    pub fn raw_inode(&mut self, ino: u64) -> Result<Inode> {
        let per = self.ifile_per_block();
        let recs = self.ifile_block(ino / per)?;
        Ok(recs[(ino % per) as usize].clone())
    }

    /// The in-use inode `ino`, or `NotFound`.
    pub fn inode(&mut self, ino: u64) -> Result<Inode> {
        if ino == 0 || ino >= self.next_ino {
            return Err(Error::NotFound);
        }
        let i = self.raw_inode(ino)?;
        if i.is_free() {
            return Err(Error::NotFound);
        }
        Ok(i)
    }

    /// Stores inode `i` (at `i.ino`) and marks its block dirty. A change
    /// beyond size and times (or a new inode) is one a data-sync log
    /// cannot carry: the inode's next fdatasync writes a checkpoint.
    pub fn put_inode(&mut self, i: Inode) -> Result<()> {
        let per = self.ifile_per_block();
        let b = i.ino / per;
        let slot = (i.ino % per) as usize;
        let ino = i.ino;
        let old = std::mem::replace(&mut self.ifile_block(b)?[slot], i);
        if !self.meta_dirty.contains(&ino) {
            let new = &self.ifile_block(b)?[slot];
            if crate::checkpoint::dsync::carries(&old, new) {
                self.dsync_dirty.insert(ino);
            } else {
                self.meta_dirty.insert(ino);
            }
        }
        if self.ifile_dirty.insert(b) {
            // A block the next checkpoint must write: space it will need.
            self.dirty_blocks += 1;
        }
        self.mods += 1;
        Ok(())
    }

    /// Encodes inode file block `b` (loaded, since it is dirty).
    pub fn encode_ifile_block(&mut self, b: u64) -> Result<Vec<u8>> {
        let bs = self.bs;
        let seed = self.seed;
        let recs = self.ifile_block(b)?;
        let mut w = Writer::with_capacity(bs);
        w.zeros(META_HEADER_SIZE);
        for r in recs.iter() {
            r.encode_into(&mut w);
        }
        w.zeros(bs - w.len());
        let mut blk = w.into_vec();
        MetaBlockHeader::seal(&mut blk, MetaKind::Ifile, seed);
        Ok(blk)
    }

    /// A free inode number.
    pub fn alloc_ino(&mut self) -> u64 {
        if let Some(i) = self.free_inos.pop_first() {
            return i;
        }
        let i = self.next_ino;
        self.next_ino += 1;
        i
    }

    /// The node of `ino`, loading its block map (and directory) if needed.
    pub fn node(&mut self, ino: u64) -> Result<&mut Node> {
        if !self.nodes.contains_key(&ino) {
            let inode = self.inode(ino)?;
            let bmap = self.load_bmap(&inode)?;
            let dir = if inode.mode & libc_s_ifmt() == S_IFDIR {
                let n = inode.size.div_ceil(self.bs as u64);
                let mut blocks = Vec::with_capacity(n as usize);
                for b in 0..n {
                    let v = bmap.get(b);
                    blocks.push(if v == 0 {
                        None
                    } else {
                        Some(self.read_virtual(v)?)
                    });
                }
                Some(Directory::load(self.bs, self.seed, &blocks)?)
            } else {
                None
            };
            self.nodes.insert(
                ino,
                Node {
                    bmap,
                    dirty: BTreeMap::new(),
                    dir,
                    xattrs: None,
                    xattr_dirty: false,
                },
            );
        }
        Ok(self.nodes.get_mut(&ino).expect("inserted above"))
    }

    /// Retires virtual block `v` from the current state. Its block stays
    /// (and stays live in its segment) while a valid checkpoint sees it:
    /// the last durable one always does; [`State::free_dead`] frees it once
    /// none does.
    pub fn retire(&mut self, v: u64) {
        if v == 0 {
            return;
        }
        // A block placed by a data-sync log since the last checkpoint is
        // seen by no checkpoint: it is dead at once.
        if let Some(p) = self.dat.retire(v, self.cno + 1) {
            if let Some(s) = self.seg_of(p) {
                self.segs.add_live(s, -1);
            }
        }
    }
}

/// The file type bits of st_mode.
pub(crate) const fn libc_s_ifmt() -> u32 {
    0o170000
}
/// Directory.
pub(crate) const S_IFDIR: u32 = 0o040000;
/// Regular file.
pub(crate) const S_IFREG: u32 = 0o100000;
/// Symbolic link.
pub(crate) const S_IFLNK: u32 = 0o120000;

/// Reads block `p` of `bs` bytes from `dev`.
pub(crate) fn read_block(dev: &dyn BlockDevice, p: u64, bs: usize) -> Result<Vec<u8>> {
    let mut b = vec![0u8; bs];
    dev.read_at(&mut b, p * bs as u64)
        .map_err(|e| Error::io(format!("reading block {p}"), e))?;
    Ok(b)
}
