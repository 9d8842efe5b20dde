//! The command line: argument parsing, settings, output and exit codes, and the only layer
//! that knows about any of them.
//!
//! Each verb parses into a value of the types below; [`settings`] resolves the arguments and
//! the environment's pins into typed settings once, and the verb hands them to the stage that
//! does the work ([`crate::app`], [`crate::deploy`], [`crate::operator`]). stdout carries data
//! (manifests, diffs, JSON); messages and progress go to stderr ([`output`]).

pub mod app;
pub mod color;
pub mod complete;
pub mod deploy;
pub mod exit;
pub mod images;
pub mod logs;
pub mod output;
pub mod param_source;
pub mod progress;
pub mod settings;
pub mod status;
pub mod sweep;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::cli::color::ColorChoice;
use crate::cli::exit::{Exit, report};

/// Deploy a Kubeflow-style ML platform to Kubernetes per environment, and run its TFJob operator.
#[derive(Debug, Parser)]
#[command(
    name = "mlkube",
    version,
    about,
    max_term_width = 100,
    after_help = "Examples:
  mlkube init ml-platform --namespace ml     create an app
  cd ml-platform && mlkube show local        render the local environment
  mlkube diff dev && mlkube apply dev        review, then deploy
  mlkube completion bash > ~/.local/share/bash-completion/completions/mlkube",
    mut_subcommands(without_app)
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every verb understands (`--app` only those that read an app).
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// The app directory (default: the nearest ancestor of the current directory holding app.yaml).
    #[arg(long, global = true, value_name = "DIR")]
    pub app: Option<PathBuf>,
    /// When to colour output: auto colours a terminal unless NO_COLOR is set.
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

