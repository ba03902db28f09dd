//! The only home of `unsafe`: Slurm's ABI (`sys`), the panic guard, the log
//! bridge, safe wrappers over Slurm's objects, and the exported functions.
//! Every `unsafe` block carries a `// SAFETY:` comment.

pub mod declare;
#[macro_use]
pub mod entry_points;
pub mod exports;
pub mod gpu_exports;
pub mod guard;
pub mod host;
pub mod log;
pub mod slurm;
pub mod sys;
