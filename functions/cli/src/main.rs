//! `cellbridge`: the Lambda handlers' logic on a laptop and in the fleet repo's CI.
//!
//! Exit codes: 0 ok; 1 the strict substitution check (or the schema rule) failed; 2 input was
//! refused or invalid (bad state, bad fleet repo, bad event, bad arguments).

mod git;
mod local;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "cellbridge",
    version,
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
}

fn main() -> ExitCode {
    // `cellbridge plan | head` should stop quietly, like any Unix tool, not panic on EPIPE.
    // SAFETY: restoring the default disposition of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    cellbridge::telemetry::init_cli(cli.output == Output::Json, cli.verbose);
    cellbridge::telemetry::install_crypto_provider();
    let json = cli.output == Output::Json;
    let result = match cli.command {
        Command::Plan(args) => local::plan(&args, json, false),
        Command::Sync(args) => local::plan(&args, json, true),
        Command::Check { fleet, cell } => local::check(&fleet, cell.as_deref(), json),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            if json {
                println!("{}", serde_json::json!({ "error": e.to_string(), "exit_code": 2 }));
            } else {
                eprintln!("cellbridge: {e}");
            }
            ExitCode::from(2)
        }
    }
}
