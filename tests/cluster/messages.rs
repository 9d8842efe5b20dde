//! What the binary says when an apply, a delete or a validate does not simply succeed, against
//! the real API server: a conflict (found by the server or by mlkube), its `-o json` document,
//! Ctrl-C at each stage (before anything is written, during the wait, during a delete), and
//! `validate` of an environment whose namespace does not exist yet.
//!
//! A stage is reached deterministically: the wait by a Deployment no node accepts, and a request
//! by a validating webhook that holds it (the API server calls a listener of the test, which
//! answers only once the binary said it was interrupted). The webhook needs the API server on
//! this host's network, as the kwok cluster runs it.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use mlkube::render::manifest::Object;
use serde_json::{Value, json};

use crate::deploy::{config_map, deployment};
use crate::support::{self, TestNamespace, lock_shared_cluster_objects, mlkube};

/// `objects` as YAML documents in `dir/objects.yaml`, for `--manifest`.
fn manifest(dir: &Path, objects: &[Object]) -> String {
    let path = dir.join("objects.yaml");
    let documents: Vec<String> = objects
        .iter()
        .map(|o| serde_yaml::to_string(&o.value).expect("YAML"))
        .collect();
    std::fs::write(&path, documents.join("---\n")).expect("write the manifest");
    path.to_str().expect("a UTF-8 path").to_string()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `mlkube apply <ns> --manifest <m> --no-wait [extra]`, which must succeed.
fn apply_ok(dir: &Path, ns: &str, manifest: &str) {
    let out = mlkube(dir, &["apply", ns, "--manifest", manifest, "--no-wait"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

// ---------------------------------------------------------------------------------------------
// conflicts

/// Another field manager, `night-shift`, takes the fields of `object` over.
async fn night_shift_applies<K>(client: &Client, ns: &str, object: Value)
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    let name = object["metadata"]["name"]
        .as_str()
        .expect("a name")
        .to_owned();
    Api::<K>::namespaced(client.clone(), ns)
        .patch(
            &name,
            &PatchParams::apply("night-shift").force(),
            &Patch::Apply(object),
        )
        .await
        .expect("the other manager's apply");
}

#[tokio::test]
async fn a_conflict_has_one_headline_and_one_hint_and_json_still_prints_a_document() {
    use base64::Engine as _;

    let test = TestNamespace::new("messages-conflict").await;
    let ns = test.name.as_str();
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let mut token = config_map(ns, "c", "token", json!({}));
    token.value["kind"] = json!("Secret");
    token.value["data"] = json!({"token": base64::engine::general_purpose::STANDARD.encode("one")});
    let objects = [
        config_map(ns, "c", "settings", json!({"level": "info"})),
        token,
    ];
    let manifest = manifest(tmp.path(), &objects);
    apply_ok(tmp.path(), ns, &manifest);

    // The server finds the ConfigMap's conflict; mlkube finds the Secret's itself (the other
    // manager wrote the value through `stringData`, a path the server tracks apart).
    let meta = |name: &str| json!({"name": name, "namespace": ns});
    night_shift_applies::<ConfigMap>(
        &test.client,
        ns,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("settings"),
               "data": {"level": "debug"}}),
    )
    .await;
    night_shift_applies::<Secret>(
        &test.client,
        ns,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta("token"),
               "stringData": {"token": "two"}}),
    )
    .await;

    let out = mlkube(
        tmp.path(),
        &["apply", ns, "--manifest", &manifest, "--no-wait"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "mlkube: error: 2 object(s) conflict with other field managers; nothing was written:"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("server rejected"), "{stderr}");
    assert!(
        stderr.contains(".data.level is owned by \"night-shift\"")
            && stderr.contains(".stringData.token is owned by \"night-shift\""),
        "{stderr}"
    );
    let hints: Vec<&str> = stderr.lines().filter(|l| l.contains("hint:")).collect();
    assert_eq!(hints.len(), 1, "{stderr}");
    assert!(hints[0].contains("--force-conflicts"), "{stderr}");

    let out = mlkube(
        tmp.path(),
        &[
            "apply",
            ns,
            "--manifest",
            &manifest,
            "--no-wait",
            "-o",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let document: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("one JSON document on stdout ({e}): {}", text(&out.stdout)));
    let error = &document["error"];
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("2 object(s) conflict with other field managers")),
        "{document:#}"
    );
    assert_eq!(
        error["hints"].as_array().map(Vec::len),
        Some(1),
        "{document:#}"
    );
    let outcomes: Vec<(String, String)> = document["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .map(|o| {
            let name = o["name"].as_str().unwrap_or_default().to_owned();
            (name, o["outcome"].as_str().unwrap_or_default().to_owned())
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("settings".to_owned(), "conflict".to_owned()),
            ("token".to_owned(), "conflict".to_owned())
        ],
        "{document:#}"
    );
    assert!(
        document["objects"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("night-shift")),
        "{document:#}"
    );
    assert_eq!(document["summary"]["created"], 0, "{document:#}");
}

