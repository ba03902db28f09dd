//! The declaration macros of `libgres_rs.so`: one line in
//! `crates/gres_rs` per plugin file makes that plugin's functions and
//! exports their table (`gres_rs_gres_gpu_entries_<checksum>`), through
//! which the plugin file's entry points jump (see
//! [`crate::entry_points::table_symbol`]).

/// In `libgres_rs.so`: the bodies of the functions the release being
/// built for resolves (`__in_release!` is made by build.rs from
/// [`crate::releases`]), and the plugin file's table of them
/// (`__entry_table!`, made by build.rs in the order of the plugin file's
/// jumps).  The functions themselves are not exported.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_functions {
    ($tag:ident; $(fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty $(, since $since:tt)? $(, until $until:tt)? => $body:expr;)*) => {
        $(
            // Only the functions the release resolves: the others may name
            // types the release's header lacks (gres_job_data_type).
            $crate::__in_release! { [$($since)?] [$($until)?]
                #[allow(unused_variables, unused_unsafe)]
                unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
                    // SAFETY: slurmd's arguments, passed through unchanged by
                    // the plugin file.
                    unsafe { $body }
                }
            }
        )*
        $crate::__entry_table!($tag);
    };
}

/// In `crates/gres_rs`: export the functions of plugin file `$tag`,
/// `export_gres_plugin!(gres_gpu => path::to::Plugin);` where the type
/// implements [`crate::plugins::GresPlugin`] and `$tag` is its
/// [`gres_core::plugin_files::PluginFile::file`].
#[macro_export]
macro_rules! export_gres_plugin {
    ($tag:ident => $plugin:ty) => {
        const _: () = {
            #[allow(unused_imports)] // c_void: only get_job_info/get_step_info (until 24.11)
            use ::std::ffi::{c_char, c_int, c_void};
            use $crate::plugins::GresPlugin as _;
            use $crate::sys;
            use $crate::{common_functions as common, gres_functions as gres};
            type P = $plugin;
            static DEVICES: $crate::slurm::DeviceListCache = $crate::slurm::DeviceListCache::new();
            $crate::gres_plugin_functions!(__export_functions!($tag));
        };
    };
}

/// In `crates/gres_rs`: export the functions of gpu plugin file `$tag`,
/// `export_gpu_plugin!(gpu_nvml => path::to::Plugin);` where the type
/// implements [`crate::plugins::GpuPlugin`].
#[macro_export]
macro_rules! export_gpu_plugin {
    ($tag:ident => $plugin:ty) => {
        const _: () = {
            use ::std::ffi::{c_char, c_int, c_uint};
            use $crate::plugins::GpuPlugin as _;
            use $crate::sys;
            use $crate::{common_functions as common, gpu_functions as gpu};
            type P = $plugin;
            $crate::gpu_plugin_functions!(__export_functions!($tag));
        };
    };
}
