//! Splitting a checkpoint's payload into logs at the log head.
//!
//! Every log lies inside one segment: summary blocks, payload, and for the
//! last log of a checkpoint the super root. When the head segment is full
//! the writer moves to the segment chosen in advance (`next_seg`, recorded
//! in every log header of the current segment so that recovery can follow
//! the chain) and picks the one after it from the clean pool.

use crate::format::LogHeader;

/// Fewest free blocks worth starting a log in: a summary block and one
/// more block.
pub const MIN_LOG_BLOCKS: u64 = 2;

/// [`Head::next_seg`] of a side head (cleaning's and the long head's
/// logs): recovery never follows them, so no segment is set aside for
/// them to continue in; a full one takes the next clean segment when it
/// must, and their logs name their own segment as the next.
pub const NO_NEXT: u64 = u64::MAX;

/// Where the next log goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Segment being written.
    pub seg: u64,
    /// Next free block (absolute address) in it.
    pub block: u64,
    /// Segment to continue in when this one is full.
    pub next_seg: u64,
}

/// One log of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// Its segment.
    pub seg: u64,
    /// Its first (summary) block.
    pub start: u64,
    /// Summary blocks.
    pub nsummary: u64,
    /// Payload blocks (entries).
    pub nentries: u64,
    /// Whether it ends with the super root.
    pub super_root: bool,
    /// The next-segment field of its header.
    pub next_seg: u64,
}

impl Span {
    /// Blocks the log takes.
    pub fn nblocks(&self) -> u64 {
        self.nsummary + self.nentries + u64::from(self.super_root)
    }
    /// Address of payload block `i` of this log.
    pub fn payload_addr(&self, i: u64) -> u64 {
        self.start + self.nsummary + i
    }
}

/// The logs of one checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Logs in write order.
    pub spans: Vec<Span>,
    /// Clean segments taken, in order (entered as heads or chosen as next).
    pub taken: Vec<u64>,
    /// Segments left behind full.
    pub left: Vec<u64>,
    /// The head after the checkpoint.
    pub head: Head,
}

/// Payload blocks a whole segment holds at least (one log: its summary
/// blocks, and a super root).
pub fn payload_per_segment(block_size: usize, blocks_per_segment: u64) -> u64 {
    let sum = LogHeader::summary_blocks_for(blocks_per_segment as usize, block_size) as u64;
    blocks_per_segment.saturating_sub(sum + 1).max(1)
}

/// Clean segments a checkpoint of `n` payload blocks may need beyond the
/// head segment: one per `payload_per_segment`, plus the one chosen next
/// at each step, plus one for a short head.
pub fn segments_needed(n: u64, block_size: usize, blocks_per_segment: u64) -> u64 {
    n.div_ceil(payload_per_segment(block_size, blocks_per_segment)) + 2
}

/// Plans `n` payload blocks plus a super root from `head`, drawing new
/// segments from `clean` in order. `None` if `clean` runs out.
pub fn plan(
    head: Head,
    n: u64,
    block_size: usize,
    seg_start: impl Fn(u64) -> u64,
    blocks_per_segment: u64,
    clean: &[u64],
) -> Option<Layout> {
    plan_logs(
        head,
        n,
        true,
        block_size,
        seg_start,
        blocks_per_segment,
        clean,
    )
}

