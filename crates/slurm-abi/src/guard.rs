//! The panic guard around every exported function: a panic inside our code
//! becomes an error line in slurmd's log and a safe return value; no unwind
//! ever crosses into C.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

static QUIET_HOOK: Once = Once::new();

thread_local! {
    /// Where this thread's last panic inside a guard happened
    /// (`file:line:column`), kept by the panic hook for the guard's line.
    static PANIC_LOCATION: Cell<Option<String>> = const { Cell::new(None) };
}

/// Run `f`; on panic log `"<plugin_type>: <func>: internal error (panic):
/// <message> (at <file>:<line>:<column>)"` and return `fallback`.
pub fn guard<R>(plugin_type: &'static str, func: &str, fallback: R, f: impl FnOnce() -> R) -> R {
    QUIET_HOOK.call_once(|| {
        // The default hook writes to slurmd's stderr, often /dev/null; we
        // log the panic ourselves below, with the place the hook keeps.
        // Keep the previous hook for panics outside our guards.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if super::log::in_guard() {
                let location = info.location().map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
                let _ = PANIC_LOCATION.try_with(|p| p.set(location));
            } else {
                previous(info);
            }
        }));
    });
    let _scope = super::log::GuardScope::enter(plugin_type);
    let _ = PANIC_LOCATION.try_with(|p| p.set(None));
    match catch_unwind(AssertUnwindSafe(|| {
        #[cfg(feature = "fault-injection")]
        inject(func);
        f()
    })) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            let location = PANIC_LOCATION.try_with(Cell::take).ok().flatten().map(|l| format!(" (at {l})")).unwrap_or_default();
            super::log::log_error_line(&format!("{plugin_type}: {func}: internal error (panic): {msg}{location}"));
            fallback
        }
    }
}

/// Test builds: panic in `func` when `GRES_RS_PANIC_IN` names it (or is
/// `all`), to prove that the guard keeps slurmd serving.
#[cfg(feature = "fault-injection")]
fn inject(func: &str) {
    if let Ok(v) = std::env::var("GRES_RS_PANIC_IN") {
        if v.split(',').any(|f| f == func || f == "all") {
            panic!("injected panic in {func}");
        }
    }
}
