//! The operator's own identity for the cluster tests: the ServiceAccount and RBAC that the
//! `training-operator` component deploys, rendered by mlkube from its embedded library for the
//! scope a test asks for, applied to the test's namespace, and a token for that ServiceAccount
//! from the TokenRequest API, as a client for an operator in this process and as a kubeconfig
//! file for a spawned `mlkube operator`.
//!
//! The operator's cluster tests run with this identity, never as admin, so a rule the component
//! leaves out fails the test whose operator needs it. `identity.rs` proves the other direction:
//! the token may do what the operator does, and nothing more.
//!
//! An operator watching every namespace would reconcile the other tests' jobs too, so the
//! tests run operators with `--namespace` also under the cluster-scoped identity; what only a
//! cluster-wide operator does, list and watch across namespaces, is proved in `identity.rs` by
//! doing it.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::authorization::v1::SelfSubjectRulesReview;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::api::{DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::config::Kubeconfig;
use kube::discovery::{self, Scope as ApiScope};
use kube::{Api, Client};
use mlkube::app::App;
use mlkube::cli::InitArgs;
use mlkube::render::manifest::Object;
use serde_json::json;

use crate::support::{TestNamespace, clean_up, client_from, eventually, kubeconfig_path};

/// The component instance whose identity the operator gets; its ServiceAccount has this name.
pub const COMPONENT: &str = "training-operator";
/// The volume controller's component instance; its ServiceAccount has this name.
pub const VOLUME_CONTROLLER: &str = "volume-controller";
/// The environment of the throwaway app the identity is rendered from.
pub const ENVIRONMENT: &str = "local";
pub const MANAGER: &str = "mlkube-identity-tests";
/// An upper bound only: new RBAC takes effect within moments.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// The component's `deploymentScope`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A ClusterRole and ClusterRoleBinding: the operator may act in every namespace.
    Cluster,
    /// A Role and RoleBinding: only in the environment's namespace.
    Namespace,
}

/// What the component is rendered with: its `deploymentScope`, `leaderElect` and
/// `gangScheduling` params.
#[derive(Clone, Copy, Debug)]
pub struct Access {
    /// The component whose identity it is: [`COMPONENT`], or the volume controller's.
    component: &'static str,
    scope: Scope,
    leader_elect: bool,
    gang_scheduling: bool,
    /// The Gateway name of `servingGateway`: the InferenceService controller's rules.
    serving_gateway: Option<&'static str>,
}

impl Access {
    pub fn scoped(scope: Scope) -> Self {
        Access {
            component: COMPONENT,
            scope,
            leader_elect: false,
            gang_scheduling: false,
            serving_gateway: None,
        }
    }

    /// The `volume-controller` component's identity, as it renders by default (a Role in its
    /// namespace).
    pub fn volume_controller() -> Self {
        Access {
            component: VOLUME_CONTROLLER,
            ..Access::scoped(Scope::Namespace)
        }
    }

    pub fn with_leader_election(self) -> Self {
        Access {
            leader_elect: true,
            ..self
        }
    }

    pub fn with_gang_scheduling(self) -> Self {
        Access {
            gang_scheduling: true,
            ..self
        }
    }

    /// With `servingGateway` set to `gateway`: the InferenceService controller's identity too.
    pub fn with_serving(self, gateway: &'static str) -> Self {
        Access {
            serving_gateway: Some(gateway),
            ..self
        }
    }

    fn params(self) -> serde_json::Value {
        if self.component != COMPONENT {
            return json!({});
        }
        let scope = match self.scope {
            Scope::Cluster => "cluster",
            Scope::Namespace => "namespace",
        };
        json!({
            "deploymentScope": scope,
            "leaderElect": self.leader_elect,
            "gangScheduling": self.gang_scheduling,
            "servingGateway": self.serving_gateway,
        })
    }
}

/// The component's ServiceAccount with its RBAC applied in one test's namespace, and a token
/// for it. Cluster-scoped RBAC (named after the namespace, so unique per test) is deleted when
/// this is dropped; the rest goes with the namespace.
pub struct OperatorIdentity {
    /// A client that authenticates with the ServiceAccount's token.
    pub client: Client,
    kubeconfig: tempfile::TempPath,
    _cluster_objects: ClusterObjects,
}

impl OperatorIdentity {
    /// Render the component's ServiceAccount and RBAC for `access` into `ns`, apply them as
    /// admin, and mint a token; returns once every rendered rule is in effect for the token.
    pub async fn new(ns: &TestNamespace, access: Access) -> Self {
        Self::on(&ns.client, &kubeconfig_path(), &ns.name, access).await
    }

