//! The connection to an environment's cluster: which kubeconfig, which context, and how kinds map
//! to API resources.
//!
//! Choosing the context is pure ([`choose_context`]) so that the wrong-cluster refusal is unit
//! tested; [`KubeCluster::connect`] then builds the client and runs API discovery once per run
//! (aggregated discovery: two requests). Discovery is refreshed only when this run applied
//! CustomResourceDefinitions, so kinds defined by a CRD applied in the same run resolve.
//! Everything that reads or writes objects goes through the [`Cluster`] trait, the seam
//! between the deploy stages and the API server: [`KubeCluster`] talks to a real one, and the
//! tests of the deploy decisions use an in-memory one (`memory`).
//!
//! The lowest room of deploy/, and what every room above it speaks: an object's identity
//! ([`key`]), mlkube's field managers and the patches that hand fields over ([`managed_fields`],
//! which this file sends), and the request to stop ([`cancel`]). Nothing here uses another room.

pub mod cancel;
pub mod key;
pub mod managed_fields;
#[cfg(test)]
pub mod memory;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use kube::Client;
use kube::Resource as _;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::discovery::{ApiResource, Discovery, Scope};
use serde_json::Value;

use crate::deploy::cluster::managed_fields::{FIELD_MANAGER, disowning, transfer};

/// How many requests a stage keeps in flight.
pub const CONCURRENCY: usize = 32;

