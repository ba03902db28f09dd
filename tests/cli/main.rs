//! The `gres-rs` command as users see it: exit statuses, messages with
//! their place and caret, JSON, the examples, `detect` without NVML, and
//! `install`.  No Slurm daemon is needed (`install` uses Slurm's own plugin
//! files when they are installed).
//!
//! Each test is listed here, at the top level of the target (`cargo test
//! --test cli NAME` names it as before the split), and lives in the module
//! of its subject; `run` holds what they share.

#![cfg(feature = "cli")]

mod check;
mod detect;
mod help;
mod install;
mod nvml;
mod plugin_dir;
mod releases;
mod run;
mod same_device;

/// `#[test] fn NAME() { MODULE::NAME() }` for each NAME of each MODULE.
macro_rules! tests {
    ($($module:ident: [$($name:ident),+ $(,)?])*) => {
        $($(
            #[test]
            fn $name() {
                $module::$name();
            }
        )+)*
    };
}

tests! {
    check: [
        clean_configuration,
        fatal_error_with_caret_and_suggestion,
        problems_slurmd_only_logs,
        fail_on_chooses_the_least_severe_problem_that_fails,
        without_gres_conf,
        syntax_errors_anywhere_stop_every_node,
        traps_slurm_passes_in_silence,
        node_takes_a_hostlist_and_suggests_a_close_name,
        a_character_device_that_is_no_gpu,
        a_type_of_gres_conf_the_node_does_not_have_is_one_diagnosis,
        check_conf_options_are_not_for_sudo_rules,
    ]
    help: [
        usage_errors,
        help_reads_like_a_man_page,
        man_pages_and_completions_from_the_help_definitions,
        examples_are_clean,
    ]
    detect: [
        detect_without_nvml,
        detect_with_given_library_and_files,
        detect_usage_of_a_process,
    ]
    install: [
        install_makes_dirs_0755_whatever_the_umask,
        install_refuses_dirs_others_may_write,
        install_refuses_dirs_not_owned_by_root,
        install_leaves_a_directory_at_a_files_name,
        install_refuses_the_package_managers_dir,
        install_plugins,
    ]
    same_device: [
        same_device_in_multiple_files_in_another_order,
        same_device_through_a_symlink,
        same_device_in_a_range_and_a_symlink,
        different_devices_no_warning,
        same_device_names_without_device_check,
    ]
    releases: [
        version_names_the_slurm_release,
        values_of_later_releases_name_their_release,
        unsupported_slurm_releases_are_refused,
    ]
    plugin_dir: [
        check_predicts_which_plugin_file_slurmd_loads,
        check_searches_slurmds_default_plugin_dir_even_with_dangling_links,
    ]
    nvml: [
        autodetect_nvml_and_gpu_energy_without_a_driver,
        gpu_plugin_slurmd_picks_and_its_file,
        autodetect_nvml_with_the_driver_but_no_development_link,
        detect_warns_when_slurmd_would_not_pick_gpu_nvml,
    ]
}
