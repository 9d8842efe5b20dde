//! The embedded component library, without a cluster: each prototype's output with its default
//! params (snapshots), the shape of every prototype's params, the shipped environments, and the
//! errors a bad value gives.
//!
//! Prototypes are evaluated with mlkube's own Jsonnet evaluator and library resolver, from a
//! small driver file that calls `render` with the declared defaults, so these tests see exactly
//! what the binary embeds.

use std::path::Path;

use mlkube::render::jsonnet::Evaluator;
use serde_json::{Value, json};

const PROTOTYPES: [&str; 24] = [
    "training-operator",
    "profile",
    "notebook-hub",
    "object-store",
    "serving",
    "inference-service",
    "volume-controller",
    "gateway",
    "tf-job",
    "tf-job-sweep",
    "pytorch-job",
    "jax-job",
    "xgboost-job",
    "paddle-job",
    "mxnet-job",
    "pytorch-job-sweep",
    "jax-job-sweep",
    "xgboost-job-sweep",
    "paddle-job-sweep",
    "mxnet-job-sweep",
    "mpi-job",
    "mpi-job-sweep",
    "framework",
    "framework-sweep",
];
/// A training-job prototype of a framework other than TensorFlow, as `src/operator/training/frameworks/`
/// reads its job: the kind, the replica specs field, the container and its port (name and
/// number), and the replica types its defaults render.
struct JobPrototype {
    name: &'static str,
    kind: &'static str,
    replica_specs: &'static str,
    container: &'static str,
    port_name: &'static str,
    port: i64,
    types: &'static [&'static str],
}

const JOB_PROTOTYPES: [JobPrototype; 5] = [
    JobPrototype {
        name: "pytorch-job",
        kind: "PyTorchJob",
        replica_specs: "pytorchReplicaSpecs",
        container: "pytorch",
        port_name: "pytorchjob-port",
        port: 23456,
        types: &["Master", "Worker"],
    },
    JobPrototype {
        name: "jax-job",
        kind: "JAXJob",
        replica_specs: "jaxReplicaSpecs",
        container: "jax",
        port_name: "jaxjob-port",
        port: 6666,
        types: &["Worker"],
    },
    JobPrototype {
        name: "xgboost-job",
        kind: "XGBoostJob",
        replica_specs: "xgbReplicaSpecs",
        container: "xgboost",
        port_name: "xgboostjob-port",
        port: 9999,
        types: &["Master", "Worker"],
    },
    JobPrototype {
        name: "paddle-job",
        kind: "PaddleJob",
        replica_specs: "paddleReplicaSpecs",
        container: "paddle",
        port_name: "master",
        port: 36543,
        types: &["Worker"],
    },
    JobPrototype {
        name: "mxnet-job",
        kind: "MXJob",
        replica_specs: "mxReplicaSpecs",
        container: "mxnet",
        port_name: "mxjob-port",
        port: 9091,
        types: &["Scheduler", "Server", "Worker"],
    },
];
const ENVIRONMENTS: [&str; 3] = ["local", "dev", "prod"];
const TYPES: [&str; 8] = [
    "string", "integer", "number", "boolean", "array", "object", "quantity", "image",
];

/// Evaluate `source` as a file of a throwaway app that sees the embedded library.
fn evaluate(source: &str) -> Result<Value, String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("driver.jsonnet"), source).expect("write the driver");
    Evaluator::new(dir.path())
        .evaluate("driver.jsonnet")
        .map_err(|e| e.to_string())
}

/// Render `prototype` as the instance `name` with its defaults plus `overrides`, in namespace
/// `kubeflow`.
fn render(prototype: &str, name: &str, overrides: &Value) -> Result<Value, String> {
    evaluate(&format!(
        "local p = import 'mlkube/{prototype}.libsonnet';\n\
         local defaults = {{ [k]: p.params[k].default for k in std.objectFields(p.params) }};\n\
         p.render(defaults + {{ name: '{name}' }} + {overrides}, \
                  {{ name: 'default', namespace: 'kubeflow', server: null }})\n"
    ))
}

fn prototype(name: &str) -> Value {
    evaluate(&format!(
        "local p = import 'mlkube/{name}.libsonnet'; {{ name: p.name, description: p.description, params: p.params }}"
    ))
    .unwrap_or_else(|e| panic!("evaluating prototype {name}: {e}"))
}

/// What a snapshot shows: the objects, with each CRD (embedded verbatim from `crds/`, whose
/// owners have their own tests) replaced by a pointer to its file once it is checked to match.
fn snapshot_view(objects: Value) -> Value {
    let Value::Array(objects) = objects else {
        panic!("render gives an array")
    };
    let view = objects
        .into_iter()
        .map(|object| {
            if object["kind"] != "CustomResourceDefinition" {
                return object;
            }
            let name = object["metadata"]["name"].as_str().expect("a CRD has a name").to_owned();
            let file = format!("crds/{name}.yaml");
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(&file);
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let on_disk: Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert!(
                same_json(&object, &on_disk),
                "the rendered CRD {name} differs from {file}"
            );
            json!({ "apiVersion": object["apiVersion"], "kind": object["kind"], "metadata": object["metadata"], "spec": format!("(as in {file})") })
        })
        .collect();
    Value::Array(view)
}

/// JSON equality where numbers compare by value: Jsonnet has only doubles, so `minimum: 0.0` in a
/// YAML file comes back as `0`.
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

