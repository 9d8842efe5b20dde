//! The serving image (`image/serving/build.sh`): its config runs as the non-root user with
//! the venv first on PATH and HOME in /tmp, and its root file system, unpacked and entered with
//! chroot as that user, fetches models from a stand-in S3 store and serves them over the V2
//! protocol: a small XGBoost booster and a small TensorFlow SavedModel, trained in the image as
//! the digits examples train theirs (multi:softprob over 64 pixels; a `serving_default`
//! signature from `pixels` to `probabilities`), each answering on its readiness path once
//! loaded and on the unversioned and the versioned infer paths, naming the version that
//! answered. An empty prefix, a missing bucket, an unreachable store and a directory without
//! the format's files end their commands with exit status 1 and one line, on stderr and in the
//! termination message.
//!
//! Needs root (chroot, mounts in a namespace of its own) and the archive, which the test asks
//! `image/node-images.sh serving` for: up to date, or built (about 6 minutes on two cores), after
//! any other run of it has finished. The run itself takes under two minutes.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Reaped, blob, free_port, run, unpack_layout};

const USER: &str = "1000:100";

/// The archive `image/node-images.sh serving` prints: `<reference> <archive>`.
fn serving_archive() -> (String, PathBuf) {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert!(
        euid == 0,
        "the serving image's test needs root (image/node-images.sh builds as root, and the image \
         runs here with chroot): run it as root, e.g. sudo -E cargo test --test image serving"
    );
    let output = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/image/node-images.sh"))
        .arg("serving")
        .stderr(Stdio::inherit())
        .output()
        .expect("image/node-images.sh runs");
    assert!(
        output.status.success(),
        "image/node-images.sh serving failed"
    );
    let line = String::from_utf8(output.stdout).expect("UTF-8 output");
    let (reference, archive) = line
        .trim()
        .split_once(' ')
        .unwrap_or_else(|| panic!("`<reference> <archive>` on stdout, not {line:?}"));
    assert_eq!(
        reference,
        format!("docker.io/mlkube/serving:{}", env!("CARGO_PKG_VERSION"))
    );
    (reference.to_owned(), PathBuf::from(archive))
}

/// The image's config and its one layer unpacked, with owners, into a temporary directory.
struct Unpacked {
    dir: tempfile::TempDir,
    config: Value,
}

impl Unpacked {
    fn new(archive: &Path, reference: &str) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (layout, manifest, config) = unpack_layout(archive, reference, dir.path());
        let layers = manifest["layers"].as_array().expect("layers");
        assert_eq!(layers.len(), 1, "one layer: {manifest}");
        assert_eq!(
            layers[0]["mediaType"],
            "application/vnd.oci.image.layer.v1.tar+zstd"
        );
        let layer = blob(&layout, &layers[0]);
        let rootfs = dir.path().join("rootfs");
        std::fs::create_dir(&rootfs).unwrap();
        run(Command::new("tar")
            .args(["--zstd", "--numeric-owner", "-xpf"])
            .arg(&layer)
            .arg("-C")
            .arg(&rootfs));
        std::fs::remove_dir_all(&layout).unwrap();
        Unpacked { dir, config }
    }

    fn rootfs(&self) -> PathBuf {
        self.dir.path().join("rootfs")
    }

    /// A command run in the image as its config says (its user, environment and directory),
    /// with ENV added: chroot in a mount namespace of its own, where /dev and /proc are
    /// mounted as a container runtime would (TensorFlow needs /dev/urandom).
    fn command(&self, env: &[String], args: &[&str]) -> Command {
        let run = &self.config["config"];
        let mut command = Command::new("unshare");
        command
            .args(["--mount", "sh", "-c"])
            .arg(
                r#"user=$1 && shift && mount --rbind /dev "$0/dev" && mount -t proc proc "$0/proc" &&
                exec chroot --userspec="$user" "$0" /usr/bin/env -i "$@""#,
            )
            .arg(self.rootfs())
            .arg(run["User"].as_str().unwrap())
            .args(run["Env"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()))
            .arg("MLKUBE_TERMINATION_LOG=/tmp/termination-log")
            .args(env)
            .args(["sh", "-c", "cd \"$0\" && exec \"$@\""])
            .arg(run["WorkingDir"].as_str().unwrap())
            .args(args)
            .stdin(Stdio::null());
        command
    }

    /// The termination message the last failing command wrote, emptied for the next one.
    fn termination_message(&self) -> String {
        let path = self.rootfs().join("tmp/termination-log");
        let message = std::fs::read_to_string(&path).expect("the termination log");
        std::fs::write(&path, "").unwrap();
        message
    }
}

