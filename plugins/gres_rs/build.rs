// Bind every symbol at load time: in a slurmd that lacks a function we
// call, dlopen() of the plugin file fails cleanly (slurmd moves on to the
// next directory of PluginDir) instead of aborting at the first call.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,now");
}