fn kinds_and_names(objects: &Value) -> Vec<String> {
    objects
        .as_array()
        .expect("render gives an array")
        .iter()
        .map(|o| {
            format!(
                "{} {}",
                o["kind"].as_str().unwrap_or("?"),
                o["metadata"]["name"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

#[test]
fn training_operator_with_default_params() {
    let objects = render("training-operator", "training-operator", &json!({})).unwrap();
    insta::assert_yaml_snapshot!(snapshot_view(objects));
}

/// A renamed prototype's old name, as apps made before the rename import it, renders what its
/// new name renders, and describes the same params.
#[test]
fn an_old_prototype_name_renders_what_its_new_name_renders() {
    for (old, name) in mlkube::render::library::RENAMED {
        for overrides in [json!({}), json!({ "minAvailable": 0 })] {
            assert_eq!(
                render(old, "instance", &overrides).unwrap(),
                render(name, "instance", &overrides).unwrap(),
                "{old} {overrides}"
            );
        }
        assert_eq!(prototype(old), prototype(name), "{old}");
    }
}

#[test]
fn notebook_hub_with_default_params() {
    let objects = render("notebook-hub", "notebook-hub", &json!({})).unwrap();
    insta::assert_yaml_snapshot!(snapshot_view(objects));
}

#[test]
fn notebook_hub_liveness_waits_for_the_start_and_readiness_is_probed_every_few_seconds() {
    let objects = render("notebook-hub", "notebook-hub", &json!({})).unwrap();
    let hub_set = objects
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "StatefulSet")
        .expect("the hub's StatefulSet");
    let containers = &hub_set["spec"]["template"]["spec"]["containers"];
    let hub = &containers[0];
    let startup = &hub["startupProbe"];
    assert_eq!(startup["httpGet"]["path"], "/hub/health");
    let allowed =
        startup["periodSeconds"].as_i64().unwrap() * startup["failureThreshold"].as_i64().unwrap();
    assert!(
        allowed >= 300,
        "a start that migrates the database gets 5 minutes, not {allowed} s"
    );
    assert!(
        hub["livenessProbe"]["initialDelaySeconds"].is_null(),
        "the startup probe, not a guessed delay, holds liveness back: {hub}"
    );
    for container in containers.as_array().unwrap() {
        let period = container["readinessProbe"]["periodSeconds"]
            .as_i64()
            .unwrap();
        assert!(
            period <= 2,
            "{} turns Ready within seconds of starting, probed every {period} s",
            container["name"]
        );
    }
}

#[test]
fn notebook_hub_stops_servers_at_shutdown_unless_its_database_outlives_the_pod() {
    for (overrides, volume, stops) in [
        (json!({ "authenticator": "dummy" }), false, true),
        (json!({}), true, false),
    ] {
        let objects = render("notebook-hub", "notebook-hub", &overrides).unwrap();
        let objects = objects.as_array().unwrap();
        let of_kind = |kind: &str| objects.iter().find(|o| o["kind"] == kind).unwrap();
        let settings = of_kind("ConfigMap")["data"]["settings.json"]
            .as_str()
            .unwrap();
        let settings: Value = serde_json::from_str(settings).unwrap();
        assert_eq!(settings["stopServersAtShutdown"], stops, "{overrides}");
        let hub_set = &of_kind("StatefulSet")["spec"];
        assert_eq!(
            hub_set["volumeClaimTemplates"].is_array(),
            volume,
            "{overrides}"
        );
        let volumes = hub_set["template"]["spec"]["volumes"].as_array().unwrap();
        let empty_state = volumes
            .iter()
            .any(|v| v["name"] == "state" && v["emptyDir"].is_object());
        assert_eq!(empty_state, !volume, "{overrides}");
    }
}

/// Users log in with FirstUseAuthenticator unless told otherwise: a name's first password becomes
/// its own, kept beside the hub's database on its volume, which firstuse always gets (1Gi unless
/// hubDbStorage says): in an emptyDir a restart would forget every password, and the next to log
/// in as a user would take their name.
#[test]
fn notebook_hub_keeps_each_users_first_password_on_its_volume() {
    for (overrides, authenticator, volume) in [
        (json!({}), "firstuse", Some("1Gi")),
        (json!({ "hubDbStorage": "5Gi" }), "firstuse", Some("5Gi")),
        (json!({ "authenticator": "dummy" }), "dummy", None),
        (json!({ "authenticator": "header" }), "header", None),
    ] {
        let objects = render("notebook-hub", "notebook-hub", &overrides).unwrap();
        let objects = objects.as_array().unwrap();
        let of_kind = |kind: &str| objects.iter().find(|o| o["kind"] == kind).unwrap();
        let data = &of_kind("ConfigMap")["data"];
        let settings: Value =
            serde_json::from_str(data["settings.json"].as_str().unwrap()).unwrap();
        assert_eq!(settings["authenticator"], authenticator, "{overrides}");
        let config = data["jupyterhub_config.py"].as_str().unwrap();
        assert!(
            config.contains(
                "c.FirstUseAuthenticator.dbm_path = os.path.join(STATE_DIR, \"passwords\")"
            ),
            "the passwords are kept in the hub's state directory"
        );
        let claim = &of_kind("StatefulSet")["spec"]["volumeClaimTemplates"][0];
        assert_eq!(
            claim["spec"]["resources"]["requests"]["storage"].as_str(),
            volume,
            "{overrides}"
        );
    }
}

/// `allowedUsers` reaches the hub's settings as listed (null lets in any name), and a list the
/// hub could not use is refused at render, naming the param.
#[test]
fn notebook_hub_lets_in_only_the_names_it_lists() {
    let settings = |overrides: Value| {
        let objects = render("notebook-hub", "notebook-hub", &overrides).unwrap();
        let config = objects
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["kind"] == "ConfigMap");
        let data = &config.unwrap()["data"];
        serde_json::from_str::<Value>(data["settings.json"].as_str().unwrap()).unwrap()
    };
    assert_eq!(settings(json!({}))["allowedUsers"], Value::Null);
    let listed = settings(json!({ "allowedUsers": ["ada", "grace"] }));
    assert_eq!(listed["allowedUsers"], json!(["ada", "grace"]));
    for users in [
        json!([]),
        json!(["ada", ""]),
        json!(["ada lovelace"]),
        json!(["ada,grace"]),
    ] {
        let error = render("notebook-hub", "hub", &json!({ "allowedUsers": users })).unwrap_err();
        assert!(
            error.contains(
                "param allowedUsers: must list user names (at least one, no spaces or commas)"
            ),
            "{users}: {error}"
        );
        // The list as given, on the error's one line.
        assert!(error.contains(&format!("got {users}")), "{users}: {error}");
    }
}

/// With `invitationsSecret` the hub mounts that Secret (never rendering it: the administrator
/// makes it) and its config knows where, so a new name logs in first only with its invitation;
/// only `firstuse` sets a password at a first login, so another authenticator is refused.
#[test]
fn notebook_hub_reads_invitations_from_the_secret_it_is_given() {
    let params = json!({ "invitationsSecret": "hub-invitations" });
    let objects = render("notebook-hub", "notebook-hub", &params).unwrap();
    let find = |kind: &str| {
        let objects = objects.as_array().unwrap().iter();
        objects.filter(|o| o["kind"] == kind).collect::<Vec<_>>()
    };
    assert!(find("Secret").is_empty(), "{:?}", kinds_and_names(&objects));
    let config = &find("ConfigMap")[0]["data"];
    let settings: Value = serde_json::from_str(config["settings.json"].as_str().unwrap()).unwrap();
    let dir = "/etc/mlkube/hub-invitations";
    assert_eq!(settings["invitationsDir"], dir);
    let pod = &find("StatefulSet")[0]["spec"]["template"]["spec"];
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "invitations");
    let secret = json!({ "secretName": "hub-invitations", "optional": true, "defaultMode": 288 });
    assert_eq!(volume.unwrap()["secret"], secret, "{}", pod["volumes"]);
    let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
    let mount = json!({ "name": "invitations", "mountPath": dir, "readOnly": true });
    assert!(mounts.contains(&mount), "{mounts:?}");

    let none = render("notebook-hub", "notebook-hub", &json!({})).unwrap();
    assert!(
        !none.to_string().contains("invitations\""),
        "no invitations without the param"
    );
    for authenticator in ["dummy", "header"] {
        let params =
            json!({ "invitationsSecret": "hub-invitations", "authenticator": authenticator });
        let error = render("notebook-hub", "hub", &params).unwrap_err();
        let why = "param invitationsSecret: needs authenticator 'firstuse'";
        assert!(error.contains(why), "{authenticator}: {error}");
        assert!(
            error.contains(&format!("got authenticator \"{authenticator}\"")),
            "{error}"
        );
    }
    // A listed name that no Secret key can hold could never be invited.
    let users = json!(["Ada", "grace.hopper", "alan@example.com", "..x"]);
    let params = json!({ "invitationsSecret": "hub-invitations", "allowedUsers": users });
    let error = render("notebook-hub", "hub", &params).unwrap_err();
    let why =
        "param allowedUsers: with invitationsSecret every name must be one a Secret's key can hold";
    assert!(error.contains(why), "{error}");
    assert!(
        error.contains(r#"got ["alan@example.com","..x"]"#),
        "{error}"
    );
}

#[test]
fn serving_with_default_params() {
    let objects = render("serving", "mnist", &json!({})).unwrap();
    insta::assert_yaml_snapshot!(snapshot_view(objects));
}

#[test]
fn object_store_with_default_params() {
    let objects = render("object-store", "object-store", &json!({})).unwrap();
    insta::assert_yaml_snapshot!(snapshot_view(objects));
}

/// The credentials are never rendered (so `show` and `diff` cannot print them): the store and
/// its gateway read them from the Secret by reference, and only the init container that makes
/// them may create Secrets.
#[test]
fn object_store_renders_no_credentials_and_reads_them_by_reference() {
    let objects = render("object-store", "store", &json!({})).unwrap();
    assert!(
        !kinds_and_names(&objects)
            .iter()
            .any(|k| k.starts_with("Secret ")),
        "{:?}",
        kinds_and_names(&objects)
    );
    let store = objects
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "StatefulSet")
        .unwrap();
    for container in store["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
    {
        let env = container["env"].as_array().unwrap();
        if container["name"] == "model-keys" {
            // It makes keys for jobs; it never holds the administrator's.
            assert!(
                !env.iter()
                    .any(|v| v["name"].as_str().unwrap().starts_with("AWS_")),
                "{env:?}"
            );
            continue;
        }
        for key in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
            let var = env.iter().find(|v| v["name"] == key).unwrap();
            assert_eq!(
                var["valueFrom"]["secretKeyRef"]["name"],
                "store-credentials"
            );
            assert!(var.get("value").is_none(), "{key} has a literal value");
        }
    }
    let init = &store["spec"]["template"]["spec"]["initContainers"][0];
    assert_eq!(
        init["command"],
        json!(["python3", "/scripts/credentials.py"])
    );
    let endpoint = objects
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["metadata"]["name"] == "store-endpoint")
        .unwrap();
    assert_eq!(
        endpoint["data"]["AWS_ENDPOINT_URL"],
        "http://store.kubeflow.svc:8333"
    );
    assert_eq!(
        endpoint["data"]["S3_CREDENTIALS_SECRET"],
        "store-credentials"
    );
    assert_eq!(endpoint["data"]["S3_BUCKETS"], "data,models");
}

/// With an external endpoint nothing is deployed: the connection details point there, with
/// the user's Secret, and the user's Secret is only read, never created.
#[test]
fn object_store_writers_get_keys_of_their_own_for_their_prefixes_only() {
    let objects = render(
        "object-store",
        "store",
        &json!({ "writers": { "digits-v1": ["models/digits/v1/"], "uploads": ["data/digits", "data/other"] } }),
    )
    .unwrap();
    let role = object_of(&objects, "Role");
    assert_eq!(
        role["rules"][0]["resourceNames"],
        json!([
            "store-credentials",
            "store-read-credentials",
            "store-writer-digits-v1",
            "store-writer-uploads"
        ])
    );
    let init = &object_of(&objects, "StatefulSet")["spec"]["template"]["spec"]["initContainers"][0];
    let writers = init["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "WRITERS")
        .unwrap();
    let writers: Value = serde_json::from_str(writers["value"].as_str().unwrap()).unwrap();
    assert_eq!(
        writers,
        json!({ "store-writer-digits-v1": ["models/digits/v1"], "store-writer-uploads": ["data/digits", "data/other"] })
    );
    let error = render(
        "object-store",
        "store",
        &json!({ "writers": { "digits-v1": ["datasets/digits"] } }),
    )
    .unwrap_err();
    assert!(
        error.contains("param writers: prefix \"datasets/digits\" of digits-v1 is in no bucket of the store (data, models)"),
        "{error}"
    );
}

/// A job's own keys are made only in `jobBuckets` (the model-keys container reads them); the
/// store's init container makes no keys that write in a whole bucket.
#[test]
fn object_store_makes_jobs_keys_only_in_the_job_buckets() {
    let env = |objects: &Value, container: &str| {
        let pod = &object_of(objects, "StatefulSet")["spec"]["template"]["spec"];
        let init = pod["initContainers"].as_array().unwrap().iter();
        let all: Vec<&Value> = init.chain(pod["containers"].as_array().unwrap()).collect();
        let found = all.iter().find(|c| c["name"] == container);
        found.unwrap_or_else(|| panic!("{container} in {pod}"))["env"].clone()
    };
    let value = |env: &Value, name: &str| {
        let found = env.as_array().unwrap().iter().find(|e| e["name"] == name);
        found.map(|e| e["value"].clone())
    };
    let defaults = render("object-store", "store", &json!({})).unwrap();
    let keys = env(&defaults, "model-keys");
    assert_eq!(value(&keys, "JOB_BUCKETS"), Some(json!(r#"["models"]"#)));
    let credentials = env(&defaults, "credentials");
    for name in ["JOB_SECRET_NAME", "JOB_BUCKETS"] {
        assert_eq!(value(&credentials, name), None, "{credentials}");
    }
    let both = json!({ "jobBuckets": ["models", "data"] });
    let both = env(
        &render("object-store", "store", &both).unwrap(),
        "model-keys",
    );
    assert_eq!(
        value(&both, "JOB_BUCKETS"),
        Some(json!(r#"["models","data"]"#))
    );
    let error = render("object-store", "store", &json!({ "jobBuckets": ["model"] })).unwrap_err();
    assert!(
        error.contains("param jobBuckets: \"model\" is not a bucket of the store (data, models)"),
        "{error}"
    );
}

#[test]
fn object_store_with_an_external_endpoint_deploys_nothing() {
    let objects = render(
        "object-store",
        "store",
        &json!({ "endpoint": "https://s3.example.com", "credentialsSecret": "s3-keys" }),
    )
    .unwrap();
    assert_eq!(kinds_and_names(&objects), ["ConfigMap store-endpoint"]);
    assert_eq!(objects[0]["data"]["S3_ENDPOINT"], "https://s3.example.com");
    assert_eq!(objects[0]["data"]["S3_CREDENTIALS_SECRET"], "s3-keys");
    let own = render(
        "object-store",
        "store",
        &json!({ "credentialsSecret": "s3-keys" }),
    )
    .unwrap();
    let role = own
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "Role")
        .unwrap();
    // Your keys are only read; the read-only ones the store makes beside them (and annotates).
    assert_eq!(
        role["rules"],
        json!([
            { "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["s3-keys", "store-read-credentials"], "verbs": ["get"] },
            { "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["store-read-credentials"], "verbs": ["patch"] },
            { "apiGroups": [""], "resources": ["secrets"], "verbs": ["create"] },
            { "apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"] },
            { "apiGroups": [""], "resources": ["events"], "verbs": ["create"] },
            { "apiGroups": ["kubeflow.org"], "resources": ["tfjobs", "pytorchjobs", "mxjobs", "xgboostjobs", "mpijobs", "paddlejobs", "jaxjobs"], "verbs": ["get"] },
        ])
    );
}

#[test]
fn volume_controller_with_default_params() {
    let objects = render("volume-controller", "volume-controller", &json!({})).unwrap();
    insta::assert_yaml_snapshot!(snapshot_view(objects));
}

#[test]
fn profile_with_default_params() {
    let objects = render("profile", "alice", &json!({})).unwrap();
    insta::assert_yaml_snapshot!(snapshot_view(objects));
}

#[test]
fn a_profile_says_which_param_is_wrong() {
    for (overrides, says) in [
        (
            json!({ "owner": "" }),
            "param owner: must name who the profile is for",
        ),
        (
            json!({ "ownerKind": "ServiceAccount", "owner": "alice" }),
            "param owner: a ServiceAccount owner is namespace:name",
        ),
        (
            json!({ "allowedServiceAccounts": ["default"] }),
            "param allowedServiceAccounts: must hold serviceAccount \"default-editor\"",
        ),
        (
            json!({ "allowedServiceAccounts": ["a,b", "default-editor"] }),
            "names must be non-empty and without commas",
        ),
    ] {
        let error = render("profile", "alice", &overrides).unwrap_err();
        assert!(error.contains(says), "{overrides}: {error}");
    }
    let error = render("profile", "alice", &json!({ "notebookHub": "hub" })).unwrap_err();
    assert!(
        error.contains("param notebookHub: is namespace/name"),
        "{error}"
    );
    let quota = render(
        "profile",
        "alice",
        &json!({ "cpuQuota": "4", "podQuota": 20 }),
    )
    .unwrap();
    let quota = quota
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "ResourceQuota")
        .expect("a ResourceQuota");
    assert_eq!(
        quota["spec"]["hard"],
        json!({ "requests.cpu": "4", "pods": 20 })
    );
}

/// In its own namespace, beside the platform's ServiceAccounts, the hub starts pods only as
/// the notebooks' ServiceAccount and a notebook starts jobs only as `default`: an admission
/// rule of that namespace alone, for those two identities alone.
#[test]
fn a_hub_and_its_notebooks_start_nothing_as_the_platforms_accounts() {
    let hub = render("notebook-hub", "notebook-hub", &json!({})).unwrap();
    let named = |kind: &str| {
        hub.as_array()
            .unwrap()
            .iter()
            .find(|o| {
                o["kind"] == kind && o["metadata"]["name"] == "kubeflow-notebook-hub-accounts"
            })
            .unwrap_or_else(|| panic!("the hub's {kind}"))
            .clone()
    };
    let policy = named("ValidatingAdmissionPolicy");
    assert_eq!(
        policy["spec"]["matchConditions"][0]["expression"],
        "request.userInfo.username in ['system:serviceaccount:kubeflow:notebook-hub', \
         'system:serviceaccount:kubeflow:notebook-hub-notebook']"
    );
    assert_eq!(
        policy["spec"]["variables"][0]["expression"],
        "request.userInfo.username == 'system:serviceaccount:kubeflow:notebook-hub' \
         ? ['notebook-hub-notebook'] : ['default']"
    );
    let binding = named("ValidatingAdmissionPolicyBinding");
    assert_eq!(
        binding["spec"]["policyName"],
        "kubeflow-notebook-hub-accounts"
    );
    assert_eq!(
        binding["spec"]["matchResources"]["namespaceSelector"],
        json!({ "matchLabels": { "kubernetes.io/metadata.name": "kubeflow" } })
    );
}

/// With userNamespaces the hub spawns only where a profile binds its ClusterRole, and no
/// notebook identity is made in the platform's namespace.
#[test]
fn a_hub_with_user_namespaces_is_let_in_by_each_profile() {
    let hub = render(
        "notebook-hub",
        "notebook-hub",
        &json!({ "userNamespaces": true }),
    )
    .unwrap();
    let kinds: Vec<String> = hub
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        kinds.contains(&"ClusterRole/kubeflow-notebook-hub-spawner".to_owned()),
        "{kinds:?}"
    );
    assert!(
        !kinds.iter().any(|k| k.starts_with("Role/")
            || k.contains("notebook-hub-notebook")
            || k.starts_with("ValidatingAdmissionPolicy")),
        "{kinds:?}"
    );
    let profile = render(
        "profile",
        "ada",
        &json!({ "notebookHub": "kubeflow/notebook-hub" }),
    )
    .unwrap();
    let binding = profile
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "RoleBinding" && o["metadata"]["name"] == "notebook-hub-spawner")
        .expect("the hub's RoleBinding");
    assert_eq!(binding["roleRef"]["name"], "kubeflow-notebook-hub-spawner");
    assert_eq!(binding["metadata"]["namespace"], "ada");
}

#[test]
fn tf_job_with_default_params() {
    let objects = render("tf-job", "mnist", &json!({})).unwrap();
    insta::assert_yaml_snapshot!(snapshot_view(objects));
}

/// The store's endpoint and keys, where to save the model and which VolumeManager to read:
/// params of every job prototype, a sweep's jobs each saving under their own name. A job that
/// saves a model with no keys of its own requests keys for its modelPath alone.
#[test]
fn a_job_reads_placed_data_and_saves_its_model_from_params() {
    let params = json!({
        "objectStore": "object-store", "modelPath": "models/digits/1",
        "dataVolumeManager": "digits-data", "workerReplicas": 2,
    });
    let objects = render("tf-job", "digits", &params).unwrap();
    let job = &objects.as_array().unwrap()[0];
    assert_eq!(
        job["metadata"]["annotations"]["data.mlkube.io/volume-manager"],
        "digits-data"
    );
    let container = &job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["envFrom"],
        json!([
            { "configMapRef": { "name": "object-store-endpoint" } },
            { "secretRef": { "name": "digits-model-keys" } },
        ])
    );
    assert_eq!(
        container["env"],
        json!([{ "name": "MODEL_URI", "value": "s3://models/digits/1/" }])
    );
    let request = &objects.as_array().unwrap()[1];
    assert_eq!(request["kind"], "ConfigMap");
    assert_eq!(request["metadata"]["name"], "digits-model-keys");
    assert_eq!(
        request["metadata"]["labels"]["mlkube.io/object-store"],
        "object-store"
    );
    let named = r#"[{"apiVersion":"kubeflow.org/v1","kind":"TFJob","name":"digits","path":"models/digits/1"}]"#;
    assert_eq!(
        request["data"],
        json!({ "prefix": "models/digits/1", "jobs": named }),
        "it names its jobs: once they succeeded, the keys no longer write"
    );
    assert_eq!(
        request["metadata"]["annotations"]["mlkube.io/answered-by-secret"], "digits-model-keys",
        "apply waits for the Secret that answers it"
    );
    let no_model = json!({ "objectStore": "object-store" });
    let objects = render("pytorch-job", "reader", &no_model).unwrap();
    assert_eq!(objects.as_array().unwrap().len(), 1, "no model, no request");
    let master = &objects[0]["spec"]["pytorchReplicaSpecs"]["Master"];
    assert_eq!(
        master["template"]["spec"]["containers"][0]["envFrom"][1]["secretRef"]["name"],
        "object-store-read-credentials",
        "a job that saves no model only reads"
    );

    let own_keys = json!({ "objectStore": "s3", "objectStoreCredentials": "my-keys" });
    let objects = render("xgboost-job", "x", &own_keys).unwrap();
    let master = &objects.as_array().unwrap()[0]["spec"]["xgbReplicaSpecs"]["Master"];
    let container = &master["template"]["spec"]["containers"][0];
    assert_eq!(container["envFrom"][1]["secretRef"]["name"], "my-keys");
    assert_eq!(container["env"], Value::Null, "no model path, no MODEL_URI");
    let own_keys = json!({ "objectStore": "s3", "modelPath": "models/x/1", "objectStoreCredentials": "my-keys" });
    let objects = render("xgboost-job", "x", &own_keys).unwrap();
    assert_eq!(objects.as_array().unwrap().len(), 1, "own keys, no request");

    let sweep = json!({ "objectStore": "object-store", "modelPath": "models/sweep/1" });
    let objects = render("tf-job-sweep", "sweep", &sweep).unwrap();
    let (requests, jobs): (Vec<&Value>, Vec<&Value>) = objects
        .as_array()
        .unwrap()
        .iter()
        .partition(|o| o["kind"] == "ConfigMap");
    assert_eq!(requests.len(), 1, "one request for the sweep's jobs");
    assert_eq!(requests[0]["metadata"]["name"], "sweep-model-keys");
    assert_eq!(requests[0]["data"]["prefix"], "models/sweep/1");
    let named: Vec<Value> = serde_json::from_str(requests[0]["data"]["jobs"].as_str().unwrap())
        .expect("the jobs, as JSON");
    let uris: std::collections::BTreeSet<String> = jobs
        .iter()
        .map(|job| {
            let name = job["metadata"]["name"].as_str().unwrap();
            let env = &job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
                ["env"];
            let uri = env
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == "MODEL_URI")
                .unwrap();
            assert_eq!(uri["value"], format!("s3://models/sweep/1/{name}/"));
            name.to_owned()
        })
        .collect();
    assert_eq!(uris.len(), jobs.len(), "one path per job");
    let names: std::collections::BTreeSet<String> = named
        .iter()
        .map(|job| {
            let name = job["name"].as_str().unwrap();
            assert_eq!(
                job["path"],
                format!("models/sweep/1/{name}"),
                "as its MODEL_URI"
            );
            name.to_owned()
        })
        .collect();
    assert_eq!(names, uris, "the request names each of the sweep's jobs");
}

#[test]
fn tf_job_sweep_with_default_params() {
    let objects = render("tf-job-sweep", "sweep", &json!({})).unwrap();
    insta::assert_yaml_snapshot!(snapshot_view(objects));
}

#[test]
fn serving_canary_behind_istio() {
    let objects = render(
        "serving",
        "mnist",
        &json!({ "trafficRule": "v1:90,v2:10", "istio": true, "versionModelBasePaths": { "v2": "s3://models/mnist-v2" } }),
    )
    .unwrap();
    assert_eq!(
        kinds_and_names(&objects),
        [
            "ConfigMap mnist-config",
            "Service mnist",
            "Deployment mnist-v1",
            "Deployment mnist-v2",
            "PodDisruptionBudget mnist-v1",
            "PodDisruptionBudget mnist-v2",
            "DestinationRule mnist",
            "VirtualService mnist",
        ]
    );
    let items = objects.as_array().unwrap();
    let route = &items[7]["spec"]["http"][0]["route"];
    assert_eq!(route[0]["weight"], 90);
    assert_eq!(route[0]["destination"]["subset"], "v1");
    assert_eq!(route[1]["weight"], 10);
    assert_eq!(route[1]["destination"]["subset"], "v2");
    let v2_args = items[3]["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap();
    assert!(
        v2_args.contains(&json!("--model_base_path=s3://models/mnist-v2")),
        "{v2_args:?}"
    );
    assert_eq!(
        items[3]["spec"]["template"]["metadata"]["labels"]["sidecar.istio.io/inject"],
        "true"
    );
}

#[test]
fn mlserver_canary_through_a_gateway_api_route_serves_each_versions_model_from_the_store() {
    let objects = render(
        "serving",
        "digits",
        &json!({ "runtime": "mlserver", "modelFormat": "xgboost", "trafficRule": "v1:90,v2:10",
                 "modelBasePath": "s3://models/xgboost-digits/{version}/", "objectStore": "object-store",
                 "gateway": "gateway" }),
    )
    .unwrap();
    assert_eq!(
        kinds_and_names(&objects),
        [
            "Service digits",
            "Service digits-v1",
            "Service digits-v2",
            "Deployment digits-v1",
            "Deployment digits-v2",
            "PodDisruptionBudget digits-v1",
            "PodDisruptionBudget digits-v2",
            "HTTPRoute digits",
            "NetworkPolicy digits",
        ]
    );
    let items = objects.as_array().unwrap();
    // Only the gateway's pods reach the servers, on MLServer's ports: nothing else reaches the
    // repository API.
    assert_eq!(
        items[8]["spec"]["ingress"],
        json!([{
            "from": [{
                "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": "kubeflow" } },
                "podSelector": { "matchLabels": { "app.kubernetes.io/instance": "gateway",
                                                  "app.kubernetes.io/name": "gateway" } },
            }],
            "ports": [{ "port": 8080, "protocol": "TCP" }, { "port": 8081, "protocol": "TCP" }],
        }])
    );
    let route = &items[7]["spec"];
    assert_eq!(route["parentRefs"], json!([{ "name": "gateway" }]));
    let rule = &route["rules"][0];
    assert_eq!(rule["matches"][0]["path"]["value"], "/v2/models/digits");
    assert_eq!(
        rule["backendRefs"],
        json!([{ "name": "digits-v1", "port": 8080, "weight": 90 },
               { "name": "digits-v2", "port": 8080, "weight": 10 }])
    );
    assert_eq!(items[2]["spec"]["selector"]["version"], "v2");
    let v2 = &items[4];
    assert_eq!(
        v2["metadata"]["annotations"]["serving.mlkube.io/model-path"],
        "s3://models/xgboost-digits/v2/"
    );
    let pod = &v2["spec"]["template"]["spec"];
    let fetch = &pod["initContainers"][0];
    assert_eq!(fetch["image"], "mlkube/serving:0.1.0");
    let fetch_command = fetch["command"].as_array().unwrap();
    assert!(
        fetch_command.contains(&json!("s3://models/xgboost-digits/v2/")),
        "{fetch_command:?}"
    );
    assert_eq!(
        fetch["envFrom"][0]["configMapRef"]["name"],
        "object-store-endpoint"
    );
    // The store's read-only keys: a server never writes to the store.
    assert_eq!(
        fetch["envFrom"][1]["secretRef"]["name"],
        "object-store-read-credentials"
    );
    let server = &pod["containers"][0];
    let command = server["command"].as_array().unwrap();
    assert!(
        command
            .windows(2)
            .any(|w| w == [json!("--format"), json!("xgboost")]),
        "{command:?}"
    );
    assert!(
        command
            .windows(2)
            .any(|w| w == [json!("--version"), json!("v2")]),
        "{command:?}"
    );
    assert_eq!(
        server["readinessProbe"]["httpGet"]["path"],
        "/v2/models/digits/ready"
    );
    assert!(server["lifecycle"]["preStop"]["sleep"]["seconds"].as_i64() > Some(0));
}

#[test]
fn tensorflow_serving_behind_a_gateway_routes_its_rest_api() {
    let objects = render(
        "serving",
        "mnist",
        &json!({ "gateway": "infra/gateway", "enablePrometheus": false }),
    )
    .unwrap();
    let route = object_of(&objects, "HTTPRoute");
    assert_eq!(route["kind"], "HTTPRoute");
    assert_eq!(
        route["spec"]["parentRefs"],
        json!([{ "namespace": "infra", "name": "gateway" }])
    );
    assert_eq!(
        route["spec"]["rules"][0]["matches"][0]["path"]["value"],
        "/v1/models/mnist"
    );
    assert_eq!(route["spec"]["rules"][0]["backendRefs"][0]["port"], 8501);
}

#[test]
fn tensorflow_serving_with_gpus_uses_the_gpu_image_and_limits_gpus() {
    let objects = render("serving", "mnist", &json!({ "numGpus": 2 })).unwrap();
    let container = &objects[2]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "tensorflow/serving:2.18.0-gpu");
    assert_eq!(container["resources"]["limits"]["nvidia.com/gpu"], 2);
}

/// The object of `kind` named `name`.
fn object_named<'a>(objects: &'a Value, kind: &str, name: &str) -> &'a Value {
    objects
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

/// What a Deployment of `selector`'s pods needs to go through a node drain serving: spread over
/// the nodes as a preference, each pod serving on for `drain` seconds once told to stop and
/// given the time to finish after, and a PodDisruptionBudget `budget` over exactly its pods.
fn assert_drainable(objects: &Value, name: &str, budget: Value, drain: i64) {
    let deployment = object_named(objects, "Deployment", name);
    let selector = &deployment["spec"]["selector"]["matchLabels"];
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(
        pod["topologySpreadConstraints"],
        json!([{
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": { "matchLabels": selector },
            "matchLabelKeys": ["pod-template-hash"],
        }]),
        "{name}"
    );
    let container = &pod["containers"][0];
    assert_eq!(
        container["lifecycle"]["preStop"],
        json!({ "sleep": { "seconds": drain } }),
        "{name}"
    );
    assert!(
        pod["terminationGracePeriodSeconds"].as_i64().unwrap() >= drain + 10,
        "{name}: {pod}"
    );
    let pdb = object_named(objects, "PodDisruptionBudget", name);
    assert_eq!(pdb["apiVersion"], "policy/v1");
    let mut spec = budget;
    spec["selector"] = json!({ "matchLabels": selector });
    spec["unhealthyPodEvictionPolicy"] = json!("AlwaysAllow");
    assert_eq!(pdb["spec"], spec, "{name}");
    for (label, value) in selector.as_object().unwrap() {
        assert_eq!(&pdb["metadata"]["labels"][label], value, "{name}: {label}");
    }
}

