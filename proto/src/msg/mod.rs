//! Request and reply payloads: the typed messages carried by frames.
//!
//! Every message has an explicit little-endian [`Message::encode`] and a
//! [`Message::decode`] that returns a typed [`DecodeError`] on any input and
//! never panics. Encoding rules, shared by all messages:
//!
//! * integers are little-endian, of the width the field's type says; records
//!   are packed (no padding, no alignment);
//! * a counted array is a `u32` count followed by that many records;
//! * a string is a `u32` byte length followed by that many bytes of UTF-8;
//! * a payload is exactly one message: trailing bytes are an error.
//!
//! Decoders reject a count or string length above the message's documented
//! maximum, or one whose records could not fit in the bytes that remain,
//! before allocating anything; so no payload makes a decoder allocate more
//! than a small multiple of its own length. Requests reject flag bits they
//! do not know (the server answers EINVAL); replies keep unknown flag bits
//! as they are, so an older client can talk to a newer server.
//!
//! Decoding is canonical: a payload that decodes re-encodes to the same
//! bytes. The fuzz target (`crate::targets`) checks that.
//!
//! The messages, grouped by what they describe:
//! [`segments`] (GET_SUSTAT, GET_SUINFO, GET_VINFO), [`device`]
//! (GET_SEG_SUMMARY, GET_SUPER),
//! [`checkpoints`] (GET_CPSTAT, GET_CPINFO, SYNC), [`stats`] (GET_STATS,
//! GET_DF) and [`admin`] (CHANGE_CPMODE, DELETE_CHECKPOINT, CLEAN_SEGMENTS,
//! SET_SUINFO, MOUNT_CHECKPOINT, UMOUNT_CHECKPOINT, FREEZE, THAW).

pub mod admin;
pub mod checkpoints;
pub mod device;
pub mod segments;
pub mod stats;

pub use admin::{
    ChangeCpmode, CleanReply, CleanSegments, DeleteCheckpoint, Done, Freeze, MountCheckpoint,
    SetSuinfo, SuUpdate, Thaw, UmountCheckpoint, CLEAN_SEPARATE_WRITES, CLEAN_STRICT_PROTECTION,
    CLEAN_WARM_YOUNG, CPMODE_CHECKPOINT, CPMODE_SNAPSHOT, MOUNT_PATH_MAX,
};
pub use checkpoints::{
    Cpinfo, CpinfoList, Cpstat, DiffItem, DiffList, GetCpinfo, GetCpstat, GetDiff, Sync, SyncReply,
    CPINFO_FLAGS_KNOWN, CPINFO_MINOR, CPINFO_SNAPSHOT, DIFF_CREATED, DIFF_DELETED, DIFF_MODIFIED,
    DIFF_PATH_MAX, GET_CPINFO_FLAGS_KNOWN, GET_CPINFO_SNAPSHOTS_ONLY, SYNC_FLAGS_KNOWN,
    SYNC_FORCE_CHECKPOINT,
};
pub use device::{
    EntryInfo, GetSegSummary, GetSuper, LogInfo, SegSummary, Super, SUPER_CURRENT_NONE,
    SUPER_CURRENT_PRIMARY, SUPER_CURRENT_SECONDARY, SUPER_ROOT_DAMAGED, SUPER_ROOT_NONE,
    SUPER_ROOT_VALID,
};
pub use segments::{
    GetSuinfo, GetSustat, GetVinfo, Suinfo, SuinfoList, Sustat, Vinfo, VinfoList, SUINFO_ACTIVE,
    SUINFO_DIRTY, SUINFO_ERROR, SUINFO_PENDING,
};
pub use stats::{Df, GetDf, GetStats, Histogram, Stats};

