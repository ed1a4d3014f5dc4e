//! The plug-in calls back into libdat2 (`dat_registry_add_provider`,
//! `dats_get_ia_handle`), so it links it, as OFA's own providers do.
//!
//! It is linked `-z nodelete`: libdat2 unloads a provider's library when
//! the provider is removed, but a consumer may still hold its handles,
//! whose tables and handle spaces must stay (see `registry`). Its soname
//! is the one `cargo xtask install` installs it under.

fn main() {
    println!("cargo:rustc-link-lib=dylib=dat2");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libudat_dapl.so.0");
}
