//! Which kustomize-controller a cell runs, and so which substitution rules its layers meet.
//!
//! Strict substitution is a feature gate (`StrictPostBuildSubstitutions`), and what it fails on
//! changed between releases; the check applies the rules of the release each cell runs, read
//! where Flux documents setting it, first found wins:
//!
//! 1. `clusters/<cell>/flux-system/gotk-components.yaml`: the kustomize-controller Deployment's
//!    image tag and `--feature-gates` arguments (or the `# Flux Version:` header), overridden by
//!    `images:` and patches in `clusters/<cell>/flux-system/kustomization.yaml`, which is where
//!    Flux documents customising the controllers;
//! 2. a Flux Operator `FluxInstance` of the cell directory (the one its tree starts from,
//!    `root.rs`; else one its tree applies): `spec.distribution.version` and
//!    `spec.kustomize.patches`;
//! 3. the fleet's `.cellbridge/flux.yaml` (`kustomizeControllerVersion`,
//!    `strictPostBuildSubstitutions`), for cells whose files say nothing;
//! 4. else the newest rules, with a notice: the check could not tell.
//!
//! A new cell is checked with the template's files, rendered into it.

use std::fmt;

use crate::pure::envsubst::{Dialect, Strict};
use crate::pure::fleet::FleetRead;
use crate::pure::template::FoundInstance;

use super::{CheckError, KUSTOMIZATION_FILES, invalid, read, yaml};

/// The fleet-wide setting for cells whose own files do not say.
pub const FLEET_SETTING: &str = ".cellbridge/flux.yaml";
const GATE: &str = "StrictPostBuildSubstitutions";
const CONTROLLER: &str = "kustomize-controller";

/// A kustomize-controller version; `patch == None` is "the newest patch of that minor".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: Option<u32>,
}

impl Version {
    const fn new(major: u32, minor: u32, patch: u32) -> Self {
        Version {
            major,
            minor,
            patch: Some(patch),
        }
    }

    /// `v1.9.4`, `1.9.4`, `v1.9.4-rc.1`, `1.9.x`, `1.9`.
    pub fn parse(text: &str) -> Option<Version> {
        let t = text.trim().trim_start_matches('v');
        let t = t.split(['-', '+', '@']).next()?;
        let mut parts = t.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = match parts.next() {
            None | Some("x" | "X" | "*") => None,
            Some(p) => Some(p.parse().ok()?),
        };
        parts.next().is_none().then_some(Version { major, minor, patch })
    }

    /// At least `other` (an unknown patch is the newest).
    fn at_least(&self, other: Version) -> bool {
        (self.major, self.minor, self.patch.unwrap_or(u32::MAX)) >= (other.major, other.minor, other.patch.unwrap_or(0))
    }

    /// The releases whose rules the check knows: kustomize-controller v1.0.0 (Flux v2.0) to v1.9.x.
    pub fn supported(&self) -> bool {
        self.major == 1 && self.minor <= 9
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.patch {
            Some(p) => write!(f, "v{}.{}.{p}", self.major, self.minor),
            None => write!(f, "v{}.{}.x", self.major, self.minor),
        }
    }
}

/// The first release with fluxcd/pkg's envsubst fork and the strict gate (Flux v2.3).
const STRICT_GATE: Version = Version::new(1, 3, 0);
/// Strict on by default (kustomize-controller#1671), envsubst v1.7.0 (strict for every
/// operator), `spec.postBuild.substituteStrategy` (Flux v2.9).
const V1_9: Version = Version::new(1, 9, 0);
/// A negative substring length counts from the end (fluxcd/pkg#1287, released 2026-08-31).
const NEGATIVE_LENGTH_FIX: Version = Version::new(1, 9, 5);

