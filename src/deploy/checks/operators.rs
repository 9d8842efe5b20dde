//! One training operator per job: before an apply writes anything, an operator Deployment it
//! renders is checked against those of other environments already on the cluster, so two
//! operators never act on the same jobs, each undoing the other's work.
//!
//! The operator component labels its Deployment with its scope ([`SCOPE_LABEL`]: `cluster`
//! watches every namespace, `namespace` only its own). Two overlap when either is cluster-wide,
//! or both watch the same namespace. An operator of this environment (the same Deployment, or
//! one of this ApplySet) never conflicts with itself: a re-apply or a change of its scope goes
//! through. The refusal names the other environment (from its ApplySet's inventory) and how to
//! fix it; nothing is written.
//!
//! Caveats: only operators mlkube deployed carry the label; a training operator installed by
//! other means is not seen.

use serde_json::Value;

use crate::deploy::cluster::Cluster;
use crate::deploy::cluster::key::Key;
use crate::deploy::inventory::applyset::{self, PART_OF_LABEL};
use crate::deploy::inventory::plan::Plan;

/// The label of an operator Deployment that says which namespaces it watches.
pub const SCOPE_LABEL: &str = "mlkube.io/operator-scope";

/// Which namespaces an operator acts in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    Cluster,
    Namespace(String),
}

