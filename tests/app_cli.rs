//! The app verbs and `show`, driven through the built binary in a temporary directory: exit
//! code, stdout and stderr, and the files left behind.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// The `mlkube` binary in `dir` with an isolated environment (no kubeconfig, no log filter).
fn binary(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mlkube"));
    command
        .args(args)
        .current_dir(dir)
        .env("KUBECONFIG", dir.join("no-kubeconfig"))
        .env_remove("RUST_LOG");
    command
}

fn run(command: &mut Command) -> Run {
    let output = command.output().expect("the mlkube binary runs");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Run `mlkube` in `dir` with an isolated environment and no colour.
fn mlkube(dir: &Path, args: &[&str]) -> Run {
    run(binary(dir, args).env("NO_COLOR", "1"))
}

/// Run and require success, giving stdout.
fn ok(dir: &Path, args: &[&str]) -> String {
    let run = mlkube(dir, args);
    assert_eq!(run.code, 0, "mlkube {args:?} failed:\n{}", run.stderr);
    run.stdout
}

/// Run and require exit 1 (differences found, as `diff`), giving stdout.
fn differs(dir: &Path, args: &[&str]) -> String {
    let run = mlkube(dir, args);
    assert_eq!(
        run.code, 1,
        "mlkube {args:?} should find differences:\n{}",
        run.stderr
    );
    run.stdout
}

/// Run and require exit 2 with nothing on stdout, giving stderr.
fn fails(dir: &Path, args: &[&str]) -> String {
    let run = mlkube(dir, args);
    assert_eq!(
        run.code, 2,
        "mlkube {args:?} should fail:\n{}{}",
        run.stdout, run.stderr
    );
    assert_eq!(run.stdout, "", "a failed verb prints no data");
    run.stderr
}

/// A fresh app `platform` in a temporary directory; returns (tempdir, app dir).
fn new_app(extra: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = vec!["init", "platform"];
    args.extend(extra);
    ok(tmp.path(), &args);
    let app = tmp.path().join("platform");
    (tmp, app)
}

fn show_json(app: &Path, env: &str) -> Vec<Value> {
    let out = ok(app, &["show", env, "-o", "json"]);
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(list["kind"], "List");
    list["items"].as_array().unwrap().clone()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the output"))
}

fn write(app: &Path, file: &str, text: &str) {
    let path = app.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn read(app: &Path, file: &str) -> String {
    std::fs::read_to_string(app.join(file)).unwrap()
}

/// Every file of the app, with its contents, to check that a failed verb wrote nothing.
fn snapshot_files(app: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut dirs = vec![app.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                files.push((path, bytes));
            }
        }
    }
    files.sort();
    files
}

const KIND_ORDER: &[&str] = &[
    "Namespace",
    "CustomResourceDefinition",
    "StorageClass",
    "ClusterRole",
    "ClusterRoleBinding",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "Secret",
    "ConfigMap",
    "PersistentVolumeClaim",
    "Service",
    "DaemonSet",
    "Deployment",
    "StatefulSet",
];

#[test]
fn init_env_component_param_show_for_all_environments() {
    let (_tmp, app) = new_app(&["--namespace", "ml"]);

    ok(
        &app,
        &["env", "add", "staging", "--namespace", "ml-staging"],
    );
    ok(
        &app,
        &[
            "env",
            "set",
            "dev",
            "--server",
            "https://dev.example.com:6443",
        ],
    );
    ok(
        &app,
        &["env", "set", "staging", "--context", "kind-staging"],
    );
    let envs: Value = serde_json::from_str(&ok(&app, &["env", "list", "-o", "json"])).unwrap();
    assert_eq!(
        envs,
        serde_json::json!([
            {"name": "local", "namespace": "ml", "server": null, "context": null},
            {"name": "dev", "namespace": "ml-dev", "server": "https://dev.example.com:6443", "context": null},
            {"name": "prod", "namespace": "ml-prod", "server": null, "context": null},
            {"name": "staging", "namespace": "ml-staging", "server": null, "context": "kind-staging"},
        ])
    );

    // Two instances of one prototype.
    ok(
        &app,
        &[
            "component",
            "add",
            "serving",
            "resnet",
            "--param",
            "modelName=resnet",
        ],
    );
    ok(
        &app,
        &[
            "component",
            "add",
            "serving",
            "bert",
            "--param",
            "replicas=4",
        ],
    );

    // Component level, then global (which beats component params), then env global and env
    // component (which beats env global).
    ok(&app, &["param", "set", "resnet", "replicas", "2"]);
    ok(
        &app,
        &[
            "param",
            "set",
            "resnet",
            "image",
            "example/serving:component",
        ],
    );
    ok(
        &app,
        &["param", "set", "global", "image", "example/serving:global"],
    );
    ok(
        &app,
        &["param", "set", "global", "replicas", "5", "--env", "prod"],
    );
    ok(
        &app,
        &["param", "set", "resnet", "replicas", "3", "--env", "prod"],
    );
    ok(
        &app,
        &[
            "param",
            "set",
            "bert",
            "enablePrometheus",
            "false",
            "--env",
            "dev",
        ],
    );

    let expectations = [
        ("local", "ml", 2, 4, true),
        ("dev", "ml-dev", 2, 4, false),
        ("prod", "ml-prod", 3, 5, true),
        ("staging", "ml-staging", 2, 4, true),
    ];
    for (env, namespace, resnet_replicas, bert_replicas, bert_prometheus) in expectations {
        let objects = show_json(&app, env);
        let resnet = find(&objects, "Deployment", "resnet-v1");
        let bert = find(&objects, "Deployment", "bert-v1");
        assert_eq!(resnet["spec"]["replicas"], resnet_replicas, "{env}");
        assert_eq!(bert["spec"]["replicas"], bert_replicas, "{env}");
        // numbers stay numbers, strings stay strings
        assert_eq!(
            resnet["spec"]["template"]["spec"]["containers"][0]["image"], "example/serving:global",
            "{env}: global beats component params"
        );
        let bert_annotations = &bert["spec"]["template"]["metadata"]["annotations"];
        let scraped = bert_annotations.get("prometheus.io/scrape").is_some();
        assert_eq!(scraped, bert_prometheus, "{env}: enablePrometheus");

        for object in &objects {
            let metadata = &object["metadata"];
            let labels = &metadata["labels"];
            assert_eq!(labels["app.kubernetes.io/managed-by"], "mlkube");
            let cluster_scoped = matches!(
                object["kind"].as_str().unwrap(),
                "CustomResourceDefinition"
                    | "ClusterRole"
                    | "ClusterRoleBinding"
                    | "StorageClass"
                    | "GatewayClass"
                    | "ClusterServingRuntime"
                    | "ValidatingAdmissionPolicy"
                    | "ValidatingAdmissionPolicyBinding"
            );
            // Cluster-scoped objects are shared by every environment and app that renders
            // them, so they name none of the three.
            if cluster_scoped {
                assert!(labels.get("app.kubernetes.io/part-of").is_none());
                assert!(labels.get("mlkube.io/environment").is_none());
                assert!(labels.get("mlkube.io/component").is_none(), "{object}");
            } else {
                assert_eq!(labels["app.kubernetes.io/part-of"], "platform");
                assert_eq!(labels["mlkube.io/environment"], env);
                assert!(labels["mlkube.io/component"].is_string());
            }
            if cluster_scoped {
                assert!(metadata.get("namespace").is_none(), "{object}");
            } else {
                assert_eq!(metadata["namespace"], namespace, "{}", metadata["name"]);
            }
        }
        assert_eq!(
            find(&objects, "Service", "resnet")["metadata"]["labels"]["mlkube.io/component"],
            "resnet"
        );

        // Apply order: ranks of the known kinds never go down.
        let ranks: Vec<usize> = objects
            .iter()
            .filter_map(|o| KIND_ORDER.iter().position(|k| o["kind"] == *k))
            .collect();
        assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{env}: {ranks:?}");
        assert_eq!(objects[0]["kind"], "CustomResourceDefinition");
    }

    // The listing shows where each value came from.
    let rows: Value = serde_json::from_str(&ok(
        &app,
        &["param", "list", "resnet", "--env", "prod", "-o", "json"],
    ))
    .unwrap();
    let row = |param: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["param"] == param)
            .cloned()
            .unwrap()
    };
    assert_eq!(row("replicas")["value"], 3);
    assert_eq!(row("replicas")["source"], "env");
    assert_eq!(row("image")["source"], "global");
    assert_eq!(row("modelName")["source"], "component");
    assert_eq!(row("numGpus")["source"], "default");

    let diff = differs(&app, &["param", "diff", "local", "prod"]);
    assert!(
        diff.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["resnet", "replicas", "2", "3"]),
        "{diff}"
    );
}

#[test]
fn show_is_deterministic_and_yaml_is_a_document_stream() {
    let (_tmp, app) = new_app(&[]);
    let first = ok(&app, &["show", "prod"]);
    let second = ok(&app, &["show", "prod"]);
    assert_eq!(first, second);
    assert!(first.starts_with("---\napiVersion: "));
    // The YAML stream reads back as exactly the objects of `-o json`.
    let from_yaml: Vec<Value> = serde_yaml::Deserializer::from_str(&first)
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .collect();
    assert_eq!(from_yaml, show_json(&app, "prod"));
    // Found from a subdirectory, as from --app.
    assert_eq!(ok(&app.join("components"), &["show", "prod"]), first);
    let elsewhere = app.parent().unwrap();
    assert_eq!(ok(elsewhere, &["--app", "platform", "show", "prod"]), first);
}

#[test]
fn show_selects_components() {
    let (_tmp, app) = new_app(&[]);
    let objects = show_json(&app, "local");
    let only = ok(&app, &["show", "local", "-c", "mnist", "-o", "json"]);
    let only: Value = serde_json::from_str(&only).unwrap();
    let only = only["items"].as_array().unwrap();
    assert!(!only.is_empty());
    assert!(only.len() < objects.len());
    assert!(
        only.iter()
            .all(|o| o["metadata"]["labels"]["mlkube.io/component"] == "mnist")
    );
}

#[test]
fn a_hand_written_component_renders_like_one_from_component_add() {
    let (_tmp, app) = new_app(&["--empty"]);
    write(
        &app,
        "components/params.libsonnet",
        "{\n  global: {},\n  components: {\n    web: { replicas: 2, greeting: 'hi' },\n  },\n}\n",
    );
    // A List, an array and an object of objects, nested; params and env without boilerplate.
    write(
        &app,
        "components/web.jsonnet",
        r#"local c = import 'mlkube/component.libsonnet';
local cm(name) = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: name }, data: { env: c.env.name, ns: c.env.namespace, greeting: c.params.greeting } };
{
  list: { apiVersion: 'v1', kind: 'List', items: [cm(c.name + '-a'), [cm(c.name + '-b')]] },
  nested: { deeper: { role: { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'web-reader' }, rules: [] } } },
  deploy: { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: c.name }, spec: { replicas: c.params.replicas } },
}
"#,
    );
    let components: Value =
        serde_json::from_str(&ok(&app, &["component", "list", "-o", "json"])).unwrap();
    assert_eq!(
        components,
        serde_json::json!([{"name": "web", "prototype": null, "file": "components/web.jsonnet"}])
    );
    let objects = show_json(&app, "dev");
    let kinds: Vec<(&str, &str)> = objects
        .iter()
        .map(|o| {
            (
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("ClusterRole", "web-reader"),
            ("ConfigMap", "web-a"),
            ("ConfigMap", "web-b"),
            ("Deployment", "web"),
        ]
    );
    let config = find(&objects, "ConfigMap", "web-a");
    assert_eq!(config["metadata"]["namespace"], "kubeflow-dev");
    assert_eq!(
        config["data"],
        serde_json::json!({"env": "dev", "greeting": "hi", "ns": "kubeflow-dev"})
    );
    assert_eq!(config["metadata"]["labels"]["mlkube.io/component"], "web");
    assert!(
        find(&objects, "ClusterRole", "web-reader")["metadata"]
            .get("namespace")
            .is_none()
    );
    assert_eq!(find(&objects, "Deployment", "web")["spec"]["replicas"], 2);
}