/// [`plan`], with the super root at the end only if `super_root` (the
/// cold log head of cleaning writes logs without one).
pub fn plan_logs(
    head: Head,
    n: u64,
    super_root: bool,
    block_size: usize,
    seg_start: impl Fn(u64) -> u64,
    blocks_per_segment: u64,
    clean: &[u64],
) -> Option<Layout> {
    let mut clean = clean.iter().copied();
    let mut taken = Vec::new();
    let mut left = Vec::new();
    let mut h = head;
    let mut spans = Vec::new();
    let mut remaining = n;
    loop {
        let end = seg_start(h.seg) + blocks_per_segment;
        let room = end - h.block;
        if room >= MIN_LOG_BLOCKS {
            let fit = |e: u64, sr: bool| {
                LogHeader::summary_blocks_for(e as usize, block_size) as u64 + e + u64::from(sr)
                    <= room
            };
            let named_next = if h.next_seg == NO_NEXT {
                h.seg
            } else {
                h.next_seg
            };
            if fit(remaining, super_root) {
                let span = Span {
                    seg: h.seg,
                    start: h.block,
                    nsummary: LogHeader::summary_blocks_for(remaining as usize, block_size) as u64,
                    nentries: remaining,
                    super_root,
                    next_seg: named_next,
                };
                h.block += span.nblocks();
                spans.push(span);
                return Some(Layout {
                    spans,
                    taken,
                    left,
                    head: h,
                });
            }
            // The largest log without the super root that fits.
            let (mut lo, mut hi) = (0u64, remaining);
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                if fit(mid, false) {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            if lo > 0 {
                let span = Span {
                    seg: h.seg,
                    start: h.block,
                    nsummary: LogHeader::summary_blocks_for(lo as usize, block_size) as u64,
                    nentries: lo,
                    super_root: false,
                    next_seg: named_next,
                };
                h.block += span.nblocks();
                remaining -= lo;
                spans.push(span);
                continue;
            }
        }
        // Move to the next segment and choose the one after it (a side
        // head only takes the next one).
        left.push(h.seg);
        let next = clean.next()?;
        taken.push(next);
        h = if h.next_seg == NO_NEXT {
            Head {
                seg: next,
                block: seg_start(next),
                next_seg: NO_NEXT,
            }
        } else {
            Head {
                seg: h.next_seg,
                block: seg_start(h.next_seg),
                next_seg: next,
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(s: u64) -> u64 {
        1 + s * 64
    }

    #[test]
    fn fits_in_the_head_segment() {
        let h = Head {
            seg: 0,
            block: 7,
            next_seg: 1,
        };
        let l = plan(h, 10, 4096, start, 64, &[2, 3]).unwrap();
        assert_eq!(l.spans.len(), 1);
        assert_eq!(l.spans[0].nblocks(), 12);
        assert_eq!(l.head.block, 19);
        assert!(l.taken.is_empty());
    }

    #[test]
    fn spills_into_the_chosen_next_segments() {
        let h = Head {
            seg: 0,
            block: 60,
            next_seg: 1,
        };
        let l = plan(h, 150, 4096, start, 64, &[2, 3, 4]).unwrap();
        let total: u64 = l.spans.iter().map(|s| s.nentries).sum();
        assert_eq!(total, 150);
        assert!(l.spans.last().unwrap().super_root);
        assert!(l
            .spans
            .iter()
            .all(|s| s.start + s.nblocks() <= start(s.seg) + 64));
        assert_eq!(l.spans[1].seg, 1);
        assert_eq!(l.spans[1].next_seg, 2);
        // 4 entries fit in segment 0, 63 in each of 1 and 2, the rest in 3.
        assert_eq!(l.spans[0].nentries, 4);
        assert_eq!(l.left, vec![0, 1, 2]);
        assert_eq!(l.taken, vec![2, 3, 4]);
        assert_eq!(l.head.seg, 3);
        assert!(plan(h, 1000, 4096, start, 64, &[2]).is_none());
    }

    #[test]
    fn a_side_head_takes_segments_only_as_it_fills_them() {
        let h = Head {
            seg: 0,
            block: 60,
            next_seg: NO_NEXT,
        };
        let l = plan_logs(h, 100, false, 4096, start, 64, &[5, 6, 7]).unwrap();
        // 4 entries fit in segment 0 (no super root), 63 in segment 5,
        // the rest in 6.
        assert_eq!(
            l.spans
                .iter()
                .map(|s| (s.seg, s.nentries))
                .collect::<Vec<_>>(),
            [(0, 4), (5, 63), (6, 33)]
        );
        // Each log names its own segment; none is set aside.
        assert!(l.spans.iter().all(|s| s.next_seg == s.seg));
        assert_eq!(l.taken, vec![5, 6]);
        assert_eq!(l.left, vec![0, 5]);
        assert_eq!(l.head.seg, 6);
        assert_eq!(l.head.next_seg, NO_NEXT);
        assert!(plan_logs(h, 100, false, 4096, start, 64, &[5]).is_none());
    }

    #[test]
    fn logs_without_a_super_root() {
        let h = Head {
            seg: 0,
            block: 1,
            next_seg: 1,
        };
        // 63 payload blocks and a summary fill segment 0 exactly; with a
        // super root they would not.
        let l = plan_logs(h, 63, false, 4096, start, 64, &[2]).unwrap();
        assert_eq!(l.spans.len(), 1);
        assert!(!l.spans[0].super_root);
        assert_eq!(l.head.block, 65);
        let l = plan_logs(h, 63, true, 4096, start, 64, &[2]).unwrap();
        assert_eq!(l.spans.len(), 2);
    }
}
