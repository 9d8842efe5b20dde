//! The `mlkube` binary: parse the command line and hand over to the library.

// Jsonnet evaluation allocates small objects by the million; glibc's malloc was a quarter of the
// instructions of a large render.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    mlkube::cli::main()
}