#[test]
fn hand_edits_survive_the_verbs() {
    let (_tmp, app) = new_app(&[]);
    let file = "components/params.libsonnet";
    let edited = read(&app, file).replace(
        "    mnist: {\n",
        "    // The example model; keep it small.\n    mnist: {\n      minReplicas: 1 + 1,  // computed\n",
    );
    write(&app, file, &edited);
    ok(&app, &["param", "set", "mnist", "scaleTarget", "70"]);
    ok(&app, &["component", "add", "serving", "resnet"]);
    let after = read(&app, file);
    assert!(after.contains("    // The example model; keep it small.\n    mnist: {\n      minReplicas: 1 + 1,  // computed\n      modelFormat: 'tensorflow',\n      storageUri: 's3://models/tf-digits/{version}/',\n      scaleTarget: 70,\n    },"), "{after}");
    assert!(after.contains("    resnet: {},\n"), "{after}");
    let objects = show_json(&app, "local");
    // local's own params set mnist's requests; the app's computed value shows in a param
    // local does not override.
    assert!(objects.iter().any(|o| o["metadata"]["name"] == "resnet-v1"));
    assert_eq!(
        find(&objects, "InferenceService", "mnist")["spec"]["predictor"]["minReplicas"],
        2
    );

    // component rm takes its params out of every file, and leaves the rest.
    ok(
        &app,
        &["param", "set", "resnet", "replicas", "3", "--env", "prod"],
    );
    ok(&app, &["component", "rm", "resnet"]);
    assert!(!read(&app, file).contains("resnet"));
    assert!(!read(&app, "environments/prod/params.libsonnet").contains("resnet"));
    assert!(!app.join("components/resnet.jsonnet").exists());
    assert!(!read(&app, "app.yaml").contains("resnet"));
    assert!(read(&app, file).contains("minReplicas: 1 + 1,  // computed"));
}