/// (status, body) of an HTTP/1.1 request to 127.0.0.1:PORT; None when nothing answers.
fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

/// Trains a tiny model of each format in the image, as the digits examples save theirs: an
/// XGBoost multi:softprob booster's model.json, a SavedModel whose `serving_default` maps
/// `pixels` [N, 64] to `probabilities` [N, 10].
const TRAIN: &str = r#"
import os, joblib, lightgbm as lgb, numpy as np, xgboost as xgb, tensorflow as tf
from sklearn.linear_model import LogisticRegression
rng = np.random.default_rng(0)
x, y = rng.uniform(0, 16, (200, 64)).astype("float32"), rng.integers(0, 10, 200)
for name in ["xgboost", "sklearn", "lightgbm"]:
    os.makedirs(f"/tmp/models/{name}")
params = {"objective": "multi:softprob", "num_class": 10, "max_depth": 2, "nthread": 1}
xgb.train(params, xgb.DMatrix(x, label=y), 3).save_model("/tmp/models/xgboost/model.json")
joblib.dump(LogisticRegression(max_iter=50).fit(x, y), "/tmp/models/sklearn/model.joblib")
params = {"objective": "multiclass", "num_class": 10, "num_threads": 1, "verbose": -1}
lgb.train(params, lgb.Dataset(x, label=y), 3).save_model("/tmp/models/lightgbm/model.bst")

class Served(tf.Module):
    def __init__(self):
        super().__init__()
        self.kernel = tf.Variable(rng.normal(size=(64, 10)).astype("float32"))
    @tf.function(input_signature=[tf.TensorSpec([None, 64], tf.float32, name="pixels")])
    def serve(self, pixels):
        return {"probabilities": tf.nn.softmax(tf.matmul(pixels, self.kernel))}

module = Served()
tf.saved_model.save(module, "/tmp/models/tensorflow", signatures={"serving_default": module.serve})
"#;

/// `mlkube_serving.serve` for one model on free ports of 127.0.0.1; its HTTP port and process.
fn serve(image: &Unpacked, name: &str, version: &str, format: &str, dir: &str) -> (u16, Reaped) {
    let (http_port, grpc_port) = (free_port(), free_port());
    let child = image
        .command(
            &[],
            &[
                "python3",
                "-m",
                "mlkube_serving.serve",
                "--host",
                "127.0.0.1",
            ],
        )
        .args(["--name", name, "--version", version, "--format", format])
        .args(["--model-dir", dir, "--metrics-port", "0"])
        .args(["--http-port", &http_port.to_string()])
        .args(["--grpc-port", &grpc_port.to_string()])
        .stdout(Stdio::null())
        .spawn()
        .expect("chroot starts the server");
    (http_port, Reaped(child))
}

