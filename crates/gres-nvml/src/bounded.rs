//! NVML calls bounded by a deadline: the work runs in a worker thread that
//! announces each call before making it; the caller waits for the worker
//! and, when one call runs past its deadline, stops waiting and reports
//! that call ([`NvmlHang`]), with what the worker had gathered so far.
//!
//! The hung worker is abandoned, not stopped, and this is the only safe
//! way: a thread inside NVML is usually in an `ioctl` on the driver (in the
//! kernel, often in uninterruptible sleep after a GPU fault), which no
//! signal ends; killing or cancelling the thread (`pthread_cancel`, which
//! Rust does not offer for good reason) would unwind through, or stop in
//! the middle of, NVML's own code holding NVML's internal locks, leaving the
//! library (and memory this process shares with it) in a state no later
//! call may touch.  So the thread is left to finish on its own: it makes
//! no further NVML call once abandoned (it checks before each one), it
//! drops its share of the NVML session when its call returns, and a
//! short-lived process (`gres-rs health`) simply exits, which ends it.
//! [`workers_running`] tells how many are still out.
//!
//! A run may also be given an end of its own ([`run_until`]): the caller
//! stops waiting then, whatever call is in progress, and reports where the
//! worker was ([`Bounded::out_of_time`]), keeping what it had read.  Many
//! slow calls that each return in time must not keep a health check past
//! the moment slurmd kills it.
//!
//! A worker may stop half-way ([`Tracker::pause`]: [`start`] then returns
//! with a [`Paused`] handle) and go on when the caller resumes it, later,
//! from another call of the process ([`Paused::resume`]): a step's watch
//! registers NVML events when the step starts and collects them when it
//! ends, with whatever NVML objects it made kept on the worker's stack in
//! between.  Each part is bounded as a whole run is; a paused worker makes
//! no call, and ends without one when its handle is dropped.  A worker stuck in
//! `nvmlInit` holds the process's session lock ([`crate::session()`]): later
//! NVML users of the same process wait for it, so a process whose
//! reading hung should use NVML no more.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// An NVML call that did not return in time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvmlHang {
    /// NVML's name of the function (`nvmlDeviceGetTotalEccErrors`), or
    /// `"(between calls)"` when the worker made none for that long.
    pub call: &'static str,
    /// The GPU (NVML index) it was called for, if one.
    pub gpu: Option<u32>,
    /// How long it had run when the caller stopped waiting.
    pub waited_ms: u64,
}

impl std::fmt::Display for NvmlHang {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.gpu {
            Some(g) => write!(f, "{} on GPU {g} did not return in {} ms", self.call, self.waited_ms),
            None => write!(f, "{} did not return in {} ms", self.call, self.waited_ms),
        }
    }
}

/// NVML worker threads not finished yet: after a bounded run returned, the
/// abandoned ones whose call still hangs.
pub fn workers_running() -> usize {
    RUNNING.load(Ordering::SeqCst)
}

static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// The call in progress.
struct Current {
    call: &'static str,
    gpu: Option<u32>,
    started: Instant,
    /// Its deadline: the per-call deadline, plus any time the call is
    /// meant to wait (an event wait's timeout).
    allowed: Duration,
}

struct Progress<R> {
    out: R,
    calls: u32,
    current: Option<Current>,
    /// When the worker last started or ended a call.
    since: Instant,
    done: bool,
    /// The worker waits in [`Tracker::pause`] for the caller.
    paused: bool,
    /// The caller asked the paused worker to go on.
    resumed: bool,
}

struct Shared<R> {
    progress: Mutex<Progress<R>>,
    changed: Condvar,
    abandoned: AtomicBool,
}

impl<R> Shared<R> {
    fn lock(&self) -> MutexGuard<'_, Progress<R>> {
        // A panic elsewhere while holding it leaves whole data behind.
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The worker's side: announces calls and publishes what it read.
pub struct Tracker<R> {
    shared: Arc<Shared<R>>,
    deadline: Duration,
}

impl<R> Tracker<R> {
    /// Make NVML call(s) `call` (for GPU `gpu`), counted as `n` calls,
    /// allowed the deadline plus `extra`; `None`, without calling, once
    /// the caller stopped waiting.
    pub fn call<T>(&self, call: &'static str, gpu: Option<u32>, n: u32, extra: Duration, f: impl FnOnce() -> T) -> Option<T> {
        self.call_within(call, gpu, n, self.deadline.saturating_add(extra), f)
    }

