//! The lock that serializes clusters inside one test binary.

use std::sync::{Mutex, MutexGuard};

/// Serializes clusters inside one test binary (2 cores; parallel daemon
/// start-ups are slow and flaky). Held for a cluster's whole lifetime.
static CLUSTER_LOCK: Mutex<()> = Mutex::new(());

thread_local! {
    /// Clusters alive on this thread: a thread that already holds the lock
    /// may start more clusters (e.g. stock and ours side by side) without
    /// deadlocking on itself.
    static HELD_BY_THIS_THREAD: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// One cluster's share of [`CLUSTER_LOCK`].
pub(super) struct ClusterLock {
    guard: Option<MutexGuard<'static, ()>>,
}

impl Drop for ClusterLock {
    fn drop(&mut self) {
        HELD_BY_THIS_THREAD.with(|h| h.set(h.get().saturating_sub(1)));
        self.guard.take();
    }
}

pub(super) fn lock_clusters() -> ClusterLock {
    let held = HELD_BY_THIS_THREAD.with(|h| h.get());
    let guard = if held > 0 { None } else { Some(CLUSTER_LOCK.lock().unwrap_or_else(|e| e.into_inner())) };
    HELD_BY_THIS_THREAD.with(|h| h.set(h.get() + 1));
    ClusterLock { guard }
}
