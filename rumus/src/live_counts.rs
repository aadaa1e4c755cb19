//! Process-wide counts that every small op changes: bytes held by live storages and live
//! graph records, and the key comparisons of the header readers. Tests read them to prove
//! memory is released and that reading a header costs work in proportion to its size.
//!
//! A locked add to one shared counter costs tens of cycles, which showed as a visible share of
//! an op on 16 elements. So each thread keeps its own share of every count, written only by
//! that thread (a plain load and store, no locked instruction), and a reader adds the shares.
//! A thread's shares move into the retired totals when it exits, under the same lock the
//! reader takes, so a read never counts them twice or misses them.

use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// What is counted.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Count {
    StorageBytes = 0,
    GraphNodes = 1,
    /// Equality comparisons of two keys of a JSON object (`io::json`): a count of work that,
    /// unlike a duration, does not depend on the machine or its load.
    KeyComparisons = 2,
}

const COUNTS: usize = 3;
const ALL: [Count; COUNTS] = [
    Count::StorageBytes,
    Count::GraphNodes,
    Count::KeyComparisons,
];

/// One thread's share of each count.
#[derive(Default)]
struct Shares([AtomicIsize; COUNTS]);

/// The shares of every running thread.
static RUNNING: Mutex<Vec<Arc<Shares>>> = Mutex::new(Vec::new());
/// The shares of threads that have exited, and changes made while a thread was exiting.
static RETIRED: [AtomicIsize; COUNTS] = [const { AtomicIsize::new(0) }; COUNTS];

fn running() -> MutexGuard<'static, Vec<Arc<Shares>>> {
    RUNNING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// This thread's shares; registered on first use, retired when the thread exits.
struct ThreadShares(Arc<Shares>);

impl ThreadShares {
    fn register() -> Self {
        let shares = Arc::new(Shares::default());
        running().push(shares.clone());
        ThreadShares(shares)
    }
}

impl Drop for ThreadShares {
    fn drop(&mut self) {
        let mut running = running();
        running.retain(|shares| !Arc::ptr_eq(shares, &self.0));
        for (retired, share) in RETIRED.iter().zip(&self.0.0) {
            retired.fetch_add(share.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }
}

thread_local! {
    static MINE: ThreadShares = ThreadShares::register();
}

/// Adds `delta` to `count` (negative to subtract).
#[inline]
pub(crate) fn add(count: Count, delta: isize) {
    let added = MINE.try_with(|mine| {
        // Only this thread writes its share, so a load and a store cannot lose an update.
        let share = &mine.0.0[count as usize];
        share.store(share.load(Ordering::Relaxed) + delta, Ordering::Relaxed);
    });
    if added.is_err() {
        // This thread is exiting and its shares are gone: count directly.
        RETIRED[count as usize].fetch_add(delta, Ordering::Relaxed);
    }
    if delta > 0 && PEAK_WATCHERS.load(Ordering::Relaxed) > 0 {
        PEAK[count as usize].fetch_max(total(count), Ordering::Relaxed);
    }
}

/// How many [`PeakWatch`]es are alive. While none is, `add` reads nothing but this.
static PEAK_WATCHERS: AtomicUsize = AtomicUsize::new(0);
/// The highest total of each count since the last [`PeakWatch`] started.
static PEAK: [AtomicUsize; COUNTS] = [const { AtomicUsize::new(0) }; COUNTS];

/// Keeps the high-water mark of every count while alive. Each increase then sums every
/// thread's share under a lock, so this is for tests and measurements, not training loops.
/// Watches share one mark: starting one restarts it.
pub(crate) struct PeakWatch(());

impl PeakWatch {
    pub(crate) fn start() -> Self {
        PEAK_WATCHERS.fetch_add(1, Ordering::Relaxed);
        for (count, peak) in ALL.into_iter().zip(&PEAK) {
            peak.store(total(count), Ordering::Relaxed);
        }
        PeakWatch(())
    }

    /// The highest total `count` reached since [`PeakWatch::start`].
    pub(crate) fn peak(&self, count: Count) -> usize {
        PEAK[count as usize].load(Ordering::Relaxed)
    }
}

impl Drop for PeakWatch {
    fn drop(&mut self) {
        PEAK_WATCHERS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The current value of `count` over all threads.
pub(crate) fn total(count: Count) -> usize {
    let running = running();
    let sum = RETIRED[count as usize].load(Ordering::Relaxed)
        + running
            .iter()
            .map(|shares| shares.0[count as usize].load(Ordering::Relaxed))
            .sum::<isize>();
    sum.max(0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_survive_the_threads_that_made_them() {
        // Other tests change the counts concurrently, so this uses its own arithmetic: a
        // thread adds and exits, another removes, and the balance comes back.
        let before = total(Count::GraphNodes) as isize;
        std::thread::spawn(|| add(Count::GraphNodes, 1_000_000))
            .join()
            .unwrap();
        let during = total(Count::GraphNodes) as isize;
        std::thread::spawn(|| add(Count::GraphNodes, -1_000_000))
            .join()
            .unwrap();
        let after = total(Count::GraphNodes) as isize;
        assert!(
            (during - before - 1_000_000).abs() < 100_000,
            "{before} {during}"
        );
        assert!((after - before).abs() < 100_000, "{before} {after}");
    }
}
