//! The fuzz entry points of the on-disk decoders, shared by cargo-fuzz
//! (`fuzz/fuzz_targets/<name>.rs` calls `targets::<name>`) and the ordinary
//! test suite (`lfs/tests/decoders.rs` runs every entry of [`ALL`] over the
//! committed corpus in `fuzz/corpus/<name>/`, random inputs and mutations).
//!
//! Each target feeds arbitrary bytes to one decoder and returns what the
//! decoder said. Rejecting the input is fine; panicking is a bug. When the
//! decoder accepts, the target is also an oracle: it encodes the decoded
//! value, decodes that again and asserts that the two values are equal, so
//! an encode/decode asymmetry found by the fuzzer fails loudly. The
//! `assert!`s below are that oracle and the only way a target panics on
//! purpose.
//!
//! Input layout. Targets of decoders that take nothing but bytes use the
//! whole input as the structure. The others take their parameters from a
//! prefix; a prefix byte missing from a short input reads as zero, so every
//! input, even the empty one, is a valid input:
//!
//! | target | prefix | rest |
//! |---|---|---|
//! | `log_summary` | block size selector (1), crc seed (4, LE) | summary blocks, then body blocks |
//! | `meta_block` | kind selector (1), crc seed (4, LE) | the block |
//! | `super_root`, `dir_entry` | crc seed (4, LE) | the block / the entry |
//!
//! The block size selector `s` means `MIN_BLOCK_SIZE << (s % 4)` (1 to 8
//! KiB); the kind selector means `META_KINDS[s % META_KINDS.len()]`.
//! [`log_summary_input`], [`meta_block_input`] and [`seeded_input`] build
//! such inputs (the corpus generator uses them).

use std::fmt::Debug;

use super::{
    BlockEntry, CheckpointEntry, CpFileHeader, DatEntry, DecodeError, DirEntry, Inode, LogHeader,
    LogSummary, MetaBlockHeader, MetaKind, SegUsage, SuFileHeader, SuperRoot, Superblock, Writer,
    BLOCK_ENTRY_SIZE, CHECKPOINT_ENTRY_SIZE, DAT_ENTRY_SIZE, INODE_SIZE, META_HEADER_SIZE,
    MIN_BLOCK_SIZE, SB_SIZE, SEGUSAGE_SIZE, SR_SIZE,
};

/// A fuzz target: runs one decoder, and the round-trip oracle if it
/// accepts, over `data`. Returns the decoder's verdict.
pub type Target = fn(&[u8]) -> Result<(), DecodeError>;

/// Every target, by the name of its cargo-fuzz target and corpus directory.
pub const ALL: &[(&str, Target)] = &[
    ("superblock", superblock),
    ("log_summary", log_summary),
    ("block_entry", block_entry),
    ("super_root", super_root),
    ("inode", inode),
    ("dat_entry", dat_entry),
    ("checkpoint_entry", checkpoint_entry),
    ("cp_file_header", cp_file_header),
    ("seg_usage", seg_usage),
    ("su_file_header", su_file_header),
    ("dir_entry", dir_entry),
    ("meta_block", meta_block),
];

/// The name the corpus uses for the kind of `err`: a file named
/// `bad-<kind>-*` in `fuzz/corpus/<target>/` must be rejected with an
/// error of that kind, a file named `good-*` accepted.
pub fn error_kind(err: &DecodeError) -> &'static str {
    match err {
        DecodeError::Truncated { .. } => "truncated",
        DecodeError::BadMagic { .. } => "magic",
        DecodeError::UnsupportedVersion { .. } => "version",
        DecodeError::BadChecksum { .. } => "checksum",
        DecodeError::UnknownIncompatFeatures(_) => "features",
        DecodeError::InvalidField { .. } => "field",
    }
}

/// Bytes of the crc seed prefix.
pub const SEED_LEN: usize = 4;
/// Bytes of the selector-and-seed prefix of `log_summary` and `meta_block`.
pub const PARAMS_LEN: usize = 1 + SEED_LEN;
/// Block sizes a selector byte can choose from: `MIN_BLOCK_SIZE << 0..4`.
const BLOCK_SIZE_CHOICES: u8 = 4;
/// The fields of a metadata block header that `verify` checks one by one
/// (magic 4, version 2, record size 2); the crc and 4 reserved bytes follow.
const META_CHECKED_FIELDS: usize = 8;