    /// The same in `namespace` of the cluster that `admin` (from the kubeconfig at
    /// `admin_kubeconfig`) reaches. On another cluster than the test cluster only in namespace
    /// scope: cluster-scoped RBAC is deleted from the test cluster when this is dropped.
    pub async fn on(
        admin: &Client,
        admin_kubeconfig: &Path,
        namespace: &str,
        access: Access,
    ) -> Self {
        let objects = render(namespace, access);
        let mut cluster_objects = ClusterObjects::default();
        for object in &objects {
            let gvk = apply(admin, object).await;
            if object.namespace().is_none() {
                cluster_objects.0.push((gvk, object.name().to_owned()));
            }
        }
        let kubeconfig =
            token_kubeconfig_from(admin, admin_kubeconfig, namespace, access.component).await;
        let client = client_from(&kubeconfig).await;
        let granted: BTreeSet<Permission> = objects
            .iter()
            .filter(|o| o.value.get("rules").is_some())
            .flat_map(|o| rules(&o.value["rules"]))
            .collect();
        eventually(
            &format!(
                "the RBAC of {} to take effect in {namespace}",
                access.component
            ),
            TIMEOUT,
            || async {
                let permitted = permissions(&client, namespace).await;
                granted.is_subset(&permitted).then_some(())
            },
        )
        .await;
        OperatorIdentity {
            client,
            kubeconfig,
            _cluster_objects: cluster_objects,
        }
    }

    /// A kubeconfig file that authenticates with the ServiceAccount's token, for
    /// `mlkube operator --kubeconfig`; it lives as long as this identity.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }
}

/// `mlkube operator` as a child process, killed when dropped.
pub struct OperatorProcess(pub std::process::Child);

impl OperatorProcess {
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The operator binary for namespace `ns` with `flags`, run as `identity` the way the
/// quickstart runs it: with its own kubeconfig, never the admin's.
pub fn spawn_operator_binary(
    ns: &str,
    identity: &OperatorIdentity,
    flags: &[&str],
) -> OperatorProcess {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_mlkube"))
        .args(["operator", "--namespace", ns])
        .args(flags)
        .arg("--kubeconfig")
        .arg(identity.kubeconfig())
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "127.0.0.1:0",
        ])
        .env("RUST_LOG", "warn")
        .env_remove("KUBECONFIG")
        .env_remove("POD_NAMESPACE")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("the mlkube binary starts");
    OperatorProcess(child)
}

/// An operator binary for one namespace, running as the component's ServiceAccount with
/// `access`; it stops (when dropped) before its identity goes.
pub struct NamespaceOperator {
    _process: OperatorProcess,
    _identity: OperatorIdentity,
}

impl NamespaceOperator {
    pub async fn start(ns: &TestNamespace, access: Access) -> Self {
        let identity = OperatorIdentity::new(ns, access).await;
        NamespaceOperator {
            _process: spawn_operator_binary(&ns.name, &identity, &[]),
            _identity: identity,
        }
    }
}

/// The cluster-scoped objects an identity applied, deleted when dropped (also on a panic).
#[derive(Default)]
struct ClusterObjects(Vec<(GroupVersionKind, String)>);

impl Drop for ClusterObjects {
    fn drop(&mut self) {
        for (gvk, name) in std::mem::take(&mut self.0) {
            clean_up(&format!("{} {name}", gvk.kind), |client| async move {
                let (resource, _) = discovery::pinned_kind(&client, &gvk).await?;
                Api::<DynamicObject>::all_with(client, &resource)
                    .delete(&name, &DeleteParams::background())
                    .await
                    .map(|_| ())
            });
        }
    }
}

/// The component's ServiceAccount and RBAC as `mlkube` renders them for `access` in a fresh app
/// whose `local` environment is `namespace`.
fn render(namespace: &str, access: Access) -> Vec<Object> {
    const IDENTITY_KINDS: [&str; 5] = [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
    ];
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path().join("app");
    mlkube::cli::app::init(&InitArgs {
        dir: root.clone(),
        namespace: Some(namespace.to_owned()),
        server: None,
        context: None,
        empty: false,
        with_jobs: false,
    })
    .unwrap_or_else(|e| panic!("mlkube init {}: {e}", root.display()));
    let component = access.component;
    let params = json!({ "global": {}, "components": { component: access.params() } });
    std::fs::write(
        root.join(mlkube::app::env_params_file(ENVIRONMENT)),
        params.to_string(),
    )
    .expect("write the environment's params");
    let app = App::load(&root).unwrap_or_else(|e| panic!("loading the app: {e}"));
    let manifest = app
        .render(ENVIRONMENT, &[component.to_owned()])
        .unwrap_or_else(|e| panic!("rendering {component} with {access:?}: {e:?}"));
    let objects: Vec<Object> = manifest
        .objects
        .into_iter()
        .filter(|o| IDENTITY_KINDS.contains(&o.kind()))
        .collect();
    assert!(
        objects
            .iter()
            .any(|o| o.kind() == "ServiceAccount" && o.name() == component),
        "{component} renders its ServiceAccount"
    );
    objects
}

