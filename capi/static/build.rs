//! Compiles the consumer entry points that dispatch through a handle's
//! provider table (`src/dispatch.c`, written against <dat2/udat.h> with
//! the header's own redirection macros) into libudat.a.

fn main() {
    println!("cargo:rerun-if-changed=src/dispatch.c");
    cc::Build::new()
        .file("src/dispatch.c")
        .define("DAT_EXTENSIONS", None)
        .warnings_into_errors(true)
        .compile("udat_dispatch");
}