/// Each version's replicas spread over the nodes and a PodDisruptionBudget per version lets a
/// drain evict them one at a time: maxUnavailable 1 by default, a single replica's pod included
/// (a budget that blocks a drain forever is refused), or minAvailable instead when it is set.
#[test]
fn a_versions_replicas_spread_over_the_nodes_and_a_drain_evicts_one_at_a_time() {
    let canary = json!({ "trafficRule": "v1:90,v2:10", "replicas": 2 });
    let objects = render("serving", "mnist", &canary).unwrap();
    for version in ["v1", "v2"] {
        let name = format!("mnist-{version}");
        assert_drainable(&objects, &name, json!({ "maxUnavailable": 1 }), 5);
        assert_eq!(
            object_named(&objects, "Deployment", &name)["spec"]["selector"]["matchLabels"]["version"],
            version
        );
    }
    let mlserver = json!({ "runtime": "mlserver", "modelFormat": "xgboost",
        "objectStore": "object-store", "modelBasePath": "s3://models/digits/{version}/" });
    let one = render("serving", "digits", &mlserver).unwrap();
    assert_drainable(&one, "digits-v1", json!({ "maxUnavailable": 1 }), 5);
    let three = json!({ "replicas": 3, "minAvailable": 2 });
    let objects = render("serving", "mnist", &three).unwrap();
    assert_drainable(&objects, "mnist-v1", json!({ "minAvailable": 2 }), 5);
}

#[test]
fn training_operator_scoped_to_its_namespace_with_leader_election() {
    let objects = render(
        "training-operator",
        "training-operator",
        &json!({ "deploymentScope": "namespace", "replicas": 2, "leaderElect": true, "minAvailable": 1 }),
    )
    .unwrap();
    assert_eq!(
        kinds_and_names(&objects),
        [
            "CustomResourceDefinition frameworks.frameworkcontroller.microsoft.com",
            "CustomResourceDefinition jaxjobs.kubeflow.org",
            "CustomResourceDefinition mpijobs.kubeflow.org",
            "CustomResourceDefinition mxjobs.kubeflow.org",
            "CustomResourceDefinition paddlejobs.kubeflow.org",
            "CustomResourceDefinition pytorchjobs.kubeflow.org",
            "CustomResourceDefinition tfjobs.kubeflow.org",
            "CustomResourceDefinition xgboostjobs.kubeflow.org",
            "ServiceAccount training-operator",
            "Role training-operator",
            "RoleBinding training-operator",
            "Role training-operator-leader-election",
            "RoleBinding training-operator-leader-election",
            "Service training-operator-metrics",
            "Deployment training-operator",
            "PodDisruptionBudget training-operator",
        ]
    );
    let deployment = objects
        .as_array()
        .and_then(|objects| objects.iter().find(|o| o["kind"] == "Deployment"))
        .expect("the operator's Deployment");
    let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
    assert_eq!(
        args,
        &json!([
            "operator",
            "--metrics-addr",
            ":8080",
            "--health-addr",
            ":8081",
            "--controllers",
            "training,fc",
            "--frameworks",
            "jax,mpi,mxnet,paddle,pytorch,tensorflow,xgboost",
            "--namespace",
            "kubeflow",
            "--leader-elect",
            "--mpi-kubectl-delivery-image",
            "mlkube/kubectl-delivery:0.1.0"
        ])
    );
}

/// The container args and the PodGroup rules of the operator rendered with `params`.
fn operator_args_and_pod_group_rules(params: &Value) -> Result<(Value, Vec<Value>), String> {
    let objects = render("training-operator", "training-operator", params)?;
    let objects = objects.as_array().expect("a list of objects");
    let find = |kind: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind}"))
    };
    let args = find("Deployment")["spec"]["template"]["spec"]["containers"][0]["args"].clone();
    let pod_group_rules = find("ClusterRole")["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["resources"] == json!(["podgroups"]))
        .cloned()
        .collect();
    Ok((args, pod_group_rules))
}

/// FrameworkController's configuration file given as the param's text: a ConfigMap the
/// operator reads back as it was written (`FcConfig::parse` takes it), mounted where
/// `--fc-config` points, its hash on the pod template so that a change rolls the operator; and
/// refused when the operator runs no Frameworks.
#[test]
fn training_operator_passes_frameworkcontrollers_configuration_file() {
    let file = "podFailureSpec:\n- code: 300\n  phrase: DataMissing\n  podPatterns:\n  - \
                containers: [{codeRange: {min: 3, max: 3}}]\nworkerNumber: 8\n";
    let objects = render(
        "training-operator",
        "op",
        &json!({ "frameworkControllerConfig": file }),
    )
    .unwrap();
    let config_map = objects
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "ConfigMap")
        .expect("a ConfigMap");
    assert_eq!(config_map["metadata"]["name"], "op-fc-config");
    let text = config_map["data"]["frameworkcontroller.yaml"]
        .as_str()
        .unwrap();
    let parsed =
        mlkube::operator::fc::config::FcConfig::parse(text).expect("the operator reads it");
    assert_eq!(
        (parsed.workers, parsed.pod_failure.last().map(|c| c.code)),
        (Some(8), Some(300))
    );
    let deployment = (objects.as_array().unwrap().iter())
        .find(|o| o["kind"] == "Deployment")
        .unwrap();
    let pod = &deployment["spec"]["template"];
    let container = &pod["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let at = args
        .iter()
        .position(|a| *a == "--fc-config")
        .expect("--fc-config");
    let mount = &container["volumeMounts"][0];
    assert_eq!(
        args[at + 1],
        format!(
            "{}/frameworkcontroller.yaml",
            mount["mountPath"].as_str().unwrap()
        )
    );
    assert_eq!(pod["spec"]["volumes"][0]["name"], mount["name"]);
    assert_eq!(
        pod["spec"]["volumes"][0]["configMap"]["name"],
        "op-fc-config"
    );
    assert!(pod["metadata"]["annotations"]["mlkube.io/fc-config-md5"].is_string());
    let error = render(
        "training-operator",
        "op",
        &json!({ "frameworkControllerConfig": file, "frameworks": ["tensorflow"] }),
    )
    .unwrap_err();
    assert!(
        error.contains("param frameworkControllerConfig: configures the Framework controller, which frameworks leaves out"),
        "{error}"
    );
}

#[test]
fn training_operator_gang_scheduler_is_passed_and_granted_its_pod_groups() {
    let (args, rules) = operator_args_and_pod_group_rules(&json!({})).unwrap();
    assert!(
        !args
            .as_array()
            .unwrap()
            .contains(&json!("--gang-scheduler")),
        "{args}"
    );
    assert_eq!(rules, Vec::<Value>::new());

    for (scheduler, group) in [
        ("volcano", "scheduling.volcano.sh"),
        ("scheduler-plugins", "scheduling.x-k8s.io"),
    ] {
        let (args, rules) =
            operator_args_and_pod_group_rules(&json!({ "gangScheduler": scheduler })).unwrap();
        let args = args.as_array().unwrap();
        let flag = args.iter().position(|a| a == "--gang-scheduler");
        assert_eq!(
            flag.and_then(|i| args.get(i + 1)),
            Some(&json!(scheduler)),
            "{args:?}"
        );
        assert_eq!(
            rules,
            [json!({
                "apiGroups": [group],
                "resources": ["podgroups"],
                "verbs": ["get", "create", "patch", "delete"]
            })]
        );
    }

    let error = operator_args_and_pod_group_rules(&json!({ "gangScheduler": "" })).unwrap_err();
    assert!(
        error.contains(
            "param gangScheduler: must be 'volcano' or a scheduler-plugins scheduler's name"
        ),
        "{error}"
    );
}

/// The value after `flag` in the operator's args, if it is passed.
fn flag_value<'a>(args: &'a Value, flag: &str) -> Option<&'a str> {
    let args = args.as_array().expect("args are a list");
    let at = args.iter().position(|a| a == flag)?;
    args.get(at + 1).and_then(Value::as_str)
}

/// A cluster that cannot pull `alpine:3.10` (air-gapped, or behind a mirror) could not run a
/// PyTorchJob with a Master: its workers' `init-pytorch` image was fixed in the code.
#[test]
fn training_operator_passes_the_pytorch_init_image_when_it_is_not_the_operators_default() {
    let declared = &prototype("training-operator")["params"]["pytorchInitImage"];
    assert_eq!(declared["type"], "image");
    // The operator's own default, so rendering it changes nothing and is left out.
    assert_eq!(
        declared["default"],
        mlkube::operator::training::frameworks::pytorch::DEFAULT_INIT_IMAGE
    );
    let (args, _) = operator_args_and_pod_group_rules(&json!({})).unwrap();
    assert_eq!(flag_value(&args, "--pytorch-init-container-image"), None);

    let mirrored = json!({ "pytorchInitImage": "mirror.internal/library/alpine:3.19" });
    let (args, _) = operator_args_and_pod_group_rules(&mirrored).unwrap();
    assert_eq!(
        flag_value(&args, "--pytorch-init-container-image"),
        Some("mirror.internal/library/alpine:3.19")
    );
    // An operator that runs no PyTorchJobs is not given the flag.
    let mut without_pytorch = mirrored.clone();
    without_pytorch["frameworks"] = json!(["tensorflow"]);
    let (args, _) = operator_args_and_pod_group_rules(&without_pytorch).unwrap();
    assert_eq!(flag_value(&args, "--pytorch-init-container-image"), None);

    for bad in [json!(""), json!("alpine 3.10"), json!(3)] {
        let error =
            operator_args_and_pod_group_rules(&json!({ "pytorchInitImage": bad })).unwrap_err();
        assert!(
            error.contains("component training-operator: param pytorchInitImage: must be an image"),
            "{bad}: {error}"
        );
    }
}

/// A cluster that cannot pull the operator's `kubectl-delivery` image gives MPIJob launchers
/// another; the default is named too (so an environment's imageRegistry reaches it); an
/// operator that runs no MPIJobs is granted nothing for them.
#[test]
fn training_operator_passes_the_kubectl_delivery_image_and_grants_mpis_rules_only_with_mpi() {
    let declared = &prototype("training-operator")["params"]["mpiKubectlDeliveryImage"];
    let default = mlkube::operator::training::frameworks::mpi::DEFAULT_KUBECTL_DELIVERY_IMAGE;
    assert_eq!(declared["default"], default);
    let (args, _) = operator_args_and_pod_group_rules(&json!({})).unwrap();
    assert_eq!(
        flag_value(&args, "--mpi-kubectl-delivery-image"),
        Some(default)
    );
    let mirrored = json!({ "mpiKubectlDeliveryImage": "mirror.internal/kubectl-delivery:1" });
    let (args, _) = operator_args_and_pod_group_rules(&mirrored).unwrap();
    assert_eq!(
        flag_value(&args, "--mpi-kubectl-delivery-image"),
        Some("mirror.internal/kubectl-delivery:1")
    );

    let rule_resources = |params: &Value| -> Vec<String> {
        let objects = render("training-operator", "training-operator", params).unwrap();
        let role = objects
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["kind"] == "ClusterRole")
            .cloned()
            .expect("a ClusterRole");
        role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["resources"].as_array().cloned().unwrap_or_default())
            .filter_map(|r| r.as_str().map(str::to_owned))
            .collect()
    };
    let with_mpi = rule_resources(&json!({}));
    assert!(with_mpi.iter().any(|r| r == "pods/exec"), "{with_mpi:?}");
    let without = rule_resources(
        &json!({ "frameworks": ["tensorflow"], "mpiKubectlDeliveryImage": "mirror.internal/k:1" }),
    );
    for resource in [
        "pods/exec",
        "configmaps",
        "roles",
        "rolebindings",
        "serviceaccounts",
    ] {
        assert!(
            !without.iter().any(|r| r == resource),
            "{resource}: {without:?}"
        );
    }
    let (args, _) = operator_args_and_pod_group_rules(
        &json!({ "frameworks": ["tensorflow"], "mpiKubectlDeliveryImage": "mirror.internal/k:1" }),
    )
    .unwrap();
    assert_eq!(flag_value(&args, "--mpi-kubectl-delivery-image"), None);
}

/// The operator's RBAC is exactly what the operator does on the API, and never a wildcard.
#[test]
fn training_operator_rbac_lists_exact_verbs() {
    let objects = render(
        "training-operator",
        "training-operator",
        &json!({ "gangScheduling": true }),
    )
    .unwrap();
    let role = objects
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "ClusterRole")
        .expect("a ClusterRole by default");
    assert_eq!(role["metadata"]["name"], "kubeflow-training-operator");
    let rules: Vec<String> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| {
            format!(
                "{} {} {}",
                rule["apiGroups"], rule["resources"], rule["verbs"]
            )
        })
        .collect();
    insta::assert_yaml_snapshot!(rules, @r#"
    - "[\"kubeflow.org\"] [\"jaxjobs\",\"mpijobs\",\"mxjobs\",\"paddlejobs\",\"pytorchjobs\",\"tfjobs\",\"xgboostjobs\"] [\"get\",\"list\",\"watch\",\"delete\"]"
    - "[\"kubeflow.org\"] [\"jaxjobs/status\",\"mpijobs/status\",\"mxjobs/status\",\"paddlejobs/status\",\"pytorchjobs/status\",\"tfjobs/status\",\"xgboostjobs/status\"] [\"update\"]"
    - "[\"kubeflow.org\"] [\"jaxjobs/finalizers\",\"mpijobs/finalizers\",\"mxjobs/finalizers\",\"paddlejobs/finalizers\",\"pytorchjobs/finalizers\",\"tfjobs/finalizers\",\"xgboostjobs/finalizers\"] [\"update\"]"
    - "[\"\"] [\"pods\"] [\"list\",\"watch\",\"create\",\"delete\",\"patch\"]"
    - "[\"\"] [\"services\"] [\"list\",\"watch\",\"create\",\"delete\",\"patch\"]"
    - "[\"kvc.kubeflow.org\"] [\"volumemanagers\"] [\"get\"]"
    - "[\"events.k8s.io\"] [\"events\"] [\"create\",\"patch\"]"
    - "[\"frameworkcontroller.microsoft.com\"] [\"frameworks\"] [\"list\",\"watch\"]"
    - "[\"frameworkcontroller.microsoft.com\"] [\"frameworks/status\",\"frameworks/finalizers\"] [\"update\"]"
    - "[\"\"] [\"configmaps\"] [\"list\",\"watch\",\"create\",\"delete\"]"
    - "[\"\"] [\"configmaps/finalizers\"] [\"update\"]"
    - "[\"\"] [\"pods\"] [\"list\",\"watch\",\"create\",\"delete\"]"
    - "[\"scheduling.volcano.sh\",\"scheduling.x-k8s.io\"] [\"podgroups\"] [\"get\",\"create\",\"patch\",\"delete\"]"
    - "[\"\"] [\"configmaps\",\"serviceaccounts\"] [\"get\",\"list\",\"watch\",\"create\",\"patch\"]"
    - "[\"rbac.authorization.k8s.io\"] [\"roles\",\"rolebindings\"] [\"get\",\"list\",\"watch\",\"create\",\"patch\"]"
    - "[\"\"] [\"pods\"] [\"get\"]"
    - "[\"\"] [\"pods/exec\"] [\"create\"]"
    - "[\"autoscaling\"] [\"horizontalpodautoscalers\"] [\"get\",\"create\",\"patch\",\"delete\"]"
    "#);
}

/// A controller's memory is bounded even where an environment sets no limits (`local`): one
/// object that grows its caches cannot take the node's memory, only restart the controller.
#[test]
fn every_controller_has_a_memory_limit_by_default() {
    for (prototype, name, limit) in [
        ("training-operator", "training-operator", "512Mi"),
        ("volume-controller", "volume-controller", "256Mi"),
        ("gateway", "gateway", "256Mi"),
    ] {
        let objects = render(prototype, name, &json!({})).unwrap();
        let pod = &object_of(&objects, "Deployment")["spec"]["template"]["spec"];
        let containers = pod["containers"].as_array().unwrap().iter();
        let init = pod["initContainers"].as_array().into_iter().flatten();
        for container in containers.chain(init) {
            assert_eq!(
                container["resources"]["limits"]["memory"], limit,
                "{prototype}: container {}",
                container["name"]
            );
        }
    }
}

#[test]
fn every_container_has_resources_and_runs_non_root() {
    for (prototype, name) in [
        ("training-operator", "training-operator"),
        ("notebook-hub", "notebook-hub"),
        ("object-store", "object-store"),
        ("serving", "mnist"),
        ("volume-controller", "volume-controller"),
        ("gateway", "gateway"),
    ] {
        let objects = render(
            prototype,
            name,
            &json!({ "cpuLimit": "1", "memoryLimit": "1Gi" }),
        )
        .unwrap();
        for object in objects.as_array().unwrap() {
            let pod = &object["spec"]["template"]["spec"];
            if !pod.is_object() {
                continue;
            }
            assert_eq!(
                pod["securityContext"]["runAsNonRoot"], true,
                "{prototype}: pod of {}",
                object["metadata"]["name"]
            );
            let containers = pod["containers"].as_array().unwrap().iter();
            let init = pod["initContainers"].as_array().into_iter().flatten();
            for container in containers.chain(init) {
                let what = format!("{prototype}: container {}", container["name"]);
                assert!(
                    container["resources"]["requests"]["cpu"].is_string(),
                    "{what} has no CPU request"
                );
                assert!(
                    container["resources"]["requests"]["memory"].is_string(),
                    "{what} has no memory request"
                );
                assert_eq!(
                    container["resources"]["limits"]["cpu"], "1",
                    "{what} ignores cpuLimit"
                );
                assert_eq!(
                    container["resources"]["limits"]["memory"], "1Gi",
                    "{what} ignores memoryLimit"
                );
                assert_eq!(container["securityContext"]["runAsNonRoot"], true, "{what}");
                assert_eq!(
                    container["securityContext"]["allowPrivilegeEscalation"], false,
                    "{what}"
                );
                assert_eq!(
                    container["securityContext"]["readOnlyRootFilesystem"], true,
                    "{what}"
                );
            }
        }
    }
}

