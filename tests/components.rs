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

const PROTOTYPES: [&str; 6] = [
    "tf-job-operator",
    "notebook-hub",
    "tf-serving",
    "volume-controller",
    "tf-job",
    "tf-job-sweep",
];
const ENVIRONMENTS: [&str; 3] = ["local", "dev", "prod"];
const TYPES: [&str; 6] = ["string", "integer", "number", "boolean", "array", "object"];

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
fn tf_job_operator_with_default_params() {
    let objects = render("tf-job-operator", "tf-job-operator", &json!({})).unwrap();
    insta::assert_yaml_snapshot!(snapshot_view(objects));
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
        (json!({}), false, true),
        (json!({ "hubDbStorage": "1Gi" }), true, false),
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

#[test]
fn tf_serving_with_default_params() {
    let objects = render("tf-serving", "mnist", &json!({})).unwrap();
    insta::assert_yaml_snapshot!(snapshot_view(objects));
}

#[test]
fn volume_controller_with_default_params() {
    let objects = render("volume-controller", "volume-controller", &json!({})).unwrap();
    insta::assert_yaml_snapshot!(snapshot_view(objects));
}

#[test]
fn tf_job_with_default_params() {
    let objects = render("tf-job", "mnist", &json!({})).unwrap();
    insta::assert_yaml_snapshot!(snapshot_view(objects));
}

#[test]
fn tf_job_sweep_with_default_params() {
    let objects = render("tf-job-sweep", "sweep", &json!({})).unwrap();
    insta::assert_yaml_snapshot!(snapshot_view(objects));
}

#[test]
fn tf_serving_canary_behind_istio() {
    let objects = render(
        "tf-serving",
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
            "DestinationRule mnist",
            "VirtualService mnist",
        ]
    );
    let items = objects.as_array().unwrap();
    let route = &items[5]["spec"]["http"][0]["route"];
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
fn tf_serving_with_gpus_uses_the_gpu_image_and_limits_gpus() {
    let objects = render("tf-serving", "mnist", &json!({ "numGpus": 2 })).unwrap();
    let container = &objects[2]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "tensorflow/serving:2.18.0-gpu");
    assert_eq!(container["resources"]["limits"]["nvidia.com/gpu"], 2);
}

#[test]
fn tf_job_operator_scoped_to_its_namespace_with_leader_election() {
    let objects = render(
        "tf-job-operator",
        "tf-job-operator",
        &json!({ "deploymentScope": "namespace", "replicas": 2, "leaderElect": true, "minAvailable": 1 }),
    )
    .unwrap();
    assert_eq!(
        kinds_and_names(&objects),
        [
            "CustomResourceDefinition jaxjobs.kubeflow.org",
            "CustomResourceDefinition mxjobs.kubeflow.org",
            "CustomResourceDefinition paddlejobs.kubeflow.org",
            "CustomResourceDefinition pytorchjobs.kubeflow.org",
            "CustomResourceDefinition tfjobs.kubeflow.org",
            "CustomResourceDefinition xgboostjobs.kubeflow.org",
            "ServiceAccount tf-job-operator",
            "Role tf-job-operator",
            "RoleBinding tf-job-operator",
            "Role tf-job-operator-leader-election",
            "RoleBinding tf-job-operator-leader-election",
            "Service tf-job-operator-metrics",
            "Deployment tf-job-operator",
            "PodDisruptionBudget tf-job-operator",
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
            "--frameworks",
            "jax,mxnet,paddle,pytorch,tensorflow,xgboost",
            "--namespace",
            "kubeflow",
            "--leader-elect"
        ])
    );
}

