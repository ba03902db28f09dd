//! `layout_<series>`: our header against the real headers of its release
//! (layouts, constants, fields, prototypes, include guards).

use crate::compile::{cc, cc_output, compare_outputs, run_probe};
use crate::fields::check_fields_complete;
use crate::generate::{gen_layout_program, gen_own_names_check, gen_proto_check, Side};
use crate::guards::{check_config_macros, slurm_headers_used};
use crate::header::{parse_header, Function, OWN_TYPEDEFS};
use crate::series::{fmt_version, Series};
use crate::source::{find_source, slurm_version_h, source_version, SourceLookup};
use crate::symbols::{aux_info_functions, check_alias, dynamic_function_symbols, grep_declaration, resolve_real_name};
use crate::util::{repo_root, s, skip_or_fail, TempDir};
use std::fs;
use std::path::Path;

/// Real Slurm headers (relative to the source root) that declare what our
/// header re-declares.  gres.h pulls in most of the others already.  Each
/// entry lists where the file lives in successive releases (gres.h and gpu.h
/// moved from src/common/ to src/interfaces/ in 23.02); the first that
/// exists is used.
const REAL_HEADERS: &[&[&str]] = &[
    &["src/common/gres.h", "src/interfaces/gres.h"],
    &["src/common/gpu.h", "src/interfaces/gpu.h"],
    &["src/common/list.h"],
    &["src/common/bitstring.h"],
    &["src/common/pack.h"],
    &["src/common/env.h"],
    &["src/common/log.h"],
    &["src/common/hostlist.h"],
    &["src/common/xmalloc.h"],
    &["src/common/xstring.h"],
];