/// Polls the model's readiness path until it answers 200; panics if the server exits first.
fn wait_ready(port: u16, name: &str, server: &mut Reaped) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let path = format!("/v2/models/{name}/ready");
    loop {
        if let Some((200, _)) = http(port, "GET", &path, None) {
            return;
        }
        let exited = server.0.try_wait().expect("the server can be waited for");
        assert!(exited.is_none(), "the server of {name} exited: {exited:?}");
        assert!(
            Instant::now() < deadline,
            "{path} did not answer 200 in 120 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A V2 request of two rows of 64 pixels, FP32, the input named NAME.
fn digits_request(input: &str) -> Value {
    let pixels: Vec<f32> = (0..128).map(|i| (i % 17) as f32).collect();
    json!({"inputs": [{"name": input, "shape": [2, 64], "datatype": "FP32", "data": pixels}]})
}

/// POSTs the request; the response's JSON, insisting on 200.
fn infer(port: u16, path: &str, request: &Value) -> Value {
    let (status, body) = http(port, "POST", path, Some(request)).expect("the server answers");
    assert_eq!(status, 200, "POST {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path} answered {body}: {e}"))
}

/// The response names the model and the version that answered, and holds one FP32 output
/// [2, 10] of probabilities under OUTPUT.
fn assert_probabilities(response: &Value, name: &str, version: &str, output: &str) {
    assert_eq!(response["model_name"], name, "{response}");
    assert_eq!(response["model_version"], version, "{response}");
    let outputs = response["outputs"].as_array().expect("outputs");
    assert_eq!(outputs.len(), 1, "{response}");
    assert_eq!(outputs[0]["name"], output, "{response}");
    assert_eq!(outputs[0]["datatype"], "FP32", "{response}");
    assert_eq!(outputs[0]["shape"], json!([2, 10]), "{response}");
    let data: Vec<f64> = outputs[0]["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|v| v.as_f64().expect("numbers"))
        .collect();
    for row in data.chunks(10) {
        let sum: f64 = row.iter().sum();
        assert!((sum - 1.0).abs() < 1e-3, "a row of probabilities: {row:?}");
    }
}

/// A stand-in for the object store, enough of S3 for boto3 to list a bucket and download its
/// objects (path-style): ListObjectsV2, HeadObject and GetObject on the bucket `models`, whose
/// OBJECTS are (key, contents); any other bucket is missing. Serves until the test ends.
fn object_store(objects: Vec<(String, Vec<u8>)>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port for the store");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = answer_s3(stream, &objects);
        }
    });
    port
}

/// Answers one request, then closes the connection (boto3 opens another).
fn answer_s3(mut stream: TcpStream, objects: &[(String, Vec<u8>)]) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte)? == 1 {
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    let mut words = head.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or("/"));
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let (bucket, key) = path
        .trim_start_matches('/')
        .split_once('/')
        .unwrap_or((path.trim_start_matches('/'), ""));
    let key = percent_decoded(key);
    let found = objects.iter().find(|(k, _)| *k == key);
    let (status, headers, body) = if bucket != "models" {
        let error = format!(
            "<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message><BucketName>{bucket}</BucketName></Error>"
        );
        ("404 Not Found", String::new(), error.into_bytes())
    } else if key.is_empty() && query.contains("list-type=2") {
        let prefix = query
            .split('&')
            .find_map(|pair| pair.strip_prefix("prefix="))
            .map(percent_decoded)
            .unwrap_or_default();
        let listed: Vec<String> = objects
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(k, v)| {
                format!(
                    "<Contents><Key>{k}</Key><Size>{}</Size><ETag>&quot;0&quot;</ETag>\
                     <LastModified>2026-01-01T00:00:00.000Z</LastModified></Contents>",
                    v.len()
                )
            })
            .collect();
        let xml = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult \
             xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>models</Name>\
             <Prefix>{prefix}</Prefix><KeyCount>{}</KeyCount><MaxKeys>1000</MaxKeys>\
             <IsTruncated>false</IsTruncated>{}</ListBucketResult>",
            listed.len(),
            listed.concat()
        );
        ("200 OK", String::new(), xml.into_bytes())
    } else if let Some((_, contents)) = found {
        let headers = "ETag: \"0\"\r\nLast-Modified: Thu, 01 Jan 2026 00:00:00 GMT\r\n";
        ("200 OK", headers.to_owned(), contents.clone())
    } else {
        let error = "<Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>";
        ("404 Not Found", String::new(), error.as_bytes().to_vec())
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\n{headers}Connection: close\r\n\r\n",
        body.len()
    )?;
    if method != "HEAD" {
        stream.write_all(&body)?;
    }
    Ok(())
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], text.get(i + 1..i + 3)) {
            (b'%', Some(hex)) if u8::from_str_radix(hex, 16).is_ok() => {
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).expect("UTF-8 keys")
}