/// Options of the verbs that talk to a cluster.
#[derive(Debug, Args, Clone, Default)]
pub struct ClusterArgs {
    /// The kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use, overriding the one the environment pins.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

/// How long the cluster verbs wait for the API server.
#[derive(Debug, Args, Clone)]
pub struct RequestArgs {
    /// How long to wait for the API server to answer one request (connecting included), e.g.
    /// 30s, 2m; a server that does not answer in time fails the verb.
    #[arg(long, value_name = "D", default_value = "30s", value_parser = settings::duration)]
    pub request_timeout: std::time::Duration,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a new app with the local, dev and prod environments.
    #[command(after_help = "Examples:
  mlkube init ml-platform
  mlkube init ml-platform --namespace ml --context kind-kind
  mlkube init ml-platform --server https://10.0.0.1:6443 --empty
  mlkube init ml-platform --with-jobs        also a TensorFlow, a PyTorch and a JAX job")]
    Init(InitArgs),
    /// List, add, change or remove environments.
    #[command(
        subcommand,
        after_help = "Examples:
  mlkube env list
  mlkube env add staging --namespace ml-staging --context staging"
    )]
    Env(EnvCommand),
    /// List the embedded prototypes, or describe one with its parameters.
    #[command(
        subcommand,
        after_help = "Examples:
  mlkube prototype list
  mlkube prototype describe serving"
    )]
    Prototype(PrototypeCommand),
    /// Add, list or remove component instances.
    #[command(
        subcommand,
        after_help = "Examples:
  mlkube component add serving resnet --param modelName=resnet
  mlkube component list -o name"
    )]
    Component(ComponentCommand),
    /// Set, list or compare parameters.
    #[command(
        subcommand,
        after_help = "Examples:
  mlkube param set mnist minReplicas 3 --env prod
  mlkube param diff dev prod"
    )]
    Param(ParamCommand),
    /// Render an environment to Kubernetes manifests, in apply order.
    #[command(after_help = "Examples:
  mlkube show local
  mlkube show prod -c mnist -o json")]
    Show(ShowArgs),
    /// Show what applying an environment would change on the live cluster.
    ///
    /// Exit codes as `kubectl diff`: 0 no differences, 1 differences, 2 and up errors.
    #[command(after_help = "Examples:
  mlkube diff dev
  mlkube diff prod -c mnist --context prod-admin")]
    Diff(DiffArgs),
    /// Apply an environment to its cluster, in order, and wait until it is healthy.
    #[command(after_help = "Examples:
  mlkube apply dev
  mlkube apply prod --prune --timeout 10m
  mlkube apply local --dry-run")]
    Apply(ApplyArgs),
    /// Delete the objects this environment applied earlier and no longer renders.
    #[command(after_help = "Examples:
  mlkube prune dev
  mlkube prune dev --yes")]
    Prune(PruneArgs),
    /// Delete everything this environment applied.
    #[command(after_help = "Examples:
  mlkube delete dev
  mlkube delete dev -c notebook-hub --yes")]
    Delete(DeleteArgs),
    /// Validate an environment with a server-side dry run, listing every rejection.
    #[command(after_help = "Examples:
  mlkube validate prod
  mlkube validate prod -c mnist")]
    Validate(ValidateArgs),
    /// Show every object an environment applied: its health, its drift since the last apply,
    /// and when, with which mlkube and from which git commit that apply ran.
    ///
    /// Exit codes: 0 all healthy and nothing drifted, 1 drift only, 3 some object failed, is
    /// missing or is not ready yet (a training job still running), 4 never applied, 2 errors.
    #[command(after_help = "Examples:
  mlkube status dev
  mlkube status prod -o json
  mlkube status prod -c sweep         a sweep's jobs, best metric first")]
    Status(StatusArgs),
    /// Print the logs of training jobs' replicas, each line tagged with its replica
    /// (`worker-1 | ...`), from a job named KIND/NAME or the jobs an environment renders.
    #[command(after_help = "Examples:
  mlkube logs -n ml tfjob/mnist               every replica's logs, oldest line first
  mlkube logs -n ml tfjob/mnist -f            follow, also pods that start later
  mlkube logs local -c train --replica worker-0 --tail 50
  mlkube logs -n ml pytorchjob/dist --previous --replica master")]
    Logs(logs::LogsArgs),
    /// List the platform's images, or push them into a registry your cluster pulls from.
    #[command(
        subcommand,
        after_help = "Examples:
  mlkube images list
  mlkube images push 127.0.0.1:5000/mlkube --insecure
  mlkube images push registry.example.com/team --dry-run"
    )]
    Images(images::ImagesCommand),
    /// Run the training-job operator (kubeflow.org/v1 TFJob, PyTorchJob, MXJob, XGBoostJob,
    /// JAXJob, PaddleJob, MPIJob) against the cluster.
    #[command(after_help = "Examples:
  mlkube operator
  mlkube operator --namespace ml --leader-elect --frameworks tensorflow,pytorch")]
    Operator(Box<OperatorArgs>),
    /// Print a completion script for a shell.
    #[command(after_help = "Examples:
  mlkube completion bash > ~/.local/share/bash-completion/completions/mlkube
  mlkube completion zsh > \"${fpath[1]}/_mlkube\"
  mlkube completion fish > ~/.config/fish/completions/mlkube.fish
  mlkube completion powershell >> $PROFILE")]
    Completion(CompletionArgs),
    /// What may come next on a command line: the completion scripts ask this.
    #[command(
        name = "__complete",
        hide = true,
        after_help = "Examples:
  mlkube __complete -- apply ''       the environments"
    )]
    Complete(CompleteArgs),
    /// Copy the objects under an S3 prefix into a directory: what the volume controller's
    /// fetcher pods run (the access key comes from the environment).
    #[command(
        name = "volume-fetch",
        hide = true,
        after_help = "Examples:
  mlkube volume-fetch --endpoint http://store:9000 --bucket datasets --prefix digits --secret store --dest /kvc/digits"
    )]
    VolumeFetch(VolumeFetchArgs),
    /// Remove a VolumeManager's directory from this node: what the volume controller's
    /// cleaner pods run.
    #[command(
        name = "volume-clean",
        hide = true,
        after_help = "Examples:
  mlkube volume-clean /kvc/0c1e6f0e-0000-4000-8000-000000000000"
    )]
    VolumeClean(VolumeCleanArgs),
    /// Wait until every Task of this pod's Framework has a pod IP, then write framework.json
    /// and injector.sh here: FrameworkController's FrameworkBarrier, run as a Framework's
    /// init container (settings from FC_FRAMEWORK_NAME, FC_FRAMEWORK_NAMESPACE,
    /// BARRIER_CHECK_INTERVAL_SEC and BARRIER_CHECK_TIMEOUT_SEC).
    #[command(
        name = "framework-barrier",
        hide = true,
        after_help = "Examples:
  mlkube framework-barrier     in an init container whose workingDir is /mnt/frameworkbarrier"
    )]
    FrameworkBarrier,
    /// Answer every request with a 404 that says what the client should ask instead: the
    /// gateway component's route for the paths no other route takes.
    #[command(
        name = "gateway-fallback",
        hide = true,
        after_help = "Examples:
  mlkube gateway-fallback --listen :8080"
    )]
    GatewayFallback(GatewayFallbackArgs),
    /// Serve a Gateway's HTTPRoutes to Traefik's HTTP provider as its dynamic configuration,
    /// and write the routes', Gateway's and GatewayClass's statuses: the gateway component's
    /// container beside Traefik, which holds no Kubernetes credentials itself.
    #[command(
        name = "gateway-routes",
        hide = true,
        after_help = "Examples:
  mlkube gateway-routes --gateway kubeflow/gateway --class kubeflow-gateway \\
    --controller-name traefik.io/gateway-controller --port 8000 \\
    --address gateway.kubeflow.svc --listen 127.0.0.1:8081 --probes :8082"
    )]
    GatewayRoutes(GatewayRoutesArgs),
}

#[derive(Debug, Args)]
pub struct GatewayRoutesArgs {
    /// The Gateway served, as <namespace>/<name>.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub gateway: String,
    /// Its GatewayClass, whose Accepted condition this writes.
    #[arg(long, value_name = "NAME")]
    pub class: String,
    /// The GatewayClass's controllerName, written in each route's status.
    #[arg(long, value_name = "NAME")]
    pub controller_name: String,
    /// The port of Traefik's entry point: a listener on another port is not served.
    #[arg(long)]
    pub port: i64,
    /// The name of that entry point in Traefik's configuration.
    #[arg(long, value_name = "NAME", default_value = "web")]
    pub entry_point: String,
    /// The Gateway's address, as its status says it (the Service's DNS name).
    #[arg(long, value_name = "HOSTNAME")]
    pub address: String,
    /// Watch the routes and Services of every namespace, not only the Gateway's.
    #[arg(long)]
    pub all_namespaces: bool,
    /// Where Traefik and the probes ask, e.g. 127.0.0.1:8081.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8081")]
    pub listen: String,
    /// Where the kubelet's probes ask (/synced, /ready; never the routes), e.g. :8082.
    #[arg(long, value_name = "ADDR", default_value = ":8082")]
    pub probes: String,
}