// ---------------------------------------------------------------------------------------------
// Ctrl-C

/// A running `mlkube`, its stdout and stderr read line by line as they come.
struct Running {
    child: Child,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    seen: String,
}

fn lines_of(stream: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    receiver
}

impl Running {
    fn start(dir: &Path, args: &[&str]) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mlkube"))
            .args(args)
            .current_dir(dir)
            .env("KUBECONFIG", support::kubeconfig_path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the mlkube binary starts");
        let stdout = lines_of(child.stdout.take().expect("stdout"));
        let stderr = lines_of(child.stderr.take().expect("stderr"));
        Running {
            child,
            stdout,
            stderr,
            seen: String::new(),
        }
    }

    /// Read stderr until a line starts with `start`; panics after a minute.
    fn await_stderr(&mut self, start: &str) {
        loop {
            let line = self
                .stderr
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("no line `{start}...` ({e}); stderr: {}", self.seen));
            self.seen.push_str(&line);
            self.seen.push('\n');
            if line.starts_with(start) {
                return;
            }
        }
    }

    /// Ctrl-C, as a terminal sends it.
    fn interrupt(&self) {
        let signal = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(signal.success());
    }

    /// Wait for the end: the exit code, all of stdout, all of stderr.
    fn finish(mut self) -> (Option<i32>, String, String) {
        let status = self.child.wait().expect("mlkube ends");
        let stdout: Vec<String> = self.stdout.iter().collect();
        let mut stderr = self.seen;
        for line in self.stderr.iter() {
            stderr.push_str(&line);
            stderr.push('\n');
        }
        (status.code(), stdout.join("\n"), stderr)
    }
}

const INTERRUPTED: &str = "mlkube: interrupted: finishing the requests in flight";

/// A validating webhook that holds the requests it selects (the objects labelled
/// `mlkube.io/hold: "true"` in one namespace, for the operations given) until the test lets
/// them go: the API server calls a listener of the test that never answers, and lets the request
/// through (failure policy Ignore) once the connection is closed.
struct HeldWebhook {
    name: String,
    listener: tokio::net::TcpListener,
}

const HOLD_LABEL: &str = "mlkube.io/hold";

impl HeldWebhook {
    /// Holds `operations` on the selected ConfigMaps, and always their creation: that is how
    /// [`HeldWebhook::await_active`] probes it.
    async fn new(client: &Client, ns: &str, operations: &[&str]) -> HeldWebhook {
        let mut operations = operations.to_vec();
        if !operations.contains(&"CREATE") {
            operations.push("CREATE");
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a local port");
        let port = listener.local_addr().expect("its address").port();
        let name = format!("{ns}-hold");
        let webhook: ValidatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"mlkube.io/test": "true"}},
            "webhooks": [{
                "name": "hold.mlkube.io",
                "clientConfig": {"url": format!("https://127.0.0.1:{port}/hold")},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"],
                           "operations": operations, "scope": "Namespaced"}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "objectSelector": {"matchLabels": {HOLD_LABEL: "true"}},
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "timeoutSeconds": 30,
                "admissionReviewVersions": ["v1"],
            }],
        }))
        .expect("a ValidatingWebhookConfiguration");
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .create(&PostParams::default(), &webhook)
            .await
            .expect("create the webhook");
        HeldWebhook { name, listener }
    }

    /// The API server's next call, held open until the stream is dropped; panics after `limit`.
    async fn call(&self, limit: Duration) -> tokio::net::TcpStream {
        let accepted = tokio::time::timeout(limit, self.listener.accept())
            .await
            .unwrap_or_else(|_| panic!("the API server did not call the webhook in {limit:?}"));
        accepted.expect("accept the call").0
    }

    /// Wait until the API server calls the webhook: it learns of a new configuration a moment
    /// after it was created. Each probe is a dry-run create of a held ConfigMap.
    async fn await_active(&self, client: &Client, ns: &str) {
        let probe: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "probe", "labels": {HOLD_LABEL: "true"}}
        }))
        .expect("a ConfigMap");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let api = Api::<ConfigMap>::namespaced(client.clone(), ns);
            let probe = probe.clone();
            let sent = tokio::spawn(async move {
                api.create(
                    &PostParams {
                        dry_run: true,
                        field_manager: None,
                    },
                    &probe,
                )
                .await
            });
            let called = tokio::time::timeout(Duration::from_secs(1), self.listener.accept());
            if let Ok(Ok((stream, _))) = called.await {
                drop(stream);
                sent.await
                    .expect("the probe")
                    .expect("the probe is let through");
                return;
            }
            sent.await
                .expect("the probe")
                .expect("the probe is accepted");
            assert!(
                tokio::time::Instant::now() < deadline,
                "the webhook never became active"
            );
        }
    }
}

