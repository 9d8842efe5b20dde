//! `mlkube images`, offline: the built binary against a checkout of its own (a temporary
//! directory whose `image/node-images.sh` prints small OCI archives made here) and a stand-in
//! `skopeo` first on PATH, a registry that keeps each manifest in a file. What a real registry
//! does with a push is proved on the real node (tests/real_node/images.rs).

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest as _, Sha256};

/// The stand-in for skopeo: `inspect --raw` prints the manifest the registry directory holds
/// for the reference (or fails as skopeo does for a missing one, or an unreachable registry
/// when FAKE_DOWN is set); `copy` stores the archive's manifest and writes its digest to the
/// --digestfile. Every call is logged in `calls`.
const FAKE_SKOPEO: &str = r#"#!/usr/bin/env bash
set -euo pipefail
echo "$*" >>"$FAKE_REGISTRY/calls"
reference=${*: -1}
reference=${reference#docker://}
stored="$FAKE_REGISTRY/$(echo "$reference" | tr '/:' '__')"
case $1 in
inspect)
  if [ -n "${FAKE_DOWN:-}" ]; then
    echo "time=\"t\" level=fatal msg=\"Error parsing image name \\\"docker://$reference\\\": pinging container registry ${reference%%/*}: dial tcp ${reference%%/*}: connect: connection refused\"" >&2
    exit 1
  fi
  if [ -f "$stored" ]; then cat "$stored"; exit 0; fi
  echo "time=\"t\" level=fatal msg=\"Error parsing image name \\\"docker://$reference\\\": reading manifest in $reference: manifest unknown: manifest unknown\"" >&2
  exit 1 ;;