#[derive(Debug, Args)]
pub struct GatewayFallbackArgs {
    /// Where to listen, e.g. :8080 or 127.0.0.1:8080.
    #[arg(long, value_name = "ADDR", default_value = ":8080")]
    pub listen: String,
}

/// The verbs that read no app.
const WITHOUT_APP: [&str; 11] = [
    "init",
    "prototype",
    "images",
    "operator",
    "completion",
    "__complete",
    "volume-fetch",
    "volume-clean",
    "framework-barrier",
    "gateway-fallback",
    "gateway-routes",
];

/// A verb that reads no app takes no `--app`: it is neither listed nor accepted there (a
/// global `--app` given before the verb is still read, and ignored).
fn without_app(command: clap::Command) -> clap::Command {
    if !WITHOUT_APP.contains(&command.get_name()) {
        return command;
    }
    command.arg(
        clap::Arg::new("app")
            .long("app")
            .global(true)
            .hide(true)
            .value_parser(|_: &str| -> Result<PathBuf, String> {
                Err("this verb reads no app; --app is for the verbs that do".to_owned())
            }),
    )
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Where to create the app; the directory must not exist or be empty, and its name (the
    /// app's) must be a DNS-1123 label.
    pub dir: PathBuf,
    /// The namespace of the `local` environment (dev and prod get `<ns>-dev`, `<ns>-prod`).
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Pin the environments to this API server URL (https:// or http://, with a host).
    #[arg(long, value_name = "URL", conflicts_with = "context")]
    pub server: Option<String>,
    /// Pin the environments to this kubeconfig context.
    #[arg(long, value_name = "CTX")]
    pub context: Option<String>,
    /// Start with no components instead of one of each prototype.
    #[arg(long)]
    pub empty: bool,
    /// Also add a TensorFlow, a PyTorch and a JAX training job (train-tf, train-pytorch,
    /// train-jax): one replica on CPU in local, four workers with a GPU each in prod.
    #[arg(long)]
    pub with_jobs: bool,
}

#[derive(Debug, Subcommand)]
pub enum EnvCommand {
    /// List the environments.
    #[command(after_help = "Examples:
  mlkube env list
  mlkube env list -o yaml")]
    List(ListArgs),
    /// Add an environment.
    #[command(after_help = "Examples:
  mlkube env add staging
  mlkube env add staging --namespace ml-staging --server https://10.0.0.1:6443")]
    Add {
        /// The new environment's name.
        env: String,
        /// Its namespace (default: the environment's name).
        #[arg(long, value_name = "NS")]
        namespace: Option<String>,
        /// Pin it to this API server URL (https:// or http://, with a host).
        #[arg(long, value_name = "URL", conflicts_with = "context")]
        server: Option<String>,
        /// Pin it to this kubeconfig context.
        #[arg(long, value_name = "CTX")]
        context: Option<String>,
    },
    /// Change an environment's namespace, cluster or name.
    #[command(after_help = "Examples:
  mlkube env set dev --namespace ml-dev
  mlkube env set dev --context dev-admin
  mlkube env set dev --server ''        unpin the cluster
  mlkube env set dev --name qa")]
    Set {
        /// The environment to change.
        env: String,
        /// Its new namespace.
        #[arg(long, value_name = "NS")]
        namespace: Option<String>,
        /// Pin it to this API server URL instead of a context; '' unpins.
        #[arg(long, value_name = "URL")]
        server: Option<String>,
        /// Pin it to this kubeconfig context instead of a server; '' unpins.
        #[arg(long, value_name = "CTX")]
        context: Option<String>,
        /// Rename the environment.
        #[arg(long, value_name = "NEW")]
        name: Option<String>,
    },
    /// Remove an environment and its overrides.
    #[command(after_help = "Examples:
  mlkube env rm staging")]
    Rm {
        /// The environment to remove.
        env: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum PrototypeCommand {
    /// List the embedded prototypes.
    #[command(after_help = "Examples:
  mlkube prototype list
  mlkube prototype list -o name")]
    List(ListArgs),
    /// Show a prototype's parameters with their types, defaults and descriptions.
    #[command(after_help = "Examples:
  mlkube prototype describe serving
  mlkube prototype describe tf-job -o json")]
    Describe {
        /// The prototype, as `mlkube prototype list` names it.
        prototype: String,
        /// How to print it.
        #[arg(short = 'o', long, value_enum, default_value_t = ListingFormat::Text)]
        output: ListingFormat,
    },
}

#[derive(Debug, Subcommand)]
pub enum ComponentCommand {
    /// Add an instance of a prototype as a component.
    #[command(after_help = "Examples:
  mlkube component add serving resnet
  mlkube component add tf-job train --param image=registry.local/train:v2 --param workers=4")]
    Add {
        /// The prototype to make an instance of.
        prototype: String,
        /// The component's name (a DNS-1123 label); it names components/<name>.jsonnet.
        name: String,
        /// A parameter value, `key=value`; repeat for more.
        #[arg(long = "param", value_name = "KEY=VALUE")]
        params: Vec<String>,
    },
    /// List the components.
    #[command(after_help = "Examples:
  mlkube component list
  mlkube component list -o name")]
    List(ListArgs),
    /// Remove a component and its parameters.
    #[command(after_help = "Examples:
  mlkube component rm resnet")]
    Rm {
        /// The component to remove.
        #[arg(value_name = "COMPONENT")]
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ParamCommand {
    /// Set a parameter of a component (or of every component, with `global`, or an
    /// environment's default for it, with `defaults`).
    #[command(after_help = "Examples:
  mlkube param set mnist minReplicas 3
  mlkube param set mnist minReplicas 1 --env dev
  mlkube param set global image registry.local/serving:2 --as-string
  mlkube param set defaults cpuRequest 100m --env local")]
    Set {
        /// The component; `global` for every component that declares the parameter;
        /// `defaults` (with --env) for the environment's value in place of the prototypes'
        /// default, below every value the app sets.
        component: String,
        /// The parameter's name.
        key: String,
        /// The value, read as JSON (`3`, `true`, `[1,2]`, `null`) or else as a string, `null`
        /// also for a string's param (`--as-string` for the word); it may start with `-` (`-1`,
        /// `-v`), also before `--env`.
        #[arg(allow_hyphen_values = true)]
        value: String,
        /// Set it for this environment only.
        #[arg(long, value_name = "ENV")]
        env: Option<String>,
        /// Keep the value a string instead of reading it as JSON.
        #[arg(long)]
        as_string: bool,
    },
    /// List parameters, as an environment sees them.
    #[command(after_help = "Examples:
  mlkube param list
  mlkube param list mnist --env prod -o json")]
    List {
        /// Only this component's parameters.
        component: Option<String>,
        /// Resolve the values as this environment sees them (default: the app's own params).
        #[arg(long, value_name = "ENV")]
        env: Option<String>,
        /// How to print the listing.
        #[arg(short = 'o', long, value_enum, default_value_t = ListingFormat::Text)]
        output: ListingFormat,
    },
    /// Show the parameters that differ between two environments.
    ///
    /// Exit codes as `diff`: 0 no differences, 1 differences, 2 and up errors.
    #[command(after_help = "Examples:
  mlkube param diff dev prod
  mlkube param diff dev prod -o yaml")]
    Diff {
        /// The first environment.
        env_a: String,
        /// The environment to compare it with.
        env_b: String,
        /// How to print the differences.
        #[arg(short = 'o', long, value_enum, default_value_t = ListingFormat::Text)]
        output: ListingFormat,
    },
}

/// Options of the listing verbs.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// How to print the listing.
    #[arg(short = 'o', long, value_enum, default_value_t = ListingFormat::Text)]
    pub output: ListingFormat,
}

/// How a listing (`env list`, `component list`, `param list`, ...) prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListingFormat {
    /// An aligned table.
    Text,
    /// A JSON array.
    Json,
    /// A YAML sequence.
    Yaml,
    /// One name per line, as `kubectl -o name`.
    Name,
}

/// How a cluster verb's report prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    Text,
    Json,
}

/// How rendered manifests print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ManifestFormat {
    Yaml,
    Json,
}

#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: complete::Shell,
}

#[derive(Debug, Args)]
pub struct CompleteArgs {
    /// The words after `mlkube`, the last one the word being completed (empty after a space).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub words: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The environment to render.
    pub env: String,
    /// Only these components; repeat for more.
    #[arg(short = 'c', long = "component", value_name = "COMPONENT")]
    pub components: Vec<String>,
    /// YAML documents, or one JSON v1 List.
    #[arg(short = 'o', long, value_enum, default_value_t = ManifestFormat::Yaml)]
    pub output: ManifestFormat,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The environment to compare with its cluster.
    pub env: String,
    /// Only these components; repeat for more.
    #[arg(short = 'c', long = "component", value_name = "COMPONENT")]
    pub components: Vec<String>,
    /// Show Secret values instead of masking them.
    #[arg(long)]
    pub show_secrets: bool,
    /// Print one line per object that differs instead of the full diff (exit codes as without).
    #[arg(long)]
    pub summary: bool,
    /// A unified diff, or the changes as JSON.
    #[arg(short = 'o', long, value_enum, default_value_t = ListFormat::Text)]
    pub output: ListFormat,
    /// Deploy these pre-rendered objects (YAML documents, as `mlkube show` prints them) instead
    /// of rendering the app; the environment argument is then also the namespace.
    #[arg(long, hide = true, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub request: RequestArgs,
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The environment to apply.
    pub env: String,
    /// Only these components; repeat for more.
    #[arg(short = 'c', long = "component", value_name = "COMPONENT")]
    pub components: Vec<String>,
    /// Send everything as a server-side dry run; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also delete what this environment applied earlier and no longer renders.
    #[arg(long)]
    pub prune: bool,
    /// Do not ask before pruning.
    #[arg(long)]
    pub yes: bool,
    /// Take over fields that another field manager owns.
    #[arg(long)]
    pub force_conflicts: bool,
    /// Take over rendered objects that exist but belong to another environment, app or tool
    /// (each is named); prune and delete may then remove them.
    #[arg(long)]
    pub adopt: bool,
    /// Wait until what was applied is healthy (the default).
    #[arg(long, overrides_with = "no_wait")]
    pub wait: bool,
    /// Do not wait for health (a training job is still written only once the object store has
    /// answered its request for keys).
    #[arg(long)]
    pub no_wait: bool,
    /// How long to wait for health, e.g. 90s, 5m.
    #[arg(long, value_name = "D", default_value = "5m", value_parser = settings::duration)]
    pub timeout: std::time::Duration,
    /// Prune even when the environment renders nothing.
    #[arg(long)]
    pub allow_empty: bool,
    /// Output format: text (a line per object, a summary on stderr) or json (one document).
    #[arg(short = 'o', long, value_enum, default_value_t = ListFormat::Text)]
    pub output: ListFormat,
    /// Deploy these pre-rendered objects (YAML documents, as `mlkube show` prints them) instead
    /// of rendering the app; the environment argument is then also the namespace.
    #[arg(long, hide = true, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub request: RequestArgs,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// The environment to prune.
    pub env: String,
    /// Do not ask before deleting.
    #[arg(long)]
    pub yes: bool,
    /// Prune even when the environment renders nothing.
    #[arg(long)]
    pub allow_empty: bool,
    /// Output format: text (a line per object, a summary on stderr) or json (one document).
    #[arg(short = 'o', long, value_enum, default_value_t = ListFormat::Text)]
    pub output: ListFormat,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub request: RequestArgs,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// The environment whose objects to delete.
    pub env: String,
    /// Only these components' objects; repeat for more.
    #[arg(short = 'c', long = "component", value_name = "COMPONENT")]
    pub components: Vec<String>,
    /// Do not ask before deleting.
    #[arg(long)]
    pub yes: bool,
    /// Also delete the environment's namespace.
    #[arg(long)]
    pub delete_namespace: bool,
    /// Output format: text (a line per object, a summary on stderr) or json (one document).
    #[arg(short = 'o', long, value_enum, default_value_t = ListFormat::Text)]
    pub output: ListFormat,
    /// Deploy these pre-rendered objects (YAML documents, as `mlkube show` prints them) instead
    /// of rendering the app; the environment argument is then also the namespace.
    #[arg(long, hide = true, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub request: RequestArgs,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The environment to validate.
    pub env: String,
    /// Only these components; repeat for more.
    #[arg(short = 'c', long = "component", value_name = "COMPONENT")]
    pub components: Vec<String>,
    /// Output format: text (rejections on stderr) or json (valid, rejected and skipped).
    #[arg(short = 'o', long, value_enum, default_value_t = ListFormat::Text)]
    pub output: ListFormat,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub request: RequestArgs,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The environment to report on.
    pub env: String,
    /// Instead, the training jobs this component renders (a sweep's), each with its
    /// hyperparameters, state and final metric, best first.
    #[arg(short = 'c', long = "component", value_name = "COMPONENT")]
    pub component: Option<String>,
    /// A table, or the report as JSON.
    #[arg(short = 'o', long, value_enum, default_value_t = ListFormat::Text)]
    pub output: ListFormat,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub request: RequestArgs,
}

#[derive(Debug, Args)]
pub struct OperatorArgs {
    /// Watch only this namespace (default: all namespaces).
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Take a coordination.k8s.io Lease before reconciling, so only one replica acts.
    #[arg(long)]
    pub leader_elect: bool,
    /// Where to serve Prometheus metrics (/metrics), as host:port or :port.
    #[arg(long, value_name = "ADDR", default_value = ":8080")]
    pub metrics_addr: String,
    /// Where to serve the liveness and readiness probes (/healthz, /readyz).
    #[arg(long, value_name = "ADDR", default_value = ":8081")]
    pub health_addr: String,
    /// How many jobs of each framework to reconcile at once. Each creates its pods and services
    /// together; 16 was the fastest of 4, 16 and 32 in the operator bench (docs/benchmarks.md,
    /// "Operator scale"): more only queues requests at the API server.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub concurrency: u16,
    /// Create a PodGroup per job for this gang scheduler (e.g. volcano, scheduler-plugins).
    #[arg(long, value_name = "NAME")]
    pub gang_scheduler: Option<String>,
    /// The image of the `init-pytorch` container in which PyTorch workers wait for the Master;
    /// another where the nodes cannot pull the default (air-gapped, or through a mirror).
    #[arg(
        long,
        value_name = "IMAGE",
        default_value = crate::operator::training::frameworks::pytorch::DEFAULT_INIT_IMAGE
    )]
    pub pytorch_init_container_image: String,
    /// The image of the `kubectl-delivery` container that puts kubectl into MPIJob launchers;
    /// another where the nodes cannot pull the default.
    #[arg(
        long,
        value_name = "IMAGE",
        default_value = crate::operator::training::frameworks::mpi::DEFAULT_KUBECTL_DELIVERY_IMAGE
    )]
    pub mpi_kubectl_delivery_image: String,
    /// Run only these frameworks' jobs, e.g. tensorflow,pytorch (default: all). Deprecated:
    /// `frameworkcontroller` here, which is `--controllers fc` now.
    #[arg(long, value_name = "NAMES", value_delimiter = ',', value_parser = framework)]
    pub frameworks: Vec<FrameworkChoice>,
    /// After SIGTERM, how long reconciles in flight may take before the process exits
    /// anyway, e.g. 20s, 500ms.
    #[arg(long, value_name = "D", default_value = "20s", value_parser = settings::duration)]
    pub shutdown_timeout: std::time::Duration,
    /// Write log lines as `text` or `json` (one JSON object per line); default: text on a
    /// terminal, else json.
    #[arg(
        long,
        value_name = "FORMAT",
        value_parser = clap::builder::TypedValueParser::map(
            clap::builder::PossibleValuesParser::new(["text", "json"]),
            |format| match format.as_str() {
                "json" => crate::operator::LogFormat::Json,
                _ => crate::operator::LogFormat::Text,
            },
        )
    )]
    pub log_format: Option<crate::operator::LogFormat>,
    /// The kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, else the pod's
    /// ServiceAccount).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: the kubeconfig's current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The controllers to run: training (the kubeflow.org/v1 jobs of --frameworks), fc
    /// (FrameworkController's Frameworks), volumes (the volume controller's VolumeManagers),
    /// serving (KServe's InferenceServices) [default: training,fc; with --frameworks and no frameworkcontroller in it: training]
    #[arg(long, value_name = "NAMES", value_delimiter = ',', value_enum)]
    pub controllers: Vec<ControllerName>,
    /// The directory on each node under which the volume controller places data.
    #[arg(long, value_name = "DIR", default_value = "/var/lib/mlkube/volumes")]
    pub volume_root: String,
    /// The image of the volume controller's fetcher and cleaner pods: one with the mlkube
    /// binary, as the nodes pull it (the operator's own image).
    #[arg(long, value_name = "IMAGE", default_value = crate::operator::volumes::pods::DEFAULT_IMAGE)]
    pub volume_image: String,
    /// The only Secrets a VolumeManager may name in options.awsCredentialsSecretName (the store
    /// credentials its namespace was granted); a VolumeManager naming another fails [default:
    /// any Secret of the namespace]
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub volume_secrets: Option<Vec<String>>,
    /// FrameworkController's configuration file (its podFailureSpec, retry delays, cache
    /// timeout, workerNumber) [default: ./frameworkcontroller.yaml if there is one, else
    /// FrameworkController's defaults]
    #[arg(long, value_name = "FILE")]
    pub fc_config: Option<PathBuf>,
    /// The Gateway API Gateway (NAMESPACE/NAME) the InferenceServices' HTTPRoutes hang on;
    /// required with --controllers serving.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub serving_gateway: Option<String>,
    /// KServe's ingress domain: an InferenceService answers at <name>-<namespace>.<domain>.
    #[arg(long, value_name = "DOMAIN", default_value = "example.com")]
    pub serving_domain: String,
    /// The image of InferenceServices' storage-initializer containers (the serving image,
    /// with mlkube_serving.fetch), as the nodes pull it.
    #[arg(long, value_name = "IMAGE", default_value = "mlkube/serving:0.1.0")]
    pub storage_initializer_image: String,
}