/// What the environment pins about its cluster, and what the command line overrides.
#[derive(Debug, Clone, Default)]
pub struct Target {
    /// The environment's name, for messages.
    pub env: String,
    /// The environment's namespace.
    pub namespace: String,
    /// The API server URL the environment is pinned to.
    pub server: Option<String>,
    /// The kubeconfig context the environment is pinned to.
    pub context: Option<String>,
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`: chooses the context instead of the environment's pin. A pinned server is
    /// still enforced, so `--context` can never send an environment to another cluster.
    pub context_flag: Option<String>,
    /// How long one request may take, connecting included (the client's defaults when unset).
    pub request_timeout: Option<Duration>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cannot read kubeconfig {source_name}{hint}")]
    ReadKubeconfig {
        source_name: String,
        #[source]
        source: KubeconfigError,
        /// What to do when a file it names is gone (empty otherwise).
        hint: String,
    },
    #[error(
        "no kubeconfig: --kubeconfig is not given, $KUBECONFIG is not set and there is no \
         ~/.kube/config\n  hint: pass --kubeconfig FILE or set KUBECONFIG"
    )]
    NoKubeconfig,
    #[error(
        "context `{context}` is not in kubeconfig {source_name} (it has: {known})\n  hint: {hint}"
    )]
    UnknownContext {
        context: String,
        source_name: String,
        known: String,
        hint: &'static str,
    },
    #[error(
        "refusing to use context `{context}` for environment `{env}`: the environment is pinned \
         to server {pinned}, but context `{context}` points at {found}\n  hint: choose a context \
         for {pinned} with --context, or change the environment's server with \
         `mlkube env set {env} --server URL`"
    )]
    WrongCluster {
        env: String,
        pinned: String,
        context: String,
        found: String,
    },
    #[error(
        "environment `{env}` is pinned to server {pinned}, but no context in kubeconfig \
         {source_name} points at it (the current context `{context}` points at {found})\n  hint: \
         add a context for {pinned} to the kubeconfig, or change the environment's server with \
         `mlkube env set {env} --server URL`"
    )]
    NoContextForServer {
        env: String,
        pinned: String,
        source_name: String,
        context: String,
        found: String,
    },
    #[error(
        "environment `{env}` is pinned to server {pinned}, and several contexts in kubeconfig \
         {source_name} point at it: {contexts}\n  hint: pick one with --context, or pin the \
         environment to a context with `mlkube env set {env} --context NAME`"
    )]
    AmbiguousServer {
        env: String,
        pinned: String,
        source_name: String,
        contexts: String,
    },
    #[error(
        "kubeconfig {source_name} has no current context and environment `{env}` pins neither a \
         server nor a context\n  hint: pass --context NAME, or pin the environment with `mlkube \
         env set {env} --context NAME`"
    )]
    NoContext { env: String, source_name: String },
    #[error("context `{context}` of kubeconfig {source_name} is not usable")]
    Config {
        context: String,
        source_name: String,
        #[source]
        source: KubeconfigError,
    },
    #[error("cannot create a client for context `{context}`")]
    Client {
        context: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "API discovery on {server} (context `{context}`) failed\n  hint: is the cluster up and \
         the kubeconfig's credentials valid? `kubectl --context {context} version` checks both"
    )]
    Discovery {
        server: String,
        context: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "the API server {server} (context `{context}`) did not answer within {timeout}\n  hint: \
         check that the cluster is up and reachable from here, or allow it longer with \
         --request-timeout"
    )]
    Timeout {
        server: String,
        context: String,
        timeout: String,
    },
}

/// A context chosen from a kubeconfig, and the server it points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    pub context: String,
    pub server: String,
}

/// Read the kubeconfig named by `--kubeconfig`, else `$KUBECONFIG` (a list of files, merged),
/// else `~/.kube/config`. Returns it with a description of where it came from, for messages.
pub fn load_kubeconfig(flag: Option<&Path>) -> Result<(Kubeconfig, String), ClusterError> {
    if let Some(path) = flag {
        let source_name = path.display().to_string();
        return Kubeconfig::read_from(path)
            .map(|k| (k, source_name.clone()))
            .map_err(|source| read_error(source_name, &[path.to_path_buf()], source));
    }
    if let Some(value) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        let source_name = format!("$KUBECONFIG ({})", value.to_string_lossy());
        let paths: Vec<PathBuf> = std::env::split_paths(&value).collect();
        return match Kubeconfig::from_env() {
            Ok(Some(k)) => Ok((k, source_name)),
            Ok(None) => Err(ClusterError::NoKubeconfig),
            Err(source) => Err(read_error(source_name, &paths, source)),
        };
    }
    let home = std::env::var_os("HOME").ok_or(ClusterError::NoKubeconfig)?;
    let path = PathBuf::from(home).join(".kube").join("config");
    if !path.exists() {
        return Err(ClusterError::NoKubeconfig);
    }
    let source_name = path.display().to_string();
    Kubeconfig::read_from(&path)
        .map(|k| (k, source_name.clone()))
        .map_err(|source| read_error(source_name, &[path], source))
}

/// A kubeconfig that cannot be read; when a file it names is gone, most often a local
/// cluster's, removed by its `down`, the hint says how to get one back.
fn read_error(source_name: String, paths: &[PathBuf], source: KubeconfigError) -> ClusterError {
    let gone: Vec<String> = paths
        .iter()
        .filter(|p| !p.as_os_str().is_empty() && !p.exists())
        .map(|p| p.display().to_string())
        .collect();
    let hint = if gone.is_empty() {
        String::new()
    } else {
        format!(
            "\n  hint: {} does not exist; if it was a local cluster's, that cluster is down: \
             `cluster/local-cluster.sh up` starts it again and `eval \"$(cluster/local-cluster.sh \
             env)\"` sets KUBECONFIG; else pass --kubeconfig FILE or set KUBECONFIG to your \
             cluster's",
            gone.join(", ")
        )
    };
    ClusterError::ReadKubeconfig {
        source_name,
        source,
        hint,
    }
}

/// The server URL a context points at, if the context and its cluster exist.
pub fn server_of(kubeconfig: &Kubeconfig, context: &str) -> Option<String> {
    let cluster = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context)?
        .context
        .as_ref()?
        .cluster
        .clone();
    kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == cluster)?
        .cluster
        .as_ref()?
        .server
        .clone()
}

/// Two server URLs name the same API server when they are equal up to case and a trailing slash.
/// Deliberately no prefix or pattern matching: that is how other tools picked the wrong cluster.
fn same_server(a: &str, b: &str) -> bool {
    a.trim_end_matches('/')
        .eq_ignore_ascii_case(b.trim_end_matches('/'))
}

