// Bind every symbol at load time: a plugin that needs a function this
// slurmd lacks then fails dlopen() cleanly (slurmd moves on to the next
// directory of PluginDir) instead of aborting slurmd at the first call.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,now");
}
