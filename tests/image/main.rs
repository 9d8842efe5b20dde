//! The operator image that `image/build.sh` writes: its OCI archive is well formed (every blob
//! matches its digest, skopeo reads it, index.json names it as containerd imports it), its
//! config runs `mlkube operator` as a non-root user with the metrics and health ports exposed,
//! and the binary taken out of its layer is static, holds no path of the machine that built it,
//! prints its version, and runs as the operator against the local control plane, as the
//! component's ServiceAccount: ready on /readyz, then a clean exit on SIGTERM. Also the real
//! node's sandbox image, which `image/pause/build.sh` builds here in a second, and the serving
//! image, run with chroot (`serving.rs`).
//!
//! Needs the archive (`image/build.sh`; `MLKUBE_IMAGE_ARCHIVE` names another path), musl-gcc
//! and, for the operator's run, the local control plane; `cluster/run-tests.sh` provides all
//! three. Without them the tests fail, saying how to get them.

#[path = "../cluster/operator_identity.rs"]
#[allow(dead_code)]
mod operator_identity;
mod serving;
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
    /// The operator's image, from the archive `image/build.sh` wrote.
    fn unpack() -> Self {
        let reference = format!("docker.io/mlkube/mlkube:{}", env!("CARGO_PKG_VERSION"));
        Self::unpack_archive(&archive_path(), &reference)
    }

    /// The one image in `archive`, which index.json names `reference` (registry/name:tag).
    fn unpack_archive(archive: &Path, reference: &str) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (layout, manifest, config) = unpack_layout(archive, reference, dir.path());
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

    /// A file of the image's root file system.
    fn file(&self, path: &str) -> PathBuf {
        self.dir
            .path()
            .join("rootfs")
            .join(path.trim_start_matches('/'))
    }

    fn binary(&self) -> PathBuf {
        self.file("/usr/local/bin/mlkube")
    }
}

/// The OCI layout in `archive`, unpacked into `dir`/layout, holding one image, which
/// index.json names `reference` (registry/name:tag) as containerd and skopeo look for it: the
/// layout's path, the image's manifest and its config.
fn unpack_layout(archive: &Path, reference: &str, dir: &Path) -> (PathBuf, Value, Value) {
    let layout = dir.join("layout");
    std::fs::create_dir(&layout).unwrap();
    run(Command::new("tar")
        .arg("-xf")
        .arg(archive)
        .arg("-C")
        .arg(&layout));

    let index = json_file(&layout.join("index.json"));
    let manifests = index["manifests"]
        .as_array()
        .expect("index.json lists manifests");
    assert_eq!(manifests.len(), 1, "one image in the archive: {index}");
    let annotations = &manifests[0]["annotations"];
    assert_eq!(
        annotations["io.containerd.image.name"], reference,
        "named in full, as `ctr images import` names it"
    );
    let (_, tag) = reference.rsplit_once(':').expect("a reference with a tag");
    assert_eq!(
        annotations["org.opencontainers.image.ref.name"], tag,
        "tagged, as skopeo's oci-archive:ARCHIVE:TAG selects it"
    );
    let manifest = blob_json(&layout, &manifests[0]);
    let config = blob_json(&layout, &manifest["config"]);
    (layout, manifest, config)
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

/// Regression (issue 23): the binary held the absolute path of cargo's registry sources in the
/// panic locations of its dependencies, so two machines built different binaries from one
/// commit. `image/build.sh` maps cargo's home and the target directory to fixed prefixes; the
/// checkout, whose files cargo names relatively, must not appear either.
#[test]
fn the_binary_holds_no_path_of_the_machine_that_built_it() {
    let image = Image::unpack();
    let elf = std::fs::read(image.binary()).unwrap();
    let target = Path::new(env!("CARGO_BIN_EXE_mlkube"))
        .ancestors()
        .nth(2)
        .expect("the binary is in <target>/<profile>/")
        .to_path_buf();
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cargo")
        });
    for (what, path) in [
        ("the checkout", PathBuf::from(env!("CARGO_MANIFEST_DIR"))),
        ("cargo's registry sources", cargo_home.join("registry/src")),
        ("the target directory", target),
    ] {
        let path = path.canonicalize().unwrap_or(path);
        let needle = path.to_str().expect("a UTF-8 path").as_bytes();
        let at = elf
            .windows(needle.len())
            .position(|window| window == needle);
        assert!(
            at.is_none(),
            "the binary holds the path of {what}, {}, at byte {at:?}: the image depends on where \
             it was built",
            path.display()
        );
    }
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

/// A child process that is killed when dropped, so a failing test leaves none behind.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        // Both fail harmlessly when the test has already waited for the child.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
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
    let child = Command::new(image.binary())
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
    let mut reaped = Reaped(child);
    let child = &mut reaped.0;
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

/// Whether the process `pid` catches `signal` (its SigCgt mask in /proc), i.e. has set up its
/// handlers; `None` once it is gone.
fn catches(pid: u32, signal: libc::c_int) -> Option<bool> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("SigCgt:"))?;
    let mask = u64::from_str_radix(mask.trim(), 16).expect("SigCgt is hexadecimal");
    Some(mask & (1 << (signal - 1)) != 0)
}