/// Why a payload failed to decode. Decoders return one of these for any
/// input they cannot accept; none panics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The payload ends inside a field.
    #[error("{what}: truncated ({got} bytes left, {needed} needed for {field})")]
    Truncated {
        /// Message being decoded.
        what: &'static str,
        /// Field being read.
        field: &'static str,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes that were left.
        got: usize,
    },
    /// Bytes follow the end of the message.
    #[error("{what}: {extra} trailing bytes after the message")]
    TrailingBytes {
        /// Message being decoded.
        what: &'static str,
        /// Bytes left over.
        extra: usize,
    },
    /// A count (of records, or of string bytes) exceeds the message's
    /// maximum, or what the rest of the payload could hold.
    #[error("{what}: {field} is {count}, at most {max} allowed here")]
    BadCount {
        /// Message being decoded.
        what: &'static str,
        /// The counted field.
        field: &'static str,
        /// The count found.
        count: u64,
        /// The largest count acceptable at this point of this payload.
        max: u64,
    },
    /// A string is not UTF-8.
    #[error("{what}: {field} is not UTF-8")]
    BadUtf8 {
        /// Message being decoded.
        what: &'static str,
        /// The string field.
        field: &'static str,
    },
    /// A field holds a value the message does not allow (an unknown request
    /// flag, arrays that must agree in length and do not).
    #[error("{what}: invalid {field} {value:#x}")]
    InvalidField {
        /// Message being decoded.
        what: &'static str,
        /// Field name.
        field: &'static str,
        /// The value found.
        value: u64,
    },
}

/// A payload type: a request or a reply.
pub trait Message: Sized {
    /// The payload bytes of `self`.
    fn encode(&self) -> Vec<u8>;
    /// Decodes a whole payload; trailing bytes are an error.
    fn decode(payload: &[u8]) -> Result<Self, DecodeError>;
}

/// A request: its code and the type of a successful reply's payload.
pub trait Request: Message {
    /// Its request code (an ioctl number, `crate::codes`).
    const CODE: u32;
    /// What a successful reply carries.
    type Reply: Message;
}

/// Appends little-endian fields to a payload.
#[derive(Debug, Default)]
pub(crate) struct Writer(Vec<u8>);

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// A count or length. Callers keep counts within the message maxima,
    /// all far below `u32::MAX`; a larger one saturates, and the decoder
    /// then rejects the payload rather than misreading it.
    pub(crate) fn count(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }
    pub(crate) fn string(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    /// A byte array: its length, then the bytes.
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.count(b.len());
        self.0.extend_from_slice(b);
    }
    pub(crate) fn list<T: Record>(&mut self, items: &[T]) {
        self.count(items.len());
        for item in items {
            item.put(self);
        }
    }
    pub(crate) fn into_vec(self) -> Vec<u8> {
        self.0
    }
}

