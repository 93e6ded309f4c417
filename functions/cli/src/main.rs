//! `cellbridge`: the Lambda handlers' logic on a laptop and in the fleet repo's CI.
//!
//! Exit codes: 0 ok; 1 the strict substitution check (or the schema rule) failed, or (`status`)
//! a cell needs attention; 2 input was refused or invalid (bad state, bad fleet repo, bad event,
//! bad arguments); 3 a call to AWS, GitHub or Kubernetes failed in a way a later run may not
//! (throttling, 5xx, cluster not ready).

mod git;
mod local;
mod remote;
mod status;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// `cellbridge --version`: the release and the commit it was built from (functions/cli/build.rs),
/// which the release's action checks and a bug report names.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("CELLBRIDGE_COMMIT"), ")");

#[derive(Parser)]
#[command(
    name = "cellbridge",
    version = VERSION,
    about = "Carry Terraform's cell_metadata into the Flux fleet repo, and bootstrap Flux on new EKS clusters"
)]
struct Cli {
    /// Output format: `text` for people, `json` for automation.
    #[arg(long, global = true, value_enum, default_value_t = Output::Text)]
    output: Output,
    /// Log progress to stderr (`RUST_LOG` also works).
    #[arg(long, short, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Print the pull request a state would open against a local fleet directory.
    Plan(local::StateArgs),
    /// Apply that change to the local fleet directory (a commit on `cellbridge/<cell>` in a Git repo).
    Sync(local::StateArgs),
    /// Run the strict substitution check over a fleet repo (for the fleet repo's own CI).
    Check {
        /// The fleet repository's root directory.
        #[arg(long, default_value = ".")]
        fleet: PathBuf,
        /// Check one cell only.
        #[arg(long)]
        cell: Option<String>,
    },
    /// Run a Lambda handler locally on an event file (see events/).
    Invoke {
        /// Which function's handler.
        #[arg(value_enum)]
        function: remote::Function,
        /// The event, as Lambda would deliver it.
        #[arg(long)]
        event: PathBuf,
        /// cluster-bootstrap only: read the fleet from this checkout instead of GitHub.
        #[arg(long)]
        fleet: Option<PathBuf>,
    },
    /// The first Flux bootstrap of a cluster, from a laptop.
    Bootstrap(remote::BootstrapArgs),
    /// Every cell of a fleet against a directory of states: the dashboard's table (exit 1 when
    /// a cell needs attention).
    Status(status::StatusArgs),
}

fn main() -> ExitCode {
    // `cellbridge plan | head` should stop quietly, like any Unix tool, not panic on EPIPE.
    // SAFETY: restoring the default disposition of one signal before any thread starts.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    cellbridge::shell::telemetry::init_cli(cli.output == Output::Json, cli.verbose);
    cellbridge::shell::telemetry::install_crypto_provider();
    let json = cli.output == Output::Json || matches!(&cli.command, Command::Status(a) if a.json());
    let result = match cli.command {
        Command::Plan(args) => local::plan(&args, json, false).map_err(|e| (e.to_string(), 2)),
        Command::Sync(args) => local::plan(&args, json, true).map_err(|e| (e.to_string(), 2)),
        Command::Check { fleet, cell } => local::check(&fleet, cell.as_deref(), json).map_err(|e| (e.to_string(), 2)),
        Command::Invoke { function, event, fleet } => {
            remote::invoke(function, &event, fleet.as_deref()).map_err(|e| (e.to_string(), e.exit_code()))
        }
        Command::Bootstrap(args) => remote::bootstrap(&args, json).map_err(|e| (e.to_string(), e.exit_code())),
        Command::Status(args) => status::status(&args, json).map_err(|e| (e.to_string(), 2)),
    };
    match result {
        Ok(code) => code,
        Err((message, code)) => {
            if json {
                println!("{}", serde_json::json!({ "error": message, "exit_code": code }));
            } else {
                eprintln!("cellbridge: {message}");
            }
            ExitCode::from(code)
        }
    }
}
