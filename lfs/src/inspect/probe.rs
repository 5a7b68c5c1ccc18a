//! Recognising filesystems by their magic numbers, so that mkfs does not
//! destroy one by accident. Offsets are those of the kernel's and blkid's
//! probes.

use super::read_opt;
use crate::blockdev::BlockDevice;
use crate::format::SB_MAGIC;
use crate::Result;

/// A filesystem recognised on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signature {
    /// lfs (primary superblock magic).
    Lfs,
    /// ext2, ext3 or ext4.
    Ext,
    /// XFS.
    Xfs,
    /// Btrfs.
    Btrfs,
    /// NILFS2.
    Nilfs2,
    /// F2FS.
    F2fs,
}

impl Signature {
    /// The name users know it by.
    pub fn name(self) -> &'static str {
        match self {
            Signature::Lfs => "lfs",
            Signature::Ext => "ext2/ext3/ext4",
            Signature::Xfs => "xfs",
            Signature::Btrfs => "btrfs",
            Signature::Nilfs2 => "nilfs2",
            Signature::F2fs => "f2fs",
        }
    }
}

/// (signature, byte offset, magic bytes)
const PROBES: &[(Signature, u64, &[u8])] = &[
    (Signature::Lfs, 0, &SB_MAGIC.to_le_bytes()),
    // ext2/3/4: s_magic 0xEF53 at offset 56 of the superblock at 1024.
    (Signature::Ext, 1024 + 56, &[0x53, 0xef]),
    // XFS: "XFSB" at the start of the primary superblock.
    (Signature::Xfs, 0, b"XFSB"),
    // Btrfs: "_BHRfS_M" at offset 64 of the superblock at 64 KiB.
    (Signature::Btrfs, 65536 + 64, b"_BHRfS_M"),
    // NILFS2: s_magic 0x3434 at offset 6 of the superblock at 1024.
    (Signature::Nilfs2, 1024 + 6, &[0x34, 0x34]),
    // F2FS: 0xF2F52010 at the superblock at 1024.
    (Signature::F2fs, 1024, &[0x10, 0x20, 0xf5, 0xf2]),
];

/// The first filesystem signature found on `dev`, if any.
pub fn probe_signature(dev: &dyn BlockDevice) -> Result<Option<Signature>> {
    for &(sig, off, magic) in PROBES {
        if let Some(b) = read_opt(dev, off, magic.len(), "a filesystem signature")? {
            if b == magic {
                return Ok(Some(sig));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blockdev::MemDevice;

    #[test]
    fn each_signature_is_recognised() {
        assert_eq!(probe_signature(&MemDevice::new(1 << 20)).unwrap(), None);
        for &(sig, off, magic) in PROBES {
            let d = MemDevice::new(1 << 20);
            d.write_all_at(magic, off).unwrap();
            assert_eq!(probe_signature(&d).unwrap(), Some(sig), "{}", sig.name());
        }
        // A device too small for some probes is not an error.
        assert_eq!(probe_signature(&MemDevice::new(100)).unwrap(), None);
    }
}
