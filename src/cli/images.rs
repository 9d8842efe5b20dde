//! `mlkube images list` and `mlkube images push`: their arguments, and what they print.
//!
//! stdout carries the data (the listing; one line per image of a push, with its digest);
//! progress and the summary go to stderr.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::builder::PossibleValuesParser;
use clap::{Args, Subcommand};
use serde_json::json;

use super::exit::Exit;
use super::{ListFormat, outcome, output, print_stdout};
use crate::images::push::{self, Planned, Progress};
use crate::images::registry::Skopeo;
use crate::images::{ImagesError, source};
use crate::render::images::{ImageRegistry, PLATFORM};

#[derive(Debug, Subcommand)]
pub enum ImagesCommand {
    /// List the platform's images: reference, size, manifest digest and OCI archive. Builds
    /// what is missing first, with the checkout's image/node-images.sh.
    #[command(after_help = "Examples:
  mlkube images list
  mlkube images list serving training -o json")]
    List(ListImagesArgs),
    /// Put the platform's images (or the NAMEs) into a registry, as
    /// <registry>/<path>/<name>:<tag>: what a cluster whose environment sets imageRegistry to
    /// <registry>/<path> pulls.
    ///
    /// The images come from the checkout's image/node-images.sh, which builds what is missing.
    /// Each is copied by skopeo (`skopeo copy oci-archive:... docker://...`), unless the
    /// registry already has it with the same manifest digest ("up to date"). Every destination
    /// is asked first, so a registry that does not answer fails before anything is written.
    /// Credentials are skopeo's: log in once with `skopeo login <registry>`, which keeps them
    /// in its auth.json.
    #[command(after_help = "Examples:
  mlkube images push 127.0.0.1:5000/mlkube --insecure     a local registry over plain HTTP
  mlkube images push registry.example.com/team serving training
  mlkube images push registry.example.com/team --dry-run")]
    Push(PushArgs),
}

