//! The plug-in calls back into libdat2 (`dat_registry_add_provider`,
//! `dats_get_ia_handle`), so it links it, as OFA's own providers do.

fn main() {
    println!("cargo:rustc-link-lib=dylib=dat2");
}