/// A controller of `mlkube operator`, for `--controllers`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ControllerName {
    /// The kubeflow.org/v1 training jobs of --frameworks.
    Training,
    /// FrameworkController's frameworkcontroller.microsoft.com/v1 Frameworks.
    Fc,
    /// The volume controller: kvc.kubeflow.org/v1 VolumeManagers.
    Volumes,
    /// KServe's serving.kserve.io/v1beta1 InferenceServices (needs --serving-gateway).
    Serving,
}

#[derive(Debug, Args)]
pub struct VolumeFetchArgs {
    /// The S3 endpoint, e.g. http://object-store:9000.
    #[arg(long, value_name = "URL")]
    pub endpoint: String,
    /// The bucket to copy from.
    #[arg(long, value_name = "NAME")]
    pub bucket: String,
    /// The key prefix to copy (empty: the whole bucket).
    #[arg(long, value_name = "KEY", default_value = "")]
    pub prefix: String,
    /// The region the requests are signed for.
    #[arg(long, value_name = "REGION", default_value = "us-east-1")]
    pub region: String,
    /// The Secret the access key came from, named in error messages.
    #[arg(long, value_name = "NAME", default_value = "")]
    pub secret: String,
    /// How long the whole copy may take, e.g. 600s, 10m.
    #[arg(long, value_name = "D", default_value = "30m", value_parser = settings::duration)]
    pub timeout: std::time::Duration,
    /// The directory to create with the objects.
    #[arg(long, value_name = "DIR")]
    pub dest: PathBuf,
}