impl Drop for HeldWebhook {
    fn drop(&mut self) {
        let name = self.name.clone();
        support::clean_up(&format!("webhook {name}"), |client| async move {
            Api::<ValidatingWebhookConfiguration>::all(client)
                .delete(&name, &DeleteParams::default())
                .await
                .map(|_| ())
        });
    }
}

/// A ConfigMap the webhook holds.
fn held(ns: &str, name: &str) -> Object {
    let mut object = config_map(ns, "c", name, json!({}));
    object.value["metadata"]["labels"][HOLD_LABEL] = json!("true");
    object
}

async fn config_maps(client: &Client, ns: &str) -> Vec<String> {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels("mlkube.io/component=c"))
        .await
        .expect("list ConfigMaps")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect()
}

#[tokio::test]
async fn ctrl_c_before_anything_was_written_says_nothing_changed() {
    let test = TestNamespace::new("messages-sigint-early").await;
    let ns = test.name.as_str();
    let webhook = HeldWebhook::new(&test.client, ns, &["CREATE", "UPDATE"]).await;
    webhook.await_active(&test.client, ns).await;
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let objects = [held(ns, "held"), config_map(ns, "c", "free", json!({}))];
    let manifest = manifest(tmp.path(), &objects);

    let mut running = Running::start(
        tmp.path(),
        &["apply", ns, "--manifest", &manifest, "--no-wait"],
    );
    // The held object's check (a dry run) is in flight: nothing was written yet.
    let call = webhook.call(Duration::from_secs(60)).await;
    running.interrupt();
    running.await_stderr(INTERRUPTED);
    drop(call);
    let (code, stdout, stderr) = running.finish();

    assert_eq!(code, Some(130), "{stderr}");
    assert_eq!(stdout, "", "nothing was applied: {stderr}");
    assert!(
        stderr.contains("mlkube: interrupted before anything was written: nothing changed"),
        "{stderr}"
    );
    assert!(!stderr.contains("objects above"), "{stderr}");
    assert_eq!(config_maps(&test.client, ns).await, Vec::<String>::new());
}

#[tokio::test]
async fn ctrl_c_during_the_wait_says_what_is_not_ready_yet_not_that_time_ran_out() {
    let test = TestNamespace::new("messages-sigint-wait").await;
    let ns = test.name.as_str();
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let mut stuck = deployment(ns, "serving", "stuck", 1);
    stuck.value["spec"]["template"]["spec"]["nodeSelector"] =
        json!({"mlkube.io/no-such-node": "true"});
    let manifest = manifest(tmp.path(), &[stuck]);

    let mut running = Running::start(
        tmp.path(),
        &["apply", ns, "--manifest", &manifest, "--timeout", "5m"],
    );
    running.await_stderr("waiting ");
    running.interrupt();
    let (code, stdout, stderr) = running.finish();

    assert_eq!(code, Some(130), "{stderr}");
    assert_eq!(stdout, format!("Deployment.apps {ns}/stuck created"));
    assert!(!stderr.contains("before the timeout"), "{stderr}");
    assert!(
        stderr.contains(
            "mlkube: interrupted during the wait: everything was applied; 1 object(s) not ready yet:"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("  Deployment.apps {ns}/stuck: ")),
        "{stderr}"
    );
}