#[test]
fn values_keep_their_json_types_unless_as_string() {
    let (_tmp, app) = new_app(&["--empty"]);
    write(
        &app,
        "components/web.jsonnet",
        "local c = import 'mlkube/component.libsonnet';\n{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'web' }, data: { p: std.manifestJsonMinified(c.params) } }\n",
    );
    ok(&app, &["param", "set", "web", "n", "3"]);
    ok(&app, &["param", "set", "web", "b", "true"]);
    ok(&app, &["param", "set", "web", "s", "true", "--as-string"]);
    ok(&app, &["param", "set", "web", "o", r#"{"a": [1, "x"]}"#]);
    ok(&app, &["param", "set", "web", "w", "plain words"]);
    let objects = show_json(&app, "local");
    let params: Value = serde_json::from_str(
        find(&objects, "ConfigMap", "web")["data"]["p"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        params,
        serde_json::json!({"b": true, "n": 3, "name": "web", "o": {"a": [1, "x"]}, "s": "true", "w": "plain words"})
    );
    assert!(read(&app, "components/params.libsonnet").contains("o: { a: [1, 'x'] },"));
}

/// `null` sets a string-typed param back to null, as it does a param of any other type; the word
/// itself takes `--as-string`.
#[test]
fn null_sets_a_string_param_back_to_unset_and_the_word_takes_as_string() {
    let (_tmp, app) = new_app(&[]);
    let storage_class = |value: &str, extra: &[&str]| {
        let set = [
            "param",
            "set",
            "notebook-hub",
            "notebookStorageClass",
            value,
        ];
        ok(&app, &[&set[..], &["--env", "dev"], extra].concat());
        let objects = show_json(&app, "dev");
        let data = &find(&objects, "ConfigMap", "notebook-hub-config")["data"];
        let settings: Value =
            serde_json::from_str(data["settings.json"].as_str().unwrap()).unwrap();
        settings["notebookStorageClass"].clone()
    };
    assert_eq!(storage_class("fast", &[]), "fast");
    assert_eq!(storage_class("null", &[]), Value::Null);
    assert_eq!(storage_class("null", &["--as-string"]), "null");
}

#[test]
fn a_list_or_an_object_given_as_plain_or_python_text_is_refused_saying_write_it_as_json() {
    let (_tmp, app) = new_app(&["--empty"]);
    ok(&app, &["component", "add", "tf-job", "train"]);
    let before = snapshot_files(&app);
    let describe = "hint: `mlkube prototype describe tf-job` lists the params and types\n";
    assert_eq!(
        fails(&app, &["param", "set", "train", "env", "FOO=1"]),
        format!(
            "mlkube: error: component `train`: param `env` must be an object, got \"FOO=1\"\n\
             hint: write it as JSON in single quotes for the shell, e.g. '{{\"NAME\": \"value\"}}'\n\
             {describe}"
        )
    );
    assert_eq!(
        fails(&app, &["param", "set", "train", "args", "['--epochs=2']"]),
        format!(
            "mlkube: error: component `train`: param `args` must be a list of strings, got \
             \"['--epochs=2']\"\n\
             hint: write it as JSON, whose strings take double quotes, in single quotes for the \
             shell, e.g. '[\"--first\", \"--second\"]'\n\
             {describe}"
        )
    );
    assert_eq!(snapshot_files(&app), before, "nothing written");
    ok(&app, &["param", "set", "train", "env", r#"{"FOO": "1"}"#]);
    ok(
        &app,
        &["param", "set", "train", "args", r#"["--epochs=2"]"#],
    );
}

#[test]
fn a_param_set_into_an_app_that_does_not_render_says_so_after_setting_it() {
    let (_tmp, app) = new_app(&["--empty"]);
    ok(&app, &["component", "add", "tf-job", "train"]);
    ok(&app, &["component", "add", "tf-job", "other"]);
    let file = "components/params.libsonnet";
    let broken = read(&app, file).replace("other: {", "other: { workerReplicas: 2 + ,");
    write(&app, file, &broken);
    let run = mlkube(&app, &["param", "set", "train", "workerReplicas", "3"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(
        lines[0],
        "Set train.workerReplicas = 3 in components/params.libsonnet."
    );
    assert_eq!(
        lines[1],
        "note: environment `local` still does not render, as before this change: cannot \
         evaluate components/params.libsonnet"
    );
    assert!(
        lines[2].starts_with("  caused by: components/params.libsonnet:")
            && lines[2].contains("syntax error"),
        "{}",
        run.stderr
    );
    assert_eq!(
        lines.last(),
        Some(&"  hint: fix that before `mlkube apply local`; `mlkube show local` tells the same")
    );
    assert!(read(&app, file).contains("workerReplicas: 3"));
}

#[test]
fn listings_print_json_for_scripts() {
    let (_tmp, app) = new_app(&[]);
    let prototypes: Value =
        serde_json::from_str(&ok(&app, &["prototype", "list", "-o", "json"])).unwrap();
    let names: Vec<&str> = prototypes
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "framework",
            "framework-sweep",
            "gateway",
            "inference-service",
            "jax-job",
            "jax-job-sweep",
            "mpi-job",
            "mpi-job-sweep",
            "mxnet-job",
            "mxnet-job-sweep",
            "notebook-hub",
            "object-store",
            "paddle-job",
            "paddle-job-sweep",
            "profile",
            "pytorch-job",
            "pytorch-job-sweep",
            "serving",
            "tf-job",
            "tf-job-sweep",
            "training-operator",
            "volume-controller",
            "xgboost-job",
            "xgboost-job-sweep"
        ]
    );
    let serving: Value = serde_json::from_str(&ok(
        &app,
        &["prototype", "describe", "serving", "-o", "json"],
    ))
    .unwrap();
    let replicas = serving["params"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "replicas")
        .unwrap();
    assert_eq!(replicas["type"], "integer");
    assert!(
        replicas["description"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    );
    let text = ok(&app, &["prototype", "describe", "serving"]);
    assert!(text.starts_with("serving\n\n"));
    assert!(text.contains("PARAM"));

    let components: Value =
        serde_json::from_str(&ok(&app, &["component", "list", "-o", "json"])).unwrap();
    assert_eq!(components.as_array().unwrap().len(), 6);
    let diff: Value = serde_json::from_str(&differs(
        &app,
        &["param", "diff", "dev", "prod", "-o", "json"],
    ))
    .unwrap();
    assert!(
        diff.as_array()
            .unwrap()
            .iter()
            .any(|row| row["component"] == "mnist"
                && row["param"] == "minReplicas"
                && row["dev"] == 1
                && row["prod"] == 2)
    );
    let list: Value = serde_json::from_str(&ok(&app, &["param", "list", "-o", "json"])).unwrap();
    assert!(!list.as_array().unwrap().is_empty());
}

#[test]
fn env_rename_and_remove() {
    let (_tmp, app) = new_app(&[]);
    ok(
        &app,
        &[
            "env",
            "set",
            "dev",
            "--name",
            "qa",
            "--namespace",
            "kubeflow-qa",
        ],
    );
    assert!(app.join("environments/qa/params.libsonnet").is_file());
    assert!(!app.join("environments/dev").exists());
    let objects = show_json(&app, "qa");
    assert!(
        objects
            .iter()
            .filter(|o| !o["metadata"]["namespace"].is_null())
            .all(|o| o["metadata"]["labels"]["mlkube.io/environment"] == "qa")
    );
    ok(&app, &["env", "rm", "qa"]);
    assert!(!app.join("environments/qa").exists());
    let stderr = fails(&app, &["show", "qa"]);
    assert_eq!(
        stderr,
        "mlkube: error: unknown environment `qa`; the app has: local, prod\n"
    );
}

#[test]
fn bad_input_gets_a_clear_error_and_changes_nothing() {
    let (_tmp, app) = new_app(&[]);
    let before = snapshot_files(&app);

    assert_eq!(
        fails(&app, &["show", "staging"]),
        "mlkube: error: unknown environment `staging`; the app has: local, dev, prod\n"
    );
    assert_eq!(
        fails(&app, &["show", "local", "-c", "resnet"]),
        "mlkube: error: unknown component `resnet`; the app has: gateway, mnist, notebook-hub, \
         object-store, \
         training-operator, volume-controller\n"
    );
    assert_eq!(
        fails(&app, &["component", "add", "servin", "resnet"]),
        "mlkube: error: unknown prototype `servin`; the library has: framework, framework-sweep, \
         gateway, inference-service, jax-job, jax-job-sweep, mpi-job, mpi-job-sweep, mxnet-job, mxnet-job-sweep, notebook-hub, object-store, paddle-job, paddle-job-sweep, \
         profile, pytorch-job, \
         pytorch-job-sweep, serving, tf-job, tf-job-sweep, training-operator, \
         volume-controller, xgboost-job, xgboost-job-sweep\n"
    );
    assert_eq!(
        fails(&app, &["param", "set", "mnist", "minReplicas", "two"]),
        "mlkube: error: component `mnist`: param `minReplicas` must be an integer of at least 1, \
         got \"two\"\n\
         hint: `mlkube prototype describe inference-service` lists the params and types\n"
    );
    let stderr = fails(&app, &["param", "set", "mnist", "minReplica", "2"]);
    assert!(
        stderr.starts_with(
            "mlkube: error: component `mnist` (inference-service prototype) has no param \
             `minReplica` (set in the command line); it has: "
        ),
        "{stderr}"
    );
    assert_eq!(
        fails(
            &app,
            &["param", "set", "mnist", "minReplicas", "2", "--env", "qa"]
        ),
        "mlkube: error: unknown environment `qa`; the app has: local, dev, prod\n"
    );
    assert_eq!(
        fails(&app, &["component", "add", "serving", "mnist"]),
        "mlkube: error: component `mnist` already exists (components/mnist.jsonnet)\n\
         hint: pick another name; several instances of one prototype are fine\n"
    );
    assert_eq!(snapshot_files(&app), before, "failed verbs wrote nothing");

    // A type error in a params file names the component, the param and the file.
    let prod = read(&app, "environments/prod/params.libsonnet");
    write(
        &app,
        "environments/prod/params.libsonnet",
        &prod.replace(
            "minReplicas: 2,\n      maxReplicas",
            "minReplicas: '2',\n      maxReplicas",
        ),
    );
    assert_eq!(
        fails(&app, &["show", "prod"]),
        "mlkube: error: component `mnist` (environment `prod`): param `minReplicas` must be an \
         integer of at least 1, got \"2\" (set \
         in environments/prod/params.libsonnet)\n"
    );
    write(&app, "environments/prod/params.libsonnet", &prod);
}

#[test]
fn jsonnet_errors_print_file_line_and_column() {
    let (_tmp, app) = new_app(&["--empty"]);
    write(
        &app,
        "components/broken.jsonnet",
        "{\n  a: 1,\n  b: error 'boom',\n}\n",
    );
    assert_eq!(
        fails(&app, &["show", "local"]),
        "mlkube: error: cannot render component `broken` for environment `local`\n  caused by: \
         components/broken.jsonnet:3:6: runtime error: boom\n    at \
         components/broken.jsonnet:3:6: error statement\n    while rendering the field b\n"
    );
    write(&app, "components/broken.jsonnet", "{\n  a: 1\n  b: 2,\n}\n");
    assert_eq!(
        fails(&app, &["show", "local"]),
        "mlkube: error: cannot render component `broken` for environment `local`\n  caused by: \
         components/broken.jsonnet:3:3: syntax error: expected '}', got identifier \"b\"\n"
    );
    // An error raised inside an imported helper points at the helper.
    write(
        &app,
        "lib/helper.libsonnet",
        "{\n  make(x):: if x.ok then x else error 'not ok: ' + x.why,\n}\n",
    );
    write(
        &app,
        "components/broken.jsonnet",
        "local h = import 'helper.libsonnet';\nh.make({ ok: false, why: 'tired' })\n",
    );
    let stderr = fails(&app, &["show", "local"]);
    assert!(
        stderr.contains("  caused by: lib/helper.libsonnet:2:33: runtime error: not ok: tired\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("    at components/broken.jsonnet:2:7"),
        "{stderr}"
    );
}

#[test]
fn objects_that_are_not_kubernetes_objects_or_duplicates_are_errors() {
    let (_tmp, app) = new_app(&["--empty"]);
    write(
        &app,
        "components/odd.jsonnet",
        "{ web: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'ok' } }, { apiVersion: 'v1', kind: 'ConfigMap', metadata: {} }] }\n",
    );
    assert_eq!(
        fails(&app, &["show", "local"]),
        "mlkube: error: component `odd` rendered something that is not a Kubernetes object at \
         `.web[1]`: an object without metadata.name\nhint: a component may render an object, an \
         array, a v1 List, or an object whose fields are objects; each object needs apiVersion, \
         kind and metadata.name\n"
    );
    write(
        &app,
        "components/odd.jsonnet",
        "{ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web' } }\n",
    );
    write(
        &app,
        "components/twin.jsonnet",
        "[{ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web' } }]\n",
    );
    assert_eq!(
        fails(&app, &["show", "dev"]),
        "mlkube: error: Service kubeflow-dev/web is rendered twice, by component `odd` and by \
         component `twin`\nhint: rename one of them, or remove it from one component\n"
    );
}

#[test]
fn init_refuses_a_non_empty_directory() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "platform/notes.txt", "mine");
    let stderr = fails(tmp.path(), &["init", "platform"]);
    assert!(stderr.contains("exists and is not empty"), "{stderr}");
    assert_eq!(read(tmp.path(), "platform/notes.txt"), "mine");
}

#[test]
fn default_app_renders_the_same_manifests() {
    let (_tmp, app) = new_app(&[]);
    for env in ["local", "dev", "prod"] {
        let yaml = ok(&app, &["show", env]);
        insta::assert_snapshot!(format!("default_app_{env}"), with_crd_schemas_named(&yaml));
    }
}

/// The app `init` made before `tf-serving` was renamed `serving` and `tf-job-operator`
/// `training-operator` (tests/fixtures/app-before-the-renames: its components `mnist` and
/// `tf-job-operator` name and import the old prototypes).
fn app_made_before_the_renames() -> (tempfile::TempDir, PathBuf) {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/app-before-the-renames");
    let tmp = tempfile::tempdir().unwrap();
    let app = tmp.path().join("platform");
    for (path, bytes) in snapshot_files(&fixture) {
        let to = app.join(path.strip_prefix(&fixture).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(to, bytes).unwrap();
    }
    (tmp, app)
}

/// An app made before the renames renders what it rendered then (its snapshots are those of
/// the default app of that time), and `component list` says what to rename for the new names.
#[test]
fn an_app_made_before_the_renames_renders_as_it_did() {
    let (_tmp, app) = app_made_before_the_renames();
    let mut before = Vec::new();
    for env in ["local", "dev", "prod"] {
        let yaml = ok(&app, &["show", env]);
        insta::assert_snapshot!(
            format!("app_made_before_the_renames_{env}"),
            with_crd_schemas_named(&yaml)
        );
        before.push(yaml);
    }
    let names = mlkube(&app, &["component", "list", "-o", "name"]);
    assert_eq!(
        (names.stdout.as_str(), names.stderr.as_str()),
        (
            "gateway\nmnist\nnotebook-hub\nobject-store\ntf-job-operator\nvolume-controller\n",
            ""
        )
    );
    assert_eq!(
        mlkube(&app, &["component", "list"]).stderr,
        "note: component `mnist` is of `tf-serving`, the old name of the `serving` prototype; it \
         renders the same\nhint: to use the new name, set `prototype: serving` under `mnist` in \
         app.yaml and import `mlkube/serving.libsonnet` in components/mnist.jsonnet\n\
         note: component `tf-job-operator` is of `tf-job-operator`, the old name of the \
         `training-operator` prototype; it renders the same\nhint: to use the new name, set \
         `prototype: training-operator` under `tf-job-operator` in app.yaml and import \
         `mlkube/training-operator.libsonnet` in components/tf-job-operator.jsonnet\n"
    );
    // Renamed as the hint says, it renders the same, and nothing is noted.
    let mut yaml = read(&app, "app.yaml");
    for (component, old, new) in [
        ("mnist", "tf-serving", "serving"),
        ("tf-job-operator", "tf-job-operator", "training-operator"),
    ] {
        yaml = yaml.replace(&format!("prototype: {old}"), &format!("prototype: {new}"));
        let file = format!("components/{component}.jsonnet");
        let text = read(&app, &file).replace(
            &format!("'mlkube/{old}.libsonnet'"),
            &format!("'mlkube/{new}.libsonnet'"),
        );
        write(&app, &file, &text);
    }
    write(&app, "app.yaml", &yaml);
    for (env, before) in ["local", "dev", "prod"].into_iter().zip(before) {
        assert!(ok(&app, &["show", env]) == before, "{env}");
    }
    assert_eq!(mlkube(&app, &["component", "list"]).stderr, "");
    // The verbs that read the prototype take the old name, and keep it.
    let (_tmp, app) = app_made_before_the_renames();
    ok(
        &app,
        &["param", "set", "mnist", "replicas", "3", "--env", "dev"],
    );
    assert!(read(&app, "app.yaml").contains("prototype: tf-serving"));
}

/// The old names of renamed prototypes still work on the command line, with a note that names
/// the new one; a new component records the new name.
#[test]
fn an_old_prototype_name_on_the_command_line_is_noted_and_recorded_by_its_new_name() {
    let (_tmp, app) = new_app(&[]);
    let note = "note: `tf-serving` is the old name of the `serving` prototype\n";
    let add = mlkube(&app, &["component", "add", "tf-serving", "resnet"]);
    assert_eq!(add.code, 0, "{}", add.stderr);
    assert_eq!(
        add.stderr,
        format!(
            "{note}Added component `resnet` (serving prototype) as components/resnet.jsonnet.\n"
        )
    );
    assert!(read(&app, "app.yaml").contains("  resnet:\n    prototype: serving\n"));
    assert!(
        read(&app, "components/resnet.jsonnet").contains("(import 'mlkube/serving.libsonnet')")
    );

    let describe = mlkube(&app, &["prototype", "describe", "tf-serving", "-o", "name"]);
    assert_eq!(
        (describe.stdout.as_str(), describe.stderr.as_str()),
        ("serving\n", note)
    );
    let text = ok(&app, &["prototype", "describe", "serving"]);
    assert!(
        text.contains("\n\nOld name: tf-serving (still accepted).\n\nPARAM"),
        "{text}"
    );
    let json: Value = serde_json::from_str(&ok(
        &app,
        &["prototype", "describe", "training-operator", "-o", "json"],
    ))
    .unwrap();
    assert_eq!(json["oldNames"], serde_json::json!(["tf-job-operator"]));
    let names = ok(&app, &["prototype", "list", "-o", "name"]);
    assert!(
        !names.lines().any(|name| name.starts_with("tf-serving")),
        "{names}"
    );
}

/// `show`'s YAML with each CRD's version schemas replaced by the name of the file in `crds/`
/// that they must equal (checked here): the schemas are generated from the operator's types,
/// hundreds of kilobytes that the CRD drift test already guards. Other documents stay as printed.
fn with_crd_schemas_named(yaml: &str) -> String {
    let documents: Vec<String> = yaml
        .split("---\n")
        .map(|document| {
            if document.contains("\nkind: CustomResourceDefinition\n") {
                crd_with_schemas_named(document)
            } else {
                document.to_owned()
            }
        })
        .collect();
    documents.join("---\n")
}

fn crd_with_schemas_named(document: &str) -> String {
    let mut crd: serde_yaml::Value = serde_yaml::from_str(document).expect("a CRD in YAML");
    let name = crd["metadata"]["name"]
        .as_str()
        .expect("a CRD's name")
        .to_owned();
    let file = format!("{name}.yaml");
    let crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
    let text = std::fs::read_to_string(crds.join(&file)).expect("the CRD's file in crds/");
    let shipped: serde_yaml::Value = serde_yaml::from_str(&text).expect("crds/ holds YAML");
    let versions = crd["spec"]["versions"].as_sequence_mut().expect("versions");
    for (index, version) in versions.iter_mut().enumerate() {
        let shipped_schema =
            numbers_as_floats(shipped["spec"]["versions"][index]["schema"].clone());
        let rendered_schema = numbers_as_floats(version["schema"].clone());
        assert!(
            rendered_schema == shipped_schema,
            "{name}: the schema of crds/{file}"
        );
        version["schema"] = serde_yaml::Value::from(format!("<the schema of crds/{file}>"));
    }
    serde_yaml::to_string(&crd).expect("YAML")
}

/// Jsonnet has only floats, so a rendered `minimum: 0` is the file's `minimum: 0.0`.
fn numbers_as_floats(value: serde_yaml::Value) -> serde_yaml::Value {
    use serde_yaml::Value as Yaml;
    match value {
        Yaml::Number(n) => Yaml::from(n.as_f64().expect("a number")),
        Yaml::Sequence(items) => Yaml::Sequence(items.into_iter().map(numbers_as_floats).collect()),
        Yaml::Mapping(map) => Yaml::Mapping(
            map.into_iter()
                .map(|(k, v)| (k, numbers_as_floats(v)))
                .collect(),
        ),
        other => other,
    }
}

fn tf_jobs(objects: &[Value]) -> Vec<&Value> {
    objects.iter().filter(|o| o["kind"] == "TFJob").collect()
}

/// ksonnet's `ks generate tf-job`, `ks param set --env`, `ks show`, with mlkube's verbs: one
/// component, different in each environment.
#[test]
fn a_training_job_is_a_component_with_per_environment_params() {
    let (_tmp, app) = new_app(&["--empty", "--namespace", "ml"]);
    ok(
        &app,
        &[
            "component",
            "add",
            "tf-job",
            "mnist",
            "--param",
            "image=example/mnist:1.0",
            "--param",
            r#"args=["--train-steps=100"]"#,
        ],
    );
    for (key, value) in [
        ("workerReplicas", "4"),
        ("psReplicas", "2"),
        ("gpus", "1"),
        ("activeDeadlineSeconds", "7200"),
    ] {
        ok(
            &app,
            &["param", "set", "mnist", key, value, "--env", "prod"],
        );
    }

    let local = show_json(&app, "local");
    let prod = show_json(&app, "prod");
    let (local_job, prod_job) = (
        find(&local, "TFJob", "mnist"),
        find(&prod, "TFJob", "mnist"),
    );
    assert_eq!(local.len(), 1);
    assert_eq!(local_job["metadata"]["namespace"], "ml");
    assert_eq!(prod_job["metadata"]["namespace"], "ml-prod");
    let types = |job: &Value| -> Vec<(String, Value)> {
        job["spec"]["tfReplicaSpecs"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(t, spec)| (t.clone(), spec["replicas"].clone()))
            .collect()
    };
    assert_eq!(types(local_job), [("Worker".to_owned(), 1.into())]);
    assert_eq!(
        types(prod_job),
        [("PS".to_owned(), 2.into()), ("Worker".to_owned(), 4.into())]
    );
    let worker = |job: &Value| {
        job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].clone()
    };
    assert_eq!(worker(local_job)["image"], "example/mnist:1.0");
    assert_eq!(
        worker(prod_job)["args"],
        serde_json::json!(["--train-steps=100"])
    );
    assert!(worker(local_job)["resources"]["limits"].is_null());
    assert_eq!(worker(prod_job)["resources"]["limits"]["nvidia.com/gpu"], 1);
    assert!(
        local_job["spec"]["runPolicy"]
            .get("activeDeadlineSeconds")
            .is_none()
    );
    assert_eq!(prod_job["spec"]["runPolicy"]["activeDeadlineSeconds"], 7200);
    assert_eq!(
        local_job["metadata"]["labels"]["mlkube.io/component"],
        "mnist"
    );

    let diff = differs(&app, &["param", "diff", "local", "prod"]);
    assert!(
        diff.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["mnist", "workerReplicas", "1", "4"]),
        "{diff}"
    );
}

/// The talk's hyperparameter sweep: a small grid in `local`, the full one in `prod`, set with
/// `param set` as JSON objects; the combination both grids share is one job name in both.
#[test]
fn a_sweep_runs_a_small_grid_locally_and_the_full_one_in_prod() {
    let (_tmp, app) = new_app(&["--empty"]);
    ok(
        &app,
        &[
            "component",
            "add",
            "tf-job-sweep",
            "sweep",
            "--param",
            "image=example/mnist:1.0",
        ],
    );
    for (env, grid) in [
        ("local", r#"{"learningRate": [0.01], "hiddenLayers": [2]}"#),
        (
            "prod",
            r#"{"learningRate": [0.01, 0.001], "hiddenLayers": [2, 3, 4]}"#,
        ),
    ] {
        ok(&app, &["param", "set", "sweep", "grid", grid, "--env", env]);
    }
    let local = show_json(&app, "local");
    let prod = show_json(&app, "prod");
    assert_eq!(tf_jobs(&local).len(), 1);
    assert_eq!(tf_jobs(&prod).len(), 6);
    let local_job = tf_jobs(&local)[0];
    let shared = find(
        &prod,
        "TFJob",
        local_job["metadata"]["name"].as_str().unwrap(),
    );
    assert_eq!(
        shared["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["args"],
        serde_json::json!(["--hidden-layers=2", "--learning-rate=0.01"])
    );
    let rates: std::collections::BTreeSet<&str> = tf_jobs(&prod)
        .iter()
        .map(|job| {
            job["metadata"]["labels"]["sweep.mlkube.io/learningRate"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(rates.into_iter().collect::<Vec<_>>(), ["0.001", "0.01"]);

    let rows: Value = serde_json::from_str(&ok(
        &app,
        &["param", "list", "sweep", "--env", "prod", "-o", "json"],
    ))
    .unwrap();
    let grid = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["param"] == "grid")
        .unwrap();
    assert_eq!(grid["source"], "env");

    // A grid must be an object: refused before anything is written.
    let before = snapshot_files(&app);
    let stderr = fails(
        &app,
        &[
            "param",
            "set",
            "sweep",
            "grid",
            "[0.1, 0.2]",
            "--env",
            "prod",
        ],
    );
    assert!(
        stderr.starts_with(
            "mlkube: error: component `sweep` (environment `prod`): param `grid` must be an \
             object"
        ),
        "{stderr}"
    );
    assert_eq!(snapshot_files(&app), before);
    // An empty grid is an object, but the sweep would not render: refused when set too.
    let stderr = fails(
        &app,
        &["param", "set", "sweep", "grid", "{}", "--env", "prod"],
    );
    assert!(
        stderr.starts_with(
            "mlkube: error: `sweep.grid = {}` would break environment `prod`: component \
             `sweep`, param `grid`: is empty; give each hyperparameter a list of values"
        ),
        "{stderr}"
    );
    assert_eq!(snapshot_files(&app), before);
}

/// Issue 36: the README's sweep walkthrough (now docs/workflow.md's) added a sweep without a grid,
/// which broke every environment that set none of its own (`dev`), and values a prototype refuses
/// only when it renders (a grid's shape and size against maxJobs, a random range, traffic weights)
/// were written, to fail later with a library trace. Now each is refused when typed: exit 2, the
/// component, the param and what is wrong, no trace, and no file changed.
#[test]
fn a_value_the_prototype_would_refuse_at_render_is_refused_when_set() {
    let (_tmp, app) = new_app(&[]);
    let refused = |args: &[&str], message: &str| {
        let before = snapshot_files(&app);
        let stderr = fails(&app, args);
        assert!(stderr.starts_with(message), "{args:?}:\n{stderr}");
        assert!(stderr.contains("\nhint: nothing was written; "), "{stderr}");
        assert!(
            !stderr.contains(" at mlkube/"),
            "no library trace: {stderr}"
        );
        assert_eq!(snapshot_files(&app), before, "{args:?} wrote nothing");
    };
    let add = ["component", "add", "pytorch-job-sweep", "sweep"];
    let image = ["--param", "image=example/mnist:1.0"];
    refused(
        &[&add[..], &image[..]].concat(),
        "mlkube: error: adding component `sweep` (pytorch-job-sweep) would break environments \
         `local`, `dev` and `prod`: component `sweep`, param `grid`: is empty; give each \
         hyperparameter a list of values",
    );
    ok(
        &app,
        &[&add[..], &image[..], &["--param", r#"grid={"lr": [0.01]}"#]].concat(),
    );
    fn set<'a>(value: &'a str, env: &[&'a str]) -> Vec<&'a str> {
        let (key, value) = value.split_once(' ').unwrap();
        [&["param", "set", "sweep", key, value][..], env].concat()
    }
    refused(
        &set("grid {}", &["--env", "dev"]),
        "mlkube: error: `sweep.grid = {}` would break environment `dev`: component `sweep`, \
         param `grid`: is empty",
    );
    ok(
        &app,
        &set(r#"grid {"lr": [0.1, 0.01, 0.001]}"#, &["--env", "prod"]),
    );
    refused(
        &set("maxJobs 2", &[]),
        "mlkube: error: `sweep.maxJobs = 2` would break environment `prod`: component `sweep`, \
         param `grid`: gives 3 jobs, more than maxJobs (2); shrink the sweep or raise maxJobs",
    );
    refused(
        &set(
            r#"random {"count": 2, "ranges": {"momentum": {"min": 0.99, "max": 0.5}}}"#,
            &["--env", "local"],
        ),
        "mlkube: error: `sweep.random = { count: 2, ranges: { momentum: { min: 0.99, max: 0.5 } \
         } }` would break environment `local`: component `sweep`, param `random`: \
         random.ranges.momentum: min (0.99) must be less than max (0.5)",
    );
    refused(
        &set(r#"random {"count": 2, "ranges": {"lr": [0.5, 0.7]}}"#, &[]),
        "mlkube: error: `sweep.random = { count: 2, ranges: { lr: [0.5, 0.7] } }` would break \
         environments `local`, `dev` and `prod`: component `sweep`, param `random`: lr is in \
         grid too",
    );
    refused(
        &["param", "set", "mnist", "maxReplicas", "1", "--env", "prod"],
        "mlkube: error: `mnist.maxReplicas = 1` would break environment `prod`: component \
         `mnist`, param `maxReplicas`: 1 is below minReplicas 2",
    );
    // What renders is set, and every environment renders.
    let scaled = ["param", "set", "mnist", "maxReplicas", "3", "--env", "prod"];
    ok(&app, &scaled);
    ok(&app, &set("maxJobs 3", &[]));
    for env in ["local", "dev", "prod"] {
        ok(&app, &["show", env]);
    }
}

/// An environment broken before an edit (a params file edited by hand) does not refuse an edit
/// that leaves it as broken as it was, and an edit that mends it goes through.
/// A hand-written component that needs two params fails on the second while only the first is
/// set: setting them one at a time is not refused (the cluster test `dry_run_truth` does so).
#[test]
fn regression_a_hand_written_component_takes_its_params_one_at_a_time() {
    let (_tmp, app) = new_app(&["--empty"]);
    write(
        &app,
        "components/widget.jsonnet",
        "local component = import 'mlkube/component.libsonnet';\n\
         [{ apiVersion: component.params.group + '/v1', kind: 'Widget',\n\
            metadata: { name: 'w' }, spec: { size: component.params.size } }]\n",
    );
    ok(
        &app,
        &[
            "param",
            "set",
            "widget",
            "group",
            "example.com",
            "--as-string",
        ],
    );
    ok(&app, &["param", "set", "widget", "size", "3"]);
    assert!(ok(&app, &["show", "dev"]).contains("size: 3"));
}

#[test]
fn an_edit_that_leaves_a_broken_environment_as_it_was_or_mends_it_is_written() {
    let (_tmp, app) = new_app(&["--empty"]);
    ok(
        &app,
        &[
            "component",
            "add",
            "pytorch-job-sweep",
            "sweep",
            "--param",
            r#"grid={"lr": [0.01]}"#,
        ],
    );
    write(
        &app,
        "environments/dev/params.libsonnet",
        "{ components: { sweep: { grid: {} } } }\n",
    );
    assert!(fails(&app, &["show", "dev"]).contains("param grid: is empty"));
    let objective = r#"{"metric": "accuracy", "goal": "maximize"}"#;
    ok(&app, &["param", "set", "sweep", "objective", objective]);
    ok(
        &app,
        &["param", "set", "sweep", "maxJobs", "1", "--env", "dev"],
    );
    // Broken otherwise than it was: refused.
    let random = r#"{"count": 1, "ranges": {"m": {"min": 2, "max": 1}}}"#;
    let stderr = fails(
        &app,
        &["param", "set", "sweep", "random", random, "--env", "dev"],
    );
    assert!(
        stderr.contains("would break environment `dev`: component `sweep`, param `random`"),
        "{stderr}"
    );
    ok(
        &app,
        &[
            "param",
            "set",
            "sweep",
            "grid",
            r#"{"lr": [0.1]}"#,
            "--env",
            "dev",
        ],
    );
    ok(&app, &["show", "dev"]);
}

#[test]
fn listings_print_text_json_yaml_and_names() {
    let (_tmp, app) = new_app(&[]);
    let listings: [&[&str]; 5] = [
        &["env", "list"],
        &["component", "list"],
        &["prototype", "list"],
        &["param", "list", "--env", "prod"],
        &["prototype", "describe", "serving"],
    ];
    for listing in listings {
        let with = |format: &str| ok(&app, &[listing, &["-o", format]].concat());
        let json: Value = serde_json::from_str(&with("json")).unwrap();
        let yaml: Value = serde_yaml::from_str(&with("yaml")).unwrap();
        assert_eq!(yaml, json, "{listing:?}: YAML holds what JSON holds");
        assert_eq!(
            with("text"),
            ok(&app, listing),
            "{listing:?}: text is the default"
        );
    }
    assert_eq!(
        ok(&app, &["env", "list", "-o", "name"]),
        "local\ndev\nprod\n"
    );
    assert_eq!(
        ok(&app, &["component", "list", "-o", "name"]),
        "gateway\nmnist\nnotebook-hub\nobject-store\ntraining-operator\nvolume-controller\n"
    );
    let prototypes = ok(&app, &["prototype", "list", "-o", "name"]);
    assert_eq!(prototypes.lines().next(), Some("framework"));
    assert!(prototypes.lines().all(|l| !l.contains(' ')), "{prototypes}");
    let params = ok(&app, &["param", "list", "mnist", "-o", "name"]);
    assert!(params.lines().any(|l| l == "mnist.minReplicas"), "{params}");
    assert!(params.lines().all(|l| l.starts_with("mnist.")), "{params}");
    assert_eq!(
        ok(&app, &["prototype", "describe", "serving", "-o", "name"]),
        "serving\n"
    );
    let stderr = mlkube(&app, &["env", "list", "-o", "xml"]).stderr;
    assert!(
        stderr.contains("[possible values: text, json, yaml, name]"),
        "{stderr}"
    );
}

#[test]
fn param_diff_exits_as_diff_does() {
    let (_tmp, app) = new_app(&[]);
    let same = mlkube(&app, &["param", "diff", "dev", "dev"]);
    assert_eq!(same.code, 0, "{}", same.stderr);
    assert_eq!(same.stdout, "COMPONENT  PARAM  DEV  DEV\n");
    let names = differs(&app, &["param", "diff", "dev", "prod", "-o", "name"]);
    assert!(names.lines().any(|l| l == "mnist.minReplicas"), "{names}");
    let unknown = mlkube(&app, &["param", "diff", "dev", "qa"]);
    assert_eq!(unknown.code, 2);
    assert!(
        unknown.stderr.contains("unknown environment `qa`"),
        "{}",
        unknown.stderr
    );
}

/// Run `mlkube` with `--color` and `NO_COLOR` as given; stdout and stderr are pipes.
fn with_color(dir: &Path, color: Option<&str>, no_color: Option<&str>, args: &[&str]) -> Run {
    let color_args = color.map(|c| vec!["--color", c]).unwrap_or_default();
    let mut command = binary(dir, &[&color_args[..], args].concat());
    command.env_remove("NO_COLOR");
    if let Some(value) = no_color {
        command.env("NO_COLOR", value);
    }
    run(&mut command)
}

#[test]
fn color_always_colours_even_a_pipe_and_despite_no_color() {
    let (_tmp, app) = new_app(&["--empty"]);
    for no_color in [None, Some("1")] {
        let run = with_color(&app, Some("always"), no_color, &["show", "qa"]);
        assert_eq!(run.code, 2);
        assert!(
            run.stderr
                .starts_with("mlkube: \x1b[1;31merror\x1b[0m: unknown environment `qa`"),
            "{:?}",
            run.stderr
        );
    }
    // clap's own argument errors follow the flag too.
    let run = with_color(&app, Some("always"), None, &["env", "lis"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("\x1b["), "{:?}", run.stderr);
    let run = with_color(&app, Some("never"), None, &["env", "lis"]);
    assert!(!run.stderr.contains('\x1b'), "{:?}", run.stderr);
}

#[test]
fn color_never_and_auto_into_a_pipe_print_plain_text() {
    let (_tmp, app) = new_app(&["--empty"]);
    for (color, no_color) in [
        (Some("never"), None),
        (Some("auto"), None),
        (None, None),
        (None, Some("1")),
    ] {
        let run = with_color(&app, color, no_color, &["show", "qa"]);
        assert_eq!(run.code, 2);
        assert!(
            run.stderr
                .starts_with("mlkube: error: unknown environment `qa`"),
            "{color:?} {no_color:?}: {:?}",
            run.stderr
        );
        assert!(!run.stderr.contains('\x1b'), "{:?}", run.stderr);
    }
    let bad = with_color(&app, Some("sometimes"), None, &["env", "list"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr
            .contains("[possible values: auto, always, never]"),
        "{}",
        bad.stderr
    );
}

#[test]
fn a_missing_import_names_the_importing_line_the_path_and_where_it_looked() {
    let (_tmp, app) = new_app(&["--empty"]);
    write(
        &app,
        "components/web.jsonnet",
        "// the web tier\nlocal lib = import 'web-lib.libsonnet';\nlib.service\n",
    );
    let stderr = fails(&app, &["show", "local"]);
    assert_eq!(
        stderr,
        format!(
            "mlkube: error: cannot render component `web` for environment `local`\n  caused by: \
             components/web.jsonnet:2:20: cannot find the import `web-lib.libsonnet`; looked for \
             components/web-lib.libsonnet, lib/web-lib.libsonnet, vendor/web-lib.libsonnet in the \
             app {}\nhint: fix the path (relative to the importing file), or put the file in the \
             app's lib/ or vendor/ folder\n",
            app.display()
        )
    );
    assert!(!stderr.contains("virtual:"));
}

#[test]
fn endless_recursion_is_a_short_error_that_suggests_no_missing_flag() {
    let (_tmp, app) = new_app(&["--empty"]);
    write(
        &app,
        "components/loop.jsonnet",
        "local count(n) = count(n + 1) + 1;\n{ n: count(0) }\n",
    );
    let stderr = fails(&app, &["show", "local"]);
    assert!(stderr.lines().count() <= 6, "{stderr}");
    assert!(!stderr.contains("max-stack"), "{stderr}");
    assert!(
        stderr.contains(
            "  caused by: components/loop.jsonnet:1:23: stack overflow: calls nested too deep"
        ),
        "{stderr}"
    );
    assert!(stderr.contains(" times)\n"), "{stderr}");
}

#[test]
fn an_unknown_prototype_in_app_yaml_names_its_component_and_the_known_prototypes() {
    let (_tmp, app) = new_app(&[]);
    let text = read(&app, "app.yaml").replace(
        "prototype: inference-service",
        "prototype: inference-servic",
    );
    write(&app, "app.yaml", &text);
    let expected = "mlkube: error: component `mnist` in app.yaml names the prototype \
                    `inference-servic`, which the library does not have; it has: framework, \
                    framework-sweep, gateway, inference-service, jax-job, jax-job-sweep, mpi-job, mpi-job-sweep, mxnet-job, mxnet-job-sweep, \
                    notebook-hub, object-store, paddle-job, \
                    paddle-job-sweep, profile, pytorch-job, pytorch-job-sweep, serving, tf-job, tf-job-sweep, \
                    training-operator, volume-controller, xgboost-job, \
                    xgboost-job-sweep\nhint: fix \
                    `prototype:` of `mnist` in app.yaml, or remove its entry to render \
                    components/mnist.jsonnet as a hand-written component\n";
    assert_eq!(fails(&app, &["show", "local"]), expected);
    assert_eq!(fails(&app, &["param", "list"]), expected);
    let before = snapshot_files(&app);
    assert_eq!(
        fails(&app, &["param", "set", "mnist", "minReplicas", "2"]),
        expected
    );
    assert_eq!(snapshot_files(&app), before);
}

#[test]
fn init_refuses_an_app_name_that_is_not_a_dns_label_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    for bad in ["Bad_App", "ml.platform", "-ml"] {
        let stderr = fails(tmp.path(), &["init", "--", bad]);
        assert!(
            stderr.starts_with(&format!(
                "mlkube: error: the directory name `{bad}` cannot name the app: the name is used \
                 in object names and labels, so it must be a DNS-1123 label\nhint: "
            )),
            "{stderr}"
        );
        assert!(!tmp.path().join(bad).exists(), "{bad} was created");
    }
}

#[test]
fn an_app_yaml_edited_by_hand_is_checked_when_loaded() {
    let (_tmp, app) = new_app(&["--empty"]);
    let good = read(&app, "app.yaml");
    for (from, to, problem) in [
        (
            "name: platform",
            "name: Bad_App!",
            "`Bad_App!` is not a valid app name",
        ),
        (
            "namespace: kubeflow-dev",
            "namespace: Kubeflow_Dev",
            "`Kubeflow_Dev` is not a valid namespace name",
        ),
        (
            "namespace: kubeflow-dev",
            "namespace: kubeflow-dev\n    server: not a url",
            "`not a url` is not an API server URL",
        ),
    ] {
        write(&app, "app.yaml", &good.replace(from, to));
        let stderr = fails(&app, &["env", "list"]);
        assert!(
            stderr.starts_with(&format!(
                "mlkube: error: {} has an invalid setting\n  caused by: {problem}",
                app.join("app.yaml").display()
            )),
            "{stderr}"
        );
        assert!(stderr.contains("\nhint: "), "{stderr}");
    }
    write(&app, "app.yaml", &good);
}

#[test]
fn namespaces_and_server_urls_are_checked_when_written() {
    let tmp = tempfile::tempdir().unwrap();
    let stderr = fails(tmp.path(), &["init", "platform", "--namespace", "ML_Team"]);
    assert!(
        stderr.contains("`ML_Team` is not a valid namespace name"),
        "{stderr}"
    );
    let stderr = fails(tmp.path(), &["init", "platform", "--server", "not a url"]);
    assert!(
        stderr.contains("`not a url` is not an API server URL\nhint: "),
        "{stderr}"
    );
    assert!(!tmp.path().join("platform").exists());

    let (_tmp, app) = new_app(&[]);
    let before = snapshot_files(&app);
    let refused: [&[&str]; 6] = [
        &["env", "add", "qa", "--namespace", "QA"],
        &["env", "add", "qa", "--server", "not a url"],
        &["env", "add", "qa", "--server", "ftp://files.example.com"],
        &["env", "set", "dev", "--namespace", "ml_dev"],
        &["env", "set", "dev", "--server", "not a url"],
        &["env", "set", "dev", "--server", "https://"],
    ];
    for args in refused {
        let stderr = fails(&app, args);
        assert!(stderr.contains("\nhint: "), "{args:?}: {stderr}");
    }
    assert_eq!(snapshot_files(&app), before, "refused edits wrote nothing");
    ok(
        &app,
        &["env", "set", "dev", "--server", "https://10.0.0.1:6443"],
    );
    ok(&app, &["env", "set", "dev", "--server", ""]);
    assert_eq!(
        snapshot_files(&app),
        before,
        "an empty --server unpins again"
    );
}

/// What a client's `{:?}` of an error looks like; a message for people never contains it.
fn assert_no_debug_dump(stderr: &str) {
    for dump in [
        "Status {",
        "Error {",
        "Os {",
        "kind: ",
        "Some(",
        "ErrorResponse",
    ] {
        assert!(
            !stderr.contains(dump),
            "a debug dump ({dump}) in:\n{stderr}"
        );
    }
}

#[test]
fn an_app_yaml_that_is_not_yaml_names_the_file_and_the_place_and_changes_nothing() {
    let (_tmp, app) = new_app(&[]);
    write(&app, "app.yaml", "name: platform\nenvironments: [\n");
    let before = snapshot_files(&app);
    let stderr = fails(&app, &["env", "add", "qa"]);
    let file = app.join("app.yaml");
    assert!(
        stderr.starts_with(&format!(
            "mlkube: error: {} is not a valid app file\n  caused by: ",
            file.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("at line 2 column 15"), "{stderr}");
    assert_no_debug_dump(&stderr);
    assert_eq!(snapshot_files(&app), before, "nothing written");
}

#[test]
#[cfg(target_os = "linux")]
fn show_into_a_full_disk_says_stdout_could_not_be_written() {
    let (_tmp, app) = new_app(&[]);
    let full = std::fs::File::create("/dev/full").expect("/dev/full opens");
    let run = run(binary(&app, &["show", "local"])
        .env("NO_COLOR", "1")
        .stdout(full));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        "mlkube: error: cannot write the manifest to stdout\n  caused by: No space left on \
         device (os error 28)\n"
    );
}

#[test]
fn a_jsonnet_error_in_show_is_the_file_and_line_without_a_debug_dump() {
    let (_tmp, app) = new_app(&["--empty"]);
    write(&app, "components/broken.jsonnet", "{ a: std.length(1) }\n");
    let stderr = fails(&app, &["show", "local"]);
    assert!(
        stderr.starts_with(
            "mlkube: error: cannot render component `broken` for environment `local`\n  \
             caused by: components/broken.jsonnet:1:16: type error: "
        ),
        "{stderr}"
    );
    assert!(stderr.contains("expected array, got number"), "{stderr}");
    assert_no_debug_dump(&stderr);
}

/// Every command of the tree whose `-o` accepts `name`, e.g. `param diff`.
fn commands_with_output_name(command: &clap::Command, path: &str, out: &mut Vec<String>) {
    let takes_name = command.get_arguments().any(|arg| {
        arg.get_id() == "output"
            && arg
                .get_possible_values()
                .iter()
                .any(|value| value.get_name() == "name")
    });
    if takes_name {
        out.push(path.trim_start().to_owned());
    }
    for sub in command.get_subcommands() {
        commands_with_output_name(sub, &format!("{path} {}", sub.get_name()), out);
    }
}

/// `-o name` prints one identifier per line, as `kubectl -o name`: as many as the JSON has
/// records, and nothing else.
#[test]
fn every_command_that_takes_output_name_prints_one_name_per_line() {
    use clap::CommandFactory;
    let (_tmp, app) = new_app(&[]);
    let mut found = Vec::new();
    commands_with_output_name(&mlkube::cli::Cli::command(), "", &mut found);
    for path in &found {
        let args: Vec<&str> = match path.as_str() {
            "env list" | "component list" | "prototype list" => vec![],
            "prototype describe" => vec!["serving"],
            "param list" => vec!["mnist", "--env", "prod"],
            "param diff" => vec!["dev", "prod"],
            other => panic!("`{other}` takes -o name: add its arguments to this test"),
        };
        let verb: Vec<&str> = path.split(' ').chain(args).collect();
        let names = mlkube(&app, &[&verb[..], &["-o", "name"]].concat());
        let json = mlkube(&app, &[&verb[..], &["-o", "json"]].concat());
        assert!(names.code <= 1, "{path}: {}", names.stderr);
        let records = match serde_json::from_str::<Value>(&json.stdout).unwrap() {
            Value::Array(records) => records.len(),
            _ => 1,
        };
        let lines: Vec<&str> = names.stdout.lines().collect();
        assert_eq!(lines.len(), records, "{path}: {}", names.stdout);
        assert!(
            lines
                .iter()
                .all(|l| !l.is_empty() && !l.contains(char::is_whitespace)),
            "{path}: one identifier a line:\n{}",
            names.stdout
        );
        assert!(records > 0, "{path}: the test lists something");
    }
    assert_eq!(found.len(), 6, "{found:?}");
}

#[test]
fn values_that_start_with_a_dash_are_values_also_before_env() {
    let (_tmp, app) = new_app(&["--empty"]);
    // A hand-written component: its params have no prototype's types to check.
    write(
        &app,
        "components/offset.jsonnet",
        "local c = import 'mlkube/component.libsonnet';\n{ apiVersion: 'v1', kind: \
         'ConfigMap', metadata: { name: 'offset' },\n  data: { delta: std.toString(c.params.delta), \
         flag: c.params.flag } }\n",
    );
    write(
        &app,
        "components/params.libsonnet",
        "{\n  global: {},\n  components: {\n    offset: { delta: 1, flag: 'on' },\n  },\n}\n",
    );
    ok(
        &app,
        &["param", "set", "offset", "delta", "-1", "--env", "prod"],
    );
    ok(
        &app,
        &[
            "param",
            "set",
            "offset",
            "flag",
            "-v",
            "--env",
            "prod",
            "--as-string",
        ],
    );
    ok(
        &app,
        &["param", "set", "offset", "delta", "--env", "dev", "-2.5"],
    );
    let prod = show_json(&app, "prod");
    let data = &find(&prod, "ConfigMap", "offset")["data"];
    assert_eq!(data["delta"], "-1");
    assert_eq!(data["flag"], "-v");
    let dev = show_json(&app, "dev");
    assert_eq!(find(&dev, "ConfigMap", "offset")["data"]["delta"], "-2.5");
    // A prototype's param: never taken for a flag (its type may still refuse the value).
    let (_tmp, app) = new_app(&[]);
    let run = mlkube(
        &app,
        &[
            "param",
            "set",
            "mnist",
            "minReplicas",
            "-1",
            "--env",
            "prod",
        ],
    );
    assert!(
        !run.stderr.contains("unexpected argument"),
        "{}",
        run.stderr
    );
    assert!(
        run.code == 0 || run.stderr.contains("param `minReplicas`"),
        "{}",
        run.stderr
    );
}

#[test]
fn server_url_schemes_and_hosts_are_case_insensitive_and_stored_in_lowercase() {
    let tmp = tempfile::tempdir().unwrap();
    ok(
        tmp.path(),
        &[
            "init",
            "platform",
            "--server",
            "HTTPS://API.Example.com:6443/",
        ],
    );
    let app = tmp.path().join("platform");
    assert!(
        read(&app, "app.yaml").contains("server: https://api.example.com:6443\n"),
        "{}",
        read(&app, "app.yaml")
    );
    ok(
        &app,
        &["env", "set", "dev", "--server", "Https://10.0.0.1:6443"],
    );
    ok(
        &app,
        &["env", "add", "qa", "--server", "HTTP://127.0.0.1:8080/"],
    );
    let listed = ok(&app, &["env", "list", "-o", "json"]);
    let servers: Vec<Value> = serde_json::from_str::<Vec<Value>>(&listed)
        .unwrap()
        .into_iter()
        .map(|e| e["server"].clone())
        .collect();
    assert_eq!(
        servers,
        [
            "https://api.example.com:6443",
            "https://10.0.0.1:6443",
            "https://api.example.com:6443",
            "http://127.0.0.1:8080"
        ]
    );
}

#[test]
fn a_typo_in_a_component_names_the_file_line_column_and_the_field_meant() {
    let (_tmp, app) = new_app(&["--empty"]);
    write(
        &app,
        "components/hello.jsonnet",
        "local c = import 'mlkube/component.libsonnet';\n{\n  apiVersion: 'v1',\n  kind: \
         'ConfigMap',\n  metadata: { name: 'hello' },\n  data: { msg: c.env.namespac },\n}\n",
    );
    assert_eq!(
        fails(&app, &["show", "local"]),
        "mlkube: error: cannot render component `hello` for environment `local`\n  caused by: \
         components/hello.jsonnet:6:22: no such field `namespac`; did you mean `namespace` or `name`?\n    \
         while rendering the field data.msg\n"
    );
}

/// Issue 24, point 8: a param's type says more than JSON's (a quantity, an integer with bounds,
/// an image, a list of allowed values), and `param set`, `component add --param` and rendering
/// all check it, naming the component, the environment, the param and what is allowed, so a
/// typo fails when it is typed, not at apply with the API server's regex or at render with a
/// stack trace into the library.
#[test]
fn typed_params_are_checked_when_set_and_rendered_naming_what_is_allowed() {
    let (_tmp, app) = new_app(&[]);
    let before = snapshot_files(&app);
    let describe = |prototype: &str| {
        format!("hint: `mlkube prototype describe {prototype}` lists the params and types\n")
    };
    assert_eq!(
        fails(
            &app,
            &[
                "param",
                "set",
                "mnist",
                "memoryRequest",
                "1Gb",
                "--env",
                "prod"
            ]
        ),
        format!(
            "mlkube: error: component `mnist` (environment `prod`): param `memoryRequest` must \
             be a quantity such as 500m, 1Gi or 2 (a number and an optional suffix: m, k, M, G, \
             T, P, E, Ki, Mi, Gi, Ti, Pi or Ei), got \"1Gb\"\nhint: did you mean 1Gi?\n{}",
            describe("inference-service")
        )
    );
    assert_eq!(
        fails(&app, &["param", "set", "mnist", "minReplicas", "0"]),
        format!(
            "mlkube: error: component `mnist`: param `minReplicas` must be an integer of at \
             least 1, got 0\n{}",
            describe("inference-service")
        )
    );
    assert_eq!(
        fails(
            &app,
            &[
                "param",
                "set",
                "notebook-hub",
                "serviceType",
                "Nodeport",
                "--env",
                "dev"
            ]
        ),
        format!(
            "mlkube: error: component `notebook-hub` (environment `dev`): param `serviceType` \
             must be one of ClusterIP, NodePort or LoadBalancer, got \"Nodeport\"\n{}",
            describe("notebook-hub")
        )
    );
    let stderr = fails(
        &app,
        &[
            "param",
            "set",
            "training-operator",
            "servingImage",
            "MLKube/serving:0.1.0",
        ],
    );
    assert!(
        stderr.starts_with(
            "mlkube: error: component `training-operator`: param `servingImage` must be an image \
             reference such as tensorflow/serving:2.18.0"
        ) && stderr.contains(
            "got \"MLKube/serving:0.1.0\"\nhint: the repository `MLKube/serving` must be \
             lowercase\n"
        ),
        "{stderr}"
    );
    assert_eq!(
        fails(
            &app,
            &[
                "component",
                "add",
                "serving",
                "resnet",
                "--param",
                "replicas=-1"
            ]
        ),
        format!(
            "mlkube: error: component `resnet`: param `replicas` must be an integer of at least \
             1, got -1\n{}",
            describe("serving")
        )
    );
    // A global value is checked against every component that declares the param.
    let stderr = fails(
        &app,
        &[
            "param", "set", "global", "cpuLimit", "2 cores", "--env", "prod",
        ],
    );
    assert!(
        stderr.starts_with("mlkube: error: component `gateway` (environment `prod`): global param `cpuLimit` must be a quantity"),
        "{stderr}"
    );
    assert_eq!(snapshot_files(&app), before, "refused values wrote nothing");

    // Values that fit are stored as typed: a quantity typed as a number stays a quantity.
    ok(
        &app,
        &["param", "set", "mnist", "cpuRequest", "2", "--env", "prod"],
    );
    assert!(read(&app, "environments/prod/params.libsonnet").contains("cpuRequest: '2'"));

    // A value written into a params file by hand is checked when an environment is rendered.
    let prod = read(&app, "environments/prod/params.libsonnet");
    write(
        &app,
        "environments/prod/params.libsonnet",
        &prod.replace("memoryRequest: '1Gi'", "memoryRequest: '1GB'"),
    );
    assert_eq!(
        fails(&app, &["show", "prod"]),
        "mlkube: error: component `mnist` (environment `prod`): param `memoryRequest` must be a \
         quantity such as 500m, 1Gi or 2 (a number and an optional suffix: m, k, M, G, T, P, E, \
         Ki, Mi, Gi, Ti, Pi or Ei), got \"1GB\" (set in environments/prod/params.libsonnet)\n\
         hint: did you mean 1Gi?\n"
    );

    // `prototype describe` shows the rules.
    let text = ok(&app, &["prototype", "describe", "serving"]);
    let row = |param: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{param} ")))
            .unwrap_or_else(|| panic!("no row for {param}:\n{text}"))
            .to_owned()
    };
    assert!(
        row("replicas").contains(" integer >= 1 "),
        "{}",
        row("replicas")
    );
    assert!(
        row("memoryRequest").contains(" quantity "),
        "{}",
        row("memoryRequest")
    );
    assert!(
        row("serviceType").contains(" string: ClusterIP|NodePort|LoadBalancer "),
        "{}",
        row("serviceType")
    );
    let json: Value = serde_json::from_str(&ok(
        &app,
        &["prototype", "describe", "serving", "-o", "json"],
    ))
    .unwrap();
    let replicas = json["params"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "replicas")
        .unwrap();
    assert_eq!(replicas["type"], "integer");
    assert_eq!(replicas["minimum"], 1);
}

#[test]
fn init_run_by_a_script_says_what_it_created_and_leaves_the_next_steps_to_the_script() {
    let tmp = tempfile::tempdir().unwrap();
    let run = mlkube(tmp.path(), &["init", "platform"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        "Created app `platform` in platform with environments local, dev, prod and components \
         gateway, mnist (inference-service), notebook-hub, object-store, training-operator, volume-controller.\n"
    );
}

/// Every job prototype, each with a component named for it (a Framework's name has no `-`)
/// and the extra params it needs to render.
const JOB_PROTOTYPES: [(&str, &str); 16] = [
    ("tf-job", ""),
    ("tf-job-sweep", ""),
    ("pytorch-job", ""),
    ("pytorch-job-sweep", "grid"),
    ("mxnet-job", ""),
    ("mxnet-job-sweep", "grid"),
    ("xgboost-job", ""),
    ("xgboost-job-sweep", "grid"),
    ("jax-job", ""),
    ("jax-job-sweep", "grid"),
    ("paddle-job", ""),
    ("paddle-job-sweep", "grid"),
    ("mpi-job", ""),
    ("mpi-job-sweep", "grid"),
    ("framework", ""),
    ("framework-sweep", "grid"),
];

/// Each image the objects name, as `component kind/name path: image`: every string under an
/// `image` key, and each platform image (`mlkube/<name>:<tag>`) standing as a word in any other
/// string (an argument, an environment variable, JSON text in a ConfigMap).
fn images_in(objects: &[Value]) -> Vec<String> {
    fn walk(value: &Value, path: &str, key: &str, out: &mut Vec<(String, String)>) {
        match value {
            Value::String(text) if key == "image" => out.push((path.to_owned(), text.clone())),
            Value::String(text) => {
                let words =
                    text.split(|c: char| !(c.is_ascii_alphanumeric() || "._-/:@".contains(c)));
                for word in words.filter(|w| w.contains("mlkube/") && w.contains(':')) {
                    out.push((path.to_owned(), word.to_owned()));
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &format!("{path}[{i}]"), key, out);
                }
            }
            Value::Object(fields) => {
                for (field, item) in fields {
                    walk(item, &format!("{path}.{field}"), field, out);
                }
            }
            _ => {}
        }
    }
    let mut lines = Vec::new();
    for object in objects {
        let metadata = &object["metadata"];
        let component = metadata["labels"]["mlkube.io/component"]
            .as_str()
            .unwrap_or("-");
        let mut found = Vec::new();
        walk(object, "", "", &mut found);
        for (path, image) in found {
            let (kind, name) = (&object["kind"], &metadata["name"]);
            let (kind, name) = (kind.as_str().unwrap(), name.as_str().unwrap());
            lines.push(format!("{component} {kind}/{name} {path}: {image}"));
        }
    }
    lines
}

/// An app with the default components, one component of each job prototype on the platform's
/// training image, one on an image of the user's own (`python:3.12`), and in `dev` the platform's
/// images wherever a component can take one: the hub's notebook image, the PyTorch workers' init
/// image (mnist is served by MLServer already: the training-operator's runtime kserve-mlserver).
fn app_on_platform_images() -> (tempfile::TempDir, PathBuf) {
    let (tmp, app) = new_app(&[]);
    let image = "image=mlkube/training:0.1.0";
    let grid = r#"grid={"learningRate": [0.1, 0.01]}"#;
    for (prototype, extra) in JOB_PROTOTYPES {
        let name = match prototype {
            "framework" | "framework-sweep" => prototype.replace('-', ""),
            _ => format!("job-{prototype}"),
        };
        let mut args = vec!["component", "add", prototype, &name, "--param", image];
        if extra == "grid" {
            args.extend(["--param", grid]);
        }
        ok(&app, &args);
    }
    ok(
        &app,
        &[
            "component",
            "add",
            "tf-job",
            "own-image",
            "--param",
            "image=python:3.12",
        ],
    );
    for (component, key, value) in [
        ("notebook-hub", "proxyImage", "mlkube/notebook-hub:0.1.0"),
        (
            "notebook-hub",
            "notebookImages",
            r#"["mlkube/notebook-hub:0.1.0", "jupyter/scipy-notebook:2023-10-20"]"#,
        ),
        (
            "training-operator",
            "pytorchInitImage",
            "docker.io/mlkube/dnsutils:0.1.0",
        ),
    ] {
        ok(
            &app,
            &["param", "set", component, key, value, "--env", "dev"],
        );
    }
    (tmp, app)
}

/// `imageRegistry` points every platform image an environment renders at the registry: each
/// component of the default app, each job prototype's, and the images the operator is told to
/// use for the pods it creates; an image of the user's own stays, and so do other environments.
#[test]
fn image_registry_points_every_platform_image_of_an_environment_at_it() {
    let (_tmp, app) = app_on_platform_images();
    let before = images_in(&show_json(&app, "dev"));
    let set = [
        "param",
        "set",
        "global",
        "imageRegistry",
        "127.0.0.1:18445/mlkube",
        "--env",
        "dev",
    ];
    ok(&app, &set);
    // `param list` and `param diff` show it as the environment's global.
    let listed: Value =
        serde_json::from_str(&ok(&app, &["param", "list", "--env", "dev", "-o", "json"])).unwrap();
    assert_eq!(
        listed[0],
        json!({"component": "global", "param": "imageRegistry", "value": "127.0.0.1:18445/mlkube", "source": "env global"})
    );
    let differences: Value = serde_json::from_str(&differs(
        &app,
        &["param", "diff", "local", "dev", "-o", "json"],
    ))
    .unwrap();
    assert_eq!(
        differences[0],
        json!({"component": "global", "param": "imageRegistry", "local": null, "dev": "127.0.0.1:18445/mlkube"})
    );
    let after = images_in(&show_json(&app, "dev"));
    insta::assert_snapshot!("image_registry_dev", after.join("\n"));

    // The same places, each platform image moved and every other one as it was.
    assert_eq!(before.len(), after.len(), "{after:#?}");
    for (was, is) in before.iter().zip(&after) {
        let (place, image) = was.rsplit_once(": ").unwrap();
        let moved = image
            .strip_prefix("docker.io/")
            .unwrap_or(image)
            .strip_prefix("mlkube/")
            .map(|rest| format!("{place}: 127.0.0.1:18445/mlkube/{rest}"));
        assert_eq!(is, moved.as_ref().unwrap_or(was));
    }
    let in_registry = |component: &str| {
        after.iter().any(|l| {
            l.starts_with(&format!("{component} ")) && l.contains(": 127.0.0.1:18445/mlkube/")
        })
    };
    // mnist's InferenceService names no image: the runtime that serves it does.
    let defaults = [
        "gateway",
        "notebook-hub",
        "object-store",
        "training-operator",
        "volume-controller",
    ];
    let jobs = JOB_PROTOTYPES.map(|(prototype, _)| match prototype {
        "framework" | "framework-sweep" => prototype.replace('-', ""),
        _ => format!("job-{prototype}"),
    });
    for component in defaults.iter().map(|c| c.to_string()).chain(jobs) {
        assert!(in_registry(&component), "{component}: {after:#?}");
    }
    assert!(
        after.iter().any(
            |l| l.starts_with("- ClusterServingRuntime/kserve-mlserver ")
                && l.ends_with(": 127.0.0.1:18445/mlkube/serving:0.1.0")
        ),
        "{after:#?}"
    );
    let own: Vec<&String> = after
        .iter()
        .filter(|l| l.starts_with("own-image "))
        .collect();
    assert!(
        !own.is_empty() && own.iter().all(|l| l.ends_with(": python:3.12")),
        "{own:?}"
    );
    // The operator names the images of the pods it creates, and they moved too.
    for flag in [
        "--mpi-kubectl-delivery-image",
        "--pytorch-init-container-image",
        "--storage-initializer-image",
        "--volume-image",
    ] {
        let objects = show_json(&app, "dev");
        let args: Vec<&str> = objects
            .iter()
            .flat_map(|o| {
                o["spec"]["template"]["spec"]["containers"]
                    .as_array()
                    .into_iter()
                    .flatten()
            })
            .flat_map(|c| c["args"].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .collect();
        let at = args
            .iter()
            .position(|a| *a == flag)
            .unwrap_or_else(|| panic!("{flag} in {args:?}"));
        assert!(
            args[at + 1].starts_with("127.0.0.1:18445/mlkube/"),
            "{flag} {}",
            args[at + 1]
        );
    }
    // Other environments are left alone.
    let local = ok(&app, &["show", "local"]);
    assert!(!local.contains("127.0.0.1:18445"));
}

/// A registry is checked when it is set (nothing is written) and when the file is read, and
/// null sets none.
#[test]
fn image_registry_is_a_registry_and_path_without_scheme_or_tag() {
    let (_tmp, app) = new_app(&[]);
    let files = snapshot_files(&app);
    for (bad, problem) in [
        (
            "http://127.0.0.1:5000/mlkube",
            "it has a scheme; drop `http://`",
        ),
        ("127.0.0.1:5000/mlkube:0.1.0", "it has a tag"),
        ("127.0.0.1:5000", "it names no path after the registry"),
        ("team/mlkube", "`team` is not a registry"),
    ] {
        let stderr = fails(
            &app,
            &[
                "param",
                "set",
                "global",
                "imageRegistry",
                bad,
                "--env",
                "prod",
            ],
        );
        assert!(
            stderr.starts_with(&format!(
                "mlkube: error: `imageRegistry` in environments/prod/params.libsonnet: `{bad}` is not <registry>/<path>: {problem}"
            )) && stderr.contains("\nhint: give a registry's host[:port] and a path"),
            "{stderr}"
        );
    }
    let stderr = fails(
        &app,
        &[
            "param",
            "set",
            "mnist",
            "imageRegistry",
            "127.0.0.1:5000/ml",
        ],
    );
    assert_eq!(
        stderr,
        "mlkube: error: `imageRegistry` is an environment's, not a component's\nhint: mlkube \
         param set global imageRegistry <registry>/<path> --env <env>\n"
    );
    assert_eq!(
        snapshot_files(&app),
        files,
        "a refused value writes nothing"
    );

    let text = read(&app, "environments/prod/params.libsonnet").replacen(
        "global: {}",
        "global: { imageRegistry: 'Registry.local:5000/Team' }",
        1,
    );
    write(&app, "environments/prod/params.libsonnet", &text);
    let stderr = fails(&app, &["show", "prod"]);
    assert!(
        stderr.starts_with(
            "mlkube: error: `imageRegistry` in environments/prod/params.libsonnet: \
             `Registry.local:5000/Team` is not <registry>/<path>: `Team` in the path"
        ),
        "{stderr}"
    );
    ok(
        &app,
        &[
            "param",
            "set",
            "global",
            "imageRegistry",
            "null",
            "--env",
            "prod",
        ],
    );
    assert!(!ok(&app, &["show", "prod"]).contains("Registry.local"));
}

// ---------------------------------------------------------------------------------------------
// An environment's `defaults` (issue 49: local's defaults fit a 2-core node)

/// The words of a command line, for the arguments of [`ok`] and [`fails`].
fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// The CPU request of every replica type of the TFJob `component` renders in `env`.
fn tf_job_cpu(app: &Path, env: &str, component: &str) -> Vec<(String, Value)> {
    let out = ok(app, &["show", env, "-c", component, "-o", "json"]);
    let list: Value = serde_json::from_str(&out).unwrap();
    let job = find(list["items"].as_array().unwrap(), "TFJob", component).clone();
    job["spec"]["tfReplicaSpecs"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(replica_type, spec)| {
            let container = &spec["template"]["spec"]["containers"][0];
            let cpu = container["resources"]["requests"]["cpu"].clone();
            (replica_type.clone(), cpu)
        })
        .collect()
}

fn workers(cpu: &str) -> Vec<(String, Value)> {
    vec![("Worker".to_owned(), cpu.into())]
}

/// The row of `component.param` in the listing of `param list <args> -o json`.
fn param_row(app: &Path, args: &str, component: &str, param: &str) -> Value {
    let rows: Value =
        serde_json::from_str(&ok(app, &words(&format!("param list {args} -o json")))).unwrap();
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["component"] == component && r["param"] == param)
        .cloned()
        .unwrap_or_else(|| panic!("no row {component}.{param} in {rows}"))
}

#[test]
fn local_defaults_give_jobs_added_later_a_small_cpu_request_below_what_the_app_sets() {
    let (_tmp, app) = new_app(&[]);
    ok(&app, &words("component add tf-job train --param image=x:1"));
    assert_eq!(tf_job_cpu(&app, "local", "train"), workers("100m"));
    assert_eq!(
        tf_job_cpu(&app, "prod", "train"),
        workers("500m"),
        "the prototype's"
    );
    assert_eq!(
        param_row(&app, "train --env local", "train", "cpuRequest"),
        json!({"component": "train", "param": "cpuRequest", "value": "100m", "source": "env defaults"})
    );
    // The environment's own setting is listed, as what the components added later take.
    assert_eq!(
        param_row(&app, "--env local", "defaults", "cpuRequest"),
        json!({"component": "defaults", "param": "cpuRequest", "value": "100m", "source": "env defaults"})
    );
    let diff = differs(&app, &words("param diff local prod"));
    for row in [
        r#"defaults cpuRequest "100m" -"#,
        r#"train cpuRequest "100m" "500m""#,
    ] {
        assert!(
            diff.lines().any(|l| words(l) == words(row)),
            "{row} in\n{diff}"
        );
    }

    // A value the app sets for the component beats the environment's default.
    ok(
        &app,
        &words("component add tf-job t2 --param image=x:1 --param cpuRequest=2"),
    );
    assert_eq!(tf_job_cpu(&app, "local", "t2"), workers("2"));
    // So do the environment's entry for the component and its `global`.
    ok(&app, &words("param set train cpuRequest 250m --env local"));
    ok(&app, &words("param set global cpuRequest 300m --env local"));
    assert_eq!(tf_job_cpu(&app, "local", "train"), workers("250m"));
    assert_eq!(tf_job_cpu(&app, "local", "t2"), workers("300m"));
}

#[test]
fn param_set_defaults_needs_an_environment_and_a_value_every_prototype_takes() {
    let (_tmp, app) = new_app(&[]);
    let before = snapshot_files(&app);
    assert_eq!(
        fails(&app, &words("param set defaults cpuRequest 200m")),
        "mlkube: error: `defaults` are an environment's: they replace the prototypes' defaults \
         there, and components/params.libsonnet has none\nhint: mlkube param set defaults \
         cpuRequest <value> --env <env>\n"
    );
    assert_eq!(
        fails(&app, &words("param set defaults cpuRequst 200m --env dev")),
        "mlkube: error: no prototype declares a param `cpuRequst`, so a default would change \
         nothing\nhint: `mlkube prototype describe <prototype>` lists a prototype's params\n"
    );
    // Checked against every prototype that declares it, those no component is made of too.
    let stderr = fails(
        &app,
        &words("param set defaults workerReplicas -1 --env dev"),
    );
    assert!(
        stderr.starts_with("mlkube: error: the ")
            && stderr.contains(
                " prototype (environment `dev`): default for param `workerReplicas` must be"
            ),
        "{stderr}"
    );
    assert_eq!(
        fails(&app, &words("component add tf-job defaults")),
        "mlkube: error: `defaults` cannot name a component: `mlkube param set defaults ...` sets \
         an environment's defaults\n"
    );
    assert_eq!(snapshot_files(&app), before, "refused edits wrote nothing");

    let run = mlkube(&app, &words("param set defaults cpuRequest 200m --env dev"));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        "Set defaults.cpuRequest = '200m' in environments/dev/params.libsonnet.\n"
    );
    let dev = read(&app, "environments/dev/params.libsonnet");
    assert!(
        dev.contains("  defaults: {\n    cpuRequest: '200m',\n  },\n"),
        "{dev}"
    );
    ok(&app, &words("component add tf-job train --param image=x:1"));
    assert_eq!(tf_job_cpu(&app, "dev", "train"), workers("200m"));
}

#[test]
fn defaults_of_a_wrong_type_or_shape_are_errors_naming_the_file() {
    let (_tmp, app) = new_app(&["--empty"]);
    ok(&app, &words("component add tf-job train --param image=x:1"));
    let file = "environments/local/params.libsonnet";
    let text = read(&app, file);
    let with = |defaults: &str| {
        text.replacen(
            "global: {},",
            &format!("global: {{}}, defaults: {defaults},"),
            1,
        )
    };
    write(&app, file, &with("{ cpuRequest: true }"));
    let stderr = fails(&app, &["show", "local"]);
    assert!(
        stderr.starts_with(
            "mlkube: error: component `train` (environment `local`): default for param \
             `cpuRequest` must be a quantity"
        ) && stderr.contains("got true (set in environments/local/params.libsonnet)"),
        "{stderr}"
    );
    write(&app, file, &with("'small'"));
    assert!(fails(&app, &["show", "local"]).starts_with(
        "mlkube: error: environments/local/params.libsonnet: `defaults` must be an object\n\
             hint: a params file evaluates to { global: { <param>: <value> }, components: { \
             <component>: { <param>: <value> } } }; an environment's may also have defaults: { \
             <param>: <value> }\n"
    ));
    write(&app, file, &text);
    let params = read(&app, "components/params.libsonnet");
    let app_wide = params.replacen(
        "global: {},",
        "global: {}, defaults: { cpuRequest: '1' },",
        1,
    );
    write(&app, "components/params.libsonnet", &app_wide);
    let stderr = fails(&app, &["show", "local"]);
    assert!(
        stderr.starts_with(
            "mlkube: error: components/params.libsonnet: `defaults` belong in an environment's \
             params file"
        ),
        "{stderr}"
    );
}

#[test]
fn a_component_named_defaults_is_still_set_by_its_name() {
    let (_tmp, app) = new_app(&["--empty"]);
    write(
        &app,
        "components/defaults.jsonnet",
        "local c = import 'mlkube/component.libsonnet';\n{ apiVersion: 'v1', kind: 'ConfigMap', \
         metadata: { name: c.name }, data: { greeting: c.params.greeting } }\n",
    );
    ok(&app, &words("param set defaults greeting hi"));
    ok(&app, &words("param set defaults greeting yo --env local"));
    let params = read(&app, "components/params.libsonnet");
    assert!(
        params.contains("components: {\n    defaults: {\n      greeting: 'hi',"),
        "{params}"
    );
    let local = read(&app, "environments/local/params.libsonnet");
    assert!(
        local.contains("components: {\n    defaults: {\n      greeting: 'yo',"),
        "{local}"
    );
    let greeting =
        |env| find(&show_json(&app, env), "ConfigMap", "defaults")["data"]["greeting"].clone();
    assert_eq!(greeting("local"), "yo");
    assert_eq!(greeting("dev"), "hi");
}