/// The input of [`log_summary`] for a log of `block_size` bytes per block
/// and checksum seed `seed`; `None` if no selector means `block_size`.
pub fn log_summary_input(block_size: usize, seed: u32, log: &[u8]) -> Option<Vec<u8>> {
    let sel = (0..BLOCK_SIZE_CHOICES).find(|&s| block_size_of(s) == block_size)?;
    Some(prefixed(Some(sel), seed, log))
}

/// The input of [`meta_block`] for a `kind` block sealed with `seed`.
pub fn meta_block_input(kind: MetaKind, seed: u32, block: &[u8]) -> Vec<u8> {
    prefixed(Some(kind_selector(kind)), seed, block)
}

/// The input of [`super_root`] or [`dir_entry`]: the seed, then `payload`.
pub fn seeded_input(seed: u32, payload: &[u8]) -> Vec<u8> {
    prefixed(None, seed, payload)
}

fn prefixed(selector: Option<u8>, seed: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(PARAMS_LEN + payload.len());
    v.extend(selector);
    v.extend_from_slice(&seed.to_le_bytes());
    v.extend_from_slice(payload);
    v
}

fn block_size_of(selector: u8) -> usize {
    (MIN_BLOCK_SIZE as usize) << (selector % BLOCK_SIZE_CHOICES)
}

/// Every kind of metadata block, in selector order.
pub const META_KINDS: [MetaKind; 8] = [
    MetaKind::Ifile,
    MetaKind::Dat,
    MetaKind::Cpfile,
    MetaKind::Sufile,
    MetaKind::Node,
    MetaKind::Dir,
    MetaKind::Xattr,
    MetaKind::DatJournal,
];

/// The selector of `kind`: its index in [`META_KINDS`]. The match is
/// exhaustive so that a new kind does not compile until it is listed there
/// (and thereby fuzzed).
fn kind_selector(kind: MetaKind) -> u8 {
    match kind {
        MetaKind::Ifile => 0,
        MetaKind::Dat => 1,
        MetaKind::Cpfile => 2,
        MetaKind::Sufile => 3,
        MetaKind::Node => 4,
        MetaKind::Dir => 5,
        MetaKind::Xattr => 6,
        MetaKind::DatJournal => 7,
    }
}

fn meta_kind_of(selector: u8) -> MetaKind {
    let i = usize::from(selector) % META_KINDS.len();
    META_KINDS.get(i).copied().unwrap_or(MetaKind::Ifile)
}

/// Splits off the seed prefix; missing bytes read as zero.
fn take_seed(data: &[u8]) -> (u32, &[u8]) {
    let mut seed = [0u8; SEED_LEN];
    for (d, s) in seed.iter_mut().zip(data) {
        *d = *s;
    }
    (
        u32::from_le_bytes(seed),
        data.get(SEED_LEN..).unwrap_or(&[]),
    )
}

/// Splits off the selector and seed prefix; missing bytes read as zero.
fn take_params(data: &[u8]) -> (u8, u32, &[u8]) {
    let selector = data.first().copied().unwrap_or(0);
    let (seed, rest) = take_seed(data.get(1..).unwrap_or(&[]));
    (selector, seed, rest)
}

/// The oracle: what was decoded, encoded and decoded again, is unchanged.
#[track_caller]
fn same<T: PartialEq + Debug>(what: &str, again: Result<T, DecodeError>, first: &T) {
    assert_eq!(
        again.as_ref(),
        Ok(first),
        "{what}: encoding the decoded value and decoding it again changed it"
    );
}

/// A fixed-size record: decode, and if accepted, encode (checking the
/// encoded size) and decode again.
fn record<T: PartialEq + Debug>(
    what: &str,
    data: &[u8],
    size: usize,
    decode: fn(&[u8]) -> Result<T, DecodeError>,
    encode: fn(&T, &mut Writer),
) -> Result<(), DecodeError> {
    let first = decode(data)?;
    let mut w = Writer::with_capacity(size);
    encode(&first, &mut w);
    assert_eq!(w.len(), size, "{what}: encoded size");
    same(what, decode(w.as_slice()), &first);
    Ok(())
}

