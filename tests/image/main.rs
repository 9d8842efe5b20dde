//! The operator image that `image/build.sh` writes: its OCI archive is well formed (every blob
//! matches its digest, skopeo reads it), its config runs `mlkube operator` as a non-root user
//! with the metrics and health ports exposed, and the binary taken out of its layer is static,
//! prints its version, and runs as the operator against the local control plane, as the
//! component's ServiceAccount: ready on /readyz, then a clean exit on SIGTERM.
//!
//! Needs the archive (`image/build.sh`; `MLKUBE_IMAGE_ARCHIVE` names another path) and, for the
//! last test, the local control plane; `cluster/run-tests.sh` provides both. Without them the
//! tests fail, saying how to get them.

#[path = "../cluster/operator_identity.rs"]
#[allow(dead_code)]
mod operator_identity;
#[path = "../cluster/support.rs"]
#[allow(dead_code)]
mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

use operator_identity::{Access, OperatorIdentity, Scope};
use support::eventually;

const USER: &str = "65532:65532";

/// The archive: `$MLKUBE_IMAGE_ARCHIVE`, or where `image/build.sh` writes it by default,
/// `$CARGO_TARGET_DIR/image/`. Panics, saying how to build it, when it is not there.
fn archive_path() -> PathBuf {
    let path = match std::env::var_os("MLKUBE_IMAGE_ARCHIVE") {
        Some(path) => PathBuf::from(path),
        None => {
            let binary = Path::new(env!("CARGO_BIN_EXE_mlkube"));
            let target = binary
                .ancestors()
                .nth(2)
                .expect("the binary is in <target>/<profile>/");
            target.join("image/mlkube.oci.tar")
        }
    };
    assert!(
        path.is_file(),
        "no image archive at {}: build it with `image/build.sh` (or set MLKUBE_IMAGE_ARCHIVE)",
        path.display()
    );
    path
}

/// The image unpacked into a temporary directory: the OCI layout and the layer's files.
struct Image {
    dir: tempfile::TempDir,
    config: Value,
}

impl Image {
    fn unpack() -> Self {
        let archive = archive_path();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let layout = dir.path().join("layout");
        std::fs::create_dir(&layout).unwrap();
        run(Command::new("tar")
            .arg("-xf")
            .arg(&archive)
            .arg("-C")
            .arg(&layout));

        let index = json_file(&layout.join("index.json"));
        let manifests = index["manifests"]
            .as_array()
            .expect("index.json lists manifests");
        assert_eq!(manifests.len(), 1, "one image in the archive: {index}");
        assert_eq!(
            manifests[0]["annotations"]["org.opencontainers.image.ref.name"],
            env!("CARGO_PKG_VERSION"),
            "tagged with the crate's version"
        );
        let manifest = blob_json(&layout, &manifests[0]);
        let config = blob_json(&layout, &manifest["config"]);
        let layers = manifest["layers"]
            .as_array()
            .expect("the manifest lists layers");
        assert_eq!(layers.len(), 1, "one layer: {manifest}");
        assert_eq!(
            layers[0]["mediaType"],
            "application/vnd.oci.image.layer.v1.tar+gzip"
        );
        let layer = blob(&layout, &layers[0]);

        let root = dir.path().join("rootfs");
        std::fs::create_dir(&root).unwrap();
        let layer_tar = dir.path().join("layer.tar");
        let unzipped = Command::new("gzip")
            .args(["-dc"])
            .arg(&layer)
            .output()
            .expect("gzip runs");
        assert!(unzipped.status.success(), "the layer is gzip");
        std::fs::write(&layer_tar, &unzipped.stdout).unwrap();
        assert_eq!(
            config["rootfs"]["diff_ids"][0],
            format!("sha256:{}", sha256_hex(&unzipped.stdout)),
            "the config's diff_id is the digest of the uncompressed layer"
        );
        run(Command::new("tar")
            .arg("-xf")
            .arg(&layer_tar)
            .arg("-C")
            .arg(&root));
        Image { dir, config }
    }

    fn binary(&self) -> PathBuf {
        self.dir.path().join("rootfs/usr/local/bin/mlkube")
    }
}

fn run(command: &mut Command) {
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("{command:?} cannot run: {e}"));
    assert!(status.success(), "{command:?} failed: {status}");
}

fn json_file(path: &Path) -> Value {
    let text =
        std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The blob a descriptor points at, checked against the descriptor's digest and size.
fn blob(layout: &Path, descriptor: &Value) -> PathBuf {
    let digest = descriptor["digest"]
        .as_str()
        .expect("a descriptor has a digest");
    let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
    let path = layout.join("blobs/sha256").join(hex);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("blob {digest} is missing: {e}"));
    assert_eq!(sha256_hex(&bytes), hex, "blob {digest} matches its digest");
    assert_eq!(
        descriptor["size"],
        bytes.len(),
        "blob {digest} has its size"
    );
    path
}