/// Choose the context for an environment.
///
/// `--context` wins, then the environment's pinned context, then the one context that points at
/// the pinned server (the current context if it is one of several), then the kubeconfig's
/// current context. Whatever was chosen, a pinned server must match the context's server, or
/// the choice is refused.
pub fn choose_context(
    kubeconfig: &Kubeconfig,
    source_name: &str,
    target: &Target,
) -> Result<Chosen, ClusterError> {
    let current = kubeconfig.current_context.clone().filter(|c| !c.is_empty());
    let named = |name: &str, hint: &'static str| named_context(kubeconfig, source_name, name, hint);
    let chosen = if let Some(flag) = &target.context_flag {
        named(flag, "pass one of the contexts above with --context")?
    } else if let Some(pinned) = &target.context {
        named(
            pinned,
            "the environment pins this context; change it with `mlkube env set ENV --context NAME`",
        )?
    } else if let Some(pinned) = &target.server {
        context_for_server(kubeconfig, source_name, target, pinned, current.as_deref())?
    } else {
        match &current {
            Some(current) => named(
                current,
                "fix current-context in the kubeconfig, or pass --context",
            )?,
            None => {
                return Err(ClusterError::NoContext {
                    env: target.env.clone(),
                    source_name: source_name.to_string(),
                });
            }
        }
    };
    if let Some(pinned) = &target.server
        && !same_server(pinned, &chosen.server)
    {
        return Err(ClusterError::WrongCluster {
            env: target.env.clone(),
            pinned: pinned.clone(),
            context: chosen.context,
            found: chosen.server,
        });
    }
    Ok(chosen)
}

/// The context `name` and its server; refused with `hint`, listing the contexts there are,
/// when the kubeconfig has no such context (or it points at no server).
fn named_context(
    kubeconfig: &Kubeconfig,
    source_name: &str,
    name: &str,
    hint: &'static str,
) -> Result<Chosen, ClusterError> {
    let known = || {
        let names: Vec<&str> = kubeconfig
            .contexts
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        if names.is_empty() {
            "no contexts".to_string()
        } else {
            names.join(", ")
        }
    };
    match server_of(kubeconfig, name) {
        Some(server) => Ok(Chosen {
            context: name.to_string(),
            server,
        }),
        None => Err(ClusterError::UnknownContext {
            context: name.to_string(),
            source_name: source_name.to_string(),
            known: known(),
            hint,
        }),
    }
}

/// The one context that points at the `pinned` server, or the `current` one if it is one of
/// several; refused when none does, or several and the current one is not among them.
fn context_for_server(
    kubeconfig: &Kubeconfig,
    source_name: &str,
    target: &Target,
    pinned: &str,
    current: Option<&str>,
) -> Result<Chosen, ClusterError> {
    let named = |name: &str| named_context(kubeconfig, source_name, name, "");
    let matching: Vec<&str> = kubeconfig
        .contexts
        .iter()
        .filter(|c| server_of(kubeconfig, &c.name).is_some_and(|s| same_server(&s, pinned)))
        .map(|c| c.name.as_str())
        .collect();
    match (matching.as_slice(), current) {
        ([], current) => {
            let context = current.map_or_else(|| "(none)".to_string(), str::to_string);
            let found = current
                .and_then(|c| server_of(kubeconfig, c))
                .unwrap_or_else(|| "no server".to_string());
            Err(ClusterError::NoContextForServer {
                env: target.env.clone(),
                pinned: pinned.to_string(),
                source_name: source_name.to_string(),
                context,
                found,
            })
        }
        ([only], _) => named(only),
        (several, Some(current)) if several.contains(&current) => named(current),
        (several, _) => Err(ClusterError::AmbiguousServer {
            env: target.env.clone(),
            pinned: pinned.to_string(),
            source_name: source_name.to_string(),
            contexts: several.join(", "),
        }),
    }
}

/// A kind as the API server serves it.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub resource: ApiResource,
    pub namespaced: bool,
}

/// The calls the deploy stages make on a cluster: resolve a kind, get, list, apply (also as a
/// dry run) and delete objects. Errors are the API server's, as kube reports them.
pub trait Cluster: Sync {
    /// How the server serves `apiVersion`/`kind`, or `None` when it does not (yet).
    fn resolve(&self, api_version: &str, kind: &str) -> Option<Resolved>;

    /// The resource of a group and kind at the version the server prefers (or, for a kind the
    /// group's preferred version does not serve, its most stable version), for listing members
    /// of an inventory that only records group and kind.
    fn resolve_group_kind(&self, group: &str, kind: &str) -> Option<Resolved>;

    /// Run discovery again, after CRDs were applied.
    fn refresh(&self) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// The live object, or `None` when it does not exist.
    fn get(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        name: &str,
    ) -> impl Future<Output = Result<Option<Value>, kube::Error>> + Send;

    /// Server-side apply with the field manager `mode` names.
    fn apply(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        name: &str,
        object: &Value,
        mode: ApplyMode<'_>,
    ) -> impl Future<Output = Result<Value, kube::Error>> + Send;