/// The sandbox image of the real node (`image/pause/build.sh`, which builds in a second): named
/// for containerd, run as the pause user, a static binary that reaps the children it inherits
/// and exits 0 on SIGTERM, as the kubelet stops a pod.
#[tokio::test]
async fn the_pause_image_reaps_children_and_exits_cleanly_on_sigterm() {
    use std::io::BufRead;
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let archive = dir.path().join("pause.oci.tar");
    let reference = "docker.io/mlkube/pause:3.10";
    run(
        Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/image/pause/build.sh"))
            .arg(&archive)
            .arg(reference)
            .env("SOURCE_DATE_EPOCH", "0"),
    );
    let image = Image::unpack_archive(&archive, reference);
    assert_eq!(image.config["config"]["User"], "65535:65535");
    assert_eq!(
        image.config["config"]["Entrypoint"],
        serde_json::json!(["/pause"])
    );
    let pause = image.file("/pause");
    let metadata = std::fs::metadata(&pause).expect("/pause is in the layer");
    assert_eq!((metadata.uid(), metadata.mode() & 0o777), (0, 0o755));
    assert!(
        !has_interpreter(&std::fs::read(&pause).unwrap()),
        "statically linked"
    );
    let version = Command::new(&pause).arg("-v").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        "pause 3.10"
    );

    // The shell starts a child and becomes pause, which so inherits the child.
    let child = Command::new("sh")
        .arg("-c")
        .arg(r#"sleep 0.5 & echo $!; exec "$0""#)
        .arg(&pause)
        .stdout(Stdio::piped())
        .spawn()
        .expect("sh starts");
    let mut reaped = Reaped(child);
    let child = &mut reaped.0;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let orphan: u32 = line
        .trim()
        .parse()
        .expect("the shell prints its child's pid");
    let timeout = Duration::from_secs(10);
    eventually("pause to reap the child it inherited", timeout, || {
        let gone = !Path::new(&format!("/proc/{orphan}")).exists();
        async move { gone.then_some(()) }
    })
    .await;
    let pid = child.id();
    eventually("pause to catch SIGTERM", timeout, || {
        let ready = catches(pid, libc::SIGTERM).expect("pause is still running");
        async move { ready.then_some(()) }
    })
    .await;
    // SAFETY: the pid is our own child's, which has not been waited for yet.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) }, 0);
    let status = eventually("pause to exit", timeout, || {
        let exited = child.try_wait().expect("the child can be waited for");
        async move { exited }
    })
    .await;
    assert_eq!(status.code(), Some(0), "a clean exit on SIGTERM");
}

/// The image's build changes nothing that the host's release build (`cargo install`) uses: it
/// builds in a target directory of its own, since the two builds would share the host's build
/// scripts and proc-macros, and what the static build sets in cargo's environment (its
/// SOURCE_DATE_EPOCH, which the cc crate's build scripts watch) made each rebuild them for the
/// other; and no profile setting reaches the host's units. A `cargo` that records what it is
/// given, and writes a stand-in binary, shows what image/build.sh passes.
#[test]
fn the_image_build_leaves_the_hosts_release_build_alone() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("a bin directory");
    let record = dir.path().join("cargo.record");
    let fake = "#!/bin/sh\nenv > \"$RECORD\"\necho \"args: $*\" >> \"$RECORD\"\n\
        out=\"$CARGO_TARGET_DIR/x86_64-unknown-linux-musl/release\"\nmkdir -p \"$out\"\n\
        printf '#!/bin/sh\\necho mlkube 0.0.0\\n' > \"$out/mlkube\"\nchmod +x \"$out/mlkube\"\n";
    let cargo = bin.join("cargo");
    std::fs::write(&cargo, fake).expect("the recording cargo");
    std::fs::set_permissions(&cargo, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("executable");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("image/build.sh"))
        .arg(dir.path().join("image.oci.tar"))
        .env("PATH", path)
        .env("RECORD", &record)
        .env("CARGO_TARGET_DIR", dir.path().join("target"))
        .output()
        .expect("image/build.sh runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let recorded = std::fs::read_to_string(&record).expect("cargo was called");
    let target_dir = recorded
        .lines()
        .find_map(|l| l.strip_prefix("CARGO_TARGET_DIR="))
        .expect("cargo is given a target directory");
    assert_eq!(
        Path::new(target_dir),
        dir.path().join("target/static"),
        "the static build's own target directory, not the one `cargo install` uses"
    );
    let profile: Vec<&str> = recorded
        .lines()
        .filter(|l| l.starts_with("CARGO_PROFILE_"))
        .collect();
    assert!(
        profile.is_empty(),
        "profile settings reach the host's build: {profile:?}"
    );
    assert!(
        recorded.contains("--target x86_64-unknown-linux-musl"),
        "{recorded}"
    );
    let flags = recorded
        .lines()
        .find_map(|l| l.strip_prefix("CARGO_ENCODED_RUSTFLAGS="))
        .expect("the musl target's flags");
    assert!(
        flags.split('\x1f').any(|f| f == "-Cstrip=symbols"),
        "{flags:?}"
    );
}