/// [`Superblock::decode`] over the whole input.
pub fn superblock(data: &[u8]) -> Result<(), DecodeError> {
    let sb = Superblock::decode(data)?;
    let bytes = sb.encode();
    assert_eq!(bytes.len(), SB_SIZE, "superblock: encoded size");
    same("superblock", Superblock::decode(&bytes), &sb);
    Ok(())
}

/// [`LogSummary::decode`] (and [`LogHeader::decode_unverified`], its first
/// step) over the summary, then [`LogSummary::verify_body`] over the bytes
/// after it. Returns `Err` if either rejects.
///
/// Encoding recomputes the counts and both crcs, so the oracle compares
/// the entries and every header field but the summary crc (reserved bytes
/// and padding are not decoded, yet covered by it), and the body crc only
/// when the body in the input verified.
pub fn log_summary(data: &[u8]) -> Result<(), DecodeError> {
    let (selector, seed, buf) = take_params(data);
    let block_size = block_size_of(selector);
    let unverified = LogHeader::decode_unverified(buf);
    let summary = LogSummary::decode(buf, block_size, seed)?;
    assert_eq!(
        unverified.as_ref(),
        Ok(&summary.header),
        "log summary: header differs from decode_unverified's"
    );
    // decode checked that `buf` holds the whole summary.
    let sum_len = (summary.header.nsummary_blocks as usize).saturating_mul(block_size);
    let body = buf.get(sum_len..).unwrap_or(&[]);
    let body_ok = summary.verify_body(seed, &[body]);

    let mut again = summary.clone();
    let bytes = again.encode(block_size, seed, &[body]);
    assert_eq!(bytes.len(), sum_len, "log summary: encoded size");
    same(
        "log summary",
        LogSummary::decode(&bytes, block_size, seed),
        &again,
    );
    assert_eq!(
        again.verify_body(seed, &[body]),
        Ok(()),
        "log summary: body crc written by encode does not verify"
    );
    let mut expect = summary.clone();
    expect.header.summary_crc = again.header.summary_crc;
    if body_ok.is_err() {
        expect.header.body_crc = again.header.body_crc;
    }
    assert_eq!(again, expect, "log summary: encode changed decoded fields");
    body_ok
}

/// [`BlockEntry::decode`] over the whole input.
pub fn block_entry(data: &[u8]) -> Result<(), DecodeError> {
    record(
        "block entry",
        data,
        BLOCK_ENTRY_SIZE,
        BlockEntry::decode,
        BlockEntry::encode_into,
    )
}

/// [`SuperRoot::decode`] over the block after the seed prefix; the oracle
/// re-encodes into a block of the same length (at least [`SR_SIZE`]: a
/// format 1.1 super root, 816 bytes, re-encodes as a 1.2 one with an
/// empty DAT journal).
pub fn super_root(data: &[u8]) -> Result<(), DecodeError> {
    let (seed, block) = take_seed(data);
    let sr = SuperRoot::decode(block, seed)?;
    let len = block.len().max(SR_SIZE);
    let bytes = sr.encode(len, seed);
    assert_eq!(bytes.len(), len, "super root: encoded size");
    same("super root", SuperRoot::decode(&bytes, seed), &sr);
    Ok(())
}

/// [`Inode::decode`] over the whole input.
pub fn inode(data: &[u8]) -> Result<(), DecodeError> {
    record("inode", data, INODE_SIZE, Inode::decode, Inode::encode_into)
}

/// [`DatEntry::decode`] over the whole input.
pub fn dat_entry(data: &[u8]) -> Result<(), DecodeError> {
    record(
        "DAT entry",
        data,
        DAT_ENTRY_SIZE,
        DatEntry::decode,
        DatEntry::encode_into,
    )
}

/// [`CheckpointEntry::decode`] over the whole input.
pub fn checkpoint_entry(data: &[u8]) -> Result<(), DecodeError> {
    record(
        "checkpoint entry",
        data,
        CHECKPOINT_ENTRY_SIZE,
        CheckpointEntry::decode,
        CheckpointEntry::encode_into,
    )
}

/// [`CpFileHeader::decode`] over the whole input.
pub fn cp_file_header(data: &[u8]) -> Result<(), DecodeError> {
    record(
        "checkpoint file header",
        data,
        CHECKPOINT_ENTRY_SIZE,
        CpFileHeader::decode,
        CpFileHeader::encode_into,
    )
}

