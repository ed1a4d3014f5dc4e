//! docs/conformance.md stays true: it has a row for each of the 73 pages,
//! and every test it names exists in the file it names.

use std::fs;

#[test]
fn conformance_table_names_real_tests_for_every_page() {
    let root = env!("CARGO_MANIFEST_DIR");
    let doc = fs::read_to_string(format!("{root}/docs/conformance.md")).expect("docs/conformance.md");
    let pages = doc.lines().filter(|l| l.starts_with("| dat_") && l.contains("(3DAT) |")).count();
    assert_eq!(pages, 73, "one row per man page");
    let mut checked = 0;
    for line in doc.lines().filter(|l| l.starts_with("| ")) {
        for cell in line.split("<br>").flat_map(|c| c.split('|')) {
            let cell = cell.trim();
            let Some(rest) = cell.strip_prefix('`') else { continue };
            let Some((name, rest)) = rest.split_once('`') else { continue };
            let file = rest.trim().trim_start_matches('(').trim_end_matches(')');
            if !file.ends_with(".rs") {
                continue;
            }
            let source = fs::read_to_string(format!("{root}/{file}")).unwrap_or_else(|e| panic!("{file}: {e}"));
            // Suite tests are generic over the transport: `fn name<F: Fabric>()`.
            let defined = source.contains(&format!("fn {name}(")) || source.contains(&format!("fn {name}<"));
            assert!(defined, "{name} is not in {file}");
            checked += 1;
        }
    }
    assert!(checked > 150, "only {checked} tests named");
}
