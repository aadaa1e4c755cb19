//! A heartbeat among the ranks of an [`Mpi`](super::Mpi) job, so that a dead rank is
//! noticed in seconds instead of after the collective timeout.
//!
//! A collective's timeout has to be long (rank 0 may write a large checkpoint while the
//! others wait at the next all-reduce), and from inside a pending collective a rank that is
//! slow looks exactly like a rank that is gone. So every rank runs a thread of its own that
//! takes part in a tiny all-reduce on a separate communicator about every
//! [`INTERVAL`]. That thread keeps answering while its rank computes, so a round that does
//! not complete within the liveness limit means a process is gone or stopped, not busy.
//!
//! The all-reduce carries a stop flag (the maximum over ranks): a rank that shuts down
//! raises it, every rank sees it in the same round and stops there, so no heartbeat is
//! left pending on any rank when MPI is finalised.

use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpi::ffi;

/// Time between the end of one heartbeat round and the start of the next.
const INTERVAL: Duration = Duration::from_millis(200);

/// Time between two checks of a pending round.
const POLL: Duration = Duration::from_millis(10);

const RUNNING: u8 = 0;
/// Every rank agreed to stop; nothing is pending.
const STOPPED: u8 = 1;
/// A round did not complete within the liveness limit, or MPI reported an error.
const LOST: u8 = 2;

/// The heartbeat thread of one rank.
pub(super) struct Heartbeat {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    stop: AtomicBool,
    state: AtomicU8,
}

/// The heartbeat's communicator, moved into its thread.
struct Comm(ffi::MPI_Comm);

// SAFETY: the handle is used by the heartbeat thread only, each call under the engine's
// MPI lock (MPI_THREAD_SERIALIZED).
unsafe impl Send for Comm {}

impl Heartbeat {
    /// Starts the heartbeat on `comm` (a communicator of its own, freed by the caller once
    /// [`Heartbeat::stop`] says nothing is pending), taking `calls` around every MPI call.
    pub(super) fn start(comm: ffi::MPI_Comm, calls: Arc<Mutex<()>>, liveness: Duration) -> Self {
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            state: AtomicU8::new(RUNNING),
        });
        let thread = {
            let shared = Arc::clone(&shared);
            let comm = Comm(comm);
            std::thread::Builder::new()
                .name("rumus-mpi-heartbeat".into())
                .spawn(move || {
                    let comm = comm;
                    let state = beat(comm.0, &calls, &shared.stop, liveness);
                    shared.state.store(state, Ordering::Release);
                })
        };
        let (thread, state) = match thread {
            Ok(thread) => (Some(thread), RUNNING),
            // Without a thread there is no heartbeat: collectives fall back to their timeout.
            Err(_) => (None, STOPPED),
        };
        shared.state.store(state, Ordering::Release);
        Heartbeat { shared, thread }
    }

    /// Whether some rank stopped answering (or MPI failed under the heartbeat).
    pub(super) fn lost(&self) -> bool {
        self.shared.state.load(Ordering::Acquire) == LOST
    }

    /// Raises the stop flag and waits for the thread: `true` when every rank agreed to stop
    /// (nothing pending, MPI can be finalised), `false` when a rank is gone.
    pub(super) fn stop(&mut self) -> bool {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            // The thread ends within one round, or within the liveness limit.
            let _ = thread.join();
        }
        self.shared.state.load(Ordering::Acquire) == STOPPED
    }

    /// Raises the stop flag without waiting (the job failed; the process is ending).
    pub(super) fn abandon(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.thread.take();
    }
}

/// The heartbeat loop: rounds until every rank raised the stop flag ([`STOPPED`]) or a round
/// fails to complete in time ([`LOST`]).
fn beat(comm: ffi::MPI_Comm, calls: &Mutex<()>, stop: &AtomicBool, liveness: Duration) -> u8 {
    let lock = || calls.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        // On the heap and owned through a raw pointer, so that a round given up on leaks
        // them while MPI may still write.
        let flags: *mut [i64; 2] =
            Box::into_raw(Box::new([i64::from(stop.load(Ordering::Acquire)), 0]));
        // SAFETY: reading the library's null-request constant.
        let mut request = unsafe { ffi::RSMPI_REQUEST_NULL };
        let code = {
            let _mpi = lock();
            // SAFETY: one i64 sent from `flags[0]` and received into `flags[1]`; the
            // allocation lives until the round completes or is leaked.
            unsafe {
                let send = flags.cast::<i64>();
                ffi::MPI_Iallreduce(
                    send.cast(),
                    send.add(1).cast(),
                    1,
                    ffi::RSMPI_INT64_T,
                    ffi::RSMPI_MAX,
                    comm,
                    &mut request,
                )
            }
        };
        if code != 0 {
            return LOST;
        }
        let posted = Instant::now();
        loop {
            std::thread::sleep(POLL);
            let mut done: c_int = 0;
            let code = {
                let _mpi = lock();
                // SAFETY: `request` came from the call above.
                unsafe { ffi::MPI_Test(&mut request, &mut done, ffi::RSMPI_STATUS_IGNORE) }
            };
            if code != 0 || (done == 0 && posted.elapsed() > liveness) {
                // `flags` is leaked: MPI may still write into it.
                return LOST;
            }
            if done != 0 {
                break;
            }
        }
        // SAFETY: the round completed, so MPI wrote `flags[1]` and holds no reference;
        // the allocation came from `Box::into_raw` above.
        let everyone_stops = unsafe { Box::from_raw(flags)[1] } != 0;
        if everyone_stops {
            return STOPPED;
        }
        // Sleep in steps, so a rank that shuts down raises its flag in the next round.
        let rested = Instant::now();
        while rested.elapsed() < INTERVAL && !stop.load(Ordering::Acquire) {
            std::thread::sleep(POLL);
        }
    }
}