/// Where the images are built.
#[derive(Debug, Args)]
pub struct SourceArgs {
    /// The mlkube checkout whose image/node-images.sh builds the images (default: the checkout
    /// this mlkube was built from, else the current directory).
    #[arg(long, value_name = "DIR", env = "MLKUBE_SOURCE")]
    pub source: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ListImagesArgs {
    /// Only these images (default: all).
    #[arg(value_name = "NAME", value_parser = PossibleValuesParser::new(PLATFORM))]
    pub names: Vec<String>,
    /// A table, or the images as JSON.
    #[arg(short = 'o', long, value_enum, default_value_t = ListFormat::Text)]
    pub output: ListFormat,
    #[command(flatten)]
    pub source: SourceArgs,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The registry and path to push to, host[:port]/path, without a scheme:
    /// 127.0.0.1:5000/mlkube, registry.example.com/team.
    #[arg(value_name = "REGISTRY/PATH")]
    pub destination: ImageRegistry,
    /// Only these images (default: all).
    #[arg(value_name = "NAME", value_parser = PossibleValuesParser::new(PLATFORM))]
    pub names: Vec<String>,
    /// Print what a push would copy and what is up to date; write nothing to the registry.
    #[arg(long)]
    pub dry_run: bool,
    /// Talk to the registry over plain HTTP, or HTTPS without verifying its certificate
    /// (skopeo's --tls-verify=false).
    #[arg(long)]
    pub insecure: bool,
    #[command(flatten)]
    pub source: SourceArgs,
}

/// `mlkube images ...`.
pub fn images(command: &ImagesCommand) -> Exit {
    match command {
        ImagesCommand::List(args) => outcome(list(args)),
        ImagesCommand::Push(args) => outcome(push(args)),
    }
}

/// The checkout `--source` (or `$MLKUBE_SOURCE`) names, else the current directory or one
/// above it, else one above the running binary (`target/<profile>/mlkube` sits in its
/// checkout). Nothing of the machine that built the binary is baked into it.
fn checkout(args: &SourceArgs) -> Result<PathBuf, ImagesError> {
    let current = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let binary = std::env::current_exe().ok();
    let binary_dir = binary.as_deref().and_then(Path::parent);
    let fallbacks: Vec<&Path> = [Some(current.as_path()), binary_dir]
        .into_iter()
        .flatten()
        .collect();
    source::checkout(args.source.as_deref(), &fallbacks)
}

fn list(args: &ListImagesArgs) -> Result<(), ImagesError> {
    let images = source::build(&checkout(&args.source)?, &args.names)?;
    let text = match args.output {
        ListFormat::Text => {
            let header = ["REFERENCE", "SIZE", "DIGEST", "ARCHIVE"].map(str::to_owned);
            let rows: Vec<Vec<String>> = (images.iter())
                .map(|i| {
                    let archive = i.archive.display().to_string();
                    vec![i.reference.clone(), size(i.size), i.digest.clone(), archive]
                })
                .collect();
            output::table(&header, &rows)
        }
        ListFormat::Json => {
            let items: Vec<_> = (images.iter())
                .map(|i| {
                    json!({"name": i.name, "tag": i.tag, "reference": i.reference,
                           "archive": i.archive, "size": i.size, "digest": i.digest})
                })
                .collect();
            format!("{:#}\n", json!(items))
        }
    };
    let _ = print_stdout(&text);
    Ok(())
}

fn push(args: &PushArgs) -> Result<(), ImagesError> {
    let skopeo = Skopeo::find(args.insecure).ok_or(ImagesError::SkopeoMissing)?;
    let images = source::build(&checkout(&args.source)?, &args.names)?;
    let to = &args.destination;
    let count = images.len();
    eprintln!(
        "asking {} for {count} image{}",
        to.host(),
        if count == 1 { "" } else { "s" }
    );
    let plan = push::plan(images, to, &skopeo)?;
    if args.dry_run {
        print_dry_run(&plan, to);
        return Ok(());
    }
    let started = Instant::now();
    let summary = push::push(&plan, &skopeo, &mut |progress| match progress {
        Progress::Pushing {
            index,
            total,
            planned,
        } => {
            let image = &planned.image;
            eprintln!(
                "pushing {index}/{total} {}:{} ({})",
                image.name,
                image.tag,
                size(image.size)
            );
        }
        Progress::Pushed { planned, digest } => {
            let _ = print_stdout(&format!("pushed {}@{digest}\n", planned.destination));
        }
        Progress::UpToDate { planned } => {
            let _ = print_stdout(&up_to_date(planned));
        }
    })?;
    eprintln!(
        "{} pushed, {} up to date, in {to} ({:.0?})",
        summary.pushed,
        summary.up_to_date,
        started.elapsed()
    );
    Ok(())
}

/// What a push would do, a line per image, and how much.
fn print_dry_run(plan: &[Planned], to: &ImageRegistry) {
    let mut text = String::new();
    let mut bytes = 0;
    for planned in plan {
        if planned.up_to_date() {
            text += &up_to_date(planned);
        } else {
            bytes += planned.image.size;
            text += &format!(
                "would push {} ({})\n",
                planned.destination,
                size(planned.image.size)
            );
        }
    }
    let _ = print_stdout(&text);
    let pushing = plan.iter().filter(|p| !p.up_to_date()).count();
    eprintln!(
        "dry run: {pushing} would be pushed ({}), {} up to date, in {to}; nothing was written",
        size(bytes),
        plan.len() - pushing
    );
}

/// `up to date <destination>@<digest>`, a line.
fn up_to_date(planned: &Planned) -> String {
    format!(
        "up to date {}@{}\n",
        planned.destination, planned.image.digest
    )
}

/// Bytes as people read them: 433 B, 1.0 MiB, 1.4 GiB.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::size;

    #[test]
    fn sizes_read_as_people_say_them() {
        assert_eq!(size(433), "433 B");
        assert_eq!(size(1_034_879), "1010.6 KiB");
        assert_eq!(size(1 << 20), "1.0 MiB");
        assert_eq!(size(1_503_238_554), "1.4 GiB");
    }
}