#[tokio::test]
async fn ctrl_c_during_a_delete_says_what_was_deleted_not_written() {
    let test = TestNamespace::new("messages-sigint-delete").await;
    let ns = test.name.as_str();
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let objects = [
        held(ns, "held"),
        config_map(ns, "c", "free", json!({})),
        deployment(ns, "c", "later", 1),
    ];
    let manifest = manifest(tmp.path(), &objects);
    apply_ok(tmp.path(), ns, &manifest);
    let webhook = HeldWebhook::new(&test.client, ns, &["DELETE"]).await;
    webhook.await_active(&test.client, ns).await;

    let mut running = Running::start(
        tmp.path(),
        &["delete", ns, "--manifest", &manifest, "--yes"],
    );
    let call = webhook.call(Duration::from_secs(60)).await;
    running.interrupt();
    running.await_stderr(INTERRUPTED);
    drop(call);
    let (code, stdout, stderr) = running.finish();

    assert_eq!(code, Some(130), "{stderr}");
    assert!(
        stdout.contains(&format!("ConfigMap {ns}/held deleted")),
        "{stdout}"
    );
    assert!(!stderr.contains("written"), "{stderr}");
    assert!(
        stderr.contains(
            "mlkube: interrupted: the objects above were deleted; the inventory still lists \
             the others; run the same command again to finish"
        ),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------------------------
// validate and diff before the namespace exists

/// A hand-written component with a misspelt field (`spec.replica`), a wrong type (a port
/// given as a name) and a missing required field (a container without a name).
const TYPO_COMPONENT: &str = r#"
local component = import 'mlkube/component.libsonnet';
local labels = { app: 'typo' };
[
  {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'typo', namespace: component.env.namespace },
    spec: {
      replica: 2,
      selector: { matchLabels: labels },
      template: { metadata: { labels: labels }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
    },
  },
  {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'typo', namespace: component.env.namespace },
    spec: { selector: labels, ports: [{ port: 'eighty' }] },
  },
  {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'unnamed', namespace: component.env.namespace },
    spec: {
      selector: { matchLabels: labels },
      template: { metadata: { labels: labels }, spec: { containers: [{ image: 'busybox' }] } },
    },
  },
]
"#;

/// An app whose `local` environment's namespace does not exist.
fn app_in_absent_namespace(dir: &Path, absent: &str) -> std::path::PathBuf {
    let app = dir.join("app");
    let init = mlkube(
        dir,
        &["init", app.to_str().expect("UTF-8"), "--namespace", absent],
    );
    assert!(init.status.success(), "{}", text(&init.stderr));
    app
}