    /// [`Tracker::call`] with a deadline of its own instead of the run's
    /// (`nvmlInit`, which loads the driver's state on a node without
    /// persistence mode, may take seconds).
    pub fn call_within<T>(&self, call: &'static str, gpu: Option<u32>, n: u32, allowed: Duration, f: impl FnOnce() -> T) -> Option<T> {
        {
            let mut p = self.shared.lock();
            if self.shared.abandoned.load(Ordering::SeqCst) {
                return None;
            }
            let now = Instant::now();
            p.current = Some(Current { call, gpu, started: now, allowed });
            p.since = now;
            p.calls += n;
        }
        self.shared.changed.notify_all();
        let out = f();
        {
            let mut p = self.shared.lock();
            p.current = None;
            p.since = Instant::now();
        }
        self.shared.changed.notify_all();
        Some(out)
    }

    /// Count `n` more calls made inside the last [`Tracker::call`] (a
    /// wrapper call that makes a second C call only sometimes).
    pub fn add_calls(&self, n: u32) {
        self.shared.lock().calls += n;
    }

    /// Change the output seen by the caller.
    pub fn update(&self, f: impl FnOnce(&mut R)) {
        f(&mut self.shared.lock().out);
    }

    /// Hand what was gathered to the caller ([`start`] returns) and wait,
    /// making no call, until it resumes the worker (`true`) or drops its
    /// [`Paused`] handle (`false`: the worker should end without another
    /// NVML call; [`Tracker::call`] would refuse one anyway).
    pub fn pause(&self) -> bool {
        let mut p = self.shared.lock();
        p.paused = true;
        self.shared.changed.notify_all();
        loop {
            if self.shared.abandoned.load(Ordering::SeqCst) {
                return false;
            }
            if p.resumed {
                p.resumed = false;
                p.since = Instant::now();
                return true;
            }
            p = self.shared.changed.wait(p).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// What a bounded run gives back.
pub struct Bounded<R> {
    /// What the worker published (all of it, or up to the hang).
    pub out: R,
    /// The NVML calls it announced.
    pub calls: u32,
    pub hang: Option<NvmlHang>,
    /// The run's own end came first ([`run_until`]): the call in progress
    /// then (or `"(between calls)"`), which had not overrun its deadline.
    pub out_of_time: Option<NvmlHang>,
}

/// Marks the run done and counts the worker out, however it ends (a panic
/// included: the caller never waits for a worker that is gone).
struct DoneGuard<R>(Arc<Shared<R>>);

impl<R> Drop for DoneGuard<R> {
    fn drop(&mut self) {
        self.0.lock().done = true;
        self.0.changed.notify_all();
        RUNNING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Run `work` in a worker thread, each of its NVML calls bounded by
/// `deadline`; returns when it is done or when a call overran.
pub fn run<R, W>(deadline: Duration, work: W) -> Result<Bounded<R>, String>
where
    R: Default + Send + 'static,
    W: FnOnce(&Tracker<R>) + Send + 'static,
{
    run_until(deadline, None, work)
}

/// [`run`], and the caller stops waiting at `until` too, whatever the
/// worker does then ([`Bounded::out_of_time`]).
pub fn run_until<R, W>(deadline: Duration, until: Option<Instant>, work: W) -> Result<Bounded<R>, String>
where
    R: Default + Send + 'static,
    W: FnOnce(&Tracker<R>) + Send + 'static,
{
    // A worker that pauses is abandoned when the handle drops here.
    start_until(deadline, until, work).map(|(b, _)| b)
}

/// A worker that paused ([`Tracker::pause`]), waiting for the caller.
/// Dropping it lets the worker end without a further NVML call.
pub struct Paused<R> {
    shared: Arc<Shared<R>>,
    deadline: Duration,
}

impl<R: Default> Paused<R> {
    /// Let the worker go on, and wait for it as [`run`] does: what it
    /// gathered after the pause, and the calls it made since.
    pub fn resume(self) -> (Bounded<R>, Option<Paused<R>>) {
        {
            let mut p = self.shared.lock();
            p.paused = false;
            p.resumed = true;
            p.calls = 0;
            p.since = Instant::now();
        }
        self.shared.changed.notify_all();
        wait(&self.shared, self.deadline, None)
    }
}

impl<R> Drop for Paused<R> {
    fn drop(&mut self) {
        {
            let _p = self.shared.lock();
            self.shared.abandoned.store(true, Ordering::SeqCst);
        }
        self.shared.changed.notify_all();
    }
}

/// [`run`] for a worker that may pause: also the handle to resume it when
/// it did.
pub fn start<R, W>(deadline: Duration, work: W) -> Result<(Bounded<R>, Option<Paused<R>>), String>
where
    R: Default + Send + 'static,
    W: FnOnce(&Tracker<R>) + Send + 'static,
{
    start_until(deadline, None, work)
}

fn start_until<R, W>(deadline: Duration, until: Option<Instant>, work: W) -> Result<(Bounded<R>, Option<Paused<R>>), String>
where
    R: Default + Send + 'static,
    W: FnOnce(&Tracker<R>) + Send + 'static,
{
    let shared = Arc::new(Shared {
        progress: Mutex::new(Progress { out: R::default(), calls: 0, current: None, since: Instant::now(), done: false, paused: false, resumed: false }),
        changed: Condvar::new(),
        abandoned: AtomicBool::new(false),
    });
    let tracker = Tracker { shared: Arc::clone(&shared), deadline };
    RUNNING.fetch_add(1, Ordering::SeqCst);
    let spawned = std::thread::Builder::new().name("nvml-worker".into()).spawn(move || {
        let _done = DoneGuard(Arc::clone(&tracker.shared));
        work(&tracker);
    });
    if let Err(e) = spawned {
        RUNNING.fetch_sub(1, Ordering::SeqCst);
        return Err(format!("cannot start the NVML worker thread: {e}"));
    }
    Ok(wait(&shared, deadline, until))
}

/// Wait for the worker to end or pause, for a call to overrun, or for
/// `until`: a hang, or the call in progress at `until`.
fn wait<R: Default>(shared: &Arc<Shared<R>>, deadline: Duration, until: Option<Instant>) -> (Bounded<R>, Option<Paused<R>>) {
    let mut p = shared.lock();
    let (hang, out_of_time) = loop {
        if p.done || p.paused {
            break (None, None);
        }
        let now = Instant::now();
        let (call, gpu, started, limit) = match &p.current {
            Some(c) => (c.call, c.gpu, c.started, c.started + c.allowed),
            None => ("(between calls)", None, p.since, p.since + deadline),
        };
        let waited = || NvmlHang { call, gpu, waited_ms: u64::try_from(now.duration_since(started).as_millis()).unwrap_or(u64::MAX) };
        if now >= limit {
            shared.abandoned.store(true, Ordering::SeqCst);
            break (Some(waited()), None);
        }
        if until.is_some_and(|u| now >= u) {
            shared.abandoned.store(true, Ordering::SeqCst);
            break (None, Some(waited()));
        }
        let next = until.map_or(limit, |u| u.min(limit));
        p = shared.changed.wait_timeout(p, next - now).unwrap_or_else(PoisonError::into_inner).0;
    };
    let out = std::mem::take(&mut p.out);
    let paused = (p.paused && !p.done && hang.is_none()).then(|| Paused { shared: Arc::clone(shared), deadline });
    (Bounded { out, calls: p.calls, hang, out_of_time }, paused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hung_call_is_named_and_the_worker_stops_there() {
        let start = Instant::now();
        let b = run(Duration::from_millis(50), |t: &Tracker<Vec<u32>>| {
            for i in 0..3 {
                if t.call("nvmlFast", Some(i), 1, Duration::ZERO, || ()).is_some() {
                    t.update(|v| v.push(i));
                }
            }
            t.call("nvmlSlow", Some(3), 1, Duration::ZERO, || std::thread::sleep(Duration::from_millis(400)));
            t.call("nvmlNever", Some(4), 1, Duration::ZERO, || panic!("called after the hang"));
        })
        .unwrap();
        assert!(start.elapsed() < Duration::from_millis(350), "{:?}", start.elapsed());
        assert_eq!(b.out, vec![0, 1, 2]);
        assert_eq!(b.calls, 4);
        let hang = b.hang.expect("hang");
        assert_eq!((hang.call, hang.gpu), ("nvmlSlow", Some(3)));
        assert!(hang.waited_ms >= 50, "{hang:?}");
    }

    #[test]
    fn a_wait_may_take_its_own_time_and_a_panic_ends_the_run() {
        let b = run(Duration::from_millis(50), |t: &Tracker<u32>| {
            t.call("nvmlEventSetWait_v2", None, 1, Duration::from_millis(200), || std::thread::sleep(Duration::from_millis(100)));
            t.update(|n| *n = 7);
        })
        .unwrap();
        assert_eq!((b.out, b.hang), (7, None));
        let b = run(Duration::from_secs(5), |_: &Tracker<u32>| panic!("worker panics"));
        assert!(b.unwrap().hang.is_none());
    }

    #[test]
    fn a_run_stops_at_its_end_with_what_was_read() {
        let start = Instant::now();
        let until = start + Duration::from_millis(250);
        let b = run_until(Duration::from_secs(5), Some(until), |t: &Tracker<Vec<u32>>| {
            for i in 0..100 {
                if t.call("nvmlSlowish", Some(i), 1, Duration::ZERO, || std::thread::sleep(Duration::from_millis(100))).is_none() {
                    return;
                }
                t.update(|v| v.push(i));
            }
        })
        .unwrap();
        assert!(start.elapsed() < Duration::from_millis(1000), "{:?}", start.elapsed());
        assert!(b.hang.is_none());
        let stopped = b.out_of_time.expect("out of time");
        assert_eq!(stopped.call, "nvmlSlowish");
        assert!((1..=3).contains(&b.out.len()), "{:?}", b.out);
        assert_eq!(stopped.gpu, Some(b.out.len() as u32), "the call in progress");
        assert_eq!(b.calls as usize, b.out.len() + 1);
        // A call's own deadline of its own.
        let b = run(Duration::from_millis(20), |t: &Tracker<u32>| {
            t.call_within("nvmlInit_v2", None, 0, Duration::from_millis(500), || std::thread::sleep(Duration::from_millis(100)));
            t.update(|n| *n = 1);
        })
        .unwrap();
        assert_eq!((b.out, b.hang, b.out_of_time), (1, None, None));
    }

    #[test]
    fn a_paused_worker_goes_on_when_resumed_and_ends_when_dropped() {
        let work = |t: &Tracker<Vec<u32>>| {
            t.call("nvmlEventSetCreate", None, 1, Duration::ZERO, || t.update(|v| v.push(1)));
            if !t.pause() {
                return;
            }
            t.call("nvmlEventSetWait_v2", None, 1, Duration::ZERO, || t.update(|v| v.push(2)));
        };
        let (first, paused) = start(Duration::from_secs(5), work).unwrap();
        assert_eq!((first.out, first.calls), (vec![1], 1));
        // Paused far longer than the deadline: no hang while it waits.
        std::thread::sleep(Duration::from_millis(80));
        let (second, again) = paused.expect("paused").resume();
        assert_eq!((second.out, second.calls, second.hang), (vec![2], 1, None));
        assert!(again.is_none());

        let ended = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ended);
        let (_, paused) = start(Duration::from_millis(50), move |t: &Tracker<u32>| {
            let resumed = t.pause();
            flag.store(!resumed, Ordering::SeqCst);
        })
        .unwrap();
        drop(paused.expect("paused"));
        let t0 = Instant::now();
        while !ended.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(ended.load(Ordering::SeqCst), "the dropped worker ended without resuming");
    }
}