    /// Delete an object; an object that is already gone is not an error.
    fn delete(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        name: &str,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send;

    /// Every object of a kind carrying `label_selector`, in one namespace or in all of them.
    fn list(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        label_selector: &str,
    ) -> impl Future<Output = Result<Vec<Value>, kube::Error>> + Send;

    /// Every object of a kind whose fields match `field_selector` (`path=value` terms joined by
    /// commas, e.g. `involvedObject.uid=...`, as far as the server supports that field), in one
    /// namespace or in all of them.
    fn list_by_fields(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        field_selector: &str,
    ) -> impl Future<Output = Result<Vec<Value>, kube::Error>> + Send;

    /// Take the field manager `manager` and the label `label` off the object `live` (as read),
    /// leaving every other field where it is; refused (409) when the object changed since it
    /// was read. How the last claim on an object mlkube never deletes is released (see
    /// [`crate::deploy::cluster::managed_fields::disowning`]).
    fn disown(
        &self,
        resolved: &Resolved,
        live: &Value,
        manager: &str,
        label: &str,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send;

    /// Make `manager` the owner of every field other managers wrote on the object `live` (as
    /// read), so that its next apply removes what it does not send; refused (409) when the
    /// object changed since it was read. How `apply --adopt` takes an object over (see
    /// [`crate::deploy::inventory::adopt`]).
    fn take_over(
        &self,
        resolved: &Resolved,
        live: &Value,
        manager: &str,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send;

    /// The server's OpenAPI v3 document of one group-version (`v1`, `apps/v1`), or `None` when
    /// it publishes none (see [`crate::deploy::checks::openapi`]).
    fn openapi(
        &self,
        api_version: &str,
    ) -> impl Future<Output = Result<Option<Value>, kube::Error>> + Send;
}

/// The cluster of one run: a client, the context it came from, and the discovery cache.
pub struct KubeCluster {
    pub client: Client,
    pub context: String,
    pub server: String,
    discovery: RwLock<Arc<Discovery>>,
    /// The request timeout, for discovery's messages.
    timeout: Option<Duration>,
}

impl KubeCluster {
    /// Load the kubeconfig, choose the context for `target`, connect and discover the API.
    pub async fn connect(target: &Target) -> Result<KubeCluster, ClusterError> {
        let (kubeconfig, source_name) = load_kubeconfig(target.kubeconfig.as_deref())?;
        let chosen = choose_context(&kubeconfig, &source_name, target)?;
        let options = KubeConfigOptions {
            context: Some(chosen.context.clone()),
            ..Default::default()
        };
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|source| ClusterError::Config {
                context: chosen.context.clone(),
                source_name,
                source,
            })?;
        if let Some(timeout) = target.request_timeout {
            config.connect_timeout = Some(timeout);
            config.read_timeout = Some(timeout);
            config.write_timeout = Some(timeout);
        }
        let client = Client::try_from(config).map_err(|source| ClusterError::Client {
            context: chosen.context.clone(),
            source,
        })?;
        let discovery = discover(
            &client,
            &chosen.context,
            &chosen.server,
            target.request_timeout,
        )
        .await?;
        let timeout = target.request_timeout;
        Ok(KubeCluster::from_parts(client, chosen, discovery, timeout))
    }

    fn from_parts(
        client: Client,
        chosen: Chosen,
        discovery: Discovery,
        timeout: Option<Duration>,
    ) -> KubeCluster {
        KubeCluster {
            client,
            context: chosen.context,
            server: chosen.server,
            discovery: RwLock::new(Arc::new(discovery)),
            timeout,
        }
    }

    /// Wrap a client that is already connected (tests build theirs from the harness).
    pub async fn with_client(
        client: Client,
        context: String,
        server: String,
    ) -> Result<KubeCluster, ClusterError> {
        let discovery = discover(&client, &context, &server, None).await?;
        let chosen = Chosen { context, server };
        Ok(KubeCluster::from_parts(client, chosen, discovery, None))
    }

    fn api(&self, resolved: &Resolved, namespace: Option<&str>) -> Api<DynamicObject> {
        match (resolved.namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &resolved.resource),
            _ => Api::all_with(self.client.clone(), &resolved.resource),
        }
    }
}

impl KubeCluster {
    /// A JSON merge patch of the object `live` is, written as field manager `manager`.
    async fn merge_patch(
        &self,
        resolved: &Resolved,
        live: &Value,
        manager: &str,
        patch: &Value,
    ) -> Result<(), kube::Error> {
        let params = PatchParams {
            field_manager: Some(manager.into()),
            ..PatchParams::default()
        };
        let namespace = live["metadata"]["namespace"].as_str();
        let name = live["metadata"]["name"].as_str().unwrap_or_default();
        self.api(resolved, namespace)
            .patch(name, &params, &Patch::Merge(patch))
            .await?;
        Ok(())
    }
}

impl Cluster for KubeCluster {
    async fn openapi(&self, api_version: &str) -> Result<Option<Value>, kube::Error> {
        let (prefix, version) = match api_version.rsplit_once('/') {
            Some((group, version)) => (format!("/openapi/v3/apis/{group}"), version),
            None => ("/openapi/v3/api".to_owned(), api_version),
        };
        let request = kube::core::Request::new(prefix)
            .get(version, &kube::api::GetParams::default())
            .map_err(kube::Error::BuildRequest)?;
        match self.client.request(request).await {
            Ok(document) => Ok(Some(document)),
            Err(error) if is_not_found(&error) => Ok(None),
            Err(error) => Err(error),
        }
    }