/// Every file below DIR as (PREFIX + its relative path, contents).
fn objects_below(dir: &Path, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let mut objects = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(dir).unwrap().to_str().unwrap().to_owned();
                objects.push((format!("{prefix}{relative}"), std::fs::read(&path).unwrap()));
            }
        }
    }
    objects
}

/// `mlkube_serving.fetch` from the store on STORE_PORT; its output.
fn fetch(image: &Unpacked, store_port: u16, uri: &str, dest: &str) -> std::process::Output {
    let env = [
        format!("AWS_ENDPOINT_URL=http://127.0.0.1:{store_port}"),
        "AWS_REGION=us-east-1".to_owned(),
        "AWS_ACCESS_KEY_ID=mlkube".to_owned(),
        "AWS_SECRET_ACCESS_KEY=secret".to_owned(),
    ];
    image
        .command(
            &env,
            &[
                "python3",
                "-m",
                "mlkube_serving.fetch",
                "--uri",
                uri,
                "--dest",
                dest,
            ],
        )
        .output()
        .expect("chroot runs the fetch")
}

/// A failure a user can fix: exit status 1, its one line on stderr and as the termination
/// message.
fn assert_fails(image: &Unpacked, output: std::process::Output, line: &str) {
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("error: {line}\n")), "{stderr}");
    assert_eq!(image.termination_message(), format!("{line}\n"));
}

/// scikit-learn's model.joblib and LightGBM's model.bst, each found by `--format auto` (as the
/// kserve-mlserver runtime runs it; a model.bst told from XGBoost's by its text), answer V2
/// requests through MLServer's own runtimes: one `predict` output row per input row.
fn mlservers_own_runtimes_serve_sklearn_and_lightgbm(image: &Unpacked) {
    for format in ["sklearn", "lightgbm"] {
        let dir = format!("/tmp/models/{format}");
        let (port, mut server) = serve(image, format, "1", "auto", &dir);
        wait_ready(port, format, &mut server);
        let path = format!("/v2/models/{format}/infer");
        let response = infer(port, &path, &digits_request("pixels"));
        assert_eq!(response["model_name"], format, "{response}");
        assert_eq!(response["model_version"], "1", "{response}");
        let output = &response["outputs"][0];
        assert_eq!(output["name"], "predict", "{response}");
        assert_eq!(output["shape"][0], 2, "{response}");
    }
}