#[derive(Debug, Args)]
pub struct VolumeCleanArgs {
    /// The directory to remove.
    pub path: PathBuf,
}

impl OperatorArgs {
    /// The operator's settings from its flags.
    fn into_settings(self) -> crate::operator::Settings {
        crate::operator::Settings {
            kubeconfig: self.kubeconfig,
            context: self.context,
            namespace: self.namespace,
            leader_elect: self.leader_elect,
            metrics_addr: self.metrics_addr,
            health_addr: self.health_addr,
            concurrency: self.concurrency,
            gang_scheduler: self.gang_scheduler,
            pytorch_init_image: self.pytorch_init_container_image,
            mpi_kubectl_delivery_image: self.mpi_kubectl_delivery_image,
            shutdown_timeout: self.shutdown_timeout,
            log_format: self.log_format,
            controllers: controllers(&self.controllers, &self.frameworks),
            deprecated: (self.frameworks)
                .contains(&FrameworkChoice::FrameworkController)
                .then_some(DEPRECATED_FRAMEWORKCONTROLLER)
                .into_iter()
                .collect(),
            fc_config: self.fc_config,
            serving: crate::operator::ServingSettings {
                gateway: self.serving_gateway,
                domain: self.serving_domain,
                storage_image: self.storage_initializer_image,
            },
            placement: crate::operator::volumes::pods::Placement {
                root: self.volume_root,
                image: self.volume_image,
                secrets: self.volume_secrets,
            },
            frameworks: if self.frameworks.is_empty() {
                crate::operator::training::registry::ALL.iter().collect()
            } else {
                let mut chosen: Vec<_> = (self.frameworks.iter())
                    .filter_map(|f| match f {
                        FrameworkChoice::Training(r) => Some(*r),
                        FrameworkChoice::FrameworkController => None,
                    })
                    .collect();
                chosen.sort_by_key(|r| r.framework.name);
                chosen.dedup_by_key(|r| r.framework.name);
                chosen
            },
        }
    }
}

