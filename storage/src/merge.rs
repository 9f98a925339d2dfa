//! The k-way merge of sorted entry sources (memtable and segments) into one sorted stream.
//!
//! # Invariants
//! 1. Every source yields entries in [`cmp_entries`] order; the merge then does too.
//! 2. The first error of any source ends the stream and is returned.

use crate::error::Result;
use crate::key::{cmp_entries, Entry};
use std::cmp::Ordering;

/// A sorted stream of entries.
pub(crate) trait EntrySource<'a> {
    fn next_entry(&mut self) -> Result<Option<Entry<'a>>>;

    /// Skip the rest of one column; return the first entry after it.
    fn skip_column(
        &mut self,
        row: &[u8],
        family: &[u8],
        qualifier: Option<&[u8]>,
    ) -> Result<Option<Entry<'a>>> {
        loop {
            match self.next_entry()? {
                Some(e) if e.row == row && e.family == family && e.qualifier == qualifier => {}
                other => return Ok(other),
            }
        }
    }
}

/// Merges sources; `k` is small (the memtable plus a handful of segments), so the smallest head
/// is found by a linear pass, which beats a heap at this size.
pub(crate) struct MergeIter<'a> {
    sources: Vec<Box<dyn EntrySource<'a> + 'a>>,
    heads: Vec<Option<Entry<'a>>>,
    current: Option<usize>,
}

impl<'a> MergeIter<'a> {
    pub(crate) fn new(mut sources: Vec<Box<dyn EntrySource<'a> + 'a>>) -> Result<MergeIter<'a>> {
        let mut heads = Vec::with_capacity(sources.len());
        for s in sources.iter_mut() {
            heads.push(s.next_entry()?);
        }
        let mut m = MergeIter {
            sources,
            heads,
            current: None,
        };
        m.pick();
        Ok(m)
    }

    fn pick(&mut self) {
        let mut best: Option<usize> = None;
        for (i, h) in self.heads.iter().enumerate() {
            if let Some(e) = h {
                best = match best {
                    Some(b) => match self.heads[b].as_ref() {
                        Some(be) if cmp_entries(e, be) == Ordering::Less => Some(i),
                        _ => Some(b),
                    },
                    None => Some(i),
                };
            }
        }
        self.current = best;
    }

    /// The next entry without consuming it.
    pub(crate) fn peek(&self) -> Option<&Entry<'a>> {
        self.current.and_then(|i| self.heads[i].as_ref())
    }

    /// Skip every remaining entry of one column, in every source.
    pub(crate) fn skip_column(
        &mut self,
        row: &[u8],
        family: &[u8],
        qualifier: Option<&[u8]>,
    ) -> Result<()> {
        for i in 0..self.sources.len() {
            let in_column = self.heads[i]
                .as_ref()
                .is_some_and(|h| h.row == row && h.family == family && h.qualifier == qualifier);
            if in_column {
                self.heads[i] = self.sources[i].skip_column(row, family, qualifier)?;
            }
        }
        self.pick();
        Ok(())
    }

    /// Consume the next entry.
    pub(crate) fn next(&mut self) -> Result<Option<Entry<'a>>> {
        let Some(i) = self.current else {
            return Ok(None);
        };
        let out = self.heads[i].take();
        self.heads[i] = self.sources[i].next_entry()?;
        self.pick();
        Ok(out)
    }
}