/// Triton's `tritonclient` (in the image, with MLServer) against the server on `port`: health,
/// readiness and an inference with JSON tensors (`binary_data=False`) are answered; its default,
/// Triton's binary tensor extension, MLServer does not read, as the docs tell a client.
fn tritons_client_is_answered_in_json(image: &Unpacked, port: u16) {
    let script = format!(
        r#"
import numpy as np
import tritonclient.http as http
client = http.InferenceServerClient(url="127.0.0.1:{port}")
assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("digits")
def infer(binary):
    pixels = http.InferInput("input-0", [1, 64], "FP32")
    pixels.set_data_from_numpy(np.arange(64, dtype=np.float32).reshape(1, 64) % 17, binary_data=binary)
    wanted = http.InferRequestedOutput("predict", binary_data=binary)
    return client.infer("digits", [pixels], outputs=[wanted]).as_numpy("predict")
print("json", infer(False).shape)
try:
    infer(True)
    print("binary answered")
except Exception as error:
    print("binary refused", str(error)[:300])
"#
    );
    let ran = image
        .command(&[], &["python3", "-c", &script])
        .output()
        .expect("chroot runs python3");
    let said = String::from_utf8_lossy(&ran.stdout);
    assert!(
        ran.status.success() && said.contains("json (1, 10)"),
        "tritonclient with JSON tensors: {said}{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(said.contains("binary refused"), "{said}");
}

#[test]
fn the_serving_image_fetches_and_serves_xgboost_and_tensorflow_models_over_v2() {
    let (reference, archive) = serving_archive();
    let image = Unpacked::new(&archive, &reference);
    let run_config = &image.config["config"];
    assert_eq!(run_config["User"], USER, "{run_config}");
    assert_eq!(run_config["WorkingDir"], "/tmp");
    let env: Vec<&str> = run_config["Env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(env[0].starts_with("PATH=/opt/venv/bin:"), "{env:?}");
    assert!(env.contains(&"HOME=/tmp"), "{env:?}");
    // As the kubelet mounts it: a file the container's user may write.
    let log = image.rootfs().join("tmp/termination-log");
    std::fs::write(&log, "").unwrap();
    std::fs::set_permissions(&log, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();

    let trained = image
        .command(&[], &["python3", "-c", TRAIN])
        .output()
        .expect("chroot runs python3");
    assert!(
        trained.status.success(),
        "the models train in the image: {}",
        String::from_utf8_lossy(&trained.stderr)
    );

    // The models go into the store as the training jobs put them, one prefix a version, and
    // come back out into the directories the servers read.
    let models = image.rootfs().join("tmp/models");
    let mut objects = objects_below(&models.join("xgboost"), "digits/1/");
    objects.extend(objects_below(&models.join("tensorflow"), "digits/2/"));
    let store = object_store(objects);
    for (uri, dest) in [
        ("s3://models/digits/1/", "/tmp/fetched/1"),
        ("s3://models/digits/2", "/tmp/fetched/2"),
    ] {
        let fetched = fetch(&image, store, uri, dest);
        assert!(fetched.status.success(), "{fetched:?}");
        assert!(
            String::from_utf8_lossy(&fetched.stdout).starts_with("fetched "),
            "{fetched:?}"
        );
    }
    let fetched = image.rootfs().join("tmp/fetched");
    assert_eq!(
        std::fs::read(fetched.join("1/model.json")).unwrap(),
        std::fs::read(models.join("xgboost/model.json")).unwrap()
    );
    assert!(fetched.join("2/saved_model.pb").is_file());
    assert!(
        fetched.join("2/variables/variables.index").is_file(),
        "paths below the prefix kept"
    );

    let (xgboost_port, mut xgboost) = serve(&image, "digits", "1", "xgboost", "/tmp/fetched/1");
    // The format the directory's files say, as the kserve-mlserver runtime serves it.
    let (tensorflow_port, mut tensorflow) = serve(&image, "digits", "2", "auto", "/tmp/fetched/2");
    wait_ready(xgboost_port, "digits", &mut xgboost);
    // The metadata a V2 client reads first: the booster's 64 features in, its classes out.
    let (status, body) =
        http(xgboost_port, "GET", "/v2/models/digits", None).expect("the server answers");
    assert_eq!(status, 200, "{body}");
    let metadata: Value = serde_json::from_str(&body).expect("JSON metadata");
    let tensors = |key: &str| -> Vec<Value> {
        (metadata[key].as_array().into_iter().flatten())
            .map(|t| json!([t["name"], t["datatype"], t["shape"]]))
            .collect()
    };
    assert_eq!(
        (tensors("inputs"), tensors("outputs")),
        (
            vec![json!(["input-0", "FP32", [-1, 64]])],
            vec![json!(["predict", "FP32", [-1, 10]])]
        ),
        "{metadata}"
    );
    // MLServer's XGBoost runtime answers `predict`: for a booster saved by xgboost.train, the
    // probabilities.
    for path in [
        "/v2/models/digits/infer",
        "/v2/models/digits/versions/1/infer",
    ] {
        let response = infer(xgboost_port, path, &digits_request("pixels"));
        assert_probabilities(&response, "digits", "1", "predict");
    }
    tritons_client_is_answered_in_json(&image, xgboost_port);
    let other = http(
        xgboost_port,
        "POST",
        "/v2/models/digits/versions/2/infer",
        Some(&digits_request("pixels")),
    );
    assert_eq!(
        other.map(|(status, _)| status),
        Some(404),
        "a version it does not serve"
    );
    let (status, body) = http(
        xgboost_port,
        "POST",
        "/v2/models/digits/infer",
        Some(
            &json!({"inputs": [{"name": "pixels", "shape": [1, 3], "datatype": "FP32",
            "data": [1, 2, 3]}]}),
        ),
    )
    .expect("the server answers");
    assert_eq!(status, 400, "a wrong shape is the client's error: {body}");
    assert!(
        body.contains("the shape [N, 64]") && body.contains("[1, 3]"),
        "the shape it takes and the request's: {body}"
    );

    wait_ready(tensorflow_port, "digits", &mut tensorflow);
    for path in [
        "/v2/models/digits/infer",
        "/v2/models/digits/versions/2/infer",
    ] {
        let response = infer(tensorflow_port, path, &digits_request("pixels"));
        assert_probabilities(&response, "digits", "2", "probabilities");
    }
    // The one input of the signature, whatever the request calls it.
    let response = infer(
        tensorflow_port,
        "/v2/models/digits/infer",
        &digits_request("x"),
    );
    assert_probabilities(&response, "digits", "2", "probabilities");
    let (status, body) = http(
        tensorflow_port,
        "POST",
        "/v2/models/digits/infer",
        Some(
            &json!({"inputs": [{"name": "pixels", "shape": [2, 3], "datatype": "FP32",
            "data": [1, 2, 3, 4, 5, 6]}]}),
        ),
    )
    .expect("the server answers");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("[None, 64]"), "the shape it takes: {body}");
    drop((xgboost, tensorflow));
    mlservers_own_runtimes_serve_sklearn_and_lightgbm(&image);

    assert_fails(
        &image,
        fetch(&image, store, "s3://models/digits/9/", "/tmp/fetched/9"),
        "s3://models/digits/9/ holds no objects: no model was saved there; check the version's \
         model path (the job's --model-uri)",
    );
    assert_fails(
        &image,
        fetch(&image, store, "s3://modles/digits/1/", "/tmp/fetched/1"),
        &format!(
            "could not read s3://modles/digits/1/: the bucket 'modles' does not exist in the \
             store at http://127.0.0.1:{store}: check the model's URI, or create the bucket"
        ),
    );
    let wrong_format = image
        .command(
            &[],
            &["python3", "-m", "mlkube_serving.serve", "--name", "digits"],
        )
        .args(["--version", "3", "--format", "tensorflow"])
        .args(["--model-dir", "/tmp/fetched/1"])
        .output()
        .expect("chroot runs the server");
    assert_fails(
        &image,
        wrong_format,
        "/tmp/fetched/1 holds no tensorflow model: the tensorflow format needs saved_model.pb \
         at its top, and it holds model.json; check the version's format and model path",
    );
    let no_model = image
        .command(
            &[],
            &["python3", "-m", "mlkube_serving.serve", "--name", "digits"],
        )
        .args(["--format", "auto", "--model-dir", "/tmp/fetched"])
        .output()
        .expect("chroot runs the server");
    assert_fails(
        &image,
        no_model,
        "/tmp/fetched holds no model: it holds 1/, 2/, and each format needs its files at the top \
         (lightgbm: model.bst; sklearn: model.joblib or model.pkl or model.pickle; tensorflow: \
         saved_model.pb; xgboost: model.json or model.ubj or model.bst); check the model's \
         storage URI, or name the format",
    );
    let unreachable = fetch(
        &image,
        free_port(),
        "s3://models/digits/1/",
        "/tmp/fetched/1",
    );
    assert_eq!(unreachable.status.code(), Some(1), "{unreachable:?}");
    let message = image.termination_message();
    assert!(
        message.starts_with("could not reach the object store at http://127.0.0.1:"),
        "{message}"
    );
    assert_eq!(message.lines().count(), 1, "one line: {message}");
}
