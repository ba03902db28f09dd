//! The state every GRES plugin file keeps in its process (slurmd, or one
//! slurmstepd), one mechanism for all of them: the plugin's data behind one
//! mutex, the generation counter slurmd's device list follows, and the rule
//! for a failing load (a reconfiguration keeps what it had, the first load
//! stops the process).  gres/gpu keeps a [`PluginState`] of its devices,
//! gres/mps and gres/shard one of their devices and counts
//! ([`super::sharing`]).

use super::EnvTarget;
use gres_core::env::{EnvState, Scope};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

/// A plugin's state: `T` is what its loads (and slurmstepd's message from
/// slurmd) replace as a whole.  Meant for a `static`.
pub struct PluginState<T> {
    locked: Mutex<Locked<T>>,
}

/// What [`PluginState`]'s lock guards.
pub struct Locked<T> {
    data: T,
    /// Changes whenever `data` is replaced.
    generation: u64,
    /// A configuration was loaded before: a failing load is a
    /// reconfiguration, not slurmd's start.
    loaded: bool,
    /// The state of this process's step's `step_set_env` calls.
    step_env: EnvState,
    /// The state of this process's task's `task_set_env` calls.
    task_env: EnvState,
}

impl<T> Locked<T> {
    pub fn data(&self) -> &T {
        &self.data
    }

    /// Whether a configuration was loaded before.
    pub fn loaded(&self) -> bool {
        self.loaded
    }

    /// The data, and the scope of a `*_set_env` call of `target` with the
    /// state it runs with: a job's variables are computed afresh each time
    /// (slurmd prepares many jobs and calls this several times per job, so
    /// `job` is a fresh state), a step's and a task's keep the state of
    /// earlier calls of this process.
    pub fn for_env<'a>(&'a mut self, target: EnvTarget<'a>, job: &'a mut EnvState) -> (&'a T, Scope<'a>, &'a mut EnvState) {
        let (scope, env_state) = match target {
            EnvTarget::Job => (Scope::Job, job),
            EnvTarget::Step => (Scope::Step, &mut self.step_env),
            EnvTarget::Task { usable } => (Scope::Task(usable), &mut self.task_env),
        };
        (&self.data, scope, env_state)
    }

    /// Replace the data as a whole (a new generation).
    pub fn replace(&mut self, data: T) {
        self.data = data;
        self.generation += 1;
    }
}

impl<T> PluginState<T> {
    /// The state of a process that has loaded nothing yet: `empty`.
    pub const fn new(empty: T) -> PluginState<T> {
        const NO_ENV: EnvState = EnvState { already_seen: false, local_inx: 0 };
        PluginState { locked: Mutex::new(Locked { data: empty, generation: 0, loaded: false, step_env: NO_ENV, task_env: NO_ENV }) }
    }

    /// A poisoned lock only means a panic was caught while it was held; the
    /// data is replaced as a whole, never left half-written, so keep using
    /// it.
    pub fn lock(&'static self) -> MutexGuard<'static, Locked<T>> {
        self.locked.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The state for a `*_set_env` call of `target`.
    ///
    /// A task's call runs in slurmstepd's forked task, where the only
    /// thread is the one that forked: a lock some other thread held at
    /// `fork()` would never be released there.  No thread can hold it then
    /// (slurmstepd calls every gres plugin function under its
    /// `gres_context_lock`, and takes that lock in the task before calling
    /// `task_set_env`: SAFETY.md, "Fork"), so for a task the lock is only
    /// tried; should it ever be held, the task starts without our variables
    /// and the log says why, instead of hanging.  A job's and a step's
    /// calls wait for the lock as usual.
    pub fn lock_for_env(&'static self, target: &EnvTarget<'_>) -> Option<MutexGuard<'static, Locked<T>>> {
        if !matches!(target, EnvTarget::Task { .. }) {
            return Some(self.lock());
        }
        match self.locked.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => {
                tracing::error!("task_set_env: the plugin's state was locked when slurmstepd forked this task: its GPU variables are not set");
                None
            }
        }
    }

    /// A counter that changes whenever the data does.
    pub fn generation(&'static self) -> u64 {
        self.lock().generation
    }

    /// Load a configuration: `load` gets the current state and returns the
    /// new data, which replaces the old (the state is locked meanwhile).
    ///
    /// On a failing load, a reconfiguration keeps what it had: slurmd runs
    /// on, and so do the jobs on the devices it already had (the caller
    /// logs the error).  On the first load (slurmd's start, `slurmd -G`,
    /// slurmctld for a cloud node) the stock plugin stops the process with
    /// Slurm's `fatal()`, and so does this.
    pub fn load(&'static self, load: impl FnOnce(&Locked<T>) -> Result<T, String>) -> Result<(), String> {
        let mut st = self.lock();
        match load(&st) {
            Ok(data) => {
                st.replace(data);
                st.loaded = true;
                Ok(())
            }
            Err(e) if st.loaded => {
                tracing::error!("keeping the previous device list until gres.conf is fixed");
                Err(e)
            }
            Err(e) => {
                drop(st);
                super::fatal(&e)
            }
        }
    }
}

impl<T: Default> Locked<T> {
    /// No data: no device is better than a wrong one.
    pub fn clear(&mut self) {
        self.replace(T::default());
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use gres_core::env::EnvChange;

    /// Call `set_env` (a task's `set_env` of the plugin over `state`) while
    /// another thread holds the state's lock: it must return at once,
    /// setting nothing.  (In slurmstepd's forked task a lock held at
    /// fork() is never released.)
    pub(crate) fn assert_task_set_env_never_waits<T: Send + 'static>(state: &'static PluginState<T>, set_env: fn() -> EnvChange) {
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let _g = state.lock();
            held_tx.send(()).unwrap();
            let _ = release_rx.recv_timeout(std::time::Duration::from_secs(30));
        });
        held_rx.recv().unwrap();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done_tx.send(set_env());
        });
        let change = done_rx.recv_timeout(std::time::Duration::from_secs(10));
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        assert_eq!(change.expect("task_set_env waited for a lock held by another thread"), EnvChange::default());
    }

    #[test]
    fn a_load_replaces_the_data_and_a_failing_reload_keeps_it() {
        static STATE: PluginState<Vec<u32>> = PluginState::new(Vec::new());
        assert!(!STATE.lock().loaded());
        STATE.load(|st| Ok(vec![st.data().len() as u32, 1])).unwrap();
        let generation = STATE.generation();
        assert!(STATE.lock().loaded());
        assert_eq!(STATE.load(|_| Err("broken".to_string())), Err("broken".to_string()));
        assert_eq!(STATE.lock().data(), &vec![0, 1]);
        assert_eq!(STATE.generation(), generation);
        STATE.lock().clear();
        assert!(STATE.lock().data().is_empty());
        assert_eq!(STATE.generation(), generation + 1);
    }
}