#[test]
fn every_param_has_a_type_a_default_and_a_one_line_description() {
    for name in PROTOTYPES {
        let p = prototype(name);
        assert_eq!(p["name"], name);
        let params = p["params"].as_object().unwrap();
        assert!(!params.is_empty(), "{name} declares no params");
        assert!(
            !params.contains_key("name"),
            "{name}: `name` is set by mlkube, not declared"
        );
        for (param, spec) in params {
            let what = format!("{name}.{param}");
            let ty = spec["type"]
                .as_str()
                .unwrap_or_else(|| panic!("{what} has no type"));
            assert!(TYPES.contains(&ty), "{what} has unknown type {ty}");
            let description = spec["description"]
                .as_str()
                .unwrap_or_else(|| panic!("{what} has no description"));
            assert!(
                !description.is_empty() && !description.contains('\n'),
                "{what}: description must be one line"
            );
            let default = spec
                .get("default")
                .unwrap_or_else(|| panic!("{what} has no default"));
            let fits = match ty {
                _ if default.is_null() => true,
                "string" | "quantity" | "image" => default.is_string(),
                "integer" => default.is_i64() || default.is_u64(),
                "number" => default.is_number(),
                "boolean" => default.is_boolean(),
                "array" => default.is_array(),
                _ => default.is_object(),
            };
            assert!(fits, "{what}: default {default} is not a {ty}");
            if let Some(allowed) = spec.get("enum") {
                assert!(
                    default.is_null() || allowed.as_array().unwrap().contains(default),
                    "{what}: default {default} is not in its enum {allowed}"
                );
            }
            if let (Some(min), Some(n)) = (spec.get("minimum"), default.as_f64()) {
                assert!(
                    n >= min.as_f64().unwrap(),
                    "{what}: default below its minimum"
                );
            }
        }
    }
}

#[test]
fn every_description_says_what_was_dropped_and_lists_the_params() {
    for name in PROTOTYPES {
        let p = prototype(name);
        let description = p["description"].as_str().unwrap();
        assert!(
            description.contains("Dropped"),
            "{name}: say what was dropped from Kubeflow's package"
        );
        let listed = description
            .lines()
            .find_map(|line| line.strip_prefix("Params: "))
            .unwrap_or_else(|| panic!("{name}: no `Params:` line"));
        for param in p["params"].as_object().unwrap().keys() {
            assert!(
                listed.split(", ").any(|p| p.trim_end_matches('.') == param),
                "{name}: {param} is not listed"
            );
        }
    }
}

/// The shipped environments set only params their components declare, and each renders.
#[test]
fn shipped_environments_render_every_component() {
    let instances = [
        ("training-operator", "training-operator"),
        ("notebook-hub", "notebook-hub"),
        ("object-store", "object-store"),
        ("mnist", "inference-service"),
        ("volume-controller", "volume-controller"),
        ("gateway", "gateway"),
    ];
    for env in ENVIRONMENTS {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("environments")
            .join(env)
            .join("params.libsonnet");
        let source =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let params = evaluate(&source).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            params["global"],
            json!({}),
            "{env}: globals would reach every component"
        );
        let components = params["components"].as_object().unwrap();
        check_shipped_defaults(env, &params["defaults"], components, &instances);
        assert_eq!(
            components.len(),
            instances.len(),
            "{env}: one entry per instance `init` creates"
        );
        for (instance, prototype_name) in instances {
            let overrides = components
                .get(instance)
                .unwrap_or_else(|| panic!("{env} does not mention {instance}"));
            let declared = prototype(prototype_name)["params"].clone();
            for key in overrides.as_object().unwrap().keys() {
                assert!(
                    declared.get(key).is_some(),
                    "{env}: {instance}.{key} is not a param of {prototype_name}"
                );
            }
            render(prototype_name, instance, overrides)
                .unwrap_or_else(|e| panic!("{env}/{instance}: {e}"));
        }
    }
}

/// Whether `prototype` makes a training job or a sweep of them.
fn is_job_prototype(prototype: &str) -> bool {
    prototype.contains("-job") || prototype.starts_with("framework")
}

/// A shipped environment's `defaults` are for the jobs added later: each is a param some job
/// prototype declares, of a type every prototype that declares it takes; every instance `init`
/// creates whose prototype declares it sets its own in the environment, so the platform's
/// objects are as the environment sizes them.
fn check_shipped_defaults(
    env: &str,
    defaults: &Value,
    components: &serde_json::Map<String, Value>,
    instances: &[(&str, &str)],
) {
    let defaults = match defaults {
        Value::Null => return,
        Value::Object(defaults) => defaults,
        other => panic!("{env}: `defaults` must be an object, got {other}"),
    };
    let evaluator = Evaluator::new(Path::new(env!("CARGO_MANIFEST_DIR")));
    for (key, value) in defaults {
        let declaring: Vec<_> = PROTOTYPES
            .into_iter()
            .filter_map(|name| {
                let found = mlkube::app::prototype::find(&evaluator, name).unwrap();
                Some((name, found.param(key)?.clone()))
            })
            .collect();
        assert!(
            declaring.iter().any(|(name, _)| is_job_prototype(name)),
            "{env}: no job prototype declares default `{key}`"
        );
        for (name, spec) in &declaring {
            assert!(
                spec.accepts(value),
                "{env}: {name} refuses default {key} = {value}"
            );
        }
        for (instance, prototype_name) in instances {
            if declaring.iter().any(|(name, _)| name == prototype_name) {
                assert!(
                    components[*instance].get(key).is_some(),
                    "{env}: {instance} would take default `{key}`; set its own"
                );
            }
        }
    }
}

#[test]
fn local_defaults_fit_a_two_core_node() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("environments/local/params.libsonnet");
    let local = evaluate(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(local["defaults"], json!({"cpuRequest": "100m"}));
}

#[test]
fn prod_differs_from_local_as_the_issue_asks() {
    let load = |env: &str| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("environments")
            .join(env)
            .join("params.libsonnet");
        evaluate(&std::fs::read_to_string(path).unwrap()).unwrap()["components"].clone()
    };
    let (local, prod) = (load("local"), load("prod"));
    assert_eq!(local["training-operator"]["replicas"], 1);
    assert_eq!(prod["training-operator"]["replicas"], 2);
    assert_eq!(prod["training-operator"]["leaderElect"], true);
    assert_eq!(local["mnist"]["minReplicas"], Value::Null);
    assert_eq!(prod["mnist"]["minReplicas"], 2);
    assert_eq!(prod["mnist"]["maxReplicas"], 4);
    for (instance, params) in prod.as_object().unwrap() {
        assert!(
            params["cpuLimit"].is_string() && params["memoryLimit"].is_string(),
            "prod {instance} has no limits"
        );
        assert!(
            local[instance]["cpuLimit"].is_null(),
            "local {instance} has limits"
        );
    }
}

#[test]
fn bad_values_name_the_component_and_the_param() {
    let cases = [
        (
            "serving",
            json!({ "trafficRule": "v1:90,v2:20" }),
            "component serving: param trafficRule: weights sum to 110",
        ),
        (
            "serving",
            json!({ "trafficRule": "v1" }),
            "component serving: param trafficRule: entry \"v1\"",
        ),
        (
            "serving",
            json!({ "versionModelBasePaths": { "v3": "x" } }),
            "component serving: param versionModelBasePaths",
        ),
        (
            "serving",
            json!({ "istioGateway": "a/b" }),
            "component serving: param istioGateway: is set but istio is off",
        ),
        (
            "serving",
            json!({ "modelFormat": "xgboost" }),
            "component serving: param modelFormat: runtime tensorflow-serving cannot load xgboost models",
        ),
        (
            "serving",
            json!({ "runtime": "mlserver", "modelBasePath": "s3://models/digits/{version}/" }),
            "component serving: param objectStore: the model path of v1, \"s3://models/digits/v1/\", is in an object store",
        ),
        (
            "serving",
            json!({ "runtime": "mlserver", "objectStore": "store", "modelBasePath": "s3://models" }),
            "component serving: param modelBasePath: the model path of v1, \"s3://models\", is not s3://bucket/prefix",
        ),
        (
            "serving",
            json!({ "runtime": "mlserver", "modelBasePath": "gs://kubeflow/mnist" }),
            "component serving: param modelBasePath: the model path of v1, \"gs://kubeflow/mnist\", must be s3://bucket/prefix",
        ),
        (
            "serving",
            json!({ "gateway": "a/b/c" }),
            "component serving: param gateway: \"a/b/c\" is not <name> or <namespace>/<name>",
        ),
        (
            "serving",
            json!({ "runtime": "triton" }),
            "component serving: param runtime: \"triton\" is not one of",
        ),
        (
            "serving",
            json!({ "maxUnavailable": 0 }),
            "component serving: param maxUnavailable: 0 leaves no pod evictable, so node drains would block",
        ),
        (
            "serving",
            json!({ "replicas": 2, "minAvailable": 2 }),
            "component serving: param minAvailable: 2 leaves no pod of 2 replicas evictable",
        ),
        (
            "gateway",
            json!({ "maxUnavailable": 0 }),
            "component gateway: param maxUnavailable: 0 leaves no pod evictable",
        ),
        (
            "training-operator",
            json!({ "deploymentScope": "everywhere" }),
            "component training-operator: param deploymentScope: \"everywhere\" is not one of",
        ),
        (
            "training-operator",
            json!({ "replicas": 2 }),
            "component training-operator: param replicas: 2 replicas without leaderElect",
        ),
        (
            "training-operator",
            json!({ "minAvailable": 1 }),
            "component training-operator: param minAvailable",
        ),
        (
            "notebook-hub",
            json!({ "notebookImages": [] }),
            "component notebook-hub: param notebookImages",
        ),
        (
            "notebook-hub",
            json!({ "authenticator": "oauth" }),
            "component notebook-hub: param authenticator",
        ),
        (
            "object-store",
            json!({ "buckets": ["Data"] }),
            "component object-store: param buckets: \"Data\" is not an S3 bucket name",
        ),
        (
            "object-store",
            json!({ "endpoint": "s3.example.com" }),
            "component object-store: param endpoint: \"s3.example.com\" is not an http",
        ),
        (
            "object-store",
            json!({ "endpoint": "https://s3.example.com" }),
            "component object-store: param credentialsSecret: name the Secret",
        ),
        (
            "volume-controller",
            json!({ "logLevel": -1 }),
            "component volume-controller: param logLevel",
        ),
        (
            "tf-job",
            json!({ "restartPolicy": "Sometimes" }),
            "component tf-job: param restartPolicy: \"Sometimes\" is not one of",
        ),
        (
            "tf-job",
            json!({ "cleanPodPolicy": "Some" }),
            "component tf-job: param cleanPodPolicy: \"Some\" is not one of",
        ),
        (
            "tf-job",
            json!({ "modelPath": "models/x/1" }),
            "component tf-job: param modelPath: needs objectStore",
        ),
        (
            "xgboost-job",
            json!({ "objectStore": "object-store", "modelPath": "models" }),
            "component xgboost-job: param modelPath: \"models\" is not bucket/prefix, e.g. models/digits/1",
        ),
        (
            "tf-job",
            json!({ "objectStore": "object-store", "modelPath": "s3://models/x/1" }),
            "component tf-job: param modelPath: \"s3://models/x/1\" is a URL; give bucket/prefix \
             in objectStore without the scheme, e.g. \"models/x/1\"",
        ),
        (
            "pytorch-job",
            json!({ "objectStore": "object-store", "modelPath": "My_Models/x" }),
            "component pytorch-job: param modelPath: \"My_Models/x\" is not bucket/prefix",
        ),
        (
            "jax-job",
            json!({ "objectStoreCredentials": "keys" }),
            "component jax-job: param objectStoreCredentials: is set without objectStore",
        ),
        (
            "tf-job",
            json!({ "chiefType": "Boss" }),
            "component tf-job: param chiefType: \"Boss\" is not one of",
        ),
        (
            "tf-job",
            json!({ "chiefReplicas": 2 }),
            "component tf-job: param chiefReplicas: must be 0 or 1, got 2",
        ),
        (
            "tf-job",
            json!({ "workerReplicas": 0, "psReplicas": 2 }),
            "component tf-job: param workerReplicas: the job has neither a Chief nor a Worker",
        ),
        (
            "tf-job",
            json!({ "psReplicas": -1 }),
            "component tf-job: param psReplicas: must not be negative",
        ),
        (
            "tf-job",
            json!({ "backoffLimit": -1 }),
            "component tf-job: param backoffLimit: must not be negative",
        ),
        (
            "tf-job",
            json!({ "args": ["--steps", 100] }),
            "component tf-job: param args: must be a list of strings, but holds 100",
        ),
        (
            "tf-job",
            json!({ "env": { "A": { "b": 1 } } }),
            "component tf-job: param env: the value of A must be",
        ),
        (
            "tf-job",
            json!({ "runAsUser": 0 }),
            "component tf-job: param runAsUser: must be a non-root user id",
        ),
        (
            "tf-job-sweep",
            json!({ "restartPolicy": "Sometimes" }),
            "component tf-job-sweep: param restartPolicy",
        ),
        (
            "tf-job-sweep",
            json!({ "grid": {} }),
            "component tf-job-sweep: param grid: is empty",
        ),
        (
            "tf-job-sweep",
            json!({ "grid": { "learningRate": 0.01 } }),
            "component tf-job-sweep: param grid: the values of learningRate must be a list, e.g. [0.01]",
        ),
        (
            "tf-job-sweep",
            json!({ "grid": { "learningRate": [] } }),
            "component tf-job-sweep: param grid: learningRate has no values",
        ),
        (
            "tf-job-sweep",
            json!({ "grid": { "learningRate": [0.01, 0.01] } }),
            "component tf-job-sweep: param grid: learningRate lists a value twice",
        ),
        (
            "tf-job-sweep",
            json!({ "grid": { "learningRate": [[0.01]] } }),
            "component tf-job-sweep: param grid: a value of learningRate must be a string, number or boolean",
        ),
        (
            "tf-job-sweep",
            json!({ "grid": { "optimizer": ["adam w"] } }),
            "component tf-job-sweep: param grid: value \"adam w\" of optimizer cannot be a label value",
        ),
        (
            "tf-job-sweep",
            json!({ "grid": { "learning-rate": [1] } }),
            "component tf-job-sweep: param grid: hyperparameter \"learning-rate\" must be a letter followed by",
        ),
        (
            "tf-job-sweep",
            json!({ "grid": { "a": [1, 2, 3], "b": [1, 2] }, "maxJobs": 5 }),
            "component tf-job-sweep: param grid: gives 6 jobs, more than maxJobs (5)",
        ),
        (
            "tf-job-sweep",
            json!({ "flagStyle": "camel" }),
            "component tf-job-sweep: param flagStyle: \"camel\" is not one of",
        ),
    ];
    for (prototype, overrides, expected) in cases {
        let error = render(prototype, "x", &overrides)
            .expect_err(&format!("{prototype} with {overrides} should fail"));
        assert!(
            error.contains(expected),
            "{prototype} with {overrides}:\n{error}\nshould contain: {expected}"
        );
    }
}

/// The `tensorflow` container of one replica type of a rendered TFJob.
fn tensorflow_container<'a>(job: &'a Value, replica_type: &str) -> &'a Value {
    let containers = &job["spec"]["tfReplicaSpecs"][replica_type]["template"]["spec"]["containers"];
    assert_eq!(containers[0]["name"], "tensorflow", "{replica_type}");
    &containers[0]
}

