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

/// An iterator whose items are produced on a reading thread, in the source's order.
pub struct Prefetched<T: Send + 'static> {
    rx: Option<Receiver<Vec<T>>>,
    batch: std::vec::IntoIter<T>,
    reader: Option<JoinHandle<()>>,
}

/// Iterates `source` on a new thread, [`BATCH`] items ahead at most [`DEPTH`] batches. The
/// thread stops when the source ends or the returned iterator is dropped. Fails only if the
/// thread cannot be started.
pub fn prefetch<I>(source: I) -> std::io::Result<Prefetched<I::Item>>
where
    I: Iterator + Send + 'static,
    I::Item: Send + 'static,
{
    let (tx, rx) = sync_channel(DEPTH);
    let reader = std::thread::Builder::new()
        .name("cachescope-read".into())
        .spawn(move || {
            let mut source = source;
            loop {
                let batch: Vec<I::Item> = source.by_ref().take(BATCH).collect();
                let last = batch.len() < BATCH;
                if batch.is_empty() || tx.send(batch).is_err() || last {
                    return;
                }
            }
        })?;
    Ok(Prefetched {
        rx: Some(rx),
        batch: Vec::new().into_iter(),
        reader: Some(reader),
    })
}

impl<T: Send + 'static> Iterator for Prefetched<T> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        loop {
            if let Some(x) = self.batch.next() {
                return Some(x);
            }
            let batch = self.rx.as_ref()?.recv().ok()?;
            self.batch = batch.into_iter();
        }
    }
}

impl<T: Send + 'static> Drop for Prefetched<T> {
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

    #[test]
    fn keeps_the_order_across_batches() {
        let n = 3 * BATCH + 17;
        let got: Vec<usize> = prefetch(0..n).unwrap().collect();
        assert_eq!(got, (0..n).collect::<Vec<_>>());
        assert_eq!(prefetch(0..0usize).unwrap().count(), 0);
        assert_eq!(prefetch(0..BATCH).unwrap().count(), BATCH);
    }

    #[test]
    fn dropping_early_stops_the_reader() {
        let mut it = prefetch(0..usize::MAX).unwrap();
        assert_eq!(it.next(), Some(0));
        drop(it); // must return: the reader sees the closed channel
    }
}