/// The container args and the PodGroup rules of the operator rendered with `params`.
fn operator_args_and_pod_group_rules(params: &Value) -> Result<(Value, Vec<Value>), String> {
    let objects = render("tf-job-operator", "tf-job-operator", params)?;
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

#[test]
fn tf_job_operator_gang_scheduler_is_passed_and_granted_its_pod_groups() {
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
fn tf_job_operator_passes_the_pytorch_init_image_when_it_is_not_the_operators_default() {
    let declared = &prototype("tf-job-operator")["params"]["pytorchInitImage"];
    assert_eq!(declared["type"], "string");
    // The operator's own default, so rendering it changes nothing and is left out.
    assert_eq!(
        declared["default"],
        mlkube::operator::frameworks::pytorch::DEFAULT_INIT_IMAGE
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
            error.contains("component tf-job-operator: param pytorchInitImage: must be an image"),
            "{bad}: {error}"
        );
    }
}

/// The operator's RBAC is exactly what the operator does on the API, and never a wildcard.
#[test]
fn tf_job_operator_rbac_lists_exact_verbs() {
    let objects = render(
        "tf-job-operator",
        "tf-job-operator",
        &json!({ "gangScheduling": true }),
    )
    .unwrap();
    let role = objects
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "ClusterRole")
        .expect("a ClusterRole by default");
    assert_eq!(role["metadata"]["name"], "kubeflow-tf-job-operator");
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
    - "[\"kubeflow.org\"] [\"jaxjobs\",\"mxjobs\",\"paddlejobs\",\"pytorchjobs\",\"tfjobs\",\"xgboostjobs\"] [\"get\",\"list\",\"watch\",\"delete\"]"
    - "[\"kubeflow.org\"] [\"jaxjobs/status\",\"mxjobs/status\",\"paddlejobs/status\",\"pytorchjobs/status\",\"tfjobs/status\",\"xgboostjobs/status\"] [\"update\"]"
    - "[\"kubeflow.org\"] [\"jaxjobs/finalizers\",\"mxjobs/finalizers\",\"paddlejobs/finalizers\",\"pytorchjobs/finalizers\",\"tfjobs/finalizers\",\"xgboostjobs/finalizers\"] [\"update\"]"
    - "[\"\"] [\"pods\"] [\"list\",\"watch\",\"create\",\"delete\",\"patch\"]"
    - "[\"\"] [\"services\"] [\"list\",\"watch\",\"create\",\"delete\",\"patch\"]"
    - "[\"events.k8s.io\"] [\"events\"] [\"create\",\"patch\"]"
    - "[\"scheduling.volcano.sh\",\"scheduling.x-k8s.io\"] [\"podgroups\"] [\"get\",\"create\",\"patch\",\"delete\"]"
    "#);
}

#[test]
fn every_container_has_resources_and_runs_non_root() {
    for (prototype, name) in [
        ("tf-job-operator", "tf-job-operator"),
        ("notebook-hub", "notebook-hub"),
        ("tf-serving", "mnist"),
        ("volume-controller", "volume-controller"),
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
                "string" => default.is_string(),
                "integer" => default.is_i64() || default.is_u64(),
                "number" => default.is_number(),
                "boolean" => default.is_boolean(),
                "array" => default.is_array(),
                _ => default.is_object(),
            };
            assert!(fits, "{what}: default {default} is not a {ty}");
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
        ("tf-job-operator", "tf-job-operator"),
        ("notebook-hub", "notebook-hub"),
        ("mnist", "tf-serving"),
        ("volume-controller", "volume-controller"),
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
    assert_eq!(local["tf-job-operator"]["replicas"], 1);
    assert_eq!(prod["tf-job-operator"]["replicas"], 2);
    assert_eq!(prod["tf-job-operator"]["leaderElect"], true);
    assert_eq!(local["mnist"]["numGpus"], 0);
    assert_eq!(prod["mnist"]["numGpus"], 1);
    assert_eq!(local["mnist"]["istio"], false);
    assert_eq!(prod["mnist"]["istio"], true);
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
            "tf-serving",
            json!({ "trafficRule": "v1:90,v2:20" }),
            "component tf-serving: param trafficRule: weights sum to 110",
        ),
        (
            "tf-serving",
            json!({ "trafficRule": "v1" }),
            "component tf-serving: param trafficRule: entry \"v1\"",
        ),
        (
            "tf-serving",
            json!({ "versionModelBasePaths": { "v3": "x" } }),
            "component tf-serving: param versionModelBasePaths",
        ),
        (
            "tf-serving",
            json!({ "istioGateway": "a/b" }),
            "component tf-serving: param istioGateway: is set but istio is off",
        ),
        (
            "tf-job-operator",
            json!({ "deploymentScope": "everywhere" }),
            "component tf-job-operator: param deploymentScope: \"everywhere\" is not one of",
        ),
        (
            "tf-job-operator",
            json!({ "replicas": 2 }),
            "component tf-job-operator: param replicas: 2 replicas without leaderElect",
        ),
        (
            "tf-job-operator",
            json!({ "minAvailable": 1 }),
            "component tf-job-operator: param minAvailable",
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
