//! Extended attributes: all of an inode's attributes in one block.
//!
//! Block layout: a metadata block header (kind Xattr), then records of
//! name length (1 byte, 1 to 255), reserved (1), value length (2), name,
//! value, zero padded to 8 bytes; a zero name length ends them.

use std::collections::BTreeMap;

use crate::format::{MetaBlockHeader, MetaKind, Reader, Writer, META_HEADER_SIZE};
use crate::{Error, Result};

const REC_FIXED: usize = 4;

fn rec_len(name: &[u8], value: &[u8]) -> usize {
    (REC_FIXED + name.len() + value.len()).div_ceil(8) * 8
}

/// Bytes the attributes take in a block.
pub fn encoded_len(x: &BTreeMap<Vec<u8>, Vec<u8>>) -> usize {
    META_HEADER_SIZE + x.iter().map(|(n, v)| rec_len(n, v)).sum::<usize>()
}

/// True if the attributes fit in one block of `block_size` bytes.
pub fn fits(x: &BTreeMap<Vec<u8>, Vec<u8>>, block_size: usize) -> bool {
    encoded_len(x) <= block_size
}

/// Encodes the attributes (which must fit) into a block.
pub fn encode(x: &BTreeMap<Vec<u8>, Vec<u8>>, block_size: usize, seed: u32) -> Vec<u8> {
    let mut w = Writer::with_capacity(block_size);
    w.zeros(META_HEADER_SIZE);
    for (n, v) in x {
        let start = w.len();
        w.u8(n.len() as u8);
        w.u8(0);
        w.u16(v.len() as u16);
        w.bytes(n);
        w.bytes(v);
        w.zeros(rec_len(n, v) - (w.len() - start));
    }
    w.zeros(block_size.saturating_sub(w.len()));
    let mut b = w.into_vec();
    MetaBlockHeader::seal(&mut b, MetaKind::Xattr, seed);
    b
}

/// Decodes an attribute block.
pub fn decode(block: &[u8], seed: u32) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
    let corrupt = |source| Error::Corrupted {
        what: "extended attribute block",
        location: "xattr block".into(),
        reason: source,
    };
    MetaBlockHeader::verify(block, MetaKind::Xattr, seed).map_err(corrupt)?;
    let mut r = Reader::new(block, "extended attribute", 0).map_err(corrupt)?;
    r.skip(META_HEADER_SIZE).map_err(corrupt)?;
    let mut x = BTreeMap::new();
    while r.pos() + REC_FIXED <= block.len() {
        let nl = usize::from(r.u8().map_err(corrupt)?);
        if nl == 0 {
            break;
        }
        r.skip(1).map_err(corrupt)?;
        let vl = usize::from(r.u16().map_err(corrupt)?);
        let name = r.bytes(nl).map_err(corrupt)?.to_vec();
        let value = r.bytes(vl).map_err(corrupt)?.to_vec();
        let pad = rec_len(&name, &value) - REC_FIXED - nl - vl;
        r.skip(pad).map_err(corrupt)?;
        x.insert(name, value);
    }
    Ok(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut x = BTreeMap::new();
        x.insert(b"user.a".to_vec(), b"1".to_vec());
        x.insert(b"user.long".to_vec(), vec![7u8; 300]);
        x.insert(b"user.empty".to_vec(), vec![]);
        assert!(fits(&x, 1024));
        let b = encode(&x, 1024, 3);
        assert_eq!(decode(&b, 3).unwrap(), x);
        assert!(decode(&b, 4).is_err());
        x.insert(b"user.big".to_vec(), vec![0u8; 1000]);
        assert!(!fits(&x, 1024));
    }
}