/// Reads little-endian fields from a payload, with typed errors.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(payload: &'a [u8], what: &'static str) -> Self {
        Reader {
            rest: payload,
            what,
        }
    }

    fn take<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        match self.rest.split_first_chunk::<N>() {
            Some((head, tail)) => {
                self.rest = tail;
                Ok(*head)
            }
            None => Err(self.truncated(field, N)),
        }
    }

    fn truncated(&self, field: &'static str, needed: usize) -> DecodeError {
        DecodeError::Truncated {
            what: self.what,
            field,
            needed,
            got: self.rest.len(),
        }
    }

    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        self.take::<1>(field).map(|[b]| b)
    }
    pub(crate) fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        self.take(field).map(u16::from_le_bytes)
    }
    pub(crate) fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        self.take(field).map(u32::from_le_bytes)
    }
    pub(crate) fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        self.take(field).map(u64::from_le_bytes)
    }

    /// Flags with only `known` bits allowed.
    pub(crate) fn flags(&mut self, field: &'static str, known: u32) -> Result<u32, DecodeError> {
        let v = self.u32(field)?;
        if v & !known != 0 {
            return Err(self.invalid(field, u64::from(v)));
        }
        Ok(v)
    }

    pub(crate) fn invalid(&self, field: &'static str, value: u64) -> DecodeError {
        DecodeError::InvalidField {
            what: self.what,
            field,
            value,
        }
    }

    /// A count of records of at least `min_size` bytes each (at least 1),
    /// at most `max`, that must fit in the bytes left.
    pub(crate) fn count(
        &mut self,
        field: &'static str,
        min_size: usize,
        max: usize,
    ) -> Result<usize, DecodeError> {
        let count = self.u32(field)?;
        let fit = self.rest.len() / min_size.max(1);
        let max = max.min(fit);
        match usize::try_from(count) {
            Ok(n) if n <= max => Ok(n),
            _ => Err(DecodeError::BadCount {
                what: self.what,
                field,
                count: u64::from(count),
                max: max as u64,
            }),
        }
    }

    pub(crate) fn string(
        &mut self,
        field: &'static str,
        max: usize,
    ) -> Result<String, DecodeError> {
        let (bytes, tail) = self.counted_bytes(field, max)?;
        let s = std::str::from_utf8(bytes).map_err(|_| DecodeError::BadUtf8 {
            what: self.what,
            field,
        })?;
        self.rest = tail;
        Ok(s.to_string())
    }

    /// A byte array of at most `max` bytes.
    pub(crate) fn bytes(
        &mut self,
        field: &'static str,
        max: usize,
    ) -> Result<Vec<u8>, DecodeError> {
        let (bytes, tail) = self.counted_bytes(field, max)?;
        self.rest = tail;
        Ok(bytes.to_vec())
    }

    /// A length and that many bytes (not consumed yet), and what follows.
    fn counted_bytes(
        &mut self,
        field: &'static str,
        max: usize,
    ) -> Result<(&'a [u8], &'a [u8]), DecodeError> {
        let len = self.count(field, 1, max)?;
        self.rest
            .split_at_checked(len)
            .ok_or_else(|| self.truncated(field, len))
    }

    pub(crate) fn list<T: Record>(
        &mut self,
        field: &'static str,
        max: usize,
    ) -> Result<Vec<T>, DecodeError> {
        let n = self.count(field, T::MIN_SIZE, max)?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(T::get(self)?);
        }
        Ok(items)
    }

    /// The end of the message: nothing may follow.
    pub(crate) fn finish(self) -> Result<(), DecodeError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes {
                what: self.what,
                extra: self.rest.len(),
            })
        }
    }
}

/// A record inside a payload (or a whole payload): fields in order.
pub(crate) trait Record: Sized {
    /// Name in decode errors.
    const WHAT: &'static str;
    /// Fewest bytes an encoding can take (its fixed fields); bounds counts.
    const MIN_SIZE: usize;
    fn put(&self, w: &mut Writer);
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError>;
}

/// Implements [`Record`] for unit structs: messages with no fields, which
/// encode to nothing.
macro_rules! empty_record {
    ($($t:ident),* $(,)?) => {$(
        impl $crate::msg::Record for $t {
            const WHAT: &'static str = stringify!($t);
            const MIN_SIZE: usize = 0;
            fn put(&self, _: &mut $crate::msg::Writer) {}
            fn get(_: &mut $crate::msg::Reader<'_>) -> Result<Self, $crate::msg::DecodeError> {
                Ok($t)
            }
        }
    )*};
}
pub(crate) use empty_record;

/// Implements [`Message`] for record types that are whole payloads.
macro_rules! message {
    ($($t:ty),* $(,)?) => {$(
        impl $crate::msg::Message for $t {
            fn encode(&self) -> Vec<u8> {
                let mut w = $crate::msg::Writer::default();
                $crate::msg::Record::put(self, &mut w);
                w.into_vec()
            }
            fn decode(payload: &[u8]) -> Result<Self, $crate::msg::DecodeError> {
                let mut r = $crate::msg::Reader::new(
                    payload,
                    <$t as $crate::msg::Record>::WHAT,
                );
                let v = <$t as $crate::msg::Record>::get(&mut r)?;
                r.finish()?;
                Ok(v)
            }
        }
    )*};
}
pub(crate) use message;

/// Implements [`Request`] for request types.
macro_rules! request {
    ($($t:ty => $code:expr, $reply:ty;)*) => {$(
        impl $crate::msg::Request for $t {
            const CODE: u32 = $code;
            type Reply = $reply;
        }
    )*};
}
pub(crate) use request;

#[cfg(test)]
pub(crate) mod testing {
    //! Helpers shared by the message tests.

    use super::{DecodeError, Message};
    use proptest::prelude::*;

