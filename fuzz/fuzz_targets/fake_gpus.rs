//! fake_gpus.conf: `parse_fake_gpus` with both CPU conversions (gpu/nvml's
//! test keywords and none), and the two text forms of each record.
#![no_main]

use libfuzzer_sys::fuzz_target;
use gres_core::fake_gpus::{parse_fake_gpus, to_log_line, to_parsable, CpuConv};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for conv in [CpuConv::Nvml, CpuConv::Unsupported] {
        match parse_fake_gpus(&text, Path::new("/etc/slurm/fake_gpus.conf"), conv) {
            Ok(fake) => {
                for r in &fake.records {
                    let _ = to_parsable(r);
                    let _ = to_log_line(r);
                }
                for d in &fake.diagnostics {
                    let _ = d.to_log_line();
                }
            }
            Err(e) => {
                let _ = e.to_string();
            }
        }
    }
});
