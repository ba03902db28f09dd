//! The benchmark families, one a module: each adds its rows to the report.

pub mod check;
pub mod health;
pub mod rss;
pub mod slurmd_g;
pub mod stepd;
pub mod steps;
pub mod steps_health;
pub mod usage;
