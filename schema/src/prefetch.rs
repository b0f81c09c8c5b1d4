//! Reading ahead on another thread: trace decoding and the merge of the threads' streams run
//! while the consumer (a simulation engine) works on the previous events.
//!
//! The order of the items is the iterator's, so results never depend on it; only the wall
//! time does. Memory is bounded by [`DEPTH`] batches of [`BATCH`] items.

use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;

/// Items per batch handed from the reading thread to the consumer.
pub const BATCH: usize = 16 * 1024;
/// Batches that may wait for the consumer.
pub const DEPTH: usize = 4;

/// Consecutive items of the source, and the error that ended it, if one did.
struct Batch<T, E> {
    items: Vec<T>,
    error: Option<E>,
}

/// An iterator whose items are produced on a reading thread, in the source's order.
pub struct Prefetched<T: Send + 'static, E: Send + 'static> {
    rx: Option<Receiver<Batch<T, E>>>,
    batch: std::vec::IntoIter<T>,
    /// The error after the current batch's items.
    error: Option<E>,
    reader: Option<JoinHandle<()>>,
}

/// Runs `fill` on a new thread, [`BATCH`] items ahead at most [`DEPTH`] batches, and yields
/// the items in the order it appends them. `fill(out, max)` appends up to `max` items to
/// `out` (fewer only at the end) and returns whether more may follow; an error ends the
/// items (nothing after it is read). The thread stops when `fill` is done or fails, or the
/// returned iterator is dropped. Fails only if the thread cannot be started.
///
/// Batches hold the items themselves, not `Result`s: a trace error is larger than an event,
/// and copying every event at the error's size through the batches cost as much as the
/// reading thread's merge.
pub fn prefetch<T, E, F>(mut fill: F) -> std::io::Result<Prefetched<T, E>>
where
    F: FnMut(&mut Vec<T>, usize) -> Result<bool, E> + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    let (tx, rx) = sync_channel(DEPTH);
    let reader = std::thread::Builder::new()
        .name("cachescope-read".into())
        .spawn(move || loop {
            let mut batch = Batch {
                items: Vec::with_capacity(BATCH),
                error: None,
            };
            let more = match fill(&mut batch.items, BATCH) {
                Ok(more) => more && batch.items.len() == BATCH,
                Err(e) => {
                    batch.error = Some(e);
                    false
                }
            };
            let nothing = batch.items.is_empty() && batch.error.is_none();
            if nothing || tx.send(batch).is_err() || !more {
                return;
            }
        })?;
    Ok(Prefetched {
        rx: Some(rx),
        batch: Vec::new().into_iter(),
        error: None,
        reader: Some(reader),
    })
}

impl<T: Send + 'static, E: Send + 'static> Iterator for Prefetched<T, E> {
    type Item = Result<T, E>;

    #[inline]
    fn next(&mut self) -> Option<Result<T, E>> {
        loop {
            if let Some(x) = self.batch.next() {
                return Some(Ok(x));
            }
            if let Some(e) = self.error.take() {
                self.rx = None;
                return Some(Err(e));
            }
            let batch = self.rx.as_ref()?.recv().ok()?;
            self.batch = batch.items.into_iter();
            self.error = batch.error;
        }
    }
}

impl<T: Send + 'static, E: Send + 'static> Prefetched<T, E> {
    /// The items not yet returned, a batch at a time, then the error that ended the source
    /// (if one did). For consumers that loop over slices: an item then costs no more than
    /// an index, where [`Iterator::next`] copies each one out in an `Option<Result<..>>`.
    pub fn next_items(&mut self) -> Option<Result<Vec<T>, E>> {
        if self.batch.len() > 0 {
            // Items left by calls of `next`.
            return Some(Ok(self.batch.by_ref().collect()));
        }
        loop {
            if let Some(e) = self.error.take() {
                self.rx = None;
                return Some(Err(e));
            }
            let batch = self.rx.as_ref()?.recv().ok()?;
            self.error = batch.error;
            if !batch.items.is_empty() {
                return Some(Ok(batch.items));
            }
        }
    }
}

impl<T: Send + 'static, E: Send + 'static> Drop for Prefetched<T, E> {
    fn drop(&mut self) {
        // Closing the channel makes the reader stop at its next send.
        self.rx = None;
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`prefetch`] for a fallible iterator: its items up to the first error, then that error.
    pub fn prefetch_iter<T, E, I>(source: I) -> std::io::Result<Prefetched<T, E>>
    where
        I: Iterator<Item = Result<T, E>> + Send + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        let mut source = source;
        prefetch(move |out: &mut Vec<T>, max| {
            while out.len() < max {
                match source.next() {
                    Some(item) => out.push(item?),
                    None => return Ok(false),
                }
            }
            Ok(true)
        })
    }

    #[test]
    fn keeps_the_order_across_batches() {
        let ok = |r: std::ops::Range<usize>| r.map(Ok::<usize, String>);
        let n = 3 * BATCH + 17;
        let got: Vec<usize> = prefetch_iter(ok(0..n))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(got, (0..n).collect::<Vec<_>>());
        assert_eq!(prefetch_iter(ok(0..0)).unwrap().count(), 0);
        assert_eq!(prefetch_iter(ok(0..BATCH)).unwrap().count(), BATCH);
    }

    #[test]
    fn an_error_ends_the_items_in_place() {
        for at in [0, 5, BATCH - 1, BATCH, 2 * BATCH + 3] {
            let source = (0..3 * BATCH).map(move |i| {
                if i == at {
                    Err(format!("bad {i}"))
                } else {
                    Ok(i)
                }
            });
            let got: Vec<Result<usize, String>> = prefetch_iter(source).unwrap().collect();
            assert_eq!(got.len(), at + 1, "error at {at}");
            assert!(got[..at].iter().enumerate().all(|(i, r)| r == &Ok(i)));
            assert_eq!(got[at], Err(format!("bad {at}")));
        }
    }

    /// Batches carry the same items in the same order as `next`, also after some `next`
    /// calls, and the error comes after the items before it.
    #[test]
    fn batches_equal_the_items() {
        for at in [None, Some(0), Some(7), Some(BATCH), Some(2 * BATCH + 3)] {
            let n = 3 * BATCH + 5;
            let source = (0..n).map(move |i| {
                if Some(i) == at {
                    Err(format!("bad {i}"))
                } else {
                    Ok(i)
                }
            });
            let mut it = prefetch_iter(source).unwrap();
            let mut got: Vec<Result<usize, String>> = it.by_ref().take(3).collect();
            while let Some(batch) = it.next_items() {
                match batch {
                    Ok(items) => {
                        assert!(!items.is_empty());
                        got.extend(items.into_iter().map(Ok));
                    }
                    Err(e) => got.push(Err(e)),
                }
            }
            let want: Vec<Result<usize, String>> = match at {
                None => (0..n).map(Ok).collect(),
                Some(a) => (0..a).map(Ok).chain([Err(format!("bad {a}"))]).collect(),
            };
            assert_eq!(got, want, "error at {at:?}");
        }
    }

    #[test]
    fn dropping_early_stops_the_reader() {
        let mut it = prefetch_iter((0..usize::MAX).map(Ok::<usize, ()>)).unwrap();
        assert_eq!(it.next(), Some(Ok(0)));
        drop(it); // must return: the reader sees the closed channel
    }
}
