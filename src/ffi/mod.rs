//! The only home of `unsafe`: Slurm's ABI (`sys`), the panic guard, the log
//! bridge, safe wrappers over Slurm's objects, and the exported functions.
//! Every `unsafe` block carries a `// SAFETY:` comment.

pub mod common_functions;
#[macro_use]
pub mod entry_points;
pub mod export_macros;
pub mod gpu_functions;
pub mod gres_functions;
pub mod guard;
pub mod host;
pub mod log;
pub mod slurm;
pub mod sys;