#[tokio::test]
async fn validate_before_the_namespace_exists_reports_a_misspelt_field_and_a_wrong_type() {
    let test = TestNamespace::new("messages-validate").await;
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let absent = format!("{}-absent", test.name);
    let app = app_in_absent_namespace(tmp.path(), &absent);
    std::fs::write(app.join("components/typo.jsonnet"), TYPO_COMPONENT).expect("write");

    for verb in ["validate", "diff"] {
        let out = mlkube(&app, &[verb, "local", "-c", "typo"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{verb}: {stderr}");
        let line = |object: &str| {
            stderr
                .lines()
                .find(|l| l.starts_with("mlkube: error: ") && l.contains(object))
                .unwrap_or_else(|| panic!("{verb}: no error for {object}: {stderr}"))
                .to_owned()
        };
        let deployment = line(&format!("Deployment.apps {absent}/typo"));
        assert!(
            deployment.contains(".spec.replica: field not declared in schema"),
            "{verb}: {stderr}"
        );
        let service = line(&format!("Service {absent}/typo"));
        assert!(
            service.contains(".port: expected numeric"),
            "{verb}: {stderr}"
        );
        if verb == "validate" {
            // Found along the server's OpenAPI schema: the dry run stops before validation.
            let unnamed = line(&format!("Deployment.apps {absent}/unnamed"));
            assert!(
                unnamed.ends_with(
                    "Deployment.apps \"unnamed\" is invalid: \
                     spec.template.spec.containers[0].name: Required value (checked against the \
                     server's OpenAPI schema)"
                ),
                "{stderr}"
            );
        }
    }

    // The rest of the app is fine: checked as far as the server can before the namespace
    // exists, and said so in one line.
    let out = mlkube(&app, &["validate", "local", "-c", "notebook-hub"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "2 valid, 0 rejected; 10 object(s) in namespace `{absent}`, which apply creates, \
             were checked against the server's schema only"
        )),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_kind_the_cluster_does_not_serve_gets_a_hint_naming_the_param_that_turns_it_off() {
    // The components test installs Istio's CRDs for a while under this lock.
    let _shared = lock_shared_cluster_objects().await;
    let test = TestNamespace::new("messages-unserved").await;
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let app = app_in_absent_namespace(tmp.path(), &format!("{}-absent", test.name));
    let added = mlkube(&app, &["component", "add", "serving", "resnet"]);
    assert!(added.status.success(), "{}", text(&added.stderr));
    let set = mlkube(
        &app,
        &["param", "set", "resnet", "istio", "true", "--env", "local"],
    );
    assert!(set.status.success(), "{}", text(&set.stderr));

    for verb in [
        &["validate", "local", "-c", "resnet"][..],
        &["diff", "local", "-c", "resnet"],
        &["apply", "local", "-c", "resnet", "--dry-run"],
    ] {
        let out = mlkube(&app, verb);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{verb:?}: {stderr}");
        assert!(
            stderr.contains("the cluster does not serve ")
                && stderr.contains("networking.istio.io/v1 VirtualService"),
            "{verb:?}: {stderr}"
        );
        let hints: Vec<&str> = stderr.lines().filter(|l| l.contains("hint:")).collect();
        assert!(!hints.is_empty(), "{verb:?}: {stderr}");
        assert!(
            hints.iter().all(|h| h.contains(
                "hint: `mlkube param set resnet istio false --env local` stops rendering"
            )),
            "{verb:?}: {stderr}"
        );
    }
}

/// A hand-written component whose free-form param `team` ends up as a label value.
const LABELLED_COMPONENT: &str = r#"
local component = import 'mlkube/component.libsonnet';
{
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: {
    name: 'labelled',
    namespace: component.env.namespace,
    labels: { team: component.params.team },
  },
  data: { team: component.params.team },
}
"#;

#[tokio::test]
async fn validate_and_apply_name_the_param_a_value_the_server_rejects_came_from() {
    let test = TestNamespace::new("messages-param-source").await;
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let app = tmp.path().join("app");
    let init = mlkube(
        tmp.path(),
        &[
            "init",
            app.to_str().expect("UTF-8"),
            "--namespace",
            &test.name,
        ],
    );
    assert!(init.status.success(), "{}", text(&init.stderr));
    std::fs::write(app.join("components/labelled.jsonnet"), LABELLED_COMPONENT).expect("write");
    let set = mlkube(
        &app,
        &[
            "param", "set", "labelled", "team", "ml team!", "--env", "local",
        ],
    );
    assert!(set.status.success(), "{}", text(&set.stderr));

    for verb in [
        &["validate", "local", "-c", "labelled"][..],
        &["apply", "local", "-c", "labelled", "--dry-run"],
        &["apply", "local", "-c", "labelled"],
    ] {
        let out = mlkube(&app, verb);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{verb:?}: {stderr}");
        assert!(
            stderr.contains("metadata.labels: Invalid value: \"ml team!\""),
            "{verb:?}: {stderr}"
        );
        assert!(
            stderr.contains(
                "hint: the value comes from param `team` of component `labelled` (environment \
                 `local`): `mlkube param set labelled team <value> --env local`"
            ),
            "{verb:?}: {stderr}"
        );
    }
}

/// A hand-written workload that needs a kind no CRD on the cluster or in the app serves.
const NEEDY_COMPONENT: &str = r#"
local component = import 'mlkube/component.libsonnet';
{
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: {
    name: 'needy',
    namespace: component.env.namespace,
    annotations: {
      'mlkube.io/requires-kinds': 'Widget.needs.example.com',
      'mlkube.io/requires-hint': 'apply the widgets component with it',
    },
  },
}
"#;

/// An object that needs a kind the cluster does not serve and the apply does not install is
/// refused before anything is written, a dry run too, with the object's hint (the operator with
/// servingGateway applied without the gateway's HTTPRoute used to wait its whole timeout).
#[tokio::test]
async fn an_apply_that_would_wait_for_a_kind_nothing_serves_is_refused_and_writes_nothing() {
    let test = TestNamespace::new("messages-requires").await;
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let app = tmp.path().join("app");
    let path = app.to_str().expect("UTF-8");
    let init = mlkube(tmp.path(), &["init", path, "--namespace", &test.name]);
    assert!(init.status.success(), "{}", text(&init.stderr));
    std::fs::write(app.join("components/needy.jsonnet"), NEEDY_COMPONENT).expect("write");
    for verb in [
        &["apply", "local", "-c", "needy", "--dry-run"][..],
        &["apply", "local", "-c", "needy"],
    ] {
        let out = mlkube(&app, verb);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{verb:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "ConfigMap {}/needy runs controllers of Widget.needs.example.com, which the \
                 cluster does not serve and this apply does not install, so it would never be \
                 ready; nothing was written\n  hint: apply the widgets component with it",
                test.name
            )),
            "{verb:?}: {stderr}"
        );
    }
    let configs = Api::<ConfigMap>::namespaced(test.client.clone(), &test.name);
    assert!(
        configs.get_opt("needy").await.unwrap().is_none(),
        "nothing was written"
    );
}
