#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case, dead_code, clippy::all)]
#![allow(missing_docs, unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
include!(concat!(env!("OUT_DIR"), "/dat_abi.rs"));