/// Apply `object` as admin (server-side); returns its kind.
async fn apply(admin: &Client, object: &Object) -> GroupVersionKind {
    let version = object.api_version().rsplit('/').next().unwrap_or_default();
    let gvk = GroupVersionKind::gvk(object.group(), version, object.kind());
    let (resource, capabilities) = discovery::pinned_kind(admin, &gvk)
        .await
        .unwrap_or_else(|e| panic!("discovering {}: {e}", object.kind()));
    let api: Api<DynamicObject> = match (capabilities.scope, object.namespace()) {
        (ApiScope::Namespaced, Some(namespace)) => {
            Api::namespaced_with(admin.clone(), namespace, &resource)
        }
        _ => Api::all_with(admin.clone(), &resource),
    };
    let mut value = object.value.clone();
    // Marked as the test namespaces are, so a leftover is recognisable.
    value["metadata"]["labels"]["mlkube.io/test"] = json!("true");
    api.patch(
        object.name(),
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(value),
    )
    .await
    .unwrap_or_else(|e| panic!("applying {} {}: {e}", object.kind(), object.name()));
    gvk
}

/// A kubeconfig for the test cluster that authenticates as `service_account` in `namespace`,
/// with a token from the TokenRequest API.
pub async fn token_kubeconfig(
    admin: &Client,
    namespace: &str,
    service_account: &str,
) -> tempfile::TempPath {
    token_kubeconfig_from(admin, &kubeconfig_path(), namespace, service_account).await
}

/// The same for the cluster of the kubeconfig at `admin_kubeconfig`, whose client is `admin`.
async fn token_kubeconfig_from(
    admin: &Client,
    admin_kubeconfig: &Path,
    namespace: &str,
    service_account: &str,
) -> tempfile::TempPath {
    let request: TokenRequest =
        serde_json::from_value(json!({ "spec": { "audiences": [], "expirationSeconds": 3600 } }))
            .expect("a valid TokenRequest");
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), namespace)
        .create_token_request(service_account, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("a token for {namespace}/{service_account}: {e}"))
        .status
        .expect("a TokenRequest is answered with a status")
        .token;

    let path = admin_kubeconfig;
    let admin_config = Kubeconfig::read_from(path)
        .unwrap_or_else(|e| panic!("cannot read kubeconfig {}: {e}", path.display()));
    let cluster_name = admin_config
        .current_context
        .as_ref()
        .and_then(|current| admin_config.contexts.iter().find(|c| &c.name == current))
        .and_then(|c| Some(c.context.as_ref()?.cluster.clone()))
        .unwrap_or_else(|| panic!("{} has no current context", path.display()));
    let cluster = admin_config
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.clone())
        .unwrap_or_else(|| panic!("{} has no cluster {cluster_name}", path.display()));
    let user = format!("{namespace}/{service_account}");
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": cluster_name, "cluster": cluster }],
        "users": [{ "name": user, "user": { "token": token } }],
        "contexts": [{ "name": user, "context": { "cluster": cluster_name, "user": user } }],
        "current-context": user,
    });
    let file = tempfile::Builder::new()
        .prefix(&format!("{service_account}-"))
        .suffix(".kubeconfig")
        .tempfile()
        .expect("a temporary kubeconfig file");
    serde_yaml::to_writer(file.as_file(), &kubeconfig).expect("write the kubeconfig");
    file.into_temp_path()
}

/// One thing a token may do: a verb on a resource (or subresource) of an API group, on the
/// objects of one name or, with none, on all.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Permission {
    pub group: String,
    pub resource: String,
    pub verb: String,
    pub name: Option<String>,
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {group}/{}", self.verb, self.resource)?;
        match &self.name {
            Some(name) => write!(f, " named {name}"),
            None => Ok(()),
        }
    }
}

/// Every permission a list of RBAC rules (or of a rules review's resource rules) grants.
pub fn rules(value: &serde_json::Value) -> Vec<Permission> {
    let rules: Vec<PolicyRule> =
        serde_json::from_value(value.clone()).expect("RBAC rules of a valid shape");
    let mut permissions = Vec::new();
    for rule in rules {
        let names: Vec<Option<String>> = match rule.resource_names {
            Some(names) if !names.is_empty() => names.into_iter().map(Some).collect(),
            _ => vec![None],
        };
        for group in rule.api_groups.unwrap_or_default() {
            for resource in rule.resources.as_deref().unwrap_or_default() {
                for verb in &rule.verbs {
                    for name in &names {
                        permissions.push(Permission {
                            group: group.clone(),
                            resource: resource.clone(),
                            verb: verb.clone(),
                            name: name.clone(),
                        });
                    }
                }
            }
        }
    }
    permissions
}

/// What the client's credentials may do to resources in `namespace`, as a
/// `SelfSubjectRulesReview` lists it.
pub async fn permissions(client: &Client, namespace: &str) -> BTreeSet<Permission> {
    let review: SelfSubjectRulesReview =
        serde_json::from_value(json!({ "spec": { "namespace": namespace } }))
            .expect("a valid SelfSubjectRulesReview");
    let status = Api::<SelfSubjectRulesReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap_or_else(|e| panic!("a SelfSubjectRulesReview in {namespace}: {e}"))
        .status
        .expect("a SelfSubjectRulesReview is answered with a status");
    assert!(
        !status.incomplete,
        "the rules review in {namespace} is incomplete: {:?}",
        status.evaluation_error
    );
    let resource_rules =
        serde_json::to_value(&status.resource_rules).expect("resource rules serialize");
    rules(&resource_rules).into_iter().collect()
}