/// What the operator logs when `--frameworks` names `frameworkcontroller`.
const DEPRECATED_FRAMEWORKCONTROLLER: &str = "`--frameworks frameworkcontroller` is deprecated: \
     FrameworkController's Framework is the `fc` controller (--controllers training,fc)";

/// The controllers `--controllers` names, or by default the training jobs and FrameworkController's
/// Framework. `frameworkcontroller` in `--frameworks` is the old spelling of `fc`: it adds it,
/// with a note; a `--frameworks` without it and no `--controllers` runs no Frameworks, as it
/// did.
fn controllers(
    named: &[ControllerName],
    frameworks: &[FrameworkChoice],
) -> crate::operator::Controllers {
    let old_spelling = frameworks.contains(&FrameworkChoice::FrameworkController);
    let default = frameworks.is_empty() || old_spelling;
    let has = |name| named.contains(&name);
    crate::operator::Controllers {
        training: has(ControllerName::Training) || named.is_empty(),
        framework_controller: has(ControllerName::Fc)
            || old_spelling
            || (named.is_empty() && default),
        volumes: has(ControllerName::Volumes),
        serving: has(ControllerName::Serving),
    }
}

/// One name of `--frameworks`: a kubeflow.org/v1 kind's framework, or FrameworkController's
/// Framework.
#[derive(Clone, Copy, Debug)]
pub enum FrameworkChoice {
    Training(&'static crate::operator::training::registry::Registered),
    FrameworkController,
}

impl PartialEq for FrameworkChoice {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Training(a), Self::Training(b)) => a.framework.name == b.framework.name,
            (Self::FrameworkController, Self::FrameworkController) => true,
            _ => false,
        }
    }
}

