//! Merged scans: fan out to the regions that can hold matching rows, k-way merge their sorted
//! pages into global row order, stop at an exact global limit.
//!
//! Each region is read page by page ([`ScanLimits`]); only the rows of the current pages are in
//! memory, never a whole region. The first page asked of each region is sized to its expected
//! share of the limit and a margin (salting spreads rows evenly, [`first_page`]), later pages
//! double, so a merged scan reads little more than it returns.
//!
//! # Invariants
//! 1. Rows come out in global key order (descending for reversed scans), each at most once.
//! 2. A region answers only for the bucket range the scan believes it owns; if a split changed
//!    it, the stream is replaced by streams over the regions now covering that range, resumed
//!    after the last row fetched from the old one. Rows up to that key were fetched from the old
//!    region while it owned them all; rows after it come from the new regions. So a scan
//!    spanning a split sees every row once.
//! 3. `complete` is true only when every stream is exhausted.

use crate::error::{ActorError, Result};
use crate::messages::{Reject, ScanRegion};
use crate::routing::{RegionRoute, TableRoute};
use crate::salt::{bucket_of, pinned_bucket, BucketRange, SaltBucket};
use kura_storage::model::*;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a scan keeps retrying a region that disowned its range before the router
/// published the new layout (a split takes milliseconds).
const REROUTE_PATIENCE: Duration = Duration::from_secs(30);

/// One region's sorted stream of rows.
struct Stream {
    region: RegionRoute,
    /// The bucket range this stream covers (the region's range when the stream was made).
    expect: BucketRange,
    /// Spec of the next page.
    next: ScanSpec,
    buf: VecDeque<Row>,
    exhausted: bool,
    last_fetched: Option<Vec<u8>>,
    page_rows: usize,
}

enum Fetch {
    Ok,
    NotOwner,
}

impl Stream {
    async fn fetch(&mut self, max_bytes: usize) -> Result<Fetch> {
        let limits = ScanLimits {
            max_rows: self.page_rows.max(1),
            max_bytes,
        };
        let spec = self.next.clone();
        let expect = self.expect;
        let answer = self
            .region
            .handle
            .call(|reply| ScanRegion {
                expect,
                spec,
                limits,
                reply,
            })
            .await;
        let page = match answer {
            Ok(p) => p,
            Err(Reject::NotOwner) => return Ok(Fetch::NotOwner),
            Err(Reject::Failed(e)) => return Err(e),
        };
        if let Some(last) = page.rows.last() {
            self.next = self.next.resume_after(&last.key);
            self.last_fetched = Some(last.key.clone());
        }
        // A page without rows is final: the store returns at least one row when one exists.
        self.exhausted = page.complete || page.rows.is_empty();
        self.buf.extend(page.rows);
        self.page_rows = self.page_rows.saturating_mul(2);
        Ok(Fetch::Ok)
    }
}

/// The rows a merged scan that wants `want` asks each of its `regions` regions for first.
/// Salting spreads rows evenly, so how many of the first `want` rows one region holds is
/// binomial (mean `want / regions`): the mean plus three standard deviations and one row
/// leaves a region short, and its stream to be asked again, in about one scan in a hundred or
/// fewer at 8 regions (and limit 10 to 1,000), while a 10-row scan over 8 regions reads 48
/// rows, not the 72 of a flat margin of eight rows a region.
fn first_page(want: usize, regions: usize) -> usize {
    let p = 1.0 / regions.max(1) as f64;
    let w = want as f64;
    let bound = w * p + 3.0 * (w * p * (1.0 - p)).sqrt();
    // `as` saturates: an unbounded `want` asks for all.
    (bound.ceil() as usize)
        .saturating_add(1)
        .clamp(1, want.max(1))
}

fn row_bytes(r: &Row) -> usize {
    r.key.len()
        + r.cells
            .iter()
            .map(|c| c.family.len() + c.qualifier.len() + c.value.len() + 8)
            .sum::<usize>()
}

/// The merged scan of one page.
pub(crate) struct MergedScan<'a> {
    pub table: &'a str,
    pub route: Arc<TableRoute>,
    pub spec: ScanSpec,
    pub limit: Option<usize>,
    pub page: ScanLimits,
    /// Re-reads the current snapshot of the table (after a split).
    pub reroute: &'a (dyn Fn() -> Result<Arc<TableRoute>> + Sync),
}

