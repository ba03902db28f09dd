//! The slurmd-to-slurmstepd messages (`recv_stepd`): gres/gpu's
//! (`read_gpu`), the bare device list (`read_devices`), and gres/mps's and
//! gres/shard's (`wire::read_shared`), from untrusted bytes.  Whatever
//! decodes must encode into a message that decodes the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use gres_core::sharing::SharedKind;
use gres_core::wire::{read_devices, read_gpu, read_shared, write_devices, write_gpu, write_shared, MemWire, WireReader};

fn reader(data: &[u8]) -> MemWire {
    MemWire { bytes: data.to_vec(), pos: 0 }
}

fuzz_target!(|data: &[u8]| {
    let mut r = reader(data);
    if let Ok((devices, flags)) = read_gpu(&mut r) {
        assert!(r.pos <= data.len());
        let mut w = MemWire::default();
        write_gpu(&mut w, &devices, flags);
        // Decoding what was encoded gives the same message back.
        let mut again = reader(&w.bytes);
        assert_eq!(read_gpu(&mut again), Ok((devices, flags)));
        assert_eq!(again.remaining(), 0);
    }
    let mut r = reader(data);
    if let Ok(devices) = read_devices(&mut r) {
        let mut w = MemWire::default();
        write_devices(&mut w, &devices);
        assert_eq!(read_devices(&mut reader(&w.bytes)), Ok(devices));
    }
    for kind in [SharedKind::Mps, SharedKind::Shard] {
        let mut r = reader(data);
        if let Ok(info) = read_shared(&mut r, kind) {
            assert!(r.pos <= data.len());
            let mut w = MemWire::default();
            write_shared(&mut w, kind, &info);
            let mut again = reader(&w.bytes);
            assert_eq!(read_shared(&mut again, kind), Ok(info));
            assert_eq!(again.remaining(), 0);
        }
    }
});
