//! `mlkube images push` into a real registry: the one the real node pulls from,
//! `$MLKUBE_REGISTRY` (plain HTTP on 127.0.0.1, from `cluster/local-cluster.sh env`). busybox,
//! as `image/node-images.sh` builds it, lands with its archive's manifest digest, and a second
//! push finds it up to date. Needs no cluster but that registry (and a KUBECONFIG, which it
//! does not read): `MLKUBE_REGISTRY=127.0.0.1:<port> KUBECONFIG=/dev/null cargo test --test
//! real_node images`.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The checkout these tests are built from: its image/node-images.sh builds the images.
const CHECKOUT: &str = env!("CARGO_MANIFEST_DIR");

/// `mlkube` with `args`, building in this checkout, insisting that it succeeds.
fn mlkube(args: &[&str]) -> Output {
    let mut args = args.to_vec();
    args.extend(["--source", CHECKOUT]);
    crate::support::mlkube_ok(Path::new(CHECKOUT), &args)
}

/// busybox's tag and the manifest digest its OCI archive's index.json names, read with tar
/// from the archive image/node-images.sh prints.
fn busybox_as_built() -> (String, String) {
    let built = Command::new("bash")
        .arg(Path::new(CHECKOUT).join("image/node-images.sh"))
        .arg("busybox")
        .current_dir(CHECKOUT)
        .stderr(Stdio::inherit())
        .output()
        .expect("image/node-images.sh runs");
    assert!(
        built.status.success(),
        "image/node-images.sh busybox failed"
    );
    let line = String::from_utf8(built.stdout).unwrap();
    let (reference, archive) = line.trim().split_once(' ').expect("<reference> <archive>");
    let tag = reference.rsplit_once(':').unwrap().1.to_owned();
    let index = Command::new("tar")
        .args(["-xOf", archive, "index.json"])
        .output()
        .expect("tar runs");
    let index: serde_json::Value = serde_json::from_slice(&index.stdout).expect("index.json");
    let digest = index["manifests"][0]["digest"].as_str().unwrap().to_owned();
    (tag, digest)
}

/// The digest the registry at `registry` (plain HTTP) reports for `repository:tag`: the
/// Docker-Content-Digest of a HEAD of the manifest, by the Distribution API.
fn reported_digest(registry: &str, repository: &str, tag: &str) -> String {
    let mut stream = TcpStream::connect(registry).expect("the registry answers");
    let request = format!(
        "HEAD /v2/{repository}/manifests/{tag} HTTP/1.1\r\nHost: {registry}\r\nAccept: \
         application/vnd.oci.image.manifest.v1+json, \
         application/vnd.docker.distribution.manifest.v2+json\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("docker-content-digest")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no Docker-Content-Digest in {response}"))
}

#[test]
fn images_push_puts_busybox_into_the_registry_with_its_archives_digest() {
    let registry = std::env::var("MLKUBE_REGISTRY").expect(
        "MLKUBE_REGISTRY names the registry the real node pulls from: eval \"$(MLKUBE_CLUSTER_NODE=real \
         cluster/local-cluster.sh env)\"",
    );
    // A path of this run's own, so the first push copies whatever earlier runs left.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let path = format!("mlkube-test/images-{nanos}");
    let to = format!("{registry}/{path}");
    let (tag, digest) = busybox_as_built();

    let dry_run = mlkube(&["images", "push", &to, "busybox", "--insecure", "--dry-run"]);
    let would = String::from_utf8(dry_run.stdout).unwrap();
    assert!(
        would.starts_with(&format!("would push {to}/busybox:{tag} (")),
        "{would}"
    );

    let pushed = mlkube(&["images", "push", &to, "busybox", "--insecure"]);
    assert_eq!(
        String::from_utf8(pushed.stdout).unwrap(),
        format!("pushed {to}/busybox:{tag}@{digest}\n")
    );
    assert_eq!(
        reported_digest(&registry, &format!("{path}/busybox"), &tag),
        digest
    );

    let again = mlkube(&["images", "push", &to, "busybox", "--insecure"]);
    assert_eq!(
        String::from_utf8(again.stdout).unwrap(),
        format!("up to date {to}/busybox:{tag}@{digest}\n")
    );
}
