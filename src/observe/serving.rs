//! The versions a serving component runs, as `status` shows them: per version its Deployment's
//! ready replicas, the share of the traffic its routes give it, and the model path it serves.
//!
//! Pure: it reads the live members `status` listed. A version is a Deployment carrying the
//! serving prototype's model-path annotation ([`MODEL_PATH_ANNOTATION`]); its weight is read
//! from the live Gateway API routes of the same component, whose backends are the versions'
//! Services, named as their Deployments. The weights are the routes' live ones, not the app's:
//! while an apply holds a route back (a new version not ready), status shows the old split.

use serde::Serialize;
use serde_json::Value;

use crate::deploy::inventory::applyset::Member;

/// The annotation the serving prototype puts on each version's Deployment.
pub const MODEL_PATH_ANNOTATION: &str = "serving.mlkube.io/model-path";

/// One version of a served model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServedVersion {
    pub component: Option<String>,
    pub namespace: Option<String>,
    /// The Deployment's name (and its Service's, under a route).
    pub deployment: String,
    pub version: String,
    pub ready: i64,
    pub replicas: i64,
    /// Percent of the route's traffic; `None` when no route of the component sends to it.
    pub weight: Option<u32>,
    pub model_path: String,
}

/// The versions among `members`, sorted by component and deployment.
pub fn served_versions(members: &[Member]) -> Vec<ServedVersion> {
    let routes: Vec<&Member> = members
        .iter()
        .filter(|m| m.key.group == "gateway.networking.k8s.io" && m.key.kind == "HTTPRoute")
        .collect();
    let mut versions: Vec<ServedVersion> = members
        .iter()
        .filter(|m| m.key.group == "apps" && m.key.kind == "Deployment")
        .filter_map(|m| {
            let value = &m.value;
            let model_path = value["metadata"]["annotations"][MODEL_PATH_ANNOTATION].as_str()?;
            let of_component = routes.iter().filter(|r| r.component == m.component);
            Some(ServedVersion {
                component: m.component.clone(),
                namespace: m.key.namespace.clone(),
                deployment: m.key.name.clone(),
                version: value["metadata"]["labels"]["version"]
                    .as_str()
                    .unwrap_or(&m.key.name)
                    .to_string(),
                ready: value["status"]["readyReplicas"].as_i64().unwrap_or(0),
                replicas: value["spec"]["replicas"].as_i64().unwrap_or(1),
                weight: of_component
                    .filter(|r| r.key.namespace == m.key.namespace)
                    .find_map(|r| weight(&r.value, &m.key.name)),
                model_path: model_path.to_string(),
            })
        })
        .collect();
    versions.sort_by(|a, b| (&a.component, &a.deployment).cmp(&(&b.component, &b.deployment)));
    versions
}

/// The percent of `route`'s traffic that goes to the Service `backend`: its weights over the
/// sum of the weights of the rule naming it (a missing weight counts 1, as the Gateway API
/// says); `None` when no rule names it.
fn weight(route: &Value, backend: &str) -> Option<u32> {
    route["spec"]["rules"].as_array()?.iter().find_map(|rule| {
        let refs = rule["backendRefs"].as_array()?;
        let of = |r: &Value| r["weight"].as_u64().unwrap_or(1);
        let total: u64 = refs.iter().map(of).sum();
        let mine: u64 = refs.iter().filter(|r| r["name"] == backend).map(of).sum();
        let named = refs.iter().any(|r| r["name"] == backend);
        named.then(|| (mine * 100).checked_div(total).unwrap_or(0) as u32)
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::deploy::cluster::key::Key;

    fn member(group: &str, kind: &str, name: &str, value: Value) -> Member {
        Member {
            key: Key {
                group: group.into(),
                kind: kind.into(),
                namespace: Some("ml".into()),
                name: name.into(),
            },
            shared: false,
            api_version: "v1".into(),
            component: Some("digits".into()),
            resource_version: "1".into(),
            value,
        }
    }

    fn version(name: &str, version: &str, ready: i64) -> Member {
        let value = json!({"metadata": {"labels": {"version": version},
            "annotations": {MODEL_PATH_ANNOTATION: format!("s3://models/digits/{version}/")}},
            "spec": {"replicas": 1}, "status": {"readyReplicas": ready}});
        member("apps", "Deployment", name, value)
    }

    #[test]
    fn each_version_shows_its_ready_replicas_its_live_weight_and_its_model_path() {
        let route = json!({"spec": {"rules": [{"backendRefs": [
            {"name": "digits-v1", "weight": 90}, {"name": "digits-v2", "weight": 10}]}]}});
        let members = vec![
            version("digits-v1", "v1", 1),
            version("digits-v2", "v2", 1),
            version("digits-v3", "v3", 0),
            member(
                "apps",
                "Deployment",
                "other",
                json!({"spec": {"replicas": 1}}),
            ),
            member("gateway.networking.k8s.io", "HTTPRoute", "digits", route),
        ];
        let shown: Vec<(String, i64, Option<u32>, String)> = served_versions(&members)
            .into_iter()
            .map(|v| (v.version, v.ready, v.weight, v.model_path))
            .collect();
        assert_eq!(
            shown,
            [
                ("v1".into(), 1, Some(90), "s3://models/digits/v1/".into()),
                ("v2".into(), 1, Some(10), "s3://models/digits/v2/".into()),
                ("v3".into(), 0, None, "s3://models/digits/v3/".into()),
            ]
        );
    }
}