    async fn disown(
        &self,
        resolved: &Resolved,
        live: &Value,
        manager: &str,
        label: &str,
    ) -> Result<(), kube::Error> {
        // A merge patch of the managed fields, which the server takes as the object's new ones.
        let patch = disowning(live, manager, label);
        self.merge_patch(resolved, live, FIELD_MANAGER, &patch)
            .await
    }

    async fn take_over(
        &self,
        resolved: &Resolved,
        live: &Value,
        manager: &str,
    ) -> Result<(), kube::Error> {
        let patch = transfer(live, manager);
        self.merge_patch(resolved, live, manager, &patch).await
    }

    async fn refresh(&self) -> Result<(), ClusterError> {
        let discovery = discover(&self.client, &self.context, &self.server, self.timeout).await?;
        *self.discovery.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(discovery);
        Ok(())
    }

    fn resolve(&self, api_version: &str, kind: &str) -> Option<Resolved> {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        let discovery = self
            .discovery
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let (resource, caps) = discovery.resolve_gvk(&gvk)?;
        Some(Resolved {
            resource,
            namespaced: caps.scope == Scope::Namespaced,
        })
    }

    fn resolve_group_kind(&self, group: &str, kind: &str) -> Option<Resolved> {
        let discovery = self
            .discovery
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let group = discovery.get(group)?;
        // A group's kinds may be served at different versions (KServe's InferenceService at
        // v1beta1, its ServingRuntimes at v1alpha1): the preferred version's, else the most
        // stable version that serves the kind.
        let (resource, caps) = group.recommended_kind(kind).or_else(|| {
            (group.resources_by_stability().into_iter()).find(|(resource, _)| resource.kind == kind)
        })?;
        Some(Resolved {
            resource,
            namespaced: caps.scope == Scope::Namespaced,
        })
    }