/// A Flux minor release and, for each of its patches, kustomize-controller's patch.
type FluxMinor = ((u32, u32), &'static [(u32, u32)]);

/// Flux release → kustomize-controller release, from fluxcd/flux2's
/// `manifests/bases/kustomize-controller/kustomization.yaml` at each tag (each row: its
/// `release/v2.N.x` branch), unless the row says otherwise. No Flux v2.10 release is listed:
/// no source gives its controllers yet, so a v2.10 cell gets the "newer than the table" notice.
const FLUX_RELEASES: &[FluxMinor] = &[
    ((2, 0), &[(0, 0), (1, 1)]),
    ((2, 1), &[(0, 0), (1, 0), (2, 1)]),
    ((2, 2), &[(0, 0), (1, 1), (2, 1), (3, 2)]),
    ((2, 3), &[(0, 0)]),
    ((2, 4), &[(0, 0)]),
    ((2, 5), &[(0, 0), (1, 1)]),
    ((2, 6), &[(0, 0), (1, 0), (2, 0), (3, 0), (4, 1)]),
    ((2, 7), &[(0, 0), (1, 0), (2, 1), (3, 2), (4, 3), (5, 3)]),
    (
        (2, 8),
        &[(0, 0), (1, 1), (2, 2), (3, 2), (4, 2), (5, 3), (6, 4), (7, 5), (8, 5)],
    ),
    // v2.9.0–v2.9.4: tags v2.9.0..v2.9.4 (release/v2.9.x ends at fluxcd/flux2#6031, v1.9.4).
    // v2.9.5 → v1.9.5: Flux v2.9.5 was released on 2026-08-31 (fluxcd/terraform-provider-flux#836,
    // "Update Flux to v2.9.5") with kustomize-controller v1.9.5, whose changelog entry is
    // fluxcd/kustomize-controller#1733 (the fluxcd/pkg#1287 fix, NEGATIVE_LENGTH_FIX above).
    ((2, 9), &[(0, 1), (1, 2), (2, 3), (3, 4), (4, 4), (5, 5)]),
];

/// The kustomize-controller of a Flux release (`2.9.3`, `2.9.x`, `2.x`); `None` when the text
/// is not a Flux v2 version the table knows.
pub fn controller_of_flux(flux: &str) -> Option<Version> {
    let t = flux.trim().trim_start_matches(['v', '~', '^', '=']);
    if matches!(t, "2.x" | "2.X" | "2" | "*" | "2.*") {
        return Some(Version {
            major: 1,
            minor: FLUX_RELEASES.last()?.0.1,
            patch: None,
        });
    }
    let v = Version::parse(t)?;
    let (_, patches) = FLUX_RELEASES
        .iter()
        .find(|((ma, mi), _)| (*ma, *mi) == (v.major, v.minor))?;
    let newest_minor = FLUX_RELEASES.last()?.0.1 == v.minor;
    let controller_patch = match v.patch {
        Some(p) => match patches.iter().find(|(fp, _)| *fp == p) {
            Some((_, cp)) => Some(*cp),
            // A patch of the newest minor the table has not seen yet ships the newest fixes.
            None if newest_minor && p > patches.last()?.0 => None,
            None => return None,
        },
        None if newest_minor => None,
        None => Some(patches.last()?.1),
    };
    Some(Version {
        major: 1,
        minor: v.minor,
        patch: controller_patch,
    })
}

/// What the check learned about a cell's kustomize-controller.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct FluxRelease {
    /// `v1.9.4`; absent when nothing says (then the newest rules apply).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kustomize_controller: Option<String>,
    #[serde(skip)]
    version: Option<Version>,
    /// The file the version was read from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version_from: Option<String>,
    /// The gate as set by a `--feature-gates` argument, and where; absent: the release's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strict_gate: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate_from: Option<String>,
    /// Said once per run: why the newest rules were applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

impl FluxRelease {
    /// The substitution rules this release applies.
    pub fn dialect(&self) -> Dialect {
        let Some(v) = self.version.filter(Version::supported) else {
            return Dialect {
                strict: if self.strict_gate == Some(false) {
                    Strict::Off
                } else {
                    Strict::Operators
                },
                ..Dialect::NEWEST
            };
        };
        let strict = if !v.at_least(STRICT_GATE) || !self.strict_gate.unwrap_or(v.at_least(V1_9)) {
            Strict::Off
        } else if v.at_least(V1_9) {
            Strict::Operators
        } else {
            Strict::Bare
        };
        Dialect {
            strict,
            negative_length_fails: !v.at_least(NEGATIVE_LENGTH_FIX),
        }
    }

    /// Whether `spec.postBuild.substituteStrategy` exists in this release (before v1.9.0 the
    /// field is unknown to the CRD, so `Always` changes nothing).
    pub fn has_substitute_strategy(&self) -> bool {
        self.version.filter(Version::supported).is_none_or(|v| v.at_least(V1_9))
    }

    /// One phrase for a finding or a report: "kustomize-controller v1.8.5 (gotk-components.yaml),
    /// strict mode off (the release's default)".
    pub fn describe(&self) -> String {
        let version = match (&self.kustomize_controller, &self.version_from) {
            (Some(v), Some(from)) => format!("{CONTROLLER} {v} ({from})"),
            (Some(v), None) => format!("{CONTROLLER} {v}"),
            _ => format!("an unknown {CONTROLLER} (the newest rules)"),
        };
        let strict = match (self.dialect().strict, &self.gate_from) {
            (Strict::Off, Some(from)) => format!("strict mode off ({GATE}=false, {from})"),
            (Strict::Off, None) if self.version.is_some_and(|v| !v.at_least(STRICT_GATE)) => {
                "no strict mode (it came with v1.3.0)".to_owned()
            }
            (Strict::Off, None) => "strict mode off (the release's default)".to_owned(),
            (_, Some(from)) => format!("strict mode on ({GATE}=true, {from})"),
            (_, None) => "strict mode on (the release's default)".to_owned(),
        };
        format!("{version}, {strict}")
    }
}

/// Reads the release of `clusters/<cell>`; `instance` is the cell directory's FluxInstance, the
/// one its tree starts from (`root.rs`), and `manifests` the files of that tree (where a
/// FluxInstance of a cell that holds none itself may be).
pub(super) fn read_release(
    fleet: &dyn FleetRead,
    cell: &str,
    manifests: &[&str],
    instance: Option<&FoundInstance>,
) -> Result<FluxRelease, CheckError> {
    let mut seen = FluxRelease::default();
    let dir = format!("clusters/{cell}/flux-system");
    let components = format!("{dir}/gotk-components.yaml");
    if let Some(text) = fleet.read_text(&components)? {
        components_release(&text, &components, &mut seen);
    }
    for name in KUSTOMIZATION_FILES {
        let path = format!("{dir}/{name}");
        if let Some(text) = fleet.read_text(&path)? {
            kustomization_overrides(fleet, &dir, &text, &path, &mut seen)?;
            break;
        }
    }
    if seen.version.is_none()
        && let Some(found) = instance
    {
        instance_release(&found.doc, &found.file, &mut seen);
    } else if seen.version.is_none() {
        for path in manifests {
            let text = read(fleet, path)?;
            if !text.contains("FluxInstance") {
                continue;
            }
            for doc in yaml::documents(&text).map_err(|r| invalid(path, r))? {
                if doc.get("kind").and_then(yaml::Node::str) == Some("FluxInstance") {
                    instance_release(&doc, path, &mut seen);
                }
            }
        }
    }
    if seen.version.is_none()
        && let Some(text) = fleet.read_text(FLEET_SETTING)?
    {
        fleet_setting(&text, &mut seen)?;
    }
    seen.notice = match seen.version {
        None => Some(format!(
            "no {CONTROLLER} release found for cell `{cell}` (no image tag in {components}, no FluxInstance, nothing in {FLEET_SETTING}): the newest rules apply"
        )),
        Some(v) if !v.supported() => Some(format!(
            "{CONTROLLER} {v} (cell `{cell}`, {}) is not a release the check knows (v1.0.0 to v1.9.x): the newest rules apply",
            seen.version_from.as_deref().unwrap_or("?")
        )),
        Some(_) => None,
    };
    Ok(seen)
}

fn set_version(seen: &mut FluxRelease, text: &str, from: &str) {
    seen.kustomize_controller = Some(text.trim().to_owned());
    seen.version = Version::parse(text);
    seen.version_from = Some(from.to_owned());
}

fn set_gate(seen: &mut FluxRelease, text: &str, from: &str) {
    if let Some(on) = gate_in(text) {
        seen.strict_gate = Some(on);
        seen.gate_from = Some(from.to_owned());
    }
}

/// The last `StrictPostBuildSubstitutions=<bool>` of `--feature-gates` arguments in `text`
/// (Go's `strconv.ParseBool` spellings); later arguments win, as they do for the flag.
fn gate_in(text: &str) -> Option<bool> {
    let mut last = None;
    for line in text.lines().filter(|l| l.contains("--feature-gates")) {
        for (at, _) in line.match_indices(GATE) {
            let value = line[at + GATE.len()..].strip_prefix('=').unwrap_or("");
            let value: String = value.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            match value.as_str() {
                "1" | "t" | "T" | "true" | "TRUE" | "True" => last = Some(true),
                "0" | "f" | "F" | "false" | "FALSE" | "False" => last = Some(false),
                _ => {}
            }
        }
    }
    last
}

/// The tag of a `…/kustomize-controller:v1.9.4` image reference (a digest after it is ignored).
fn controller_tag(image: &str) -> Option<&str> {
    let (repo, rest) = image.trim().rsplit_once(':').filter(|(r, _)| !r.ends_with("sha256"))?;
    let rest = rest.split('@').next()?;
    (repo.rsplit('/').next() == Some(CONTROLLER)).then_some(rest)
}

fn components_release(text: &str, path: &str, seen: &mut FluxRelease) {
    // Only the controller's own Deployment is parsed: a full gotk-components.yaml is ten
    // thousand lines of CRDs.
    for doc_text in text.split("\n---") {
        if !(doc_text.contains("kind: Deployment") && doc_text.contains(CONTROLLER)) {
            continue;
        }
        let Ok(docs) = yaml::documents(doc_text) else { continue };
        for doc in docs {
            let named = doc
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(yaml::Node::str)
                == Some(CONTROLLER);
            if doc.get("kind").and_then(yaml::Node::str) != Some("Deployment") || !named {
                continue;
            }
            let containers = doc
                .get("spec")
                .and_then(|s| s.get("template"))
                .and_then(|t| t.get("spec"))
                .and_then(|s| s.get("containers"))
                .map(yaml::Node::items)
                .unwrap_or_default();
            for c in containers {
                if let Some(tag) = c.get("image").and_then(yaml::Node::str).and_then(controller_tag) {
                    set_version(seen, tag, path);
                }
                let args: Vec<&str> = c
                    .get("args")
                    .map(yaml::Node::items)
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(yaml::Node::str)
                    .collect();
                set_gate(seen, &args.join("\n"), path);
            }
        }
    }
    if seen.version.is_none()
        && let Some(flux) = text
            .lines()
            .take(20)
            .find_map(|l| l.trim().strip_prefix("# Flux Version:"))
        && let Some(v) = controller_of_flux(flux)
    {
        seen.kustomize_controller = Some(v.to_string());
        seen.version = Some(v);
        seen.version_from = Some(format!("{path}, Flux {}", flux.trim()));
    }
}

/// `images:` and patches of the `flux-system` kustomization that target kustomize-controller.
fn kustomization_overrides(
    fleet: &dyn FleetRead,
    dir: &str,
    text: &str,
    path: &str,
    seen: &mut FluxRelease,
) -> Result<(), CheckError> {
    let docs = yaml::documents(text).map_err(|r| invalid(path, r))?;
    let Some(doc) = docs.first() else { return Ok(()) };
    for image in doc.get("images").map(yaml::Node::items).unwrap_or_default() {
        let name = image.get("name").and_then(yaml::Node::str).unwrap_or("");
        if name.rsplit('/').next() != Some(CONTROLLER) {
            continue;
        }
        if let Some(tag) = image.get("newTag").and_then(yaml::Node::str) {
            set_version(seen, tag, path);
        }
    }
    for field in ["patches", "patchesJson6902", "patchesStrategicMerge"] {
        for patch in doc.get(field).map(yaml::Node::items).unwrap_or_default() {
            let body = match (patch.str(), patch.get("patch"), patch.get("path")) {
                (Some(inline), ..) => Some(inline.to_owned()),
                (None, Some(p), _) => p.str().map(str::to_owned),
                (None, None, Some(file)) => match file.str() {
                    Some(f) => fleet.read_text(&format!("{dir}/{f}"))?,
                    None => None,
                },
                _ => None,
            };
            let Some(body) = body else { continue };
            if targets_controller(patch.get("target"), &body) {
                set_gate(seen, &body, path);
            }
        }
    }
    Ok(())
}

/// Whether a patch reaches the kustomize-controller Deployment: its `target` selects it
/// (kustomize anchors the name as a regular expression), or, without one, the patch names it.
fn targets_controller(target: Option<&yaml::Node>, body: &str) -> bool {
    let Some(target) = target else {
        return body.contains(CONTROLLER);
    };
    let field = |k: &str| target.get(k).and_then(yaml::Node::str);
    if field("kind").is_some_and(|k| k != "Deployment") {
        return false;
    }
    match field("name") {
        None => true,
        Some(name) => regex::Regex::new(&format!("^(?:{name})$")).is_ok_and(|re| re.is_match(CONTROLLER)),
    }
}

fn instance_release(doc: &yaml::Node, path: &str, seen: &mut FluxRelease) {
    let spec = doc.get("spec");
    let flux = spec
        .and_then(|s| s.get("distribution"))
        .and_then(|d| d.get("version"))
        .and_then(yaml::Node::str)
        .unwrap_or("");
    let from = format!("{path}, FluxInstance distribution {flux}");
    match controller_of_flux(flux) {
        Some(v) => {
            seen.kustomize_controller = Some(v.to_string());
            seen.version = Some(v);
            seen.version_from = Some(from);
        }
        None => {
            // Said in the notice: a Flux version the table does not know.
            seen.kustomize_controller = Some(format!("of Flux {flux}"));
            seen.version = Some(Version::new(0, 0, 0));
            seen.version_from = Some(from);
        }
    }
    let patches = spec
        .and_then(|s| s.get("kustomize"))
        .and_then(|k| k.get("patches"))
        .map(yaml::Node::items)
        .unwrap_or_default();
    for patch in patches {
        if let Some(body) = patch.get("patch").and_then(yaml::Node::str)
            && targets_controller(patch.get("target"), body)
        {
            set_gate(seen, body, path);
        }
    }
}

fn fleet_setting(text: &str, seen: &mut FluxRelease) -> Result<(), CheckError> {
    let docs = yaml::documents(text).map_err(|r| invalid(FLEET_SETTING, r))?;
    let Some(doc) = docs.first() else { return Ok(()) };
    if let Some(v) = doc.get("kustomizeControllerVersion").and_then(yaml::Node::str) {
        set_version(seen, v, FLEET_SETTING);
    }
    match doc.get("strictPostBuildSubstitutions").and_then(yaml::Node::str) {
        None => {}
        Some("true") => {
            seen.strict_gate = Some(true);
            seen.gate_from = Some(FLEET_SETTING.to_owned());
        }
        Some("false") => {
            seen.strict_gate = Some(false);
            seen.gate_from = Some(FLEET_SETTING.to_owned());
        }
        Some(other) => {
            return Err(invalid(
                FLEET_SETTING,
                format!("strictPostBuildSubstitutions must be true or false, not `{other}`"),
            ));
        }
    }
    Ok(())
}
