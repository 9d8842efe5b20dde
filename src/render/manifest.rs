//! Rendered Kubernetes objects, each tagged with the component that rendered it.
//!
//! This is the hand-over between rendering (pure) and the cluster stages: `render` produces a
//! [`Manifest`] whose objects are complete (namespace set, mlkube labels added) and in apply
//! order; `diff` and `apply` consume it.

use serde_json::Value;

/// One environment's rendered objects, in apply order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Manifest {
    pub objects: Vec<Object>,
}

/// One Kubernetes object and the component that rendered it.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub component: String,
    pub value: Value,
}

impl Object {
    pub fn api_version(&self) -> &str {
        self.value["apiVersion"].as_str().unwrap_or_default()
    }

    pub fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or_default()
    }

    pub fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or_default()
    }

    /// The namespace, or `None` for cluster-scoped objects.
    pub fn namespace(&self) -> Option<&str> {
        self.value["metadata"]["namespace"].as_str()
    }
}

/// Why rendered output cannot become a manifest.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error(
        "component `{component}` rendered something that is not a Kubernetes object at {path}: \
         {problem}\nhint: a component may render an object, an array, a v1 List, or an object \
         whose fields are objects; each object needs apiVersion, kind and metadata.name"
    )]
    NotAnObject {
        component: String,
        path: String,
        problem: String,
    },
    #[error(
        "{kind} {identity} is rendered twice, by component `{first}` and by component \
         `{second}`\nhint: rename one of them, or remove it from one component"
    )]
    Duplicate {
        kind: String,
        identity: String,
        first: String,
        second: String,
    },
}

/// Why a file of pre-rendered objects cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the manifest {path}: {message}")]
pub struct ManifestFileError {
    path: String,
    message: String,
}

/// The labels mlkube sets on every object it renders.
pub mod labels {
    pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
    pub const PART_OF: &str = "app.kubernetes.io/part-of";
    pub const ENVIRONMENT: &str = "mlkube.io/environment";
    pub const COMPONENT: &str = "mlkube.io/component";
    /// The value of [`MANAGED_BY`].
    pub const MANAGER: &str = "mlkube";
}

/// Where a manifest is going: what `process` needs to complete its objects.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub app: &'a str,
    pub environment: &'a str,
    pub namespace: &'a str,
}

/// Find the Kubernetes objects in one component's rendered value: the value itself, the items
/// of a `List`, the elements of an array, or the fields of an object that is not itself a
/// Kubernetes object, to any depth, in the order they appear.
pub fn extract(component: &str, value: Value) -> Result<Vec<Object>, ManifestError> {
    let mut objects = Vec::new();
    let mut path = String::new();
    walk(component, value, &mut path, &mut objects)?;
    Ok(objects)
}

fn walk(
    component: &str,
    value: Value,
    path: &mut String,
    out: &mut Vec<Object>,
) -> Result<(), ManifestError> {
    match value {
        Value::Array(items) => {
            for (index, item) in items.into_iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{index}]"));
                walk(component, item, path, out)?;
                path.truncate(len);
            }
            Ok(())
        }
        Value::Object(mut map) if map.contains_key("apiVersion") || map.contains_key("kind") => {
            if map.get("kind").and_then(Value::as_str) == Some("List")
                && let Some(items) = map.remove("items")
            {
                let len = path.len();
                path.push_str(".items");
                walk(component, items, path, out)?;
                path.truncate(len);
                return Ok(());
            }
            out.push(kubernetes_object(component, map, path)?);
            Ok(())
        }
        Value::Object(map) => {
            for (key, field) in map {
                let len = path.len();
                if is_identifier(&key) {
                    path.push('.');
                    path.push_str(&key);
                } else {
                    path.push_str(&format!("[{key:?}]"));
                }
                walk(component, field, path, out)?;
                path.truncate(len);
            }
            Ok(())
        }
        other => Err(not_an_object(
            component,
            path,
            format!("{}, not an object", describe(&other)),
        )),
    }
}

