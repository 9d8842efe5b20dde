//! The live objects of rendered objects that are not members of the inventory: new ones, and
//! ones another tool, environment or app wrote. `diff` and `apply` judge whose each one is
//! before anything is written.
//!
//! Read with one list per kind and namespace where a kind has many such objects, and one get
//! each where it has few: listing a namespace's ConfigMaps to find two of them would cost more
//! than the two gets, while five thousand gets for a first apply cost more than one list. A list
//! the server refuses (RBAC may allow get and not list) falls back to the gets.

use std::collections::{BTreeMap, HashMap};

use futures::StreamExt;
use serde_json::Value;

use crate::deploy::cluster::key::Key;
use crate::deploy::cluster::{CONCURRENCY, Cluster, Resolved};

/// From this many objects of one kind in one namespace on, they are found by a list.
pub const LIST_FROM: usize = 16;

/// A rendered object to look up, and how the server serves its kind.
pub type Wanted<'a> = (&'a Key, &'a Resolved);

/// The live object of each wanted key (`None`: it does not exist), or the server's error.
pub async fn read(
    cluster: &impl Cluster,
    wanted: &[Wanted<'_>],
) -> HashMap<Key, Result<Option<Value>, kube::Error>> {
    let mut groups: BTreeMap<(&str, &str, Option<&str>), Vec<Wanted<'_>>> = BTreeMap::new();
    for &(key, resolved) in wanted {
        let namespace = key.namespace.as_deref().filter(|_| resolved.namespaced);
        let kind = (
            resolved.resource.api_version.as_str(),
            resolved.resource.plural.as_str(),
            namespace,
        );
        groups.entry(kind).or_default().push((key, resolved));
    }
    let mut found = HashMap::with_capacity(wanted.len());
    let mut singles: Vec<Wanted<'_>> = Vec::new();
    for ((_, _, namespace), group) in groups {
        let listed = match group.len() >= LIST_FROM {
            true => cluster.list(group[0].1, namespace, "").await.ok(),
            false => None,
        };
        let Some(listed) = listed else {
            singles.extend(group);
            continue;
        };
        let mut by_key: HashMap<Key, Value> = listed
            .into_iter()
            .filter_map(|value| Some((Key::of(&value)?, value)))
            .collect();
        for (key, _) in group {
            found.insert(key.clone(), Ok(by_key.remove(key)));
        }
    }
    let gets: Vec<_> = singles
        .into_iter()
        .map(|(key, resolved)| get(cluster, key, resolved))
        .collect();
    let read: Vec<(Key, Result<Option<Value>, kube::Error>)> = futures::stream::iter(gets)
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    found.extend(read);
    found
}

async fn get(
    cluster: &impl Cluster,
    key: &Key,
    resolved: &Resolved,
) -> (Key, Result<Option<Value>, kube::Error>) {
    let live = cluster
        .get(resolved, key.namespace.as_deref(), &key.name)
        .await;
    (key.clone(), live)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deploy::cluster::memory::MemoryCluster;
    use serde_json::json;

    fn config_map(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "ns"}, "data": {"k": name}})
    }

    #[tokio::test]
    async fn many_objects_of_a_kind_are_listed_once_and_few_are_read_one_by_one() {
        let cluster = MemoryCluster::new();
        cluster.create_as(
            "kubectl",
            json!({"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": "ns"}}),
        );
        cluster.create_as("kubectl", config_map("cm-3"));
        cluster.create_as("kubectl", config_map("cm-33"));
        let resolved = cluster.resolve("v1", "ConfigMap").unwrap();
        let keys: Vec<Key> = (0..40)
            .map(|i| Key::of(&config_map(&format!("cm-{i}"))).unwrap())
            .collect();
        let wanted: Vec<Wanted<'_>> = keys.iter().map(|k| (k, &resolved)).collect();

        let found = read(&cluster, &wanted).await;
        assert_eq!(found.len(), 40);
        let existing: Vec<&str> = keys
            .iter()
            .filter(|k| found[*k].as_ref().unwrap().is_some())
            .map(|k| k.name.as_str())
            .collect();
        assert_eq!(existing, ["cm-3", "cm-33"]);
        let cm_3 = found[&keys[3]].as_ref().unwrap().as_ref().unwrap();
        assert_eq!(cm_3["data"]["k"], "cm-3");
        assert_eq!(cluster.reads(), (1, 0), "one list, no get");

        let few = read(&cluster, &wanted[..3]).await;
        assert!(few.values().all(|live| matches!(live, Ok(None))));
        assert_eq!(cluster.reads(), (1, 3), "then three gets, no list");
    }
}