/// A `--frameworks` name: `tensorflow`, `pytorch`, ..., `frameworkcontroller`.
fn framework(name: &str) -> Result<FrameworkChoice, String> {
    use crate::operator::fc::controller::FLAG_NAME;
    use crate::operator::training::registry;
    if name == FLAG_NAME {
        return Ok(FrameworkChoice::FrameworkController);
    }
    registry::by_name(name)
        .map(FrameworkChoice::Training)
        .ok_or_else(|| {
            let names: Vec<_> = registry::names().chain([FLAG_NAME]).collect();
            format!(
                "no framework {name}; the frameworks are {}",
                names.join(", ")
            )
        })
}

/// Parse the process arguments, run the verb, and turn the outcome into an exit code.
pub fn main() -> ExitCode {
    // clap prints help and argument errors while it parses, so it learns `--color` first.
    let choice = color::from_args(std::env::args_os()).unwrap_or_default();
    color::choose(choice);
    let matches = Cli::command().color(choice.into()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit());
    run(&cli.global, cli.command).into()
}

/// FrameworkBarrier's exit code: the container contract's (201, 210), not a verb's.
fn framework_barrier() -> i32 {
    use crate::operator::fc::barrier;
    let code = match barrier::settings(|key| std::env::var(key).ok()) {
        Ok(settings) => tokio::runtime::Runtime::new()
            .map_or(barrier::UNKNOWN_FAILURE, |runtime| {
                runtime.block_on(barrier::run(&settings, std::path::Path::new(".")))
            }),
        Err(message) => {
            eprintln!("framework-barrier: {message}");
            barrier::PERMANENT_FAILURE
        }
    };
    i32::from(code)
}