    async fn get(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, kube::Error> {
        let object = self.api(resolved, namespace).get_opt(name).await?;
        object.map(to_value).transpose()
    }

    async fn apply(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        name: &str,
        object: &Value,
        mode: ApplyMode<'_>,
    ) -> Result<Value, kube::Error> {
        let mut params = PatchParams::apply(mode.manager);
        if mode.force {
            params = params.force();
        }
        if mode.dry_run {
            params = params.dry_run();
        }
        let applied = self
            .api(resolved, namespace)
            .patch(name, &params, &Patch::Apply(object))
            .await?;
        to_value(applied)
    }

    async fn delete(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), kube::Error> {
        match self
            .api(resolved, namespace)
            .delete(name, &DeleteParams::background())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn list(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        label_selector: &str,
    ) -> Result<Vec<Value>, kube::Error> {
        let params = ListParams::default().labels(label_selector);
        self.list_with(resolved, namespace, &params).await
    }

    async fn list_by_fields(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        field_selector: &str,
    ) -> Result<Vec<Value>, kube::Error> {
        let params = ListParams::default().fields(field_selector);
        self.list_with(resolved, namespace, &params).await
    }
}

impl KubeCluster {
    /// The objects of a kind that `params` select, in one namespace or in all of them.
    async fn list_with(
        &self,
        resolved: &Resolved,
        namespace: Option<&str>,
        params: &ListParams,
    ) -> Result<Vec<Value>, kube::Error> {
        // The items are read straight into JSON values: through `DynamicObject` each would be
        // decoded twice, and a list of thousands is what a no-op diff spends its time on.
        let namespace = namespace.filter(|_| resolved.namespaced);
        let url = DynamicObject::url_path(&resolved.resource, namespace);
        let mut request = kube::core::Request::new(url)
            .list(params)
            .map_err(kube::Error::BuildRequest)?;
        request.extensions_mut().insert("list");
        let list: Items = self.client.request(request).await?;
        let (api_version, kind) = (&resolved.resource.api_version, &resolved.resource.kind);
        Ok(list
            .items
            .into_iter()
            .map(|item| typed(item, api_version, kind))
            .collect())
    }
}

/// The Namespace resource, which every cluster serves.
pub fn namespace_resource() -> Resolved {
    Resolved {
        resource: kube::discovery::ApiResource {
            group: String::new(),
            version: "v1".into(),
            api_version: "v1".into(),
            kind: "Namespace".into(),
            plural: "namespaces".into(),
        },
        namespaced: false,
    }
}

/// How an apply is sent.
#[derive(Debug, Clone, Copy)]
pub struct ApplyMode<'m> {
    pub dry_run: bool,
    pub force: bool,
    /// The field manager.
    pub manager: &'m str,
}

/// The items of a list response; the rest of it (its `metadata`) is not read.
#[derive(serde::Deserialize)]
struct Items {
    #[serde(default)]
    items: Vec<Value>,
}

/// Items of a list carry no type; put it back, first, so they read like single objects.
fn typed(item: Value, api_version: &str, kind: &str) -> Value {
    let mut typed = serde_json::Map::new();
    typed.insert("apiVersion".into(), Value::String(api_version.to_string()));
    typed.insert("kind".into(), Value::String(kind.to_string()));
    if let Value::Object(map) = item {
        for (k, v) in map {
            typed.entry(k).or_insert(v);
        }
    }
    Value::Object(typed)
}

fn to_value(object: DynamicObject) -> Result<Value, kube::Error> {
    serde_json::to_value(object).map_err(kube::Error::SerdeError)
}

async fn discover(
    client: &Client,
    context: &str,
    server: &str,
    timeout: Option<Duration>,
) -> Result<Discovery, ClusterError> {
    let error = |source: kube::Error| match timeout.filter(|_| timed_out(&source)) {
        Some(timeout) => ClusterError::Timeout {
            server: server.to_string(),
            context: context.to_string(),
            timeout: flag_duration(timeout),
        },
        None => ClusterError::Discovery {
            server: server.to_string(),
            context: context.to_string(),
            source,
        },
    };
    match Discovery::new(client.clone()).run_aggregated().await {
        Ok(discovery) => Ok(discovery),
        Err(e) if timed_out(&e) => Err(error(e)),
        // Servers older than 1.26 have no aggregated discovery; ask each group instead.
        Err(_) => Discovery::new(client.clone()).run().await.map_err(error),
    }
}

/// Whether a request failed because the server did not answer within the request timeout
/// (connecting, or reading the answer).
pub fn timed_out(error: &kube::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        let io_timeout = e
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut);
        if io_timeout || e.is::<tokio::time::error::Elapsed>() {
            return true;
        }
        cause = e.source();
    }
    false
}

/// `30s`, `1500ms`: a duration as the flags take it.
pub fn flag_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}

/// The conflicts of a rejected server-side apply: each field and the manager that owns it.
pub fn conflicts(error: &kube::Error) -> Option<Vec<Conflict>> {
    let kube::Error::Api(status) = error else {
        return None;
    };
    if status.code != 409 || status.reason != "Conflict" {
        return None;
    }
    let causes = status
        .details
        .as_ref()
        .map(|d| d.causes.as_slice())
        .unwrap_or_default();
    let found: Vec<Conflict> = causes
        .iter()
        .filter(|c| c.reason == "FieldManagerConflict" || c.message.starts_with("conflict with"))
        .map(|c| Conflict {
            field: c.field.clone(),
            manager: c
                .message
                .split('"')
                .nth(1)
                .map(str::to_string)
                .unwrap_or_else(|| c.message.clone()),
        })
        .collect();
    Some(found)
}