impl Scope {
    fn of(deployment: &Value) -> Option<Scope> {
        let namespace = deployment["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default();
        match deployment["metadata"]["labels"][SCOPE_LABEL].as_str()? {
            "cluster" => Some(Scope::Cluster),
            _ => Some(Scope::Namespace(namespace.to_string())),
        }
    }

    fn overlaps(&self, other: &Scope) -> bool {
        match (self, other) {
            (Scope::Namespace(a), Scope::Namespace(b)) => a == b,
            _ => true,
        }
    }

    fn words(&self) -> String {
        match self {
            Scope::Cluster => "cluster-wide".into(),
            Scope::Namespace(namespace) => format!("for namespace {namespace}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error(
    "{ours} would run an operator {our_scope} ({our_key}), and the cluster already runs one \
     {their_scope} of {theirs} ({their_key}): both would act on {shared}, each undoing the \
     other's work; nothing was written\n  hint: {hint}"
)]
pub struct TwoOperators {
    pub ours: String,
    pub our_scope: String,
    pub our_key: Key,
    pub theirs: String,
    pub their_scope: String,
    pub their_key: Key,
    pub shared: String,
    pub hint: String,
}

/// Refuse a plan whose operator would act on jobs an operator of another environment acts on.
pub async fn check(cluster: &impl Cluster, plan: &Plan) -> Result<(), CheckError> {
    let ours: Vec<(Key, Scope, &str)> = plan
        .objects
        .iter()
        .filter(|d| d.key.kind == "Deployment" && d.key.group == "apps")
        .filter_map(|d| {
            let component = d.value["metadata"]["labels"]["mlkube.io/component"].as_str();
            Some((
                d.key.clone(),
                Scope::of(&d.value)?,
                component.unwrap_or("?"),
            ))
        })
        .collect();
    if ours.is_empty() {
        return Ok(());
    }
    let Some(deployments) = cluster.resolve("apps/v1", "Deployment") else {
        return Ok(());
    };
    let live = cluster
        .list(&deployments, None, SCOPE_LABEL)
        .await
        .map_err(|source| CheckError::List { source })?;
    for (key, scope, component) in &ours {
        let other = live.iter().find_map(|theirs| {
            let their_key = Key::of(theirs)?;
            let set = theirs["metadata"]["labels"][PART_OF_LABEL].as_str();
            let same = their_key == *key || set == Some(plan.applyset.id.as_str());
            let their_scope = Scope::of(theirs)?;
            (!same && scope.overlaps(&their_scope)).then_some((their_key, their_scope, set))
        });
        let Some((their_key, their_scope, set)) = other else {
            continue;
        };
        let theirs = match set {
            Some(id) => format!("environment {}", applyset::name_of(cluster, id).await),
            None => "another tool".into(),
        };
        return Err(CheckError::Two(Box::new(refusal(
            plan,
            key,
            scope,
            component,
            their_key,
            their_scope,
            theirs,
        ))));
    }
    Ok(())
}

/// The refusal, with the fix that fits: a cluster-wide operator of ours can be scoped to its
/// namespace unless theirs is cluster-wide, which already runs this environment's jobs.
fn refusal(
    plan: &Plan,
    key: &Key,
    scope: &Scope,
    component: &str,
    their_key: Key,
    their_scope: Scope,
    theirs: String,
) -> TwoOperators {
    let env = &plan.applyset.env;
    let shared = match (scope, &their_scope) {
        (Scope::Namespace(namespace), _) | (_, Scope::Namespace(namespace)) => {
            format!("every job in namespace {namespace}")
        }
        _ => "every job".into(),
    };
    let hint = match their_scope {
        Scope::Cluster => format!(
            "that operator already runs this environment's jobs: leave this one out (`mlkube \
             component rm {component}` if no other environment needs it, or apply the other \
             components with -c), or scope both to their namespaces (`mlkube param set \
             <component> deploymentScope namespace --env <env>` in each app, then apply the \
             other first)"
        ),
        Scope::Namespace(_) => format!(
            "scope this one to its namespace: `mlkube param set {component} deploymentScope \
             namespace --env {env}`, then apply again"
        ),
    };
    TwoOperators {
        ours: format!("environment {}/{env}", plan.applyset.app),
        our_scope: scope.words(),
        our_key: key.clone(),
        theirs,
        their_scope: their_scope.words(),
        their_key,
        shared,
        hint,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Two(Box<TwoOperators>),
    #[error("cannot list the operators on the cluster (Deployments labelled {SCOPE_LABEL})")]
    List {
        #[source]
        source: kube::Error,
    },
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::deploy::cluster::memory::MemoryCluster;
    use crate::deploy::inventory::applyset::ApplySet;
    use crate::deploy::inventory::plan;
    use crate::render::manifest::{Manifest, Object};

    fn operator(namespace: &str, scope: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "tf-job-operator", "namespace": namespace,
                            "labels": {"mlkube.io/component": "tf-job-operator",
                                       SCOPE_LABEL: scope}},
               "spec": {"selector": {"matchLabels": {"app": "op"}},
                        "template": {"metadata": {"labels": {"app": "op"}},
                                     "spec": {"containers": [{"name": "op", "image": "o"}]}}}})
    }

    fn plan_of(env: &str, namespace: &str, scope: &str) -> Plan {
        let manifest = Manifest {
            objects: vec![Object {
                component: "tf-job-operator".into(),
                value: operator(namespace, scope),
            }],
        };
        plan::plan(&manifest, &ApplySet::new("platform", env, namespace), &[]).expect("a plan")
    }

    /// A cluster where environment `local` (namespace `ml`) runs its operator in `scope`.
    fn running(scope: &str) -> MemoryCluster {
        let cluster = MemoryCluster::new();
        cluster.create_as(
            "kubectl",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}),
        );
        let theirs = plan_of("local", "ml", scope);
        cluster.create_as("mlkube", theirs.objects[0].value.clone());
        cluster
    }

    #[tokio::test]
    async fn a_second_operator_whose_jobs_overlap_is_refused_naming_the_first() {
        let cluster = running("cluster");
        for scope in ["cluster", "namespace"] {
            let error = check(&cluster, &plan_of("dev", "ml-dev", scope))
                .await
                .unwrap_err()
                .to_string();
            assert!(
                error.contains(
                    "and the cluster already runs one cluster-wide of environment ApplySet"
                ) && error.contains("(Deployment.apps ml/tf-job-operator)"),
                "{scope}: {error}"
            );
            assert!(
                error.contains("that operator already runs this environment's jobs"),
                "{error}"
            );
        }
        let cluster = running("namespace");
        let error = check(&cluster, &plan_of("dev", "ml-dev", "cluster"))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("both would act on every job in namespace ml")
                && error.contains(
                    "`mlkube param set tf-job-operator deploymentScope namespace --env dev`"
                ),
            "{error}"
        );
    }

    #[tokio::test]
    async fn operators_of_other_namespaces_and_the_environments_own_are_let_through() {
        let cluster = running("namespace");
        check(&cluster, &plan_of("dev", "ml-dev", "namespace"))
            .await
            .expect("two namespaces, two operators");
        let cluster = running("cluster");
        check(&cluster, &plan_of("local", "ml", "cluster"))
            .await
            .expect("its own operator, applied again");
        check(&cluster, &plan_of("local", "ml", "namespace"))
            .await
            .expect("its own operator, scoped down");
    }
}