fn run(global: &GlobalArgs, command: Command) -> Exit {
    match command {
        Command::Completion(args) => outcome(print_stdout(complete::script(args.shell))),
        Command::Complete(args) => {
            let text: String = complete::candidates(&args.words)
                .iter()
                .map(|candidate| format!("{candidate}\n"))
                .collect();
            outcome(print_stdout(&text))
        }
        Command::Init(args) => outcome(app::init(&args)),
        Command::Env(command) => outcome(app::env(global.app.as_deref(), &command)),
        Command::Prototype(command) => outcome(app::prototype(&command)),
        Command::Component(command) => outcome(app::component(global.app.as_deref(), &command)),
        Command::Param(command) => {
            app::param(global.app.as_deref(), &command).unwrap_or_else(|error| report(&error))
        }
        Command::Show(args) => outcome(show(global.app.as_deref(), &args)),
        Command::Diff(args) => deploy::diff(global, &args),
        Command::Apply(args) => deploy::apply(global, &args),
        Command::Prune(args) => deploy::prune(global, &args),
        Command::Delete(args) => deploy::delete(global, &args),
        Command::Validate(args) => deploy::validate(global, &args),
        Command::Status(args) => status::status(global, &args),
        Command::Logs(args) => logs::logs(global, &args),
        Command::Images(command) => images::images(&command),
        Command::Operator(args) => outcome(crate::operator::run((*args).into_settings())),
        Command::VolumeFetch(args) => {
            let args = crate::operator::volumes::fetch::FetchArgs {
                endpoint: args.endpoint,
                bucket: args.bucket,
                prefix: args.prefix,
                region: args.region,
                secret: args.secret,
                timeout: args.timeout,
                dest: args.dest,
            };
            succeeded(crate::operator::volumes::fetch::run_fetch(&args))
        }
        Command::VolumeClean(args) => {
            succeeded(crate::operator::volumes::fetch::run_clean(&args.path))
        }
        // Its codes are not the verbs' Exit: it ends the process with its own.
        Command::FrameworkBarrier => std::process::exit(framework_barrier()),
        Command::GatewayFallback(args) => outcome(crate::gateway::fallback::run(&args.listen)),
        Command::GatewayRoutes(args) => gateway_routes(args),
    }
}

/// `mlkube gateway-routes`: its arguments checked, then served until the process ends.
fn gateway_routes(args: GatewayRoutesArgs) -> Exit {
    let Some((namespace, name)) = args.gateway.split_once('/') else {
        eprintln!(
            "mlkube: --gateway {:?} is not <namespace>/<name>; hint: e.g. --gateway kubeflow/gateway",
            args.gateway
        );
        return Exit::Error;
    };
    let settings = crate::gateway::routes::Settings {
        served: crate::gateway::routes::world::Served {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            controller: args.controller_name,
            port: args.port,
            entry_point: args.entry_point,
        },
        class: args.class,
        all_namespaces: args.all_namespaces,
        hostname: args.address,
        listen: args.listen,
        probes: args.probes,
    };
    outcome(crate::gateway::routes::run(settings))
}

#[derive(Debug, thiserror::Error)]
enum ShowError {
    #[error(transparent)]
    App(#[from] crate::app::AppError),
    #[error(transparent)]
    Render(#[from] crate::app::render::RenderError),
    #[error("cannot write the manifest to stdout")]
    Output(#[source] std::io::Error),
}

/// `mlkube show`: render and print; on any error nothing reaches stdout.
fn show(app_flag: Option<&std::path::Path>, args: &ShowArgs) -> Result<(), ShowError> {
    use std::io::Write as _;
    let app = crate::app::App::discover(app_flag)?;
    let manifest = app.render(&args.env, &args.components)?;
    let text = match args.output {
        ManifestFormat::Yaml => manifest.to_yaml(),
        ManifestFormat::Json => manifest.to_json(),
    };
    // Freeing thousands of objects just before exit is wasted time.
    std::mem::forget(manifest);
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(ShowError::Output(error))
        }
        _ => Ok(()),
    }
}

/// Print `text` on stdout; a closed pipe is not an error.
fn print_stdout(text: &str) -> Result<(), std::io::Error> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => Err(error),
        _ => Ok(()),
    }
}

/// A verb's result as an exit code, reporting the error if there is one.
/// A verb that printed its own outcome: done, or the error status.
fn succeeded(ok: bool) -> Exit {
    if ok { Exit::Done } else { Exit::Error }
}

fn outcome<E: std::error::Error + 'static>(result: Result<(), E>) -> Exit {
    match result {
        Ok(()) => Exit::Done,
        Err(error) => report(&error),
    }
}

#[cfg(test)]
mod tests {
    use super::{ControllerName, FrameworkChoice, controllers, framework};
    use crate::operator::Controllers;

    fn on(training: bool, framework_controller: bool, volumes: bool) -> Controllers {
        Controllers {
            training,
            framework_controller,
            volumes,
            serving: false,
        }
    }

    #[test]
    fn controllers_are_named_and_the_old_spellings_still_work() {
        use ControllerName::{Fc, Training, Volumes};
        let tensorflow: FrameworkChoice = framework("tensorflow").unwrap();
        let old_fc = FrameworkChoice::FrameworkController;
        // The default: the training jobs and FrameworkController's Framework.
        assert_eq!(controllers(&[], &[]), on(true, true, false));
        assert_eq!(
            controllers(&[Training, Fc, Volumes], &[]),
            on(true, true, true)
        );
        assert_eq!(controllers(&[Volumes], &[]), on(false, false, true));
        assert_eq!(controllers(&[Training], &[]), on(true, false, false));
        // `--frameworks` as it was: without frameworkcontroller, no Frameworks.
        assert_eq!(controllers(&[], &[tensorflow]), on(true, false, false));
        assert_eq!(
            controllers(&[], &[tensorflow, old_fc]),
            on(true, true, false)
        );
        assert_eq!(controllers(&[Volumes], &[old_fc]), on(false, true, true));
    }
}