fn job_names(jobs: &Value) -> Vec<String> {
    jobs.as_array()
        .expect("render gives an array")
        .iter()
        .map(|job| job["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn tf_job_distributed_with_gpus_on_the_chief_and_workers_only() {
    let objects = render(
        "tf-job",
        "mnist",
        &json!({
            "chiefReplicas": 1, "psReplicas": 2, "workerReplicas": 4, "evaluatorReplicas": 1,
            "gpus": 2, "gpuImage": "example/train:gpu", "image": "example/train:cpu",
            "restartPolicy": "ExitCode", "backoffLimit": 3, "activeDeadlineSeconds": 3600,
            "ttlSecondsAfterFinished": 600, "cleanPodPolicy": "All", "suspend": true,
            "command": ["python", "train.py"], "args": ["--steps=10"], "env": { "LOG_LEVEL": "info", "SEED": 7 },
        }),
    )
    .unwrap();
    assert_eq!(kinds_and_names(&objects), ["TFJob mnist"]);
    let job = &objects[0];
    assert_eq!(job["apiVersion"], "kubeflow.org/v1");
    assert_eq!(
        job["spec"]["runPolicy"],
        json!({ "activeDeadlineSeconds": 3600, "backoffLimit": 3, "cleanPodPolicy": "All", "suspend": true, "ttlSecondsAfterFinished": 600 })
    );
    let specs = job["spec"]["tfReplicaSpecs"].as_object().unwrap();
    let counts: Vec<(&str, &Value)> = specs
        .iter()
        .map(|(t, s)| (t.as_str(), &s["replicas"]))
        .collect();
    assert_eq!(
        counts,
        [
            ("Chief", &json!(1)),
            ("Evaluator", &json!(1)),
            ("PS", &json!(2)),
            ("Worker", &json!(4))
        ]
    );
    for (replica_type, gpu_image) in [
        ("Chief", true),
        ("Worker", true),
        ("PS", false),
        ("Evaluator", false),
    ] {
        assert_eq!(specs[replica_type]["restartPolicy"], "ExitCode");
        let container = tensorflow_container(job, replica_type);
        let gpus = &container["resources"]["limits"]["nvidia.com/gpu"];
        if gpu_image {
            assert_eq!(container["image"], "example/train:gpu", "{replica_type}");
            assert_eq!(gpus, 2, "{replica_type}");
        } else {
            assert_eq!(container["image"], "example/train:cpu", "{replica_type}");
            assert!(gpus.is_null(), "{replica_type} should get no GPUs");
        }
        assert_eq!(container["command"], json!(["python", "train.py"]));
        assert_eq!(container["args"], json!(["--steps=10"]));
        assert_eq!(
            container["env"],
            json!([{ "name": "LOG_LEVEL", "value": "info" }, { "name": "SEED", "value": "7" }])
        );
        assert_eq!(
            container["ports"],
            json!([{ "name": "tfjob-port", "containerPort": 2222, "protocol": "TCP" }])
        );
    }
}

#[test]
fn tf_job_master_replaces_chief_and_zero_replicas_leave_a_type_out() {
    let objects = render(
        "tf-job",
        "mnist",
        &json!({ "chiefType": "Master", "chiefReplicas": 1, "workerReplicas": 0, "psReplicas": 1 }),
    )
    .unwrap();
    let types: Vec<&String> = objects[0]["spec"]["tfReplicaSpecs"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(types, ["Master", "PS"]);
}

/// Training pods get least privilege too: non-root, no escalation, no capabilities, and no API
/// token unless the job names a service account.
#[test]
fn tf_job_pods_run_non_root_without_a_token_unless_given_a_service_account() {
    for (overrides, token) in [
        (json!({ "cpuLimit": "1", "memoryLimit": "1Gi" }), false),
        (
            json!({ "serviceAccount": "trainer", "imagePullSecrets": ["registry"] }),
            true,
        ),
    ] {
        let objects = render("tf-job", "mnist", &overrides).unwrap();
        let pod = &objects[0]["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(pod["securityContext"]["runAsUser"], 1000);
        assert_eq!(pod["automountServiceAccountToken"], token, "{overrides}");
        let container = &pod["containers"][0];
        assert_eq!(container["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            container["securityContext"]["allowPrivilegeEscalation"],
            false
        );
        assert_eq!(
            container["securityContext"]["capabilities"]["drop"],
            json!(["ALL"])
        );
        assert!(container["resources"]["requests"]["cpu"].is_string());
        assert!(container["resources"]["requests"]["memory"].is_string());
        if token {
            assert_eq!(pod["serviceAccountName"], "trainer");
            assert_eq!(pod["imagePullSecrets"], json!([{ "name": "registry" }]));
        } else {
            assert_eq!(
                container["resources"]["limits"],
                json!({ "cpu": "1", "memory": "1Gi" })
            );
        }
    }
}

#[test]
fn sweep_renders_one_job_per_combination_with_flags_labels_and_annotation() {
    let jobs = render(
        "tf-job-sweep",
        "sweep",
        &json!({
            "grid": { "learningRate": [0.01, 0.001], "hiddenLayers": [2, 3, 4] },
            "args": ["--epochs=5"], "psReplicas": 1, "workerReplicas": 2,
        }),
    )
    .unwrap();
    let jobs_list = jobs.as_array().unwrap();
    assert_eq!(jobs_list.len(), 6);
    let mut combinations = Vec::new();
    for job in jobs_list {
        let name = job["metadata"]["name"].as_str().unwrap();
        let hash = name
            .strip_prefix("sweep-")
            .expect("named after the component");
        assert!(
            hash.len() == 10
                && hash
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
            "{name}"
        );
        let labels = &job["metadata"]["labels"];
        let (rate, layers) = (
            labels["sweep.mlkube.io/learningRate"].as_str().unwrap(),
            labels["sweep.mlkube.io/hiddenLayers"].as_str().unwrap(),
        );
        let chosen: Value = serde_json::from_str(
            job["metadata"]["annotations"]["sweep.mlkube.io/hyperparameters"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(chosen["learningRate"].to_string(), rate);
        assert_eq!(chosen["hiddenLayers"].to_string(), layers);
        let flags = json!([
            "--epochs=5",
            format!("--hidden-layers={layers}"),
            format!("--learning-rate={rate}")
        ]);
        for replica_type in ["PS", "Worker"] {
            assert_eq!(
                tensorflow_container(job, replica_type)["args"],
                flags,
                "{name} {replica_type}"
            );
            let pod_labels =
                &job["spec"]["tfReplicaSpecs"][replica_type]["template"]["metadata"]["labels"];
            assert_eq!(
                pod_labels["sweep.mlkube.io/learningRate"], rate,
                "pods are selectable too"
            );
            assert_eq!(pod_labels["app.kubernetes.io/instance"], "sweep");
        }
        assert_eq!(job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"], 2);
        combinations.push((rate.to_owned(), layers.to_owned()));
    }
    combinations.sort();
    assert_eq!(
        combinations,
        [
            ("0.001", "2"),
            ("0.001", "3"),
            ("0.001", "4"),
            ("0.01", "2"),
            ("0.01", "3"),
            ("0.01", "4")
        ]
        .map(|(r, l)| (r.to_owned(), l.to_owned()))
    );
}

/// A combination's job keeps its name when the grid grows or is reordered, so growing a sweep
/// in `prod` adds jobs and leaves the finished ones alone; and `local`'s small grid names its
/// jobs as `prod` does.
#[test]
fn sweep_job_names_depend_only_on_the_combination() {
    let names = |grid: Value| {
        job_names(&render("tf-job-sweep", "sweep", &json!({ "grid": grid })).unwrap())
    };
    let small = names(json!({ "learningRate": [0.01], "hiddenLayers": [2] }));
    let full = names(json!({ "learningRate": [0.1, 0.01, 0.001], "hiddenLayers": [2, 3] }));
    let reordered = names(json!({ "hiddenLayers": [3, 2], "learningRate": [0.001, 0.01, 0.1] }));
    assert_eq!(small.len(), 1);
    assert_eq!(full.len(), 6);
    assert!(full.contains(&small[0]), "{small:?} not in {full:?}");
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(sorted(full.clone()), sorted(reordered));
    let mut unique = sorted(full.clone());
    unique.dedup();
    assert_eq!(unique.len(), 6);
    // The same combination in another sweep component is another job.
    let other = job_names(
        &render(
            "tf-job-sweep",
            "other",
            &json!({ "grid": { "learningRate": [0.01], "hiddenLayers": [2] } }),
        )
        .unwrap(),
    );
    assert_eq!(
        other[0][6..],
        small[0][6..],
        "the hash is the combination's"
    );
    assert!(other[0].starts_with("other-"));
}

#[test]
fn sweep_flags_in_snake_case_and_string_and_boolean_values() {
    let jobs = render(
        "tf-job-sweep",
        "sweep",
        &json!({ "grid": { "optimizerName": ["adam"], "use_bias": [true] }, "flagStyle": "snake" }),
    )
    .unwrap();
    let job = &jobs[0];
    assert_eq!(
        tensorflow_container(job, "Worker")["args"],
        json!(["--optimizer_name=adam", "--use_bias=true"])
    );
    assert_eq!(
        job["metadata"]["labels"]["sweep.mlkube.io/use_bias"],
        "true"
    );
}

#[test]
fn training_job_names_fit_the_pod_names_the_operator_derives() {
    // 63 characters is the limit of a pod's Service name, `<job>-<type>-<index>`.
    let name = "a".repeat(63 - "-worker-9".len());
    render("tf-job", &name, &json!({ "workerReplicas": 10 }))
        .expect("`<name>-worker-9` is 63 characters");
    let error = render("tf-job", &name, &json!({ "workerReplicas": 11 })).unwrap_err();
    assert!(
        error.contains(&format!("component tf-job: param name: the TFJob name \"{name}\" is too long: its pod and service {name}-worker-10 would be 64 characters")),
        "{error}"
    );
    let error = render("tf-job", "1job", &json!({})).unwrap_err();
    assert!(
        error.contains(
            "component tf-job: param name: the TFJob name \"1job\" is not a DNS-1035 label"
        ),
        "{error}"
    );
    // A sweep's jobs add `-` and 10 hex digits.
    let room = 63 - "-worker-0".len() - 11;
    render("tf-job-sweep", &"s".repeat(room), &json!({})).expect("fits exactly");
    let error = render("tf-job-sweep", &"s".repeat(room + 1), &json!({})).unwrap_err();
    assert!(
        error.contains(&format!(
            "component tf-job-sweep: param name: the component name \"{}\" is too long for a sweep",
            "s".repeat(room + 1)
        )),
        "{error}"
    );
    assert!(error.contains(&format!("use at most {room}")), "{error}");
}

/// The combinations a sweep rendered, by job name, from each job's annotation.
fn sweep_combinations(jobs: &Value) -> std::collections::BTreeMap<String, Value> {
    jobs.as_array()
        .expect("render gives an array")
        .iter()
        .map(|job| {
            let text = job["metadata"]["annotations"]["sweep.mlkube.io/hyperparameters"]
                .as_str()
                .expect("each job carries its combination");
            (
                job["metadata"]["name"].as_str().unwrap().to_owned(),
                serde_json::from_str(text).unwrap(),
            )
        })
        .collect()
}

fn random_sweep(random: Value) -> Result<Value, String> {
    render(
        "tf-job-sweep",
        "sweep",
        &json!({ "grid": {}, "random": random, "maxJobs": 200 }),
    )
}

/// A random search draws from its ranges by a hash of the seed, the draw's index and the
/// hyperparameter: the same seed renders the same jobs, a larger count keeps the earlier ones,
/// another seed draws others, and every value lies in its range (log-uniform spread over the
/// decades, integers whole, choices from the list).
#[test]
fn a_random_search_is_deterministic_for_a_seed_and_grows_without_renaming() {
    let ranges = json!({
        "learningRate": { "min": 0.0001, "max": 0.1, "log": true },
        "layers": { "min": 2, "max": 5, "integer": true },
        "dropout": { "min": 0.0, "max": 0.5, "digits": 2 },
        "optimizer": ["adam", "sgd"],
    });
    let draw = |count: u32, seed: Value| {
        sweep_combinations(
            &random_sweep(json!({ "count": count, "seed": seed, "ranges": ranges })).unwrap(),
        )
    };
    let twenty = draw(20, json!(1));
    assert_eq!(twenty.len(), 20, "continuous ranges do not repeat a draw");
    assert_eq!(draw(20, json!(1)), twenty, "the same seed, the same jobs");
    let five = draw(5, json!(1));
    assert!(
        five.iter().all(|(name, c)| twenty.get(name) == Some(c)),
        "a larger count keeps the earlier draws and their names"
    );
    let other = draw(20, json!("another"));
    assert!(other.keys().all(|name| !twenty.contains_key(name)));

    let mut decades = std::collections::BTreeSet::new();
    for combination in twenty.values() {
        let rate = combination["learningRate"].as_f64().unwrap();
        assert!((0.0001..=0.1).contains(&rate), "{combination}");
        decades.insert(rate.log10().floor() as i32);
        let shown = combination["learningRate"].to_string();
        assert!(shown.len() <= 9, "3 significant digits: {shown}");
        let layers = combination["layers"].as_f64().unwrap();
        assert!(
            layers.fract() == 0.0 && (2.0..=5.0).contains(&layers),
            "{combination}"
        );
        let dropout = combination["dropout"].as_f64().unwrap();
        assert!((0.0..=0.5).contains(&dropout), "{combination}");
        let significant: String = dropout
            .to_string()
            .chars()
            .filter(char::is_ascii_digit)
            .skip_while(|&c| c == '0')
            .collect();
        assert!(significant.len() <= 2, "2 significant digits: {dropout}");
        assert!(["adam", "sgd"].contains(&combination["optimizer"].as_str().unwrap()));
    }
    assert!(
        decades.len() >= 3,
        "log-uniform covers the decades of 1e-4..1e-1: {decades:?}"
    );
}

/// A grid and a random search together: every grid combination with every draw, each value a
/// flag and a label; a draw that repeats an earlier one is left out.
#[test]
fn a_grid_with_a_random_search_crosses_them_and_repeated_draws_are_left_out() {
    let jobs = render(
        "tf-job-sweep",
        "sweep",
        &json!({
            "grid": { "layers": [2, 3] },
            "random": { "count": 3, "seed": 7, "ranges": { "learningRate": { "min": 0.001, "max": 0.1, "log": true } } },
        }),
    )
    .unwrap();
    let combinations = sweep_combinations(&jobs);
    assert_eq!(combinations.len(), 6);
    for job in jobs.as_array().unwrap() {
        let labels = &job["metadata"]["labels"];
        let rate = labels["sweep.mlkube.io/learningRate"].as_str().unwrap();
        let layers = labels["sweep.mlkube.io/layers"].as_str().unwrap();
        assert_eq!(
            tensorflow_container(job, "Worker")["args"],
            json!([
                format!("--layers={layers}"),
                format!("--learning-rate={rate}")
            ])
        );
    }
    // Two choices drawn 10 times: at most 2 distinct draws.
    let few = sweep_combinations(
        &random_sweep(
            json!({ "count": 10, "seed": 1, "ranges": { "optimizer": ["adam", "sgd"] } }),
        )
        .unwrap(),
    );
    assert!(!few.is_empty() && few.len() <= 2, "{few:?}");
}

#[test]
fn bad_random_searches_and_objectives_name_the_param() {
    let range = json!({ "learningRate": { "min": 0.001, "max": 0.1 } });
    let cases = [
        (
            json!({ "random": { "seed": 1, "ranges": range } }),
            "param random: count must be a whole number of jobs",
        ),
        (
            json!({ "random": { "count": 2, "ranges": {} } }),
            "param random: ranges is empty",
        ),
        (
            json!({ "random": { "count": 2, "ranges": range, "size": 3 } }),
            "param random: has size; it takes count, seed and ranges",
        ),
        (
            json!({ "random": { "count": 2, "ranges": { "learningRate": { "min": 0, "max": 1, "log": true } } } }),
            "a log range needs min above 0",
        ),
        (
            json!({ "random": { "count": 2, "ranges": { "learningRate": { "min": 1, "max": 1 } } } }),
            "min (1) must be less than max (1)",
        ),
        (
            json!({ "random": { "count": 2, "ranges": { "layers": { "min": 1.5, "max": 4, "integer": true } } } }),
            "an integer range needs whole min and max",
        ),
        (
            json!({ "random": { "count": 2, "ranges": { "learning-rate": [1, 2] } } }),
            "param random: hyperparameter \"learning-rate\" must be a letter",
        ),
        (
            json!({ "grid": { "learningRate": [0.1] }, "random": { "count": 2, "ranges": range } }),
            "param random: learningRate is in grid too",
        ),
        (
            json!({ "random": { "count": 60, "ranges": range } }),
            "param grid: gives 60 jobs, more than maxJobs (50)",
        ),
        (
            json!({ "objective": { "metric": "loss", "goal": "lowest" } }),
            "param objective: goal must be \"maximize\" or \"minimize\"",
        ),
        (
            json!({ "objective": "accuracy" }),
            "param objective: must be {\"metric\": <name>",
        ),
    ];
    for (overrides, expected) in cases {
        let mut params = json!({ "grid": {} });
        if overrides.get("grid").is_none() && overrides.get("random").is_none() {
            params["grid"] = json!({ "learningRate": [0.1] });
        }
        for (key, value) in overrides.as_object().unwrap() {
            params[key] = value.clone();
        }
        let error =
            render("tf-job-sweep", "sweep", &params).expect_err(&format!("{params} should fail"));
        assert!(
            error.contains("component tf-job-sweep: ") && error.contains(expected),
            "{params}: {error}"
        );
    }
}

/// The objective goes on every job as an annotation, which `status -c` ranks by; without one
/// the jobs are as before.
#[test]
fn a_sweep_objective_is_annotated_on_each_job() {
    let jobs = render(
        "tf-job-sweep",
        "sweep",
        &json!({ "grid": { "layers": [2] }, "objective": { "metric": "loss", "goal": "minimize" } }),
    )
    .unwrap();
    assert_eq!(
        jobs[0]["metadata"]["annotations"]["sweep.mlkube.io/objective"],
        r#"{"goal":"minimize","metric":"loss"}"#
    );
    let plain = render(
        "tf-job-sweep",
        "sweep",
        &json!({ "grid": { "layers": [2] } }),
    )
    .unwrap();
    assert!(plain[0]["metadata"]["annotations"]["sweep.mlkube.io/objective"].is_null());
}

// ---------------------------------------------------------------------------------------------
// The job prototypes of the other frameworks

#[test]
fn pytorch_job_with_default_params() {
    insta::assert_yaml_snapshot!(render("pytorch-job", "mnist", &json!({})).unwrap());
}

#[test]
fn jax_job_with_default_params() {
    insta::assert_yaml_snapshot!(render("jax-job", "mnist", &json!({})).unwrap());
}

#[test]
fn xgboost_job_with_default_params() {
    insta::assert_yaml_snapshot!(render("xgboost-job", "iris", &json!({})).unwrap());
}

#[test]
fn paddle_job_with_default_params() {
    insta::assert_yaml_snapshot!(render("paddle-job", "check", &json!({})).unwrap());
}

#[test]
fn mxnet_job_with_default_params() {
    insta::assert_yaml_snapshot!(render("mxnet-job", "mnist", &json!({})).unwrap());
}

#[test]
fn mpi_job_with_default_params() {
    insta::assert_yaml_snapshot!(render("mpi-job", "mnist", &json!({})).unwrap());
}

/// An MPIJob as `src/operator/training/frameworks/mpi.rs` runs it: one Launcher running `mpirun` that
/// mounts its API token (its kubectl execs into the Workers as the ServiceAccount the operator
/// binds), Workers without a command (the operator's sleep) and without a token, no port, all
/// non-root; the MPI fields go into the spec.
#[test]
fn mpi_job_renders_a_launcher_running_mpirun_with_a_token_and_workers_without() {
    let job = &render("mpi-job", "mnist", &json!({})).unwrap()[0];
    assert_eq!(job["kind"], "MPIJob");
    assert_eq!(job["spec"]["slotsPerWorker"], 1);
    assert!(job["spec"]["mpiImplementation"].is_null());
    assert_eq!(job["spec"]["runPolicy"]["cleanPodPolicy"], "Running");
    let specs = &job["spec"]["mpiReplicaSpecs"];
    assert_eq!(specs["Launcher"]["replicas"], 1);
    assert_eq!(specs["Worker"]["replicas"], 2);
    let launcher = &specs["Launcher"]["template"]["spec"];
    let worker = &specs["Worker"]["template"]["spec"];
    assert_eq!(launcher["automountServiceAccountToken"], true);
    assert!(
        launcher["serviceAccountName"].is_null(),
        "the operator binds <job>-launcher"
    );
    assert_eq!(worker["automountServiceAccountToken"], false);
    for (rtype, pod) in [("Launcher", launcher), ("Worker", worker)] {
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{rtype}");
        let c = &pod["containers"][0];
        assert_eq!(c["name"], "mpi", "{rtype}");
        assert!(c["ports"].is_null(), "{rtype}: MPI has no port");
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    }
    let launcher = &launcher["containers"][0];
    assert_eq!(launcher["command"], json!(["mpirun"]));
    let args = launcher["args"].as_array().unwrap();
    assert!(!args.contains(&json!("--allow-run-as-root")));
    assert!(
        !args.contains(&json!("-np")),
        "mpirun fills the hostfile's slots"
    );
    assert!(worker["containers"][0]["command"].is_null());
    assert!(worker["containers"][0]["args"].is_null());

    let tuned = &render(
        "mpi-job",
        "mnist",
        &json!({
            "slotsPerWorker": 4,
            "mpiImplementation": "Intel",
            "runLauncherAsWorker": true,
            "workerCommand": ["/usr/sbin/sshd"],
            "workerArgs": ["-D"],
            "serviceAccount": "trainer",
        }),
    )
    .unwrap()[0];
    assert_eq!(tuned["spec"]["slotsPerWorker"], 4);
    assert_eq!(tuned["spec"]["mpiImplementation"], "Intel");
    assert_eq!(tuned["spec"]["runLauncherAsWorker"], true);
    let worker = &tuned["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"];
    assert_eq!(
        worker["containers"][0]["command"],
        json!(["/usr/sbin/sshd"])
    );
    assert_eq!(worker["containers"][0]["args"], json!(["-D"]));
    assert_eq!(worker["serviceAccountName"], "trainer");
    assert_eq!(worker["automountServiceAccountToken"], true);
}

#[test]
fn mpi_job_rejects_what_the_operator_would_not_run() {
    for (overrides, expected) in [
        (
            json!({ "workerArgs": ["-D"] }),
            "component mpi-job: param workerArgs: needs workerCommand",
        ),
        (
            json!({ "launcherCommand": [] }),
            "component mpi-job: param launcherCommand: is empty",
        ),
        (
            json!({ "slotsPerWorker": 0 }),
            "component mpi-job: param slotsPerWorker: must be 1 or more, got 0",
        ),
        (
            json!({ "mpiImplementation": "LAM" }),
            "component mpi-job: param mpiImplementation:",
        ),
        (
            json!({ "launcherArgs": ["-np", 2] }),
            "component mpi-job: param launcherArgs: must be a list of strings",
        ),
    ] {
        let error = render("mpi-job", "job", &overrides).unwrap_err();
        assert!(error.contains(expected), "{overrides}: {error}");
    }
}

/// `local` one Worker on CPU, `prod` four Workers with a GPU each, set as a user would; the
/// Launcher, which only runs mpirun, never gets a GPU.
#[test]
fn mpi_job_runs_one_cpu_worker_in_local_and_gpus_in_prod() {
    use mlkube::app::change::{self, ParamAssignment};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("app");
    let options = mlkube::app::init::InitOptions {
        dir: root.clone(),
        empty: true,
        ..Default::default()
    };
    let mut app = mlkube::app::init::init(&options).unwrap();
    change::add_component(&mut app, "mpi-job", "mpi", &[]).unwrap();
    for (env, key, value) in [
        ("local", "workerReplicas", "1"),
        ("local", "cpuRequest", "250m"),
        ("prod", "workerReplicas", "4"),
        ("prod", "gpus", "1"),
    ] {
        let assignment = ParamAssignment {
            component: "mpi".into(),
            key: key.into(),
            value: value.into(),
            env: Some(env.into()),
            as_string: false,
        };
        change::set_param(&app, &assignment).unwrap_or_else(|e| panic!("{env} {key}: {e}"));
    }
    let app = mlkube::app::App::load(&root).unwrap();
    let specs_of = |env: &str| {
        let manifest = app.render(env, &["mpi".to_owned()]).unwrap();
        assert_eq!(manifest.objects.len(), 1, "{env}");
        manifest.objects[0].value["spec"]["mpiReplicaSpecs"].clone()
    };
    let local = specs_of("local");
    assert_eq!(local["Launcher"]["replicas"], 1);
    assert_eq!(local["Worker"]["replicas"], 1);
    for rtype in ["Launcher", "Worker"] {
        let resources = &local[rtype]["template"]["spec"]["containers"][0]["resources"];
        assert_eq!(resources["requests"]["cpu"], "250m", "local {rtype}");
        assert!(resources["limits"].is_null(), "local {rtype}: no GPU");
    }
    let prod = specs_of("prod");
    assert_eq!(prod["Launcher"]["replicas"], 1);
    assert_eq!(prod["Worker"]["replicas"], 4);
    let limits = |rtype: &str| {
        prod[rtype]["template"]["spec"]["containers"][0]["resources"]["limits"].clone()
    };
    assert_eq!(limits("Worker")["nvidia.com/gpu"], 1);
    assert!(limits("Launcher")["nvidia.com/gpu"].is_null());
}

/// A sweep of MPIJobs appends its flags to the Launcher's program, labels every pod, and
/// leaves the Workers' command to the operator.
#[test]
fn mpi_job_sweep_appends_its_flags_to_the_launchers_args() {
    let objects = render(
        "mpi-job-sweep",
        "sweep",
        &json!({ "grid": { "lr": [0.1, 0.01] }, "workerReplicas": 1 }),
    )
    .unwrap();
    let jobs = objects.as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    let mut flags = Vec::new();
    for job in jobs {
        assert_eq!(job["kind"], "MPIJob");
        let name = job["metadata"]["name"].as_str().unwrap();
        assert!(
            name.starts_with("sweep-") && name.len() == "sweep-".len() + 10,
            "{name}"
        );
        let specs = &job["spec"]["mpiReplicaSpecs"];
        let args = specs["Launcher"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap();
        assert_eq!(
            args[args.len() - 2],
            "/horovod/examples/tensorflow2/tensorflow2_mnist.py"
        );
        flags.push(args.last().unwrap().as_str().unwrap().to_owned());
        let worker = &specs["Worker"]["template"];
        assert!(worker["spec"]["containers"][0]["args"].is_null());
        assert_eq!(
            worker["metadata"]["labels"]["sweep.mlkube.io/lr"],
            job["metadata"]["labels"]["sweep.mlkube.io/lr"]
        );
    }
    flags.sort();
    assert_eq!(flags, ["--lr=0.01", "--lr=0.1"]);
}

/// Each job prototype renders one job of its kind whose replicas run the container the operator
/// injects into, with the port it reads, non-root and without an API token, as tf-job's do.
#[test]
fn every_job_prototype_renders_its_frameworks_container_and_port_non_root_without_a_token() {
    for JobPrototype {
        name: prototype,
        kind,
        replica_specs: field,
        container,
        port_name: port,
        port: number,
        types,
    } in JOB_PROTOTYPES
    {
        let objects = render(prototype, "job", &json!({})).unwrap();
        let objects = objects.as_array().unwrap();
        assert_eq!(objects.len(), 1, "{prototype}: one job");
        let job = &objects[0];
        assert_eq!(job["apiVersion"], "kubeflow.org/v1", "{prototype}");
        assert_eq!(job["kind"], kind, "{prototype}");
        assert_eq!(job["metadata"]["name"], "job", "{prototype}");
        assert_eq!(
            job["metadata"]["labels"]["app.kubernetes.io/name"],
            prototype
        );
        assert_eq!(
            job["spec"]["runPolicy"]["cleanPodPolicy"], "Running",
            "{prototype}"
        );
        let specs = job["spec"][field]
            .as_object()
            .unwrap_or_else(|| panic!("{prototype}: {field}"));
        let rendered: Vec<&str> = specs.keys().map(String::as_str).collect();
        let mut expected = types.to_vec();
        expected.sort_unstable();
        assert_eq!(rendered, expected, "{prototype}: replica types");
        for (rtype, spec) in specs {
            let what = format!("{prototype} {rtype}");
            assert_eq!(spec["replicas"], 1, "{what}");
            let pod = &spec["template"]["spec"];
            assert_eq!(pod["automountServiceAccountToken"], false, "{what}");
            assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{what}");
            let containers = pod["containers"].as_array().unwrap();
            assert_eq!(containers.len(), 1, "{what}");
            let c = &containers[0];
            assert_eq!(c["name"], container, "{what}");
            assert_eq!(
                c["ports"],
                json!([{ "name": port, "containerPort": number, "protocol": "TCP" }]),
                "{what}"
            );
            assert_eq!(c["securityContext"]["runAsNonRoot"], true, "{what}");
            assert_eq!(
                c["securityContext"]["allowPrivilegeEscalation"], false,
                "{what}"
            );
            assert!(c["resources"]["requests"]["cpu"].is_string(), "{what}");
            assert!(
                c["resources"]["limits"].is_null(),
                "{what}: no limits by default"
            );
        }
    }
}

/// What a sweep calls on a job prototype (`replicaCounts`, `longestPodSuffix` and `job` with a
/// name, labels, annotations and extra args), the same for every framework as for tf-job.
#[test]
fn every_job_prototype_exposes_what_a_sweep_renders_it_with() {
    for prototype in [
        "tf-job",
        "pytorch-job",
        "jax-job",
        "xgboost-job",
        "paddle-job",
        "mxnet-job",
    ] {
        let shaped = evaluate(&format!(
            "local p = import 'mlkube/{prototype}.libsonnet';\n\
             local params = {{ [k]: p.params[k].default for k in std.objectFields(p.params) }} + {{ name: 'sweep' }};\n\
             {{\n\
               suffix: p.longestPodSuffix(p.replicaCounts('a-sweep', params)),\n\
               job: p.job('a-sweep', 'a-part', params, 'sweep-0123456789', labels={{ 'sweep.mlkube.io/lr': '0.1' }},\n\
                          annotations={{ 'sweep.mlkube.io/hyperparameters': '{{}}' }}, extraArgs=['--lr=0.1']),\n\
             }}\n"
        ))
        .unwrap_or_else(|e| panic!("{prototype}: {e}"));
        let job = &shaped["job"];
        assert_eq!(job["metadata"]["name"], "sweep-0123456789", "{prototype}");
        assert_eq!(
            job["metadata"]["labels"]["app.kubernetes.io/instance"],
            "sweep"
        );
        assert_eq!(
            job["metadata"]["labels"]["app.kubernetes.io/name"],
            "a-part"
        );
        assert_eq!(job["metadata"]["labels"]["sweep.mlkube.io/lr"], "0.1");
        assert_eq!(
            job["metadata"]["annotations"]["sweep.mlkube.io/hyperparameters"],
            "{}"
        );
        let specs = job["spec"]
            .as_object()
            .unwrap()
            .iter()
            .find(|(k, _)| k.ends_with("ReplicaSpecs"))
            .unwrap()
            .1;
        for (rtype, spec) in specs.as_object().unwrap() {
            let template = &spec["template"];
            assert_eq!(
                template["metadata"]["labels"]["sweep.mlkube.io/lr"], "0.1",
                "{prototype} {rtype}"
            );
            let args = template["spec"]["containers"][0]["args"]
                .as_array()
                .unwrap();
            assert_eq!(
                args.last().unwrap(),
                "--lr=0.1",
                "{prototype} {rtype}: extra args come last"
            );
        }
        let suffix = shaped["suffix"].as_str().unwrap();
        assert!(
            suffix.starts_with('-') && suffix.ends_with("-0"),
            "{prototype}: {suffix}"
        );
    }
}

/// An app with a job of each framework, `local` one replica on CPU, `prod` more replicas with a
/// GPU each, set with `param set --env` as a user would: the environments render what the issue
/// asks, and only where the framework's replicas train.
#[test]
fn every_job_prototype_runs_one_cpu_replica_in_local_and_gpus_in_prod() {
    use mlkube::app::change::{self, ParamAssignment};
    /// What `local` and `prod` set, and the replica types that get GPUs in prod.
    struct Environments {
        prototype: &'static str,
        local: &'static [(&'static str, &'static str)],
        prod: &'static [(&'static str, &'static str)],
        gpu_types: &'static [&'static str],
    }
    let cases = [
        Environments {
            prototype: "pytorch-job",
            local: &[("workerReplicas", "0")],
            prod: &[("workerReplicas", "4"), ("nprocPerNode", "gpu")],
            gpu_types: &["Master", "Worker"],
        },
        Environments {
            prototype: "jax-job",
            local: &[],
            prod: &[("workerReplicas", "4")],
            gpu_types: &["Worker"],
        },
        Environments {
            prototype: "xgboost-job",
            local: &[("workerReplicas", "0")],
            prod: &[("workerReplicas", "4")],
            gpu_types: &["Master", "Worker"],
        },
        Environments {
            prototype: "paddle-job",
            local: &[],
            prod: &[("workerReplicas", "4")],
            gpu_types: &["Worker"],
        },
        Environments {
            prototype: "mxnet-job",
            // Servers first: a Scheduler-less job renders only as a lone Worker, and each
            // value is rendered when it is set.
            local: &[("serverReplicas", "0"), ("schedulerReplicas", "0")],
            prod: &[("serverReplicas", "2"), ("workerReplicas", "4")],
            gpu_types: &["Worker"],
        },
    ];
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("app");
    let options = mlkube::app::init::InitOptions {
        dir: root.clone(),
        empty: true,
        ..Default::default()
    };
    let mut app = mlkube::app::init::init(&options).unwrap();
    let set = |app: &mlkube::app::App, component: &str, env: &str, key: &str, value: &str| {
        let assignment = ParamAssignment {
            component: component.into(),
            key: key.into(),
            value: value.into(),
            env: Some(env.into()),
            as_string: false,
        };
        change::set_param(app, &assignment)
            .unwrap_or_else(|e| panic!("{component}.{key}={value}: {e}"));
    };
    for Environments {
        prototype,
        local,
        prod,
        ..
    } in &cases
    {
        let component = prototype.trim_end_matches("-job");
        change::add_component(&mut app, prototype, component, &[]).unwrap();
        set(&app, component, "local", "cpuRequest", "250m");
        for (key, value) in local.iter() {
            set(&app, component, "local", key, value);
        }
        set(&app, component, "prod", "gpus", "1");
        for (key, value) in prod.iter() {
            set(&app, component, "prod", key, value);
        }
    }
    let app = mlkube::app::App::load(&root).unwrap();
    for Environments {
        prototype,
        gpu_types,
        ..
    } in &cases
    {
        let component = prototype.trim_end_matches("-job").to_owned();
        let job_of = |env: &str| {
            let manifest = app
                .render(env, std::slice::from_ref(&component))
                .unwrap_or_else(|e| panic!("{env}/{component}: {e:?}"));
            assert_eq!(manifest.objects.len(), 1, "{env}/{component}");
            manifest.objects[0].value.clone()
        };
        let specs = |job: &Value| -> Vec<(String, Value)> {
            let (_, specs) = job["spec"]
                .as_object()
                .unwrap()
                .iter()
                .find(|(k, _)| k.ends_with("ReplicaSpecs"))
                .unwrap();
            specs
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        let local = job_of("local");
        let local_specs = specs(&local);
        assert_eq!(
            local_specs.len(),
            1,
            "local {prototype}: one replica type, {local_specs:?}"
        );
        assert_eq!(
            local_specs[0].1["replicas"], 1,
            "local {prototype}: one replica"
        );
        let container = &local_specs[0].1["template"]["spec"]["containers"][0];
        assert_eq!(
            container["resources"]["requests"]["cpu"], "250m",
            "local {prototype}"
        );
        assert!(
            container["resources"]["limits"].is_null(),
            "local {prototype}: no GPU"
        );

        let prod = job_of("prod");
        for (rtype, spec) in specs(&prod) {
            let limits = &spec["template"]["spec"]["containers"][0]["resources"]["limits"];
            let expected = if gpu_types.contains(&rtype.as_str()) {
                json!(1)
            } else {
                Value::Null
            };
            assert_eq!(
                limits["nvidia.com/gpu"], expected,
                "prod {prototype} {rtype}"
            );
            if rtype == "Worker" {
                assert_eq!(spec["replicas"], 4, "prod {prototype}: 4 workers");
            }
        }
    }
    assert_eq!(
        app.render("prod", &["pytorch".to_owned()]).unwrap().objects[0].value["spec"]["nprocPerNode"],
        "gpu"
    );
}

#[test]
fn pytorch_job_elastic_policy_and_processes_per_node() {
    let job = &render(
        "pytorch-job",
        "elastic",
        &json!({
            "masterReplicas": 0,
            "workerReplicas": 2,
            "nprocPerNode": "4",
            "elasticPolicy": { "minReplicas": 1, "maxReplicas": 4, "rdzvBackend": "c10d", "maxRestarts": 3 },
        }),
    )
    .unwrap()[0];
    assert_eq!(job["spec"]["nprocPerNode"], "4");
    assert_eq!(job["spec"]["elasticPolicy"]["maxReplicas"], 4);
    assert_eq!(job["spec"]["elasticPolicy"]["rdzvBackend"], "c10d");
    let types: Vec<&String> = job["spec"]["pytorchReplicaSpecs"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(types, ["Worker"]);
    assert_eq!(
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"],
        "OnFailure"
    );
    let plain = &render("pytorch-job", "plain", &json!({})).unwrap()[0];
    assert!(
        plain["spec"].get("elasticPolicy").is_none() && plain["spec"].get("nprocPerNode").is_none()
    );
}

#[test]
fn mxnet_job_tuning_mode_takes_the_tuner_types() {
    let job = &render(
        "mxnet-job",
        "tune",
        &json!({ "jobMode": "MXTune", "gpus": 1 }),
    )
    .unwrap()[0];
    assert_eq!(job["spec"]["jobMode"], "MXTune");
    let specs = job["spec"]["mxReplicaSpecs"].as_object().unwrap();
    let types: Vec<&String> = specs.keys().collect();
    assert_eq!(types, ["Tuner", "TunerServer", "TunerTracker"]);
    let gpus = |t: &str| {
        specs[t]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
            .clone()
    };
    assert_eq!(gpus("TunerServer"), 1);
    assert_eq!(gpus("Tuner"), Value::Null);
    // A lone Worker decides an MXTrain job without a Scheduler.
    let lone = &render(
        "mxnet-job",
        "lone",
        &json!({ "schedulerReplicas": 0, "serverReplicas": 0 }),
    )
    .unwrap()[0];
    let types: Vec<&String> = lone["spec"]["mxReplicaSpecs"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(types, ["Worker"]);
}

#[test]
fn job_prototypes_bad_values_name_the_component_and_the_param() {
    let cases = [
        (
            "pytorch-job",
            json!({ "masterReplicas": 2 }),
            "component pytorch-job: param masterReplicas: must be 0 or 1, got 2",
        ),
        (
            "pytorch-job",
            json!({ "masterReplicas": 0, "workerReplicas": 0 }),
            "component pytorch-job: param workerReplicas: the job has neither a Master nor a Worker",
        ),
        (
            "pytorch-job",
            json!({ "nprocPerNode": "many" }),
            "component pytorch-job: param nprocPerNode: must be a number of processes, auto, cpu or gpu",
        ),
        (
            "pytorch-job",
            json!({ "elasticPolicy": { "minReplica": 1 } }),
            "component pytorch-job: param elasticPolicy: has no field minReplica",
        ),
        (
            "pytorch-job",
            json!({ "elasticPolicy": { "rdzvBackend": "zk" } }),
            "component pytorch-job: param elasticPolicy: rdzvBackend \"zk\" is not one of",
        ),
        (
            "pytorch-job",
            json!({ "elasticPolicy": { "nProcPerNode": 2 }, "nprocPerNode": "2" }),
            "component pytorch-job: param elasticPolicy: nProcPerNode and the nprocPerNode param",
        ),
        (
            "pytorch-job",
            json!({ "workerReplicas": 0, "elasticPolicy": {} }),
            "component pytorch-job: param elasticPolicy: needs Workers",
        ),
        (
            "jax-job",
            json!({ "workerReplicas": 0 }),
            "component jax-job: param workerReplicas: must be at least 1",
        ),
        (
            "xgboost-job",
            json!({ "workerReplicas": -1 }),
            "component xgboost-job: param workerReplicas: must not be negative",
        ),
        (
            "paddle-job",
            json!({ "workerReplicas": 0 }),
            "component paddle-job: param workerReplicas: the job has neither a Master nor a Worker",
        ),
        (
            "mxnet-job",
            json!({ "jobMode": "MXServe" }),
            "component mxnet-job: param jobMode: \"MXServe\" is not one of",
        ),
        (
            "mxnet-job",
            json!({ "tunerReplicas": 1 }),
            "component mxnet-job: param tunerReplicas: Tuner replicas belong to the other job mode",
        ),
        (
            "mxnet-job",
            json!({ "schedulerReplicas": 0 }),
            "component mxnet-job: param schedulerReplicas: the job has no Scheduler and not a lone Worker",
        ),
        (
            "mxnet-job",
            json!({ "jobMode": "MXTune", "tunerReplicas": 0 }),
            "component mxnet-job: param tunerReplicas: an MXTune job needs its Tuner",
        ),
        (
            "jax-job",
            json!({ "schedulingPolicy": { "queue": "q", "minMember": 2 } }),
            "component jax-job: param schedulingPolicy: has no field minMember",
        ),
        (
            "xgboost-job",
            json!({ "restartPolicy": "Sometimes" }),
            "component xgboost-job: param restartPolicy: \"Sometimes\" is not one of",
        ),
        (
            "paddle-job",
            json!({ "args": ["--steps", 100] }),
            "component paddle-job: param args: must be a list of strings",
        ),
    ];
    for (prototype, overrides, expected) in cases {
        let error = render(prototype, "x", &overrides)
            .expect_err(&format!("{prototype} with {overrides} should fail"));
        assert!(
            error.contains(expected),
            "{prototype} with {overrides}:\n{error}\nshould contain: {expected}"
        );
    }
}

#[test]
fn a_scheduling_policy_goes_into_the_run_policy() {
    let policy = json!({ "minAvailable": 2, "queue": "research", "priorityClass": "high" });
    for prototype in ["tf-job", "jax-job"] {
        let job = &render(prototype, "gang", &json!({ "schedulingPolicy": policy })).unwrap()[0];
        assert_eq!(
            job["spec"]["runPolicy"]["schedulingPolicy"], policy,
            "{prototype}"
        );
    }
}

/// Each framework's sweep prototype, its kind, container and replica-specs field.
const SWEEPS: [(&str, &str, &str, &str); 6] = [
    ("tf-job-sweep", "TFJob", "tensorflow", "tfReplicaSpecs"),
    (
        "pytorch-job-sweep",
        "PyTorchJob",
        "pytorch",
        "pytorchReplicaSpecs",
    ),
    ("jax-job-sweep", "JAXJob", "jax", "jaxReplicaSpecs"),
    (
        "xgboost-job-sweep",
        "XGBoostJob",
        "xgboost",
        "xgbReplicaSpecs",
    ),
    (
        "paddle-job-sweep",
        "PaddleJob",
        "paddle",
        "paddleReplicaSpecs",
    ),
    ("mxnet-job-sweep", "MXJob", "mxnet", "mxReplicaSpecs"),
];

/// Every framework's sweep renders its own kind of job, each exactly the single job prototype's
/// but for its name, its labels and annotation, and the flags after its args; a combination has
/// the same name in every framework's sweep of the same component name.
#[test]
fn every_framework_has_a_sweep_whose_jobs_are_its_job_prototypes() {
    let params = json!({
        "grid": { "lr": [0.1, 0.01] },
        "random": { "count": 2, "seed": 3, "ranges": { "momentum": { "min": 0.5, "max": 0.99, "log": true } } },
    });
    let mut names_by_sweep = Vec::new();
    for (prototype, kind, container, specs) in SWEEPS {
        let jobs = render(prototype, "s", &params).unwrap_or_else(|e| panic!("{prototype}: {e}"));
        let jobs = jobs.as_array().unwrap();
        assert_eq!(jobs.len(), 4, "{prototype}");
        let single_prototype = prototype.trim_end_matches("-sweep");
        let single = render(single_prototype, "s", &json!({})).unwrap();
        for job in jobs {
            assert_eq!(job["kind"], kind, "{prototype}");
            let combination: Value = serde_json::from_str(
                job["metadata"]["annotations"]["sweep.mlkube.io/hyperparameters"]
                    .as_str()
                    .unwrap(),
            )
            .unwrap();
            let flags = [
                format!("--lr={}", combination["lr"]),
                format!("--momentum={}", combination["momentum"]),
            ];
            let mut expected = single[0].clone();
            expected["metadata"] = job["metadata"].clone();
            for (replica_type, spec) in expected["spec"][specs].as_object_mut().unwrap() {
                let rendered = &job["spec"][specs][replica_type]["template"];
                spec["template"]["metadata"] = rendered["metadata"].clone();
                let main = spec["template"]["spec"]["containers"]
                    .as_array_mut()
                    .unwrap()
                    .iter_mut()
                    .find(|c| c["name"] == container)
                    .unwrap_or_else(|| panic!("{prototype}: no {container} container"));
                let mut args: Vec<Value> = main["args"].as_array().cloned().unwrap_or_default();
                args.extend(flags.iter().map(|f| json!(f)));
                main["args"] = json!(args);
            }
            assert_eq!(
                job, &expected,
                "{prototype}: only names, labels and flags differ"
            );
            assert_eq!(
                job["metadata"]["labels"]["app.kubernetes.io/name"],
                prototype
            );
            assert_eq!(
                job["metadata"]["labels"]["sweep.mlkube.io/lr"],
                combination["lr"].to_string()
            );
        }
        names_by_sweep.push(job_names(&Value::Array(jobs.clone())));
    }
    assert!(
        names_by_sweep.windows(2).all(|w| w[0] == w[1]),
        "a combination's name is its hash, whatever the framework: {names_by_sweep:?}"
    );
}

/// The sweep prototypes without a grid or a random search say what to set.
#[test]
fn a_sweep_without_a_grid_or_a_random_search_says_what_to_set() {
    for (prototype, ..) in SWEEPS.iter().skip(1) {
        let error = render(prototype, "s", &json!({})).unwrap_err();
        assert!(
            error.contains(&format!("component {prototype}: param grid: is empty; give each hyperparameter a list of values")),
            "{error}"
        );
    }
}

#[test]
fn pytorch_job_sweep_with_a_grid_and_a_random_search() {
    let objects = render(
        "pytorch-job-sweep",
        "sweep",
        &json!({
            "grid": { "lr": [0.1, 0.01] },
            "random": { "count": 1, "seed": 1, "ranges": { "momentum": { "min": 0.5, "max": 0.99 } } },
            "objective": { "metric": "accuracy", "goal": "maximize" },
        }),
    )
    .unwrap();
    insta::assert_yaml_snapshot!(snapshot_view(objects));
}

#[test]
fn framework_with_default_params() {
    insta::assert_yaml_snapshot!(render("framework", "hello", &json!({})).unwrap());
}

/// Two TaskRoles, the second with its own image, command, env, resources, completion counts and
/// retry policy: each gets what it sets and the params give it the rest.
#[test]
fn framework_task_roles_take_their_own_settings_and_the_params_the_rest() {
    let objects = render(
        "framework",
        "train",
        &json!({
            "taskRoles": [
                { "name": "ps", "taskNumber": 1, "minFailedTaskCount": -1 },
                { "name": "worker", "taskNumber": 3, "image": "example/train:2", "command": ["python3", "train.py"],
                  "args": ["--epochs=2"], "env": { "ROLE": "worker" }, "gpus": 1, "cpuRequest": "2",
                  "minSucceededTaskCount": 3,
                  "taskRetryPolicy": { "fancyRetryPolicy": true, "maxRetryCount": 3 },
                  "podGracefulDeletionTimeoutSec": 60 },
            ],
            "env": { "SHARED": 1 },
            "executionType": "Create",
            "fancyRetryPolicy": true,
            "maxRetryCount": -1,
            "serviceAccount": "trainer",
        }),
    )
    .unwrap();
    let framework = &objects[0];
    assert_eq!(
        framework["apiVersion"],
        "frameworkcontroller.microsoft.com/v1"
    );
    assert_eq!(framework["kind"], "Framework");
    assert_eq!(framework["metadata"]["name"], "train");
    let spec = &framework["spec"];
    assert_eq!(spec["executionType"], "Create");
    assert_eq!(
        spec["retryPolicy"],
        json!({ "fancyRetryPolicy": true, "maxRetryCount": -1 })
    );
    let (ps, worker) = (&spec["taskRoles"][0], &spec["taskRoles"][1]);
    assert_eq!(ps["name"], "ps");
    assert_eq!(ps["taskNumber"], 1);
    assert_eq!(
        ps["frameworkAttemptCompletionPolicy"],
        json!({ "minFailedTaskCount": -1, "minSucceededTaskCount": -1 })
    );
    assert_eq!(
        ps["task"]["retryPolicy"],
        json!({ "fancyRetryPolicy": false, "maxRetryCount": 0 })
    );
    assert!(ps["task"].get("podGracefulDeletionTimeoutSec").is_none());
    let ps_container = &ps["task"]["pod"]["spec"]["containers"][0];
    assert_eq!(ps_container["name"], "ps");
    assert_eq!(ps_container["image"], "docker.io/library/busybox:1.36");
    assert_eq!(
        ps_container["env"],
        json!([{ "name": "SHARED", "value": "1" }])
    );
    assert_eq!(worker["taskNumber"], 3);
    assert_eq!(
        worker["frameworkAttemptCompletionPolicy"],
        json!({ "minFailedTaskCount": 1, "minSucceededTaskCount": 3 })
    );
    assert_eq!(
        worker["task"]["retryPolicy"],
        json!({ "fancyRetryPolicy": true, "maxRetryCount": 3 })
    );
    assert_eq!(worker["task"]["podGracefulDeletionTimeoutSec"], 60);
    let pod = &worker["task"]["pod"];
    assert_eq!(pod["spec"]["restartPolicy"], "Never");
    assert_eq!(pod["spec"]["serviceAccountName"], "trainer");
    assert_eq!(pod["spec"]["automountServiceAccountToken"], true);
    assert_eq!(pod["spec"]["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["metadata"]["labels"]["app.kubernetes.io/instance"],
        "train"
    );
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["name"], "worker");
    assert_eq!(container["image"], "example/train:2");
    assert_eq!(container["command"], json!(["python3", "train.py"]));
    assert_eq!(container["args"], json!(["--epochs=2"]));
    assert_eq!(
        container["env"],
        json!([{ "name": "ROLE", "value": "worker" }, { "name": "SHARED", "value": "1" }])
    );
    assert_eq!(container["resources"]["requests"]["cpu"], "2");
    assert_eq!(container["resources"]["limits"]["nvidia.com/gpu"], 1);
    assert_eq!(container["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    assert_eq!(
        container["securityContext"]["capabilities"]["drop"],
        json!(["ALL"])
    );
}

#[test]
fn framework_bad_values_name_the_component_and_the_param() {
    let role = |extra: Value| {
        let mut role = json!({ "name": "worker", "taskNumber": 1 });
        role.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({ "taskRoles": [role] })
    };
    let cases = [
        (
            json!({ "taskRoles": [] }),
            "param taskRoles: must list at least one TaskRole",
        ),
        (
            role(json!({ "name": "the-workers" })),
            "param taskRoles: taskRoles[0]: name \"the-workers\" must be 1 to 63 lowercase letters and digits, without \"-\"",
        ),
        (
            json!({ "taskRoles": [{ "name": "worker" }] }),
            "param taskRoles: TaskRole worker has no taskNumber",
        ),
        (
            role(json!({ "taskNumber": 801 })),
            "param taskRoles: the taskNumber of TaskRole worker must be a whole number from 0 to 800, got 801",
        ),
        (
            role(json!({ "taskNumber": -1 })),
            "the taskNumber of TaskRole worker must be a whole number from 0 to 800, got -1",
        ),
        (
            role(json!({ "replicas": 2 })),
            "param taskRoles: taskRoles[0] has no field replicas; a TaskRole takes args, command",
        ),
        (
            json!({ "taskRoles": [{ "name": "a", "taskNumber": 1 }, { "name": "a", "taskNumber": 2 }] }),
            "param taskRoles: two TaskRoles are named \"a\"",
        ),
        (
            json!({ "taskRoles": [{ "name": "a", "taskNumber": 500 }, { "name": "b", "taskNumber": 301 }] }),
            "param taskRoles: the taskNumbers add up to 801 Tasks, more than the 800 a Framework may have",
        ),
        (
            role(json!({ "minFailedTaskCount": -2 })),
            "the minFailedTaskCount of TaskRole worker must be a whole number, -1 (never) or more, got -2",
        ),
        (
            role(json!({ "taskRetryPolicy": { "maxRetryCount": -3 } })),
            "the taskRetryPolicy of TaskRole worker: maxRetryCount must be a whole number, -2 (always retry)",
        ),
        (
            role(json!({ "taskRetryPolicy": { "retries": 1 } })),
            "the taskRetryPolicy of TaskRole worker has no field retries; its fields are fancyRetryPolicy, maxRetryCount",
        ),
        (
            role(json!({ "podGracefulDeletionTimeoutSec": -5 })),
            "the podGracefulDeletionTimeoutSec of TaskRole worker must be null (never force-delete a pod) or seconds",
        ),
        (
            role(json!({ "args": ["--steps", 100] })),
            "the args of TaskRole worker must be a list of strings",
        ),
        (
            role(json!({ "env": { "A": [1] } })),
            "the value of A in the env of TaskRole worker must be a string, number or boolean",
        ),
        (
            json!({ "executionType": "Run" }),
            "param executionType: \"Run\" is not one of \"Create\", \"Start\", \"Stop\"",
        ),
        (
            json!({ "maxRetryCount": -3 }),
            "param maxRetryCount: the RetryPolicy: maxRetryCount must be a whole number, -2",
        ),
        (
            json!({ "runAsUser": 0 }),
            "param runAsUser: must be a non-root user id",
        ),
        (
            json!({ "restartPolicy": "ExitCode" }),
            "param restartPolicy: \"ExitCode\" is not one of \"Never\", \"OnFailure\", \"Always\"",
        ),
    ];
    for (overrides, expected) in cases {
        let error = render("framework", "x", &overrides)
            .expect_err(&format!("framework with {overrides} should fail"));
        assert!(
            error.contains(&format!("component framework: {expected}")) || error.contains(expected),
            "framework with {overrides}:\n{error}\nshould contain: {expected}"
        );
    }
    let error = render("framework", "my-job", &json!({})).unwrap_err();
    assert!(
        error.contains(
            "component framework: param name: the Framework name \"my-job\" must be 1 to 63 \
             lowercase letters and digits, without \"-\""
        ),
        "{error}"
    );
}

/// A Framework sweep renders the framework prototype's Framework per combination, its name
/// `<component><hash>` without a `-`, the flags after every TaskRole's args.
#[test]
fn framework_sweep_renders_frameworks_named_without_a_dash() {
    let params = json!({
        "taskRoles": [{ "name": "ps", "taskNumber": 1 }, { "name": "worker", "taskNumber": 2 }],
        "grid": { "lr": [0.1, 0.01] },
        "objective": { "metric": "accuracy", "goal": "maximize" },
    });
    let jobs = render("framework-sweep", "sweep", &params).unwrap();
    let jobs = jobs.as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    let single = render("framework", "sweep", &params).unwrap();
    for job in jobs {
        let name = job["metadata"]["name"].as_str().unwrap();
        assert!(
            name.len() == "sweep".len() + 10 && name.starts_with("sweep") && !name.contains('-'),
            "{name}"
        );
        let lr = &job["metadata"]["labels"]["sweep.mlkube.io/lr"];
        let flag = format!("--lr={}", lr.as_str().unwrap());
        let mut expected = single[0].clone();
        expected["metadata"] = job["metadata"].clone();
        for (i, role) in expected["spec"]["taskRoles"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .enumerate()
        {
            let rendered = &job["spec"]["taskRoles"][i]["task"]["pod"];
            role["task"]["pod"]["metadata"] = rendered["metadata"].clone();
            role["task"]["pod"]["spec"]["containers"][0]["args"] = json!([flag]);
        }
        assert_eq!(job, &expected, "only names, labels and flags differ");
        assert_eq!(
            job["metadata"]["annotations"]["sweep.mlkube.io/objective"],
            r#"{"goal":"maximize","metric":"accuracy"}"#
        );
    }
    // The name has room for the hash and the longest pod suffix, `-worker-1`.
    let long = "a".repeat(63 - 10 - "-worker-1".len() + 1);
    let error = render("framework-sweep", &long, &params).unwrap_err();
    assert!(error.contains("is too long for a sweep"), "{error}");
    let error = render("framework-sweep", "sweep", &json!({})).unwrap_err();
    assert!(
        error.contains("component framework-sweep: param grid: is empty"),
        "{error}"
    );
}

/// The rendered object of `kind` (the first one).
fn object_of<'a>(objects: &'a Value, kind: &str) -> &'a Value {
    objects
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} rendered"))
}

/// A role's rules, one line each: API groups, resources, resource names if any, verbs.
fn rule_lines(role: &Value) -> Vec<String> {
    role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let names = r
                .get("resourceNames")
                .map_or(String::new(), |n| format!(" {n}"));
            format!(
                "{} {}{names} {}",
                r["apiGroups"], r["resources"], r["verbs"]
            )
        })
        .collect()
}

fn traefik_args(objects: &Value) -> Vec<String> {
    serde_json::from_value(
        object_of(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
            .clone(),
    )
    .unwrap()
}

/// The paths no other route takes go to `mlkube gateway-fallback`: a route for `/` on the
/// component's Gateway to the fallback's Service, whose pods (and only they) run it, without a
/// ServiceAccount token; `fallbackImage: null` leaves Traefik's own 404.
#[test]
fn gateway_routes_what_no_other_route_takes_to_the_fallback() {
    let objects = render("gateway", "gw", &json!({})).unwrap();
    let named = |kind: &str| {
        (objects.as_array().unwrap().iter())
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == "gw-fallback")
            .unwrap_or_else(|| panic!("{kind} gw-fallback"))
            .clone()
    };
    let route = named("HTTPRoute");
    assert_eq!(route["spec"]["parentRefs"], json!([{ "name": "gw" }]));
    assert_eq!(
        route["spec"]["rules"],
        json!([{ "matches": [{ "path": { "type": "PathPrefix", "value": "/" } }],
                 "backendRefs": [{ "name": "gw-fallback", "port": 8080 }] }])
    );
    let service = named("Service");
    let pod = named("Deployment")["spec"]["template"].clone();
    assert_eq!(service["spec"]["selector"], pod["metadata"]["labels"]);
    assert_ne!(
        pod["metadata"]["labels"],
        named_traefik_pod_labels(&objects),
        "the gateway's Service must not select the fallback"
    );
    assert_eq!(pod["spec"]["automountServiceAccountToken"], false);
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["image"], "mlkube/mlkube:0.1.0");
    assert_eq!(
        container["command"],
        json!(["mlkube", "gateway-fallback", "--listen", ":8080"])
    );
    let without = render("gateway", "gw", &json!({ "fallbackImage": null })).unwrap();
    assert!(
        !kinds_and_names(&without)
            .iter()
            .any(|k| k.ends_with("gw-fallback")),
        "{:?}",
        kinds_and_names(&without)
    );
}

/// The labels of the Traefik pods of a rendered gateway.
fn named_traefik_pod_labels(objects: &Value) -> Value {
    (objects.as_array().unwrap().iter())
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "gw")
        .expect("Traefik's Deployment")["spec"]["template"]["metadata"]["labels"]
        .clone()
}

#[test]
fn gateway_with_default_params_serves_one_http_listener_on_a_class_of_its_own() {
    let objects = render("gateway", "gateway", &json!({})).unwrap();
    assert_eq!(
        kinds_and_names(&objects),
        [
            "CustomResourceDefinition gatewayclasses.gateway.networking.k8s.io",
            "CustomResourceDefinition gateways.gateway.networking.k8s.io",
            "CustomResourceDefinition httproutes.gateway.networking.k8s.io",
            "CustomResourceDefinition grpcroutes.gateway.networking.k8s.io",
            "CustomResourceDefinition tlsroutes.gateway.networking.k8s.io",
            "CustomResourceDefinition referencegrants.gateway.networking.k8s.io",
            "CustomResourceDefinition backendtlspolicies.gateway.networking.k8s.io",
            "GatewayClass kubeflow-gateway",
            "Gateway gateway",
            "ServiceAccount gateway",
            "ConfigMap gateway",
            "ClusterRole kubeflow-gateway",
            "ClusterRoleBinding kubeflow-gateway",
            "Role gateway",
            "RoleBinding gateway",
            "Deployment gateway",
            "Service gateway",
            "PodDisruptionBudget gateway",
            "Deployment gateway-fallback",
            "Service gateway-fallback",
            "HTTPRoute gateway-fallback",
        ]
    );
    // Each CRD is its file in crds/, as the Gateway API ships it.
    snapshot_view(objects.clone());
    let class = object_of(&objects, "GatewayClass");
    assert_eq!(
        class["spec"]["controllerName"],
        "traefik.io/gateway-controller"
    );
    assert_eq!(
        class["metadata"]["labels"]["mlkube.io/gateway-namespace"],
        "kubeflow"
    );
    assert_eq!(
        object_of(&objects, "Gateway")["spec"],
        json!({
            "gatewayClassName": "kubeflow-gateway",
            "listeners": [{
                "name": "http", "protocol": "HTTP", "port": 8000,
                "allowedRoutes": { "namespaces": { "from": "Same" } },
            }],
        })
    );
    let args = traefik_args(&objects);
    for expected in [
        "--providers.http.endpoint=http://127.0.0.1:8081/config",
        "--providers.http.pollinterval=1s",
        "--entrypoints.web.address=:8000",
        "--ping=true",
        "--global.checknewversion=false",
    ] {
        assert!(args.iter().any(|a| a == expected), "{expected} in {args:?}");
    }
    assert!(
        !args.iter().any(|a| a.contains("kubernetes")),
        "Traefik reads nothing from the cluster: {args:?}"
    );
    let routes = routes_container(&objects);
    assert_eq!(
        routes["command"],
        json!([
            "mlkube",
            "gateway-routes",
            "--gateway=kubeflow/gateway",
            "--class=kubeflow-gateway",
            "--controller-name=traefik.io/gateway-controller",
            "--port=8000",
            "--entry-point=web",
            "--address=gateway.kubeflow.svc",
            "--listen=127.0.0.1:8081",
            "--probes=:8082",
        ])
    );
    assert_eq!(routes["image"], "mlkube/mlkube:0.1.0");
    assert!(
        !args.iter().any(|a| a.starts_with("--api")),
        "no API or dashboard: {args:?}"
    );
    assert_eq!(
        object_of(&objects, "Service")["spec"],
        json!({
            "type": "ClusterIP",
            "selector": { "app.kubernetes.io/name": "gateway", "app.kubernetes.io/instance": "gateway" },
            "ports": [{ "name": "http", "port": 8000, "targetPort": "web", "protocol": "TCP" }],
        })
    );
}

/// Traefik's pods spread over the nodes and go through a drain serving: each serves on once
/// told to stop until kube-proxy sends it nothing new, closes kept-alive connections well before
/// that ends, and finishes what is in flight; a budget lets a drain take one at a time.
#[test]
fn gateway_pods_spread_over_the_nodes_and_a_drain_takes_one_at_a_time() {
    let objects = render("gateway", "gateway", &json!({ "replicas": 2 })).unwrap();
    assert_drainable(&objects, "gateway", json!({ "maxUnavailable": 1 }), 5);
    let args = traefik_args(&objects);
    for expected in [
        "--entrypoints.web.transport.keepalivemaxtime=2s",
        "--entrypoints.web.transport.lifecycle.gracetimeout=10s",
    ] {
        assert!(args.iter().any(|a| a == expected), "{expected} in {args:?}");
    }
    let pod = &object_of(&objects, "Deployment")["spec"]["template"]["spec"];
    assert!(pod["terminationGracePeriodSeconds"].as_i64() > Some(5 + 10));
}

/// A new Traefik pod is admitted by the servers' NetworkPolicies a moment after it starts, so
/// every route of the entry point tries a refused connection again, from a file of the
/// ConfigMap the pods mount; a change to that file rolls them.
#[test]
fn gateway_tries_a_refused_connection_again_on_every_route() {
    let objects = render("gateway", "gateway", &json!({})).unwrap();
    let args = traefik_args(&objects);
    for expected in [
        "--entrypoints.web.http.middlewares=retry-refused@file",
        "--providers.file.filename=/etc/traefik/dynamic.yaml",
    ] {
        assert!(args.iter().any(|a| a == expected), "{expected} in {args:?}");
    }
    let file = object_of(&objects, "ConfigMap")["data"]["dynamic.yaml"]
        .as_str()
        .expect("the ConfigMap holds dynamic.yaml");
    let dynamic: Value = serde_yaml::from_str(file).unwrap();
    assert_eq!(
        dynamic["http"]["middlewares"]["retry-refused"],
        json!({ "retry": { "attempts": 10, "initialInterval": "250ms", "timeout": "5s" } })
    );
    let template = &object_of(&objects, "Deployment")["spec"]["template"];
    assert_eq!(
        template["spec"]["volumes"][1],
        json!({ "name": "dynamic", "configMap": { "name": "gateway" } })
    );
    assert!(
        template["metadata"]["annotations"]["mlkube.io/dynamic-config"].is_string(),
        "{template}"
    );
}

/// The routes sidecar of a gateway pod, which feeds Traefik.
fn routes_container(objects: &Value) -> Value {
    object_of(objects, "Deployment")["spec"]["template"]["spec"]["initContainers"][0].clone()
}

/// `mlkube gateway-routes` lists and watches the Gateway API's objects, Services and
/// EndpointSlices, never a Secret or ConfigMap, and patches only statuses: in its own namespace
/// unless routes of every namespace may attach.
#[test]
fn gateway_rbac_reads_no_secret_and_patches_only_statuses() {
    let cluster_wide = [
        r#"["gateway.networking.k8s.io"] ["gatewayclasses"] ["list","watch"]"#,
        r#"["gateway.networking.k8s.io"] ["gatewayclasses/status"] ["kubeflow-gateway"] ["patch"]"#,
    ];
    let watched = [
        r#"[""] ["services"] ["list","watch"]"#,
        r#"["discovery.k8s.io"] ["endpointslices"] ["list","watch"]"#,
        r#"["gateway.networking.k8s.io"] ["gateways","httproutes","referencegrants"] ["list","watch"]"#,
        r#"["gateway.networking.k8s.io"] ["gateways/status","httproutes/status"] ["patch"]"#,
    ];
    let same = render("gateway", "gateway", &json!({})).unwrap();
    assert_eq!(rule_lines(object_of(&same, "ClusterRole")), cluster_wide);
    assert_eq!(rule_lines(object_of(&same, "Role")), watched);

    let all = render("gateway", "gateway", &json!({ "routeNamespaces": "All" })).unwrap();
    assert!(!kinds_and_names(&all).iter().any(|o| o.starts_with("Role")));
    let everything: Vec<&str> = cluster_wide.iter().chain(&watched).copied().collect();
    assert_eq!(rule_lines(object_of(&all, "ClusterRole")), everything);
    assert_eq!(
        object_of(&all, "Gateway")["spec"]["listeners"][0]["allowedRoutes"],
        json!({ "namespaces": { "from": "All" } })
    );
    let command = routes_container(&all)["command"].clone();
    assert_eq!(
        command.as_array().unwrap().last().unwrap(),
        "--all-namespaces",
        "gateway-routes watches every namespace: {command}"
    );
}

/// Traefik, which faces every client, holds no Kubernetes credentials: the pod mounts no token
/// by default, and only the routes sidecar (started before Traefik, stopped after it) mounts
/// one, with the cluster's CA and its namespace, where a client looks for them.
#[test]
fn gateway_traefik_holds_no_credentials_and_only_the_routes_sidecar_has_the_token() {
    let objects = render("gateway", "gateway", &json!({})).unwrap();
    let pod = &object_of(&objects, "Deployment")["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false);
    let traefik = &pod["containers"][0];
    let mounts = traefik["volumeMounts"].to_string();
    assert!(
        !mounts.contains("api-access") && !mounts.contains("serviceaccount"),
        "{mounts}"
    );
    let routes = routes_container(&objects);
    assert_eq!(routes["restartPolicy"], "Always");
    assert_eq!(routes["startupProbe"]["httpGet"]["path"], "/synced");
    assert_eq!(routes["readinessProbe"]["httpGet"]["path"], "/ready");
    assert_eq!(
        routes["volumeMounts"],
        json!([{ "name": "api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true }])
    );
    let access = (pod["volumes"].as_array().unwrap().iter())
        .find(|v| v["name"] == "api-access")
        .expect("the token's volume");
    let sources = access["projected"]["sources"].to_string();
    for expected in [
        "serviceAccountToken",
        "kube-root-ca.crt",
        "metadata.namespace",
    ] {
        assert!(sources.contains(expected), "{expected} in {sources}");
    }
}

#[test]
fn gateway_node_port_and_without_crds() {
    let objects = render(
        "gateway",
        "gateway",
        &json!({ "serviceType": "NodePort", "nodePort": 30080, "crds": false }),
    )
    .unwrap();
    assert!(
        !kinds_and_names(&objects)
            .iter()
            .any(|o| o.starts_with("CustomResourceDefinition")),
        "crds: false renders none"
    );
    let service = &object_of(&objects, "Service")["spec"];
    assert_eq!(service["type"], "NodePort");
    assert_eq!(service["ports"][0]["nodePort"], 30080);
}

#[test]
fn gateway_bad_values_name_the_param() {
    for (params, expected) in [
        (
            json!({ "serviceType": "NodePort", "nodePort": 80 }),
            "component gateway: param nodePort: must be in the node port range 30000-32767, got 80",
        ),
        (
            json!({ "nodePort": 30080 }),
            "component gateway: param nodePort: is set but serviceType is ClusterIP",
        ),
        (
            json!({ "port": 8080 }),
            "component gateway: param port: must be a port from 1 to 65535 other than 8080",
        ),
        (
            json!({ "port": 70000 }),
            "component gateway: param port: must be a port from 1 to 65535",
        ),
        (
            json!({ "serviceType": "LoadBalancer" }),
            "component gateway: param serviceType: \"LoadBalancer\" is not one of",
        ),
        (
            json!({ "routeNamespaces": "Selector" }),
            "component gateway: param routeNamespaces: \"Selector\" is not one of",
        ),
    ] {
        let error = render("gateway", "gateway", &params).unwrap_err();
        assert!(error.contains(expected), "{params}: {error}");
    }
}

/// servingGateway runs the InferenceService controller: the operator's flags name the Gateway
/// (this namespace's, when given by name alone), KServe's three CRDs and the kserve-mlserver
/// ClusterServingRuntime are rendered, and the runtime is one the controller selects for an
/// xgboost model over V2 (and builds a pod from, with the model's name filled in).
#[test]
fn training_operator_runs_the_inference_service_controller_with_a_gateway() {
    use mlkube::operator::serving::{api, predictor, select};
    let objects = render(
        "training-operator",
        "op",
        &json!({ "servingGateway": "gateway" }),
    )
    .unwrap();
    let objects = objects.as_array().unwrap();
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let args: Vec<&str> = (deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter())
    .filter_map(|a| a.as_str())
    .collect();
    let after = |flag: &str| args[args.iter().position(|a| *a == flag).unwrap() + 1];
    assert_eq!(after("--controllers"), "training,fc,serving");
    assert_eq!(after("--serving-gateway"), "kubeflow/gateway");
    assert_eq!(after("--storage-initializer-image"), "mlkube/serving:0.1.0");
    let crds: Vec<&str> = (objects.iter())
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .filter_map(|o| o["metadata"]["name"].as_str())
        .filter(|n| n.ends_with("serving.kserve.io"))
        .collect();
    assert_eq!(crds.len(), 3, "{crds:?}");
    let runtime = objects
        .iter()
        .find(|o| o["kind"] == "ClusterServingRuntime")
        .unwrap();
    let runtime: api::ClusterServingRuntime = serde_json::from_value(runtime.clone()).unwrap();
    assert_eq!(runtime.metadata.name.as_deref(), Some("kserve-mlserver"));
    let model: api::ModelSpec = serde_json::from_value(json!({
        "modelFormat": { "name": "xgboost" }, "protocolVersion": "v2", "storageUri": "s3://models/digits/1/"
    }))
    .unwrap();
    let candidates = [select::Runtime {
        name: "kserve-mlserver",
        cluster: true,
        created: None,
        spec: &runtime.spec.spec,
    }];
    let chosen = select::select(&model, "team-a", &candidates).expect("selected");
    for format in ["sklearn", "lightgbm", "tensorflow"] {
        let other: api::ModelSpec = serde_json::from_value(json!({
            "modelFormat": { "name": format }, "protocolVersion": "v2", "storageUri": "s3://m/d/1/"
        }))
        .unwrap();
        let served = select::select(&other, "team-a", &candidates);
        assert!(served.is_ok(), "kserve-mlserver serves {format}");
    }
    let mut isvc = api::InferenceService::new(
        "digits",
        serde_json::from_value(json!({ "predictor": { "model": model } })).unwrap(),
    );
    isvc.metadata.namespace = Some("team-a".into());
    let built = predictor::build(&predictor::Inputs {
        isvc: &isvc,
        runtime: Some((chosen.name, chosen.spec)),
        storage_image: "mlkube/serving:0.1.0",
        store_env: &[],
    })
    .unwrap();
    let pod = serde_json::to_value(&built.template).unwrap();
    assert_eq!(pod["spec"]["containers"][0]["args"][1], "digits");
    assert_eq!(
        pod["spec"]["containers"][0]["readinessProbe"]["httpGet"]["path"],
        "/v2/models/digits/ready"
    );
    let bad = render(
        "training-operator",
        "op",
        &json!({ "servingGateway": "a/b/c" }),
    )
    .unwrap_err();
    assert!(bad.contains("servingGateway"), "{bad}");
}

/// The inference-service prototype renders an InferenceService the controller reads, with the
/// version in its model's URI and the canary's share; with objectStore, a ServiceAccount that
/// lists the store's read-only keys, which the store annotates with its endpoint KServe's way
/// (and may patch, that Secret alone). Bad params name themselves.
#[test]
fn an_inference_service_serves_a_version_from_the_store_with_its_read_keys() {
    use mlkube::operator::serving::api;
    let params = json!({ "storageUri": "s3://models/digits/{version}/", "version": "v2",
                         "canaryTrafficPercent": 10, "maxReplicas": 3 });
    let objects = render("inference-service", "digits", &params).unwrap();
    let objects = objects.as_array().unwrap();
    let isvc = objects
        .iter()
        .find(|o| o["kind"] == "InferenceService")
        .unwrap();
    let isvc: api::InferenceService = serde_json::from_value(isvc.clone()).unwrap();
    let predictor = &isvc.spec.predictor;
    let model = predictor.model.as_ref().unwrap();
    assert_eq!(model.storage_uri.as_deref(), Some("s3://models/digits/v2/"));
    assert_eq!(model.protocol_version.as_deref(), Some("v2"));
    assert_eq!(predictor.canary_traffic_percent, Some(10));
    assert_eq!(predictor.service_account_name.as_deref(), Some("digits"));
    let account = objects
        .iter()
        .find(|o| o["kind"] == "ServiceAccount")
        .unwrap();
    assert_eq!(
        account["secrets"][0]["name"],
        "object-store-read-credentials"
    );

    let store = render("object-store", "object-store", &json!({})).unwrap();
    let store = store.as_array().unwrap();
    let set = store.iter().find(|o| o["kind"] == "StatefulSet").unwrap();
    let init = &set["spec"]["template"]["spec"]["initContainers"][0];
    let env = init["env"].as_array().unwrap();
    let annotations = env
        .iter()
        .find(|e| e["name"] == "READ_SECRET_ANNOTATIONS")
        .unwrap();
    let annotations: Value = serde_json::from_str(annotations["value"].as_str().unwrap()).unwrap();
    let endpoint = store.iter().find(|o| o["kind"] == "ConfigMap").unwrap();
    assert_eq!(
        format!(
            "http://{}",
            annotations["serving.kserve.io/s3-endpoint"]
                .as_str()
                .unwrap()
        ),
        endpoint["data"]["AWS_ENDPOINT_URL"]
    );
    assert_eq!(annotations["serving.kserve.io/s3-usehttps"], "0");
    let role = store.iter().find(|o| o["kind"] == "Role").unwrap();
    let patch = (role["rules"].as_array().unwrap().iter())
        .find(|r| r["verbs"] == json!(["patch"]))
        .unwrap();
    assert_eq!(
        patch["resourceNames"],
        json!(["object-store-read-credentials"])
    );

    for (params, expected) in [
        (
            json!({ "storageUri": "gs://b/{version}" }),
            "param storageUri: \"gs://b/v1\" is neither",
        ),
        (
            json!({ "storageUri": "s3://models/{model}/" }),
            "a placeholder other than {version}",
        ),
        (
            json!({ "objectStore": null }),
            "param objectStore: \"s3://models/v1/\" is in an object store",
        ),
        (
            json!({ "minReplicas": 3, "maxReplicas": 2 }),
            "param maxReplicas: 2 is below minReplicas 3",
        ),
        (
            json!({ "version": "a/b" }),
            "param version: \"a/b\" is not a name",
        ),
        (
            json!({ "protocolVersion": "v3" }),
            "param protocolVersion: \"v3\" is not one of",
        ),
    ] {
        let error = render("inference-service", "digits", &params).unwrap_err();
        assert!(error.contains(expected), "{params}: {error}");
    }
}

#[test]
fn inference_service_with_default_params() {
    let objects = render("inference-service", "digits", &json!({})).unwrap();
    insta::assert_yaml_snapshot!(snapshot_view(objects));
}