/// [`SegUsage::decode`] over the whole input.
pub fn seg_usage(data: &[u8]) -> Result<(), DecodeError> {
    record(
        "segment usage",
        data,
        SEGUSAGE_SIZE,
        SegUsage::decode,
        SegUsage::encode_into,
    )
}

/// [`SuFileHeader::decode`] over the whole input.
pub fn su_file_header(data: &[u8]) -> Result<(), DecodeError> {
    record(
        "segment usage header",
        data,
        SEGUSAGE_SIZE,
        SuFileHeader::decode,
        SuFileHeader::encode_into,
    )
}

/// [`DirEntry::decode`] over the bytes after the seed prefix.
///
/// A stored record length may exceed the entry's own (the last entry of a
/// block owns the slack after it); encoding writes the minimum, so the
/// oracle expects that back.
pub fn dir_entry(data: &[u8]) -> Result<(), DecodeError> {
    let (seed, buf) = take_seed(data);
    let (entry, rec_len) = DirEntry::decode(buf, seed)?;
    assert!(
        entry.rec_len() <= rec_len && rec_len <= buf.len(),
        "directory entry: record length {rec_len} outside {}..={}",
        entry.rec_len(),
        buf.len()
    );
    let mut w = Writer::default();
    entry.encode_into(&mut w, seed);
    let min_len = entry.rec_len();
    assert_eq!(w.len(), min_len, "directory entry: encoded size");
    same(
        "directory entry",
        DirEntry::decode(w.as_slice(), seed),
        &(entry, min_len),
    );
    Ok(())
}

/// [`MetaBlockHeader::verify`] over the block after the prefix (any
/// length, not only whole blocks).
///
/// The header has no decoded value, so the oracle is [`MetaBlockHeader::seal`]:
/// resealing an accepted block must verify, keep the checked header fields
/// and leave the records alone.
pub fn meta_block(data: &[u8]) -> Result<(), DecodeError> {
    let (selector, seed, block) = take_params(data);
    let kind = meta_kind_of(selector);
    MetaBlockHeader::verify(block, kind, seed)?;
    let mut resealed = block.to_vec();
    MetaBlockHeader::seal(&mut resealed, kind, seed);
    assert_eq!(
        MetaBlockHeader::verify(&resealed, kind, seed),
        Ok(()),
        "metadata block: resealed block does not verify"
    );
    assert_eq!(
        resealed.get(..META_CHECKED_FIELDS),
        block.get(..META_CHECKED_FIELDS),
        "metadata block: seal wrote other header fields than verify accepted"
    );
    assert_eq!(
        resealed.get(META_HEADER_SIZE..),
        block.get(META_HEADER_SIZE..),
        "metadata block: seal changed the records"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_match_their_lists() {
        for (i, &kind) in META_KINDS.iter().enumerate() {
            assert_eq!(usize::from(kind_selector(kind)), i);
            assert_eq!(meta_kind_of(i as u8), kind);
            assert_eq!(meta_block_input(kind, 7, b"x")[0], i as u8);
        }
        for s in 0..BLOCK_SIZE_CHOICES {
            let bs = block_size_of(s);
            assert_eq!(log_summary_input(bs, 1, &[]).unwrap()[0], s);
        }
        assert_eq!(block_size_of(0), 1024);
        assert_eq!(block_size_of(3), 8192);
        assert_eq!(block_size_of(4), 1024);
        assert!(log_summary_input(512, 1, &[]).is_none());
        assert_eq!(seeded_input(0x0403_0201, b"z"), b"\x01\x02\x03\x04z");
    }

    #[test]
    fn short_inputs_read_missing_prefix_bytes_as_zero() {
        assert_eq!(take_params(&[]), (0, 0, &[][..]));
        assert_eq!(take_params(&[3, 1]), (3, 1, &[][..]));
        assert_eq!(take_seed(&[1, 0, 0, 0, 9]), (1, &[9u8][..]));
        for (name, target) in ALL {
            for n in 0..PARAMS_LEN + 2 {
                assert!(target(&vec![0u8; n]).is_err(), "{name} accepted {n} zeros");
            }
        }
    }
}
