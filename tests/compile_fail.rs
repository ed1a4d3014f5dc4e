//! The holes a safe API must not have, each shown closed by a program the
//! compiler refuses (`tests/compile_fail/*.rs`, with the refusal expected
//! beside it in a `.stderr` file).

#[test]
fn safe_code_cannot_reach_memory_it_did_not_give() {
    trybuild::TestCases::new().compile_fail("tests/compile_fail/*.rs");
}