    /// Parses a golden vector written as hex with spaces and newlines.
    pub fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        assert!(digits.len() % 2 == 0, "odd number of hex digits");
        digits
            .chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    /// `value` encodes to exactly `golden`, which decodes back to `value`;
    /// every proper prefix of it, and it with a byte appended, are rejected.
    pub fn golden<M: Message + PartialEq + std::fmt::Debug>(value: &M, golden: &str) {
        let bytes = hex(golden);
        assert_eq!(value.encode(), bytes, "encoding of {value:?}");
        assert_eq!(&M::decode(&bytes).unwrap(), value);
        for len in 0..bytes.len() {
            let r = M::decode(&bytes[..len]);
            assert!(
                matches!(
                    r,
                    Err(DecodeError::Truncated { .. } | DecodeError::BadCount { .. })
                ),
                "prefix of {len} bytes: {r:?}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            M::decode(&longer),
            Err(DecodeError::TrailingBytes { extra: 1, .. })
        ));
    }

    /// Round trip: decode(encode(v)) == v.
    pub fn round_trip<M: Message + PartialEq + std::fmt::Debug>(
        v: &M,
    ) -> Result<(), TestCaseError> {
        let bytes = v.encode();
        prop_assert_eq!(&M::decode(&bytes).unwrap(), v);
        Ok(())
    }

    /// Decoding arbitrary bytes returns (Ok or Err) without panicking, and
    /// what decodes re-encodes to the same bytes.
    pub fn canonical<M: Message + std::fmt::Debug>(bytes: &[u8]) -> Result<(), TestCaseError> {
        if let Ok(v) = M::decode(bytes) {
            prop_assert_eq!(v.encode(), bytes, "{:?}", v);
        }
        Ok(())
    }

    /// Short strings, some non-ASCII.
    pub fn text(max: usize) -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just('a'),
                Just('z'),
                Just('_'),
                Just('é'),
                Just('→'),
                any::<char>()
            ],
            0..=max,
        )
        .prop_map(|c| c.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_bounded_by_max_and_by_the_bytes_left() {
        // 3 records of 8 bytes announced, 16 bytes left.
        let mut p = 3u32.to_le_bytes().to_vec();
        p.extend_from_slice(&[0; 16]);
        let mut r = Reader::new(&p, "test");
        assert!(matches!(
            r.count("n", 8, 100),
            Err(DecodeError::BadCount {
                count: 3,
                max: 2,
                ..
            })
        ));
        let mut r = Reader::new(&p, "test");
        assert!(matches!(
            r.count("n", 1, 2),
            Err(DecodeError::BadCount {
                count: 3,
                max: 2,
                ..
            })
        ));
        let mut r = Reader::new(&p, "test");
        assert_eq!(r.count("n", 4, 100).unwrap(), 3);
    }

    #[test]
    fn huge_counts_are_rejected_without_allocating() {
        let p = u32::MAX.to_le_bytes();
        let mut r = Reader::new(&p, "test");
        assert!(matches!(
            r.list::<segments::Suinfo>("items", usize::MAX),
            Err(DecodeError::BadCount { max: 0, .. })
        ));
    }

    #[test]
    fn strings_must_be_utf8_and_within_their_maximum() {
        let mut w = Writer::default();
        w.string("héllo");
        let p = w.into_vec();
        assert_eq!(Reader::new(&p, "t").string("s", 6).unwrap(), "héllo");
        assert!(matches!(
            Reader::new(&p, "t").string("s", 5),
            Err(DecodeError::BadCount {
                count: 6,
                max: 5,
                ..
            })
        ));
        let bad = [2, 0, 0, 0, 0xc3, 0x28];
        assert!(matches!(
            Reader::new(&bad, "t").string("s", 10),
            Err(DecodeError::BadUtf8 { field: "s", .. })
        ));
    }

    #[test]
    fn unknown_request_flags_are_rejected() {
        let p = 6u32.to_le_bytes();
        assert!(matches!(
            Reader::new(&p, "t").flags("flags", 3),
            Err(DecodeError::InvalidField { value: 6, .. })
        ));
        assert_eq!(Reader::new(&p, "t").flags("flags", 7).unwrap(), 6);
    }
}