fn blob_json(layout: &Path, descriptor: &Value) -> Value {
    json_file(&blob(layout, descriptor))
}

/// Whether an ELF executable asks for a dynamic loader (has a PT_INTERP program header).
fn has_interpreter(elf: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    assert_eq!(&elf[..5], b"\x7fELF\x02", "a 64-bit ELF file");
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()) as usize;
    let offset = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    (0..count).any(|i| {
        let at = offset + i * size;
        u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) == PT_INTERP
    })
}

#[test]
fn the_config_runs_the_operator_as_non_root_with_its_ports_exposed() {
    let image = Image::unpack();
    let config = &image.config;
    assert_eq!(config["os"], "linux");
    assert_eq!(config["architecture"], "amd64");
    let run = &config["config"];
    assert_eq!(run["User"], USER, "a numeric non-root user and group");
    assert_eq!(
        run["Entrypoint"],
        serde_json::json!(["/usr/local/bin/mlkube", "operator"])
    );
    assert!(run["Cmd"].is_null(), "the operator's own defaults apply");
    let ports: Vec<&String> = run["ExposedPorts"]
        .as_object()
        .expect("exposed ports")
        .keys()
        .collect();
    assert_eq!(ports, ["8080/tcp", "8081/tcp"], "metrics and health");
    // The component's Deployment runs `command: [mlkube]`, found on the image's PATH.
    let path = run["Env"][0].as_str().unwrap();
    assert!(path.starts_with("PATH=/usr/local/bin:"), "{path}");
}

#[test]
fn the_binary_is_static_and_owned_by_root_and_prints_its_version() {
    use std::os::unix::fs::MetadataExt;
    let image = Image::unpack();
    let binary = image.binary();
    let metadata = std::fs::metadata(&binary).expect("/usr/local/bin/mlkube is in the layer");
    assert_eq!(
        metadata.mode() & 0o777,
        0o755,
        "executable, writable by its owner only"
    );
    let elf = std::fs::read(&binary).unwrap();
    assert!(
        !has_interpreter(&elf),
        "statically linked: the image has no C library"
    );
    let output = Command::new(&binary).arg("--version").output().unwrap();
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        format!("mlkube {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn skopeo_reads_the_archive_as_an_image() {
    let archive = archive_path();
    let output = Command::new("skopeo")
        .args(["inspect", "--config"])
        .arg(format!("oci-archive:{}", archive.display()))
        .output()
        .unwrap_or_else(|e| panic!("skopeo cannot run ({e}); install it: apt-get install skopeo"));
    assert!(
        output.status.success(),
        "skopeo inspect failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let config: Value = serde_json::from_slice(&output.stdout).expect("skopeo prints JSON");
    assert_eq!(config["config"]["User"], USER);
}

/// A port on 127.0.0.1 that was free a moment ago.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().unwrap().port()
}

fn http_status(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.lines().next().map(str::to_owned)
}

#[tokio::test]
async fn the_binary_from_the_image_runs_the_operator_until_sigterm() {
    let image = Image::unpack();
    let ns = support::TestNamespace::new("image-operator").await;
    let identity = OperatorIdentity::new(&ns, Access::scoped(Scope::Namespace)).await;
    let health = free_port();
    let mut child = Command::new(image.binary())
        .args(["operator", "--namespace", &ns.name])
        .arg("--kubeconfig")
        .arg(identity.kubeconfig())
        .env_remove("KUBECONFIG")
        .args(["--metrics-addr", &format!("127.0.0.1:{}", free_port())])
        .args(["--health-addr", &format!("127.0.0.1:{health}")])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("the binary from the image starts");
    let timeout = Duration::from_secs(60);
    let ready = eventually("the operator's /readyz to answer 200", timeout, || {
        let exited = child.try_wait().expect("the child can be waited for");
        assert!(exited.is_none(), "the operator exited early: {exited:?}");
        let answer = http_status(health, "/readyz").filter(|line| line.contains(" 200 "));
        async move { answer }
    })
    .await;
    assert!(ready.starts_with("HTTP/1.1 200"));

    // SAFETY: the pid is our own child's, which has not been waited for yet.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0, "SIGTERM was sent");
    let status = eventually("the operator to exit", timeout, || {
        let exited = child.try_wait().expect("the child can be waited for");
        async move { exited }
    })
    .await;
    assert_eq!(status.code(), Some(0), "a clean exit on SIGTERM");
}
