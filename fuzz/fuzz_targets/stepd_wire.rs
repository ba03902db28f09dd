//! The slurmd-to-slurmstepd messages (`recv_stepd`): gres/gpu's
//! (`read_gpu_as`), the bare device list (`read_devices_as`), and
//! gres/mps's and gres/shard's (`wire::read_shared_as`), from untrusted
//! bytes, in the layout of each release the first byte picks.  Whatever
//! decodes must encode into a message that decodes the same.
#![no_main]

use gres_core::behaviour::Behaviour;
use gres_core::sharing::SharedKind;
use gres_core::wire::{read_devices_as, read_gpu_as, read_shared_as, write_devices_as, write_gpu_as, write_shared_as, MemWire, WireReader};
use libfuzzer_sys::fuzz_target;
use slurm_gpu_gres::ffi::behaviour::{for_release, SERIES};

fn reader(data: &[u8]) -> MemWire {
    MemWire { bytes: data.to_vec(), pos: 0 }
}

fuzz_target!(|input: &[u8]| {
    let Some((&pick, data)) = input.split_first() else { return };
    let (major, minor) = SERIES[usize::from(pick) % SERIES.len()];
    let b: Behaviour = for_release(major, minor, 0).expect("a series we build for");
    let mut r = reader(data);
    if let Ok((devices, flags)) = read_gpu_as(&mut r, &b) {
        assert!(r.pos <= data.len());
        let mut w = MemWire::default();
        write_gpu_as(&mut w, &devices, flags, &b);
        // Decoding what was encoded gives the same message back.
        let mut again = reader(&w.bytes);
        assert_eq!(read_gpu_as(&mut again, &b), Ok((devices, flags)));
        assert_eq!(again.remaining(), 0);
    }
    let mut r = reader(data);
    if let Ok(devices) = read_devices_as(&mut r, &b) {
        let mut w = MemWire::default();
        write_devices_as(&mut w, &devices, &b);
        assert_eq!(read_devices_as(&mut reader(&w.bytes), &b), Ok(devices));
    }
    for kind in [SharedKind::Mps, SharedKind::Shard] {
        let mut r = reader(data);
        if let Ok(info) = read_shared_as(&mut r, kind, &b) {
            assert!(r.pos <= data.len());
            let mut w = MemWire::default();
            write_shared_as(&mut w, kind, &info, &b);
            let mut again = reader(&w.bytes);
            assert_eq!(read_shared_as(&mut again, kind, &b), Ok(info));
            assert_eq!(again.remaining(), 0);
        }
    }
});