copy)
  while [ $# -gt 0 ]; do
    case $1 in
      --digestfile) digestfile=$2; shift ;;
      oci-archive:*) archive=${1#oci-archive:} ;;
    esac
    shift
  done
  digest=$(tar -xOf "$archive" index.json | grep -o 'sha256:[0-9a-f]*' | head -1)
  tar -xOf "$archive" "blobs/sha256/${digest#sha256:}" >"$stored"
  echo "$digest" >"$digestfile" ;;
esac
"#;

/// The stand-in for the checkout's script: the lines of `images.txt` beside it (`<name> <line>`)
/// for the names asked (all without any), after a line of progress on stderr.
const FAKE_SCRIPT: &str = r#"#!/usr/bin/env bash
echo "image: building nothing, all up to date" >&2
while read -r name line; do
  if [ $# -eq 0 ] || [[ " $* " == *" $name "* ]]; then echo "$line"; fi
done <"$(dirname "$0")/images.txt"
"#;

/// A checkout with three small images, a registry directory and the stand-in skopeo.
struct Setup {
    _tmp: tempfile::TempDir,
    source: PathBuf,
    registry: PathBuf,
    bin: PathBuf,
    /// Each image's manifest, by name.
    manifests: Vec<(&'static str, Vec<u8>)>,
}

impl Setup {
    fn new() -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let source = tmp.path().join("checkout");
        let registry = tmp.path().join("registry");
        let bin = tmp.path().join("bin");
        for dir in [source.join("image"), registry.clone(), bin.clone()] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(source.join("image/node-images.sh"), FAKE_SCRIPT).unwrap();
        std::fs::write(bin.join("skopeo"), FAKE_SKOPEO).unwrap();
        make_executable(&bin.join("skopeo"));
        let mut lines = String::new();
        let mut manifests = Vec::new();
        for (name, tag) in [
            ("busybox", "1.35.0"),
            ("serving", "0.1.0"),
            ("training", "0.1.0"),
        ] {
            let manifest = format!("{{\"schemaVersion\": 2, \"layers\": [\"{name}\"]}}\n");
            let archive = oci_archive(tmp.path(), name, tag, manifest.as_bytes());
            lines += &format!(
                "{name} docker.io/mlkube/{name}:{tag} {}\n",
                archive.display()
            );
            manifests.push((name, manifest.into_bytes()));
        }
        std::fs::write(source.join("image/images.txt"), lines).unwrap();
        Setup {
            _tmp: tmp,
            source,
            registry,
            bin,
            manifests,
        }
    }

    fn manifest(&self, name: &str) -> &[u8] {
        &self.manifests.iter().find(|(n, _)| *n == name).unwrap().1
    }

    /// `mlkube images ...` with the stand-in skopeo first on PATH and the checkout as source.
    fn mlkube(&self, args: &[&str]) -> Run {
        let path = format!("{}:{}", self.bin.display(), std::env::var("PATH").unwrap());
        let mut command = Command::new(env!("CARGO_BIN_EXE_mlkube"));
        command
            .args(args)
            .env("PATH", path)
            .env("MLKUBE_SOURCE", &self.source)
            .env("FAKE_REGISTRY", &self.registry)
            .env("NO_COLOR", "1")
            .env_remove("FAKE_DOWN");
        output_of(&mut command)
    }

    /// The registry's manifest for `reference`, as the stand-in stores it.
    fn stored(&self, reference: &str) -> PathBuf {
        self.registry.join(reference.replace(['/', ':'], "_"))
    }

    /// Put `manifest` in the registry as `<TO>/<image>`.
    fn store(&self, image: &str, manifest: &[u8]) {
        std::fs::write(self.stored(&format!("{TO}/{image}")), manifest).unwrap();
    }

    fn calls(&self) -> String {
        std::fs::read_to_string(self.registry.join("calls")).unwrap_or_default()
    }
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn output_of(command: &mut Command) -> Run {
    let output = command.output().expect("the mlkube binary runs");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn digest(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// An OCI archive of one image, as image/oci.sh lays it out: oci-layout, index.json naming
/// the manifest, the manifest among the blobs.
fn oci_archive(dir: &Path, name: &str, tag: &str, manifest: &[u8]) -> PathBuf {
    let layout = dir.join(format!("layout-{name}"));
    let blobs = layout.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    let digest = digest(manifest);
    std::fs::write(blobs.join(digest.trim_start_matches("sha256:")), manifest).unwrap();
    std::fs::write(
        layout.join("oci-layout"),
        "{\"imageLayoutVersion\": \"1.0.0\"}\n",
    )
    .unwrap();
    let index = format!(
        "{{\"schemaVersion\": 2, \"manifests\": [{{\"mediaType\": \
         \"application/vnd.oci.image.manifest.v1+json\", \"digest\": \"{digest}\", \"size\": {}, \
         \"annotations\": {{\"org.opencontainers.image.ref.name\": \"{tag}\"}}}}]}}\n",
        manifest.len()
    );
    std::fs::write(layout.join("index.json"), index).unwrap();
    let archive = dir.join(format!("{name}-{tag}.oci.tar"));
    let status = Command::new("tar")
        .arg("--create")
        .arg("--file")
        .arg(&archive)
        .arg("--directory")
        .arg(&layout)
        .args(["oci-layout", "index.json", "blobs"])
        .status()
        .expect("tar runs");
    assert!(status.success());
    archive
}

const TO: &str = "127.0.0.1:5000/mlkube";

#[test]
fn images_list_names_each_image_with_its_size_digest_and_archive() {
    let setup = Setup::new();
    let run = setup.mlkube(&["images", "list", "busybox", "serving", "-o", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let images: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let images = images.as_array().unwrap();
    assert_eq!(images.len(), 2, "{images:?}");
    assert_eq!(images[0]["reference"], "docker.io/mlkube/busybox:1.35.0");
    assert_eq!(images[0]["digest"], digest(setup.manifest("busybox")));
    assert!(
        images[1]["archive"]
            .as_str()
            .unwrap()
            .ends_with("serving-0.1.0.oci.tar")
    );
    assert!(images[1]["size"].as_u64().unwrap() >= 2048);
    assert!(
        run.stderr.contains("image: building nothing"),
        "the script's progress shows"
    );

    let table = setup.mlkube(&["images", "list"]).stdout;
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    assert!(
        lines[0]
            .split_whitespace()
            .eq(["REFERENCE", "SIZE", "DIGEST", "ARCHIVE"]),
        "{table}"
    );
    assert!(
        lines[3].starts_with("docker.io/mlkube/training:0.1.0  "),
        "{table}"
    );
}

/// The registry has busybox as built, serving as it was before, training not at all: a dry
/// run says so, asking the registry only, and writes nothing.
#[test]
fn images_push_dry_run_says_what_would_be_pushed_and_writes_nothing() {
    let setup = Setup::new();
    setup.store("busybox:1.35.0", setup.manifest("busybox"));
    setup.store("serving:0.1.0", b"{\"old\": 1}");
    let run = setup.mlkube(&["images", "push", TO, "--dry-run", "--insecure"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let busybox = digest(setup.manifest("busybox"));
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!("up to date {TO}/busybox:1.35.0@{busybox}")
    );
    assert!(
        lines[1].starts_with(&format!("would push {TO}/serving:0.1.0 (")),
        "{lines:?}"
    );
    assert!(
        lines[2].starts_with(&format!("would push {TO}/training:0.1.0 (")),
        "{lines:?}"
    );
    assert!(
        run.stderr.contains("dry run: 2 would be pushed")
            && run.stderr.contains("nothing was written"),
        "{}",
        run.stderr
    );
    let calls = setup.calls();
    assert_eq!(calls.lines().count(), 3, "{calls}");
    assert!(
        calls
            .lines()
            .all(|c| c
                .starts_with("inspect --raw --tls-verify=false docker://127.0.0.1:5000/mlkube/")),
        "{calls}"
    );
    assert_eq!(
        std::fs::read(setup.stored(&format!("{TO}/serving:0.1.0"))).unwrap(),
        b"{\"old\": 1}"
    );
}

#[test]
fn images_push_copies_what_the_registry_lacks_and_then_finds_it_up_to_date() {
    let setup = Setup::new();
    setup.store("busybox:1.35.0", setup.manifest("busybox"));
    let run = setup.mlkube(&["images", "push", TO, "busybox", "serving"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let (busybox, serving) = (
        digest(setup.manifest("busybox")),
        digest(setup.manifest("serving")),
    );
    assert_eq!(
        run.stdout,
        format!("up to date {TO}/busybox:1.35.0@{busybox}\npushed {TO}/serving:0.1.0@{serving}\n")
    );
    assert!(
        run.stderr.contains("pushing 2/2 serving:0.1.0 ("),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("1 pushed, 1 up to date, in 127.0.0.1:5000/mlkube"),
        "{}",
        run.stderr
    );
    let copy = setup
        .calls()
        .lines()
        .find(|c| c.starts_with("copy"))
        .unwrap()
        .to_owned();
    assert!(
        copy.starts_with("copy --quiet --preserve-digests --digestfile "),
        "{copy}"
    );
    assert!(
        copy.ends_with(&format!(
            "serving-0.1.0.oci.tar docker://{TO}/serving:0.1.0"
        )),
        "{copy}"
    );
    assert_eq!(
        std::fs::read(setup.stored(&format!("{TO}/serving:0.1.0"))).unwrap(),
        setup.manifest("serving")
    );

    let again = setup.mlkube(&["images", "push", TO, "serving"]);
    assert_eq!(
        again.stdout,
        format!("up to date {TO}/serving:0.1.0@{serving}\n")
    );
    assert_eq!(
        setup.calls().matches("copy").count(),
        1,
        "nothing copied twice"
    );
}

/// Bad input fails with exit 2, nothing on stdout and nothing pushed, saying what to fix.
#[test]
fn images_push_refuses_bad_input_saying_what_to_fix() {
    let setup = Setup::new();
    let no_checkout = setup.registry.join("empty");
    std::fs::create_dir_all(&no_checkout).unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["registry.example.com".into()],
            "it names no path after the registry",
        ),
        (
            vec!["http://127.0.0.1:5000/mlkube".into()],
            "it has a scheme; drop `http://`",
        ),
        (
            vec!["team/mlkube".into()],
            "for Docker Hub write docker.io/team",
        ),
        (
            vec![TO.into(), "nginx".into()],
            "invalid value 'nginx' for '[NAME]...'\n  [possible values: pause, mlkube, training,",
        ),
        (
            vec![
                TO.into(),
                "--source".into(),
                no_checkout.display().to_string(),
            ],
            "no image/node-images.sh in",
        ),
    ];
    for (args, says) in cases {
        let mut all = vec!["images", "push"];
        all.extend(args.iter().map(String::as_str));
        let run = setup.mlkube(&all);
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (2, ""),
            "{all:?}: {}",
            run.stderr
        );
        assert!(run.stderr.contains(says), "{all:?}: {}", run.stderr);
    }
    let hint = setup.mlkube(&[
        "images",
        "push",
        TO,
        "--source",
        &no_checkout.display().to_string(),
    ]);
    assert!(
        hint.stderr
            .contains("hint: run mlkube images in the mlkube checkout, or pass --source DIR")
    );

    // No skopeo on PATH.
    let empty_path = setup.registry.join("no-tools");
    std::fs::create_dir_all(&empty_path).unwrap();
    let run = output_of(
        Command::new(env!("CARGO_BIN_EXE_mlkube"))
            .args(["images", "push", TO])
            .env("PATH", &empty_path)
            .env("MLKUBE_SOURCE", &setup.source),
    );
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "mlkube: error: skopeo is not on PATH; it copies the images into the registry\nhint: \
         install it: apt-get install skopeo\n"
    );

    // A registry that does not answer: asked once, nothing copied.
    let run = run_down(&setup);
    assert_eq!((run.code, run.stdout.as_str()), (2, ""), "{}", run.stderr);
    assert!(
        run.stderr.contains("mlkube: error: cannot ask the registry for 127.0.0.1:5000/mlkube/busybox:1.35.0\n  caused by: pinging container registry 127.0.0.1:5000: dial tcp")
            && run.stderr.contains("hint: is a registry running at 127.0.0.1:5000?"),
        "{}",
        run.stderr
    );
    assert!(!setup.calls().contains("copy"), "{}", setup.calls());
}

fn run_down(setup: &Setup) -> Run {
    let path = format!("{}:{}", setup.bin.display(), std::env::var("PATH").unwrap());
    output_of(
        Command::new(env!("CARGO_BIN_EXE_mlkube"))
            .args(["images", "push", TO])
            .env("PATH", path)
            .env("MLKUBE_SOURCE", &setup.source)
            .env("FAKE_REGISTRY", &setup.registry)
            .env("FAKE_DOWN", "1"),
    )
}

#[test]
fn a_build_that_fails_fails_the_verb() {
    let setup = Setup::new();
    std::fs::write(
        setup.source.join("image/node-images.sh"),
        "echo 'image: error: musl-gcc is not on PATH' >&2\nexit 1\n",
    )
    .unwrap();
    let run = setup.mlkube(&["images", "list"]);
    assert_eq!((run.code, run.stdout.as_str()), (2, ""));
    assert!(
        run.stderr
            .starts_with("image: error: musl-gcc is not on PATH\n"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("node-images.sh failed (exit status: 1); its messages above say why"),
        "{}",
        run.stderr
    );
}