pub fn check_layout(series: &'static str) {
    let started = std::time::Instant::now();
    let Some(series) = Series::new(series) else { return };
    let name = series.name;
    let hdr = series.header.as_str();
    let root = repo_root();
    let header_path = series.header_path();
    let header = parse_header(&header_path);
    header.assert_plausible(hdr);

    let src = match find_source(&series) {
        SourceLookup::Found(src) => src,
        SourceLookup::Skip(why) => {
            skip_or_fail(&format!("Slurm {name}: {why}"));
            return;
        }
    };
    match source_version(&src) {
        Some(v) if series.is(v) => println!("layout: Slurm {name}: source {} ({})", src.display(), fmt_version(v)),
        v => panic!("Slurm {name}: source {} is version {}, not {name}", src.display(), v.map_or("unknown".into(), fmt_version)),
    }
    let real_headers = real_headers(&src);

    let work = TempDir::new(&format!("gres-layout-{}", name.replace('.', "_")));
    let gen = work.path.join("gen");
    fs::create_dir_all(gen.join("slurm")).unwrap();
    fs::copy(root.join(&series.config_h), gen.join("config.h")).unwrap();
    fs::write(gen.join("slurm/slurm_version.h"), slurm_version_h(&src)).unwrap();
    let real_includes = [gen.clone(), src.clone(), src.join("slurm")];
    let our_includes = [header_path.parent().unwrap().to_path_buf()];

    let mut problems: Vec<String> = Vec::new();

    // 0. our own typedef names must not be the release's.
    if !header.own_typedefs.is_empty() {
        let own_c = work.path.join("own_real.c");
        fs::write(&own_c, gen_own_names_check(&header, &real_headers)).unwrap();
        let out = cc_output(&real_includes, &["-w".into(), "-fsyntax-only".into()], &own_c, None);
        if !out.status.success() {
            problems.push(format!(
                "{OWN_TYPEDEFS} lists {}, but the real headers declare (some of) them: drop them from \
                 {OWN_TYPEDEFS} (the real declaration is then checked as usual):\n{}",
                header.own_typedefs.join(", "),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }

    // 1. layouts and constants, real headers vs ours.
    let real_c = work.path.join("real.c");
    let ours_c = work.path.join("ours.c");
    fs::write(&real_c, gen_layout_program(&header, Side::Real(&real_headers))).unwrap();
    fs::write(&ours_c, gen_layout_program(&header, Side::Ours)).unwrap();
    let deps = work.path.join("real.d");
    let aux = work.path.join("real.aux");
    let real_exe = work.path.join("real");
    let ours_exe = work.path.join("ours");
    let mut args = vec!["-w".to_string(), "-MD".into(), "-MF".into(), s(&deps)];
    args.extend(["-aux-info".into(), s(&aux)]);
    cc(&work, hdr, &real_includes, &args, &real_c, Some(&real_exe), &format!("probe against the real Slurm {name} headers"));
    cc(
        &work,
        hdr,
        &our_includes,
        &["-Wall".into(), "-Wextra".into(), "-Werror".into()],
        &ours_c,
        Some(&ours_exe),
        "probe against our header (a failure here is a parser or header bug)",
    );
    let real_out = run_probe(&work, &real_exe);
    let ours_out = run_probe(&work, &ours_exe);
    let compared = compare_outputs(&real_out, &ours_out, &mut problems);
    // 1b. no real field left out of ours (a left-out field that fits in
    // padding changes no size or offset).
    let pre = cc_output(&real_includes, &["-w".into(), "-E".into(), "-P".into()], &real_c, None);
    assert!(pre.status.success(), "Slurm {name}: cc -E {} failed:\n{}", real_c.display(), String::from_utf8_lossy(&pre.stderr));
    check_fields_complete(&header, &String::from_utf8_lossy(&pre.stdout), &mut problems);

    // 2. only Slurm's own headers, and only reviewed config.h macros.
    let slurm_headers = slurm_headers_used(&deps, &src, real_headers.len(), &mut problems);
    check_config_macros(&src, &slurm_headers, &root.join(&series.config_h), &series.config_h, &mut problems);

    // 3. prototypes.
    let declared = aux_info_functions(&aux, &src);
    let lib = series.libslurmfull().ok();
    let symbols = lib.as_ref().map(|l| dynamic_function_symbols(l));
    let mut checks: Vec<(&Function, String)> = Vec::new();
    let mut unchecked: Vec<String> = Vec::new();
    let mut aliases_unverified = 0;
    for f in &header.functions {
        match resolve_real_name(f, &declared) {
            Some(real) => {
                if real != f.name {
                    match (&lib, &symbols) {
                        (Some(lib), Some(symbols)) => check_alias(&f.name, &real, lib, symbols, &mut problems),
                        _ => aliases_unverified += 1,
                    }
                }
                checks.push((f, real));
            }
            None => match grep_declaration(&src, &f.name) {
                Some(file) => problems.push(format!(
                    "{}: declared in {file}, which the probe does not include: add it to \
                     REAL_HEADERS in tests/layout/check.rs",
                    f.name
                )),
                None => unchecked.push(f.name.clone()),
            },
        }
    }
    let protos_c = work.path.join("protos_real.c");
    fs::write(&protos_c, gen_proto_check(&header, &checks, &real_headers)).unwrap();
    let out = cc_output(&real_includes, &["-w".into(), "-fsyntax-only".into()], &protos_c, None);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let mut named = 0;
        for line in stderr.lines() {
            if let Some(rest) = line.split("static assertion failed: \"proto:").nth(1) {
                let fname = rest.trim_end_matches('"');
                let f = header.functions.iter().find(|f| f.name == fname).unwrap();
                let real = &checks.iter().find(|(g, _)| g.name == fname).unwrap().1;
                let decl = declared.get(real).map(String::as_str).unwrap_or("?");
                problems.push(format!("prototype of {fname} differs from the real one:\n      ours: {}\n      real: {decl}", f.prototype()));
                named += 1;
            }
        }
        if named == 0 {
            problems.push(format!("prototype check {} does not compile:\n{stderr}", protos_c.display()));
        }
    }

    println!(
        "layout: Slurm {name}: {} structs, {} typedefs ({} our own), {} enums, {} defines; {compared} values compared",
        header.structs.len(),
        header.aliases.len(),
        header.own_typedefs.len(),
        header.enums.len(),
        header.defines.len()
    );
    println!(
        "layout: Slurm {name}: {} prototypes compared with the real declarations{}{}",
        checks.len(),
        if unchecked.is_empty() { String::new() } else { format!("; not declared in any Slurm header, existence only: {}", unchecked.join(", ")) },
        if aliases_unverified == 0 {
            String::new()
        } else {
            format!("; {aliases_unverified} slurm_X = X aliases not verified (no libslurmfull.so of {name}: ${})", series.lib_env())
        }
    );
    println!("layout: Slurm {name}: checked in {:.1} s", started.elapsed().as_secs_f64());
    if !problems.is_empty() {
        work.keep();
        panic!(
            "Slurm {name}: {hdr} does not match Slurm {} ({} problem(s); generated files kept in {}):\n  - {}",
            src.display(),
            problems.len(),
            work.path.display(),
            problems.join("\n  - ")
        );
    }
}

/// The first existing path of each [`REAL_HEADERS`] entry.
fn real_headers(src: &Path) -> Vec<&'static str> {
    REAL_HEADERS
        .iter()
        .map(|alts| *alts.iter().find(|p| src.join(p).is_file()).unwrap_or_else(|| panic!("none of {alts:?} exists in {}", src.display())))
        .collect()
}