/// The object at `path`, which has an `apiVersion` or a `kind`, as one of `component`'s
/// objects, once it has all of `apiVersion`, `kind` and `metadata.name`.
fn kubernetes_object(
    component: &str,
    map: serde_json::Map<String, Value>,
    path: &str,
) -> Result<Object, ManifestError> {
    let value = Value::Object(map);
    let missing = [
        ("apiVersion", &value["apiVersion"]),
        ("kind", &value["kind"]),
        ("metadata.name", &value["metadata"]["name"]),
    ]
    .into_iter()
    .filter(|(_, field)| field.as_str().is_none_or(str::is_empty))
    .map(|(name, _)| name)
    .collect::<Vec<_>>();
    if !missing.is_empty() {
        return Err(not_an_object(
            component,
            path,
            format!("an object without {}", missing.join(", ")),
        ));
    }
    Ok(Object {
        component: component.to_owned(),
        value,
    })
}

/// The error for a value at `path` of `component` that is not a Kubernetes object.
fn not_an_object(component: &str, path: &str, problem: String) -> ManifestError {
    ManifestError::NotAnObject {
        component: component.to_owned(),
        path: if path.is_empty() {
            "the top level".to_owned()
        } else {
            format!("`{path}`")
        },
        problem,
    }
}

fn is_identifier(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) if s.chars().count() > 40 => {
            format!("a string ({:?}...)", s.chars().take(40).collect::<String>())
        }
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// Kinds that are not namespaced, by API group (`""` is the core group). Objects of a
/// CustomResourceDefinition in the same manifest follow that CRD's `scope`.
const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "ComponentStatus"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "MutatingAdmissionPolicyBinding",
    ),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("node.k8s.io", "RuntimeClass"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("resource.k8s.io", "DeviceClass"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"),
];

/// The API group of an `apiVersion` (`apps/v1` → `apps`, `v1` → the core group `""`).
pub fn api_group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

impl Object {
    pub fn group(&self) -> &str {
        api_group(self.api_version())
    }
}

impl Manifest {
    /// Read YAML documents (as `mlkube show` prints them) as objects; each object's component is
    /// its `mlkube.io/component` label.
    pub fn read(path: &std::path::Path) -> Result<Manifest, ManifestFileError> {
        use serde::Deserialize as _;
        let error = |message: String| ManifestFileError {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
        let mut objects = Vec::new();
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value = Value::deserialize(document).map_err(|e| error(e.to_string()))?;
            if value.is_null() {
                continue;
            }
            let component = value["metadata"]["labels"][labels::COMPONENT]
                .as_str()
                .unwrap_or("manifest")
                .to_string();
            objects.push(Object { component, value });
        }
        Ok(Manifest { objects })
    }

    /// Complete and order rendered objects: set the environment's namespace on namespaced
    /// objects that have none, add the mlkube labels (the app, environment and component only
    /// on namespaced objects), refuse two objects with the same
    /// kind/namespace/name, and sort into apply order (ties broken by kind, namespace, name,
    /// so the result does not depend on the order of components).
    pub fn process(objects: Vec<Object>, target: Target<'_>) -> Result<Manifest, ManifestError> {
        let custom_cluster_scoped: Vec<(String, String)> = objects
            .iter()
            .filter(|o| o.kind() == "CustomResourceDefinition")
            .filter(|o| o.value["spec"]["scope"].as_str() == Some("Cluster"))
            .filter_map(|o| {
                let spec = &o.value["spec"];
                Some((
                    spec["group"].as_str()?.to_owned(),
                    spec["names"]["kind"].as_str()?.to_owned(),
                ))
            })
            .collect();
        let is_cluster_scoped = |object: &Object| {
            let key = (object.group(), object.kind());
            CLUSTER_SCOPED.contains(&key)
                || custom_cluster_scoped
                    .iter()
                    .any(|(group, kind)| (group.as_str(), kind.as_str()) == key)
        };

        let mut objects = objects;
        let mut seen: std::collections::HashMap<(String, String, String, String), String> =
            std::collections::HashMap::with_capacity(objects.len());
        for object in &mut objects {
            let cluster_scoped = is_cluster_scoped(object);
            complete(object, target, cluster_scoped);
            let key = (
                object.group().to_owned(),
                object.kind().to_owned(),
                object.namespace().unwrap_or_default().to_owned(),
                object.name().to_owned(),
            );
            if let Some(first) = seen.get(&key) {
                return Err(ManifestError::Duplicate {
                    kind: object.kind().to_owned(),
                    identity: match object.namespace() {
                        Some(namespace) => format!("{namespace}/{}", object.name()),
                        None => object.name().to_owned(),
                    },
                    first: first.clone(),
                    second: object.component.clone(),
                });
            }
            seen.insert(key, object.component.clone());
        }
        objects.sort_by_cached_key(|o| {
            let key = (
                super::kinds::rank(o.group(), o.kind()),
                o.kind(),
                o.namespace(),
                o.name(),
                o.group(),
            );
            (
                key.0,
                key.1.to_owned(),
                key.2.map(str::to_owned),
                key.3.to_owned(),
                key.4.to_owned(),
            )
        });
        Ok(Manifest { objects })
    }

    /// A stream of YAML documents, each starting with `---`.
    pub fn to_yaml(&self) -> String {
        let mut out = String::with_capacity(self.objects.len() * 1024);
        for object in &self.objects {
            out.push_str("---\n");
            crate::render::yaml::document(&object.value, &mut out);
        }
        out
    }

    /// One `v1` `List` holding every object, pretty-printed.
    pub fn to_json(&self) -> String {
        let items: Vec<&Value> = self.objects.iter().map(|o| &o.value).collect();
        let list = serde_json::json!({ "apiVersion": "v1", "kind": "List", "items": items });
        let mut out = serde_json::to_string_pretty(&list).unwrap_or_default();
        out.push('\n');
        out
    }
}

/// Default the namespace and add the mlkube labels, keeping `metadata` keys sorted as Jsonnet
/// prints them.
fn complete(object: &mut Object, target: Target<'_>, cluster_scoped: bool) {
    let component = object.component.clone();
    let Some(metadata) = object
        .value
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let has_namespace = metadata
        .get("namespace")
        .and_then(Value::as_str)
        .is_some_and(|ns| !ns.is_empty());
    if !cluster_scoped && !has_namespace {
        metadata.insert(
            "namespace".into(),
            Value::String(target.namespace.to_owned()),
        );
    }
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if !labels.is_object() {
        *labels = Value::Object(serde_json::Map::new());
    }
    if let Some(labels) = labels.as_object_mut() {
        // A cluster-scoped object is shared by every environment and app that renders it, so
        // it carries neither the app's, the environment's nor the component's name (each one's
        // claim on it names its component).
        let identity = [
            (labels::PART_OF, target.app),
            (labels::ENVIRONMENT, target.environment),
            (labels::COMPONENT, component.as_str()),
        ];
        let identity = if cluster_scoped {
            &[][..]
        } else {
            &identity[..]
        };
        for (key, value) in [(labels::MANAGED_BY, labels::MANAGER)]
            .iter()
            .chain(identity)
        {
            labels.insert((*key).to_owned(), Value::String((*value).to_owned()));
        }
        labels.sort_keys();
    }
    metadata.sort_keys();
}

#[cfg(test)]
mod processing_tests {
    use super::*;
    use serde_json::json;

    const TARGET: Target<'static> = Target {
        app: "platform",
        environment: "dev",
        namespace: "kubeflow-dev",
    };

    fn object(component: &str, api_version: &str, kind: &str, name: &str) -> Object {
        Object {
            component: component.into(),
            value: json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}),
        }
    }

    #[test]
    fn extract_unwraps_lists_arrays_and_nested_objects() {
        let value = json!({
            "a": {"apiVersion": "v1", "kind": "List", "items": [
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one"}},
                [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "two"}}],
            ]},
            "b": {"deep": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "three"}}},
        });
        let names: Vec<String> = extract("c", value)
            .unwrap()
            .iter()
            .map(|o| o.name().to_owned())
            .collect();
        assert_eq!(names, ["one", "two", "three"]);
    }

    #[test]
    fn extract_names_the_component_and_the_path_of_a_non_object() {
        let value = json!({"web": [{"apiVersion": "v1", "kind": "Service", "metadata": {}}]});
        let error = extract("frontend", value).unwrap_err().to_string();
        assert!(
            error.starts_with(
                "component `frontend` rendered something that is not a Kubernetes object at \
                 `.web[0]`: an object without metadata.name"
            ),
            "{error}"
        );
        let error = extract("frontend", json!({"x-y": "text"}))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("at `[\"x-y\"]`: the string \"text\", not an object"),
            "{error}"
        );
    }

    #[test]
    fn namespace_defaults_on_namespaced_kinds_only() {
        let crd = Object {
            component: "c".into(),
            value: json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.com"},
                "spec": {"group": "example.com", "scope": "Cluster", "names": {"kind": "Widget"}},
            }),
        };
        let objects = vec![
            object("c", "v1", "ConfigMap", "cm"),
            object("c", "rbac.authorization.k8s.io/v1", "ClusterRole", "cr"),
            object("c", "v1", "Namespace", "ns"),
            object("c", "example.com/v1", "Widget", "w"),
            object("c", "other.example.com/v1", "Gadget", "g"),
            crd,
        ];
        let manifest = Manifest::process(objects, TARGET).unwrap();
        let namespaces: Vec<(&str, Option<&str>)> = manifest
            .objects
            .iter()
            .map(|o| (o.kind(), o.namespace()))
            .collect();
        assert_eq!(
            namespaces,
            [
                ("Namespace", None),
                ("CustomResourceDefinition", None),
                ("ClusterRole", None),
                ("ConfigMap", Some("kubeflow-dev")),
                ("Gadget", Some("kubeflow-dev")),
                ("Widget", None),
            ]
        );
    }

    #[test]
    fn explicit_namespace_is_kept() {
        let mut cm = object("c", "v1", "ConfigMap", "cm");
        cm.value["metadata"]["namespace"] = json!("elsewhere");
        let manifest = Manifest::process(vec![cm], TARGET).unwrap();
        assert_eq!(manifest.objects[0].namespace(), Some("elsewhere"));
    }

    #[test]
    fn labels_are_added_and_existing_ones_kept() {
        let mut cm = object("serving", "v1", "ConfigMap", "cm");
        cm.value["metadata"]["labels"] = json!({"app": "web"});
        let manifest = Manifest::process(vec![cm], TARGET).unwrap();
        assert_eq!(
            manifest.objects[0].value["metadata"]["labels"],
            json!({
                "app": "web",
                "app.kubernetes.io/managed-by": "mlkube",
                "app.kubernetes.io/part-of": "platform",
                "mlkube.io/component": "serving",
                "mlkube.io/environment": "dev",
            })
        );
    }

    #[test]
    fn apply_order_puts_namespaces_crds_rbac_config_then_workloads() {
        let objects = vec![
            object("c", "apps/v1", "Deployment", "d"),
            object(
                "c",
                "admissionregistration.k8s.io/v1",
                "ValidatingWebhookConfiguration",
                "vw",
            ),
            object("c", "example.com/v1", "Widget", "w"),
            object("c", "v1", "Service", "s"),
            object("c", "v1", "ConfigMap", "cm"),
            object("c", "v1", "ServiceAccount", "sa"),
            object(
                "c",
                "rbac.authorization.k8s.io/v1",
                "ClusterRoleBinding",
                "crb",
            ),
            object("c", "rbac.authorization.k8s.io/v1", "ClusterRole", "cr"),
            object(
                "c",
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                "crd",
            ),
            object("c", "v1", "Namespace", "ns"),
        ];
        let manifest = Manifest::process(objects, TARGET).unwrap();
        let kinds: Vec<&str> = manifest.objects.iter().map(Object::kind).collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "CustomResourceDefinition",
                "ClusterRole",
                "ClusterRoleBinding",
                "ServiceAccount",
                "ConfigMap",
                "Service",
                "Deployment",
                "Widget",
                "ValidatingWebhookConfiguration",
            ]
        );
    }

    #[test]
    fn duplicates_name_both_components() {
        let objects = vec![
            object("serving-a", "v1", "Service", "web"),
            object("serving-b", "v1", "Service", "web"),
        ];
        let error = Manifest::process(objects, TARGET).unwrap_err().to_string();
        assert!(
            error.starts_with(
                "Service kubeflow-dev/web is rendered twice, by component `serving-a` and by \
                 component `serving-b`"
            ),
            "{error}"
        );
    }

    #[test]
    fn yaml_is_a_document_stream_and_json_a_list() {
        let manifest = Manifest {
            objects: vec![
                object("c", "v1", "ConfigMap", "a"),
                object("c", "v1", "ConfigMap", "b"),
            ],
        };
        let yaml = manifest.to_yaml();
        assert_eq!(yaml.matches("---\n").count(), 2);
        assert!(yaml.starts_with("---\napiVersion: v1\nkind: ConfigMap\n"));
        let json: Value = serde_json::from_str(&manifest.to_json()).unwrap();
        assert_eq!(json["kind"], "List");
        assert_eq!(json["items"].as_array().map(Vec::len), Some(2));
    }
}