/// A field another manager owns with a different value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Conflict {
    pub field: String,
    pub manager: String,
}

/// The message the API server gave for a failed request, without the client's wrapping.
pub fn api_message(error: &kube::Error) -> String {
    if timed_out(error) {
        return "the API server did not answer in time (see --request-timeout)".into();
    }
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

/// Whether the server said "not found" (object, namespace, or resource type).
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig() -> Kubeconfig {
        Kubeconfig::from_yaml(
            r#"
apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev
  cluster: { server: "https://dev.example:6443" }
- name: prod
  cluster: { server: "https://prod.example:6443/" }
contexts:
- name: dev
  context: { cluster: dev, user: u }
- name: prod
  context: { cluster: prod, user: u }
- name: prod-admin
  context: { cluster: prod, user: u }
users:
- name: u
  user: { token: t }
"#,
        )
        .expect("a valid kubeconfig")
    }

    fn target() -> Target {
        Target {
            env: "prod".into(),
            namespace: "kf".into(),
            ..Target::default()
        }
    }

    #[test]
    fn without_pins_the_current_context_is_used() {
        let chosen = choose_context(&kubeconfig(), "k", &target()).unwrap();
        assert_eq!(
            chosen,
            Chosen {
                context: "dev".into(),
                server: "https://dev.example:6443".into()
            }
        );
    }

    #[test]
    fn a_pinned_context_is_used() {
        let t = Target {
            context: Some("prod".into()),
            ..target()
        };
        assert_eq!(
            choose_context(&kubeconfig(), "k", &t).unwrap().context,
            "prod"
        );
    }

    #[test]
    fn an_unknown_pinned_context_lists_the_known_ones() {
        let t = Target {
            context: Some("staging".into()),
            ..target()
        };
        let message = choose_context(&kubeconfig(), "k", &t)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("`staging`") && message.contains("dev, prod, prod-admin"),
            "{message}"
        );
    }

    #[test]
    fn a_pinned_server_matching_several_contexts_is_ambiguous() {
        let t = Target {
            server: Some("https://prod.example:6443".into()),
            ..target()
        };
        let error = choose_context(&kubeconfig(), "k", &t).unwrap_err();
        assert!(
            matches!(error, ClusterError::AmbiguousServer { ref contexts, .. } if contexts == "prod, prod-admin")
        );
    }

    #[test]
    fn a_pinned_server_chooses_its_only_context_up_to_a_trailing_slash() {
        let t = Target {
            server: Some("https://dev.example:6443/".into()),
            ..target()
        };
        assert_eq!(
            choose_context(&kubeconfig(), "k", &t).unwrap().context,
            "dev"
        );
    }

    #[test]
    fn a_pinned_server_no_context_points_at_is_refused_naming_what_was_found() {
        let t = Target {
            server: Some("https://prod.example:64430".into()),
            ..target()
        };
        let message = choose_context(&kubeconfig(), "k", &t)
            .unwrap_err()
            .to_string();
        assert!(message.contains("https://prod.example:64430"), "{message}");
        assert!(
            message.contains("`dev` points at https://dev.example:6443"),
            "{message}"
        );
    }

    #[test]
    fn the_context_flag_cannot_send_a_pinned_environment_to_another_server() {
        let t = Target {
            server: Some("https://prod.example:6443".into()),
            context_flag: Some("dev".into()),
            ..target()
        };
        let error = choose_context(&kubeconfig(), "k", &t).unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, ClusterError::WrongCluster { .. }));
        assert!(
            message.contains("pinned to server https://prod.example:6443"),
            "{message}"
        );
        assert!(
            message.contains("context `dev` points at https://dev.example:6443"),
            "{message}"
        );
    }

    #[test]
    fn the_context_flag_overrides_a_pinned_context() {
        let t = Target {
            context: Some("prod".into()),
            context_flag: Some("dev".into()),
            ..target()
        };
        assert_eq!(
            choose_context(&kubeconfig(), "k", &t).unwrap().context,
            "dev"
        );
    }

    #[test]
    fn a_pinned_context_pointing_away_from_the_pinned_server_is_refused() {
        let t = Target {
            server: Some("https://dev.example:6443".into()),
            context: Some("prod".into()),
            ..target()
        };
        assert!(matches!(
            choose_context(&kubeconfig(), "k", &t),
            Err(ClusterError::WrongCluster { .. })
        ));
    }
}