impl MergedScan<'_> {
    pub(crate) async fn run(self) -> Result<ScanPage> {
        let want = self.limit.unwrap_or(usize::MAX).min(self.page.max_rows);
        let pin = pinned_bucket(&self.spec.low, &self.spec.high, &self.route.desc.salt);
        let regions: Vec<RegionRoute> = match pin {
            Some(b) => self.route.region_for(b).cloned().into_iter().collect(),
            None => self.route.regions.clone(),
        };
        let first_page = first_page(want, regions.len());
        let mut streams: Vec<Stream> = regions
            .into_iter()
            .map(|region| Stream {
                expect: region.range,
                region,
                next: self.spec.clone(),
                buf: VecDeque::new(),
                exhausted: false,
                last_fetched: None,
                page_rows: first_page,
            })
            .collect();

        let mut out: Vec<Row> = Vec::new();
        let mut bytes = 0usize;
        let mut waiting_since: Option<Instant> = None;
        // Refill only when a stream ran dry: every pick must see the head of every live stream.
        let mut need_refill = true;
        loop {
            // A full page ends the scan before any refill: the stream the last pick emptied
            // is not asked again for rows nobody wants (a one-row scan asks each region once).
            if out.len() >= want || (bytes >= self.page.max_bytes && !out.is_empty()) {
                break;
            }
            if need_refill {
                self.refill(&mut streams, want - out.len(), &mut waiting_since, pin)
                    .await?;
            }
            let best = streams
                .iter()
                .enumerate()
                .filter_map(|(i, s)| s.buf.front().map(|r| (i, &r.key)))
                .reduce(|a, b| {
                    let b_first = if self.spec.reversed {
                        b.1 > a.1
                    } else {
                        b.1 < a.1
                    };
                    if b_first {
                        b
                    } else {
                        a
                    }
                })
                .map(|(i, _)| i);
            let Some(i) = best else { break };
            let stream = &mut streams[i];
            if let Some(row) = stream.buf.pop_front() {
                bytes += row_bytes(&row);
                self.route
                    .count_read(bucket_of(&row.key, &self.route.desc.salt));
                out.push(row);
            }
            need_refill = stream.buf.is_empty() && !stream.exhausted;
        }
        let complete = streams.iter().all(|s| s.exhausted && s.buf.is_empty());
        Ok(ScanPage {
            rows: out,
            complete,
        })
    }

    /// Fetch a page for every stream whose buffer is empty and which is not exhausted, so that
    /// the next pick sees the head of every live stream.
    async fn refill(
        &self,
        streams: &mut Vec<Stream>,
        remaining: usize,
        waiting_since: &mut Option<Instant>,
        pin: Option<SaltBucket>,
    ) -> Result<()> {
        loop {
            let max_bytes = self.page.max_bytes;
            let fetches = streams
                .iter_mut()
                .filter(|s| s.buf.is_empty() && !s.exhausted)
                .map(|s| {
                    // The next page of a stream is sized to what is still wanted.
                    s.page_rows = s.page_rows.min(remaining);
                    s.fetch(max_bytes)
                });
            let results = futures::future::join_all(fetches).await;
            if results.is_empty() {
                return Ok(());
            }
            let mut disowned = false;
            for r in results {
                if let Fetch::NotOwner = r? {
                    disowned = true;
                }
            }
            if !disowned {
                return Ok(());
            }
            self.replace_disowned(streams, waiting_since, pin).await?;
        }
    }

    /// Replace the streams of regions that disowned their range by streams over the regions
    /// that own it now (see invariant 2).
    async fn replace_disowned(
        &self,
        streams: &mut Vec<Stream>,
        waiting_since: &mut Option<Instant>,
        pin: Option<SaltBucket>,
    ) -> Result<()> {
        let route = (self.reroute)()?;
        let mut added = Vec::new();
        let mut stale = false;
        for s in streams
            .iter_mut()
            .filter(|s| s.buf.is_empty() && !s.exhausted)
        {
            let now: Vec<RegionRoute> = route
                .overlapping(s.expect)
                .filter(|r| pin.is_none_or(|b| r.range.contains(b)))
                .cloned()
                .collect();
            let unchanged =
                now.len() == 1 && now[0].id() == s.region.id() && now[0].range == s.expect;
            if unchanged || now.is_empty() {
                // The router has not published the new layout yet.
                stale = true;
                continue;
            }
            let resume = match &s.last_fetched {
                Some(k) => self.spec.resume_after(k),
                None => self.spec.clone(),
            };
            for region in now {
                // Not empty: `overlapping` keeps the regions that share a bucket with it.
                let Some(expect) = region.range.intersection(s.expect) else {
                    continue;
                };
                added.push(Stream {
                    expect,
                    region,
                    next: resume.clone(),
                    buf: VecDeque::new(),
                    exhausted: false,
                    last_fetched: s.last_fetched.clone(),
                    page_rows: s.page_rows,
                });
            }
            // The old stream keeps nothing to fetch; its buffer is already empty.
            s.exhausted = true;
        }
        streams.extend(added);
        if stale {
            let since = *waiting_since.get_or_insert_with(Instant::now);
            if since.elapsed() > REROUTE_PATIENCE {
                return Err(ActorError::Internal(format!(
                    "scan of {}: a region disowned its range but no new layout was published",
                    self.table
                )));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Ok(())
    }
}
