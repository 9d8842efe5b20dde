//! Rebuild when the embedded component library changes, including files added to it:
//! `include_dir!` alone only notices edits to files that were already there.

fn main() {
    for dir in ["components", "crds", "environments"] {
        println!("cargo:rerun-if-changed={dir}");
    }
}
