//! The panic guard around every exported function: a panic inside our code
//! becomes an error line in slurmd's log and a safe return value; no unwind
//! ever crosses into C.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

static QUIET_HOOK: Once = Once::new();

/// Run `f`; on panic log `"<plugin_type>: <func>: internal error: ..."` and
/// return `fallback`.
pub fn guard<R>(plugin_type: &'static str, func: &str, fallback: R, f: impl FnOnce() -> R) -> R {
    QUIET_HOOK.call_once(|| {
        // The default hook writes to slurmd's stderr, often /dev/null; we
        // log the panic ourselves below.  Keep the previous hook for
        // panics outside our guards.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !super::log::in_guard() {
                previous(info);
            }
        }));
    });
    let _scope = super::log::GuardScope::enter(plugin_type);
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
            super::log::log_error_line(&format!("{plugin_type}: {func}: internal error (panic): {msg}"));
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
