//! Where a layer's variables come from, resolved the way kustomize-controller resolves them.
//!
//! fluxcd/pkg `kustomize/kustomize_varsub.go` (`LoadVariables`, `SubstituteVariables`), which
//! kustomize-controller calls before applying a layer:
//!
//! - each `substituteFrom` entry is read with `Get(namespace of the Kustomization, name)`; a
//!   missing object fails the layer (`substitute from 'ConfigMap/x' error`) unless the entry is
//!   `optional: true`, when it counts as present and empty;
//! - every key of a ConfigMap's `data` and of a Secret's `data` becomes a variable (a Secret's
//!   `stringData` is `data` once the API server stores it); later entries override earlier
//!   ones and `spec.postBuild.substitute` overrides them all;
//! - every variable name must match `^[_[:alpha:]][_[:alpha:][:digit:]]*$`, else the whole
//!   layer fails (`'x' var name is invalid`).
//!
//! (The Kustomization reference, `docs/spec/v1/kustomizations.md` "Post build variable
//! substitution" in fluxcd/kustomize-controller, says the same.)
//!
//! The check knows a source when the cell's Flux tree applies it from Git: a plain or
//! SOPS-encrypted object (SOPS encrypts values only, so keys are in clear) or the output of a
//! `configMapGenerator` / `secretGenerator`, whose name kustomize suffixes with a content hash
//! unless `disableNameSuffixHash` is set (a hashed name never equals the `substituteFrom` name).
//! A source that only exists in the cluster is known when its keys are declared in
//! [`super::IN_CLUSTER_SOURCES`]. What only an unknown source could supply is *unverified*.

use std::collections::{BTreeMap, BTreeSet};

use crate::pure::envsubst;
use crate::pure::fleet::FleetRead;

use super::build::{Build, GeneratedKey, Role, Unit};
use super::in_cluster::Declared;
use super::layers::{FluxLayer, SourceRef};
use super::{CheckError, Finding, FindingKind, IN_CLUSTER_SOURCES, invalid, read, yaml};

/// A ConfigMap or Secret the cell's Flux tree applies from Git.
#[derive(Debug, Clone)]
pub(super) struct GitSource {
    pub(super) kind: String,
    /// The name in the cluster, after kustomize's `namePrefix`/`nameSuffix` (without the
    /// hash kustomize may append: see `hashed`).
    pub(super) name: String,
    /// `None`: the object names no namespace, so it matches any layer's (lenient).
    pub(super) namespace: Option<String>,
    pub(super) keys: Vec<GeneratedKey>,
    pub(super) file: String,
    pub(super) line: usize,
    /// A generator's output whose real name is `<name>-<hash>`.
    pub(super) hashed: bool,
}

/// The ConfigMaps and Secrets one build applies, in the namespace `target_namespace` forces
/// (a Flux Kustomization's `spec.targetNamespace`) when set.
pub(super) fn collect(
    fleet: &dyn FleetRead,
    build: &Build,
    target_namespace: Option<&str>,
    out: &mut Vec<GitSource>,
) -> Result<(), CheckError> {
    for unit in &build.units {
        let Unit::File {
            path,
            role: Role::Manifest,
        } = unit
        else {
            continue;
        };
        if path.ends_with("/gotk-components.yaml") {
            continue;
        }
        let text = read(fleet, path)?;
        if !(text.contains("ConfigMap") || text.contains("Secret")) {
            continue;
        }
        let naming = build.naming.get(path).cloned().unwrap_or_default();
        for doc in yaml::documents(&text).map_err(|r| invalid(path, r))? {
            let kind = doc.get("kind").and_then(yaml::Node::str).unwrap_or("");
            if doc.get("apiVersion").and_then(yaml::Node::str) != Some("v1") || !matches!(kind, "ConfigMap" | "Secret")
            {
                continue;
            }
            let meta = doc.get("metadata");
            let field = |k: &str| {
                meta.and_then(|m| m.get(k))
                    .and_then(yaml::Node::str)
                    .filter(|s| !s.is_empty())
            };
            let Some(name) = field("name") else { continue };
            // A ConfigMap's `binaryData` is not read by kustomize-controller: only `data`.
            let maps: &[&str] = if kind == "Secret" {
                &["data", "stringData"]
            } else {
                &["data"]
            };
            let mut keys = Vec::new();
            for m in maps {
                if let Some(yaml::Node::Map(entries, ..)) = doc.get(m) {
                    for (k, v) in entries {
                        if let Some(key) = k.str() {
                            keys.push(GeneratedKey {
                                key: key.to_owned(),
                                file: path.clone(),
                                line: k.line(),
                                // A Secret's values are never read: no check may print them.
                                value: (kind == "ConfigMap").then(|| v.str().map(str::to_owned)).flatten(),
                            });
                        }
                    }
                }
            }
            let (name, namespace) = naming.apply(kind, name, field("namespace"));
            out.push(GitSource {
                kind: kind.to_owned(),
                name,
                // The Flux Kustomization's targetNamespace is set last, on every object.
                namespace: target_namespace.map(str::to_owned).or(namespace),
                keys,
                file: path.clone(),
                line: doc.line(),
                hashed: false,
            });
        }
    }
    for g in &build.generated {
        let (name, namespace) = g.naming.apply(g.kind, &g.name, g.namespace.as_deref());
        out.push(GitSource {
            kind: g.kind.to_owned(),
            name,
            namespace: target_namespace.map(str::to_owned).or(namespace),
            keys: g.keys.clone(),
            file: g.file.clone(),
            line: g.line,
            hashed: g.hashed,
        });
    }
    Ok(())
}

/// What a layer's variables resolve to.
#[derive(Debug, Default)]
pub(super) struct LayerVars {
    /// Every variable a known source or the inline `substitute` supplies.
    pub(super) known: BTreeSet<String>,
    /// Sources whose keys the check cannot know (`Secret/x`), in `substituteFrom` order.
    pub(super) unknown: Vec<String>,
    /// `ConfigMap/cell-metadata` is one of the sources.
    pub(super) reads_cell_metadata: bool,
    /// Each variable's value as Flux would substitute it (newlines removed, the last source
    /// and then the inline `substitute` winning), `None` where the check cannot know it.
    pub(super) values: BTreeMap<String, Option<String>>,
    /// The sources whose values the check cannot read, for what could not be checked.
    pub(super) unread_values: Vec<String>,
}

pub(super) enum Verdict<'a> {
    Set,
    /// Only an unknown source could supply it.
    Unverified(&'a [String]),
    /// Nothing supplies it; the closest known key when it is within two edits.
    NotSet {
        did_you_mean: Option<&'a str>,
    },
}

impl LayerVars {
    fn unread(&mut self, source: String) {
        if !self.unread_values.contains(&source) {
            self.unread_values.push(source);
        }
    }

    pub(super) fn verdict(&self, name: &str) -> Verdict<'_> {
        if self.known.contains(name) {
            return Verdict::Set;
        }
        let did_you_mean = self
            .known
            .iter()
            .map(|k| (strsim::levenshtein(k, name), k))
            .filter(|(d, _)| *d <= 2)
            .min()
            .map(|(_, k)| k.as_str());
        if did_you_mean.is_none() && !self.unknown.is_empty() {
            return Verdict::Unverified(&self.unknown);
        }
        Verdict::NotSet { did_you_mean }
    }

    /// The sources, for a message: `ConfigMap/cell-metadata, Secret/x`.
    pub(super) fn describe(layer: &FluxLayer) -> String {
        layer
            .sources
            .iter()
            .map(SourceRef::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// An object matches a layer's source only in the layer's namespace (a layer without one is
/// not held to any); an object without a namespace is never applied.
fn ns_matches(object: Option<&str>, layer: Option<&str>) -> bool {
    object.is_some() && (layer.is_none() || object == layer)
}

/// Resolves every source of `layer`; what Flux itself would fail on is pushed to `findings`.
pub(super) fn resolve(
    layer: &FluxLayer,
    cell_metadata: &BTreeMap<String, String>,
    git: &[GitSource],
    declared: &[Declared],
    findings: &mut Vec<Finding>,
) -> LayerVars {
    let mut vars = LayerVars::default();
    let ns = layer.namespace.as_deref();
    let mut finding = |file: &str, line: usize, variable: &str, message: String| {
        findings.push(Finding {
            file: file.to_owned(),
            line,
            variable: variable.to_owned(),
            layer: layer.name.clone(),
            message,
            kind: FindingKind::Layer,
        })
    };
    for src in &layer.sources {
        if src.kind != "ConfigMap" && src.kind != "Secret" {
            finding(
                &layer.defined_in,
                src.line,
                "",
                format!(
                    "substituteFrom `{src}`: kind must be ConfigMap or Secret, the only kinds Flux substitutes from"
                ),
            );
            continue;
        }
        if src.is_cell_metadata() {
            // cellbridge writes it: its keys are the metadata being checked.
            vars.reads_cell_metadata = true;
            vars.known.extend(cell_metadata.keys().cloned());
            for (k, v) in cell_metadata {
                vars.values.insert(k.clone(), Some(flux_value(v)));
            }
            continue;
        }
        let named = |g: &&GitSource| g.kind == src.kind && g.name == src.name;
        let same = |g: &&GitSource| named(g) && ns_matches(g.namespace.as_deref(), ns);
        let found: Vec<&GitSource> = git.iter().filter(same).collect();
        if found.is_empty()
            && let Some(g) = git.iter().filter(named).find(|g| g.namespace.is_none())
        {
            // Flux applies a namespaced object without a namespace nowhere: server-side apply
            // fails with "namespace not specified" (fluxcd/pkg ssa/errors), so the source never
            // exists in the cluster.
            finding(
                &g.file,
                g.line,
                "",
                format!(
                    "{} `{}` has no namespace, and neither its kustomization's `namespace` nor the applying Flux Kustomization's `targetNamespace` gives it one: Flux fails to apply it (\"namespace not specified\"), so layer `{}`'s substituteFrom `{src}` finds nothing; set `metadata.namespace`",
                    g.kind, g.name, layer.name
                ),
            );
            vars.unknown.push(src.to_string());
            vars.unread(src.to_string());
            continue;
        }
        let (plain, hashed): (Vec<&GitSource>, Vec<&GitSource>) = found.into_iter().partition(|g| !g.hashed);
        if !plain.is_empty() {
            for g in plain {
                for k in &g.keys {
                    if !envsubst::valid_name(&k.key) {
                        finding(
                            &k.file,
                            k.line,
                            &k.key,
                            format!(
                                "`{}` (a key of {src}) is not a valid variable name ({}): Flux fails the whole layer with \"'{}' var name is invalid\"",
                                k.key,
                                envsubst::NAME_PATTERN,
                                k.key
                            ),
                        );
                    }
                    vars.known.insert(k.key.clone());
                    vars.values.insert(k.key.clone(), k.value.as_deref().map(flux_value));
                    if k.value.is_none() {
                        vars.unread(src.to_string());
                    }
                }
            }
            continue;
        }
        let decl: Vec<&Declared> = declared
            .iter()
            // A declaration without a namespace speaks for every namespace.
            .filter(|d| {
                d.kind == src.kind
                    && d.name == src.name
                    && (d.namespace.is_none() || ns_matches(d.namespace.as_deref(), ns))
            })
            .collect();
        if !decl.is_empty() {
            vars.known.extend(decl.iter().flat_map(|d| d.keys.iter().cloned()));
            for k in decl.iter().flat_map(|d| d.keys.iter()) {
                vars.values.insert(k.clone(), None);
            }
            vars.unread(src.to_string());
            continue;
        }
        if let Some(g) = hashed.first() {
            finding(
                &g.file,
                g.line,
                "",
                format!(
                    "substituteFrom `{src}` (layer `{}`, {}:{}): kustomize generates this {} as `{}-<hash>`, so Flux finds no {} named `{}`; set `options.disableNameSuffixHash: true` on the generator",
                    layer.name, layer.defined_in, src.line, src.kind, src.name, src.kind, src.name
                ),
            );
            continue;
        }
        if !src.optional {
            finding(
                &layer.defined_in,
                src.line,
                "",
                format!(
                    "substituteFrom `{src}`: the cell's Flux tree applies no {} `{}`{} from Git and {IN_CLUSTER_SOURCES} does not declare it; unless something creates it in the cluster, Flux fails the layer (\"substitute from '{src}' error: not found\"); declare its keys there if it does",
                    src.kind,
                    src.name,
                    ns.map(|n| format!(" in namespace `{n}`")).unwrap_or_default()
                ),
            );
        }
        vars.unknown.push(src.to_string());
        // Any key of an unread source may override what came before it.
        for v in vars.values.values_mut() {
            *v = None;
        }
        vars.unread(src.to_string());
    }
    for (k, line, value) in &layer.inline {
        if !envsubst::valid_name(k) {
            finding(
                &layer.defined_in,
                *line,
                k,
                format!(
                    "`{k}` in spec.postBuild.substitute is not a valid variable name ({}): Flux fails the whole layer",
                    envsubst::NAME_PATTERN
                ),
            );
        }
        vars.known.insert(k.clone());
        vars.values.insert(k.clone(), value.as_deref().map(flux_value));
    }
    vars
}

/// kustomize-controller removes every newline from a value before substituting it.
fn flux_value(v: &str) -> String {
    v.replace('\n', "")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::{CheckReport, IN_CLUSTER_SOURCES, check_cell};
    use crate::pure::fleet::MemFleet;

    const CELL: &str = "c1";

    fn layer(name: &str, path: &str, post_build: &str) -> String {
        format!(
            "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: {path}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n  postBuild:\n{post_build}"
        )
    }

    /// A cell whose directory applies `cell-metadata`, `layers.yaml` and `extra` files.
    fn fleet(layers: &str, cell_files: &[(&str, &str)], files: &[(&str, &str)]) -> MemFleet {
        let mut f = MemFleet::new();
        let mut resources = vec!["cell-metadata.yaml", "layers.yaml"];
        resources.extend(cell_files.iter().map(|(p, _)| *p));
        f.insert(
            format!("clusters/{CELL}/kustomization.yaml"),
            format!(
                "resources:\n{}",
                resources.iter().map(|r| format!("  - {r}\n")).collect::<String>()
            ),
        );
        f.insert(
            format!("clusters/{CELL}/cell-metadata.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cell-metadata\n  namespace: flux-system\ndata:\n  cell_name: c1\n",
        );
        f.insert(format!("clusters/{CELL}/layers.yaml"), layers);
        for (p, t) in cell_files {
            f.insert(format!("clusters/{CELL}/{p}"), *t);
        }
        for (p, t) in files {
            f.insert(*p, *t);
        }
        f
    }

    fn run(f: &MemFleet) -> CheckReport {
        let vars: BTreeMap<String, String> = [("cell_name".to_owned(), "c1".to_owned())].into();
        check_cell(f, CELL, &vars).unwrap()
    }

    fn found(r: &CheckReport) -> Vec<String> {
        r.findings
            .iter()
            .map(|f| format!("{}:{} {}", f.file, f.line, f.variable))
            .collect()
    }

    const SOURCES: &str = "    substituteFrom:\n      - kind: ConfigMap\n        name: cell-metadata\n      - kind: ConfigMap\n        name: cluster-vars\n      - kind: Secret\n        name: sops-vars\n      - kind: Secret\n        name: external-vars\n        optional: true\n";
    const CLUSTER_VARS: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-vars\n  namespace: flux-system\ndata:\n  region: eu-west-1\nbinaryData:\n  blob: AAAA\n";
    // What `sops --encrypt` leaves: values encrypted, keys in clear, a `sops` block.
    const SOPS_SECRET: &str = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: sops-vars\n  namespace: flux-system\nstringData:\n  db_user: ENC[AES256_GCM,data:abc=,iv:x=,tag:y=,type:str]\ndata:\n  db_pass: ENC[AES256_GCM,data:def=,iv:x=,tag:y=,type:str]\nsops:\n  age:\n    - recipient: age1xyz\n  version: 3.8.1\n";
    const APP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  a: ${cell_name}\n  b: ${region}\n  c: ${db_user}\n  d: ${db_pass}\n  e: ${ext_token}\n  f: ${celll_name}\n  g: ${blob}\n";

    fn unverified(r: &CheckReport) -> Vec<String> {
        r.unverified
            .iter()
            .map(|u| format!("{}:{} {} <- {}", u.file, u.line, u.variable, u.sources.join(",")))
            .collect()
    }

    #[test]
    fn every_source_counts_and_only_typos_fail() {
        let f = fleet(
            &layer("apps", "./apps", SOURCES),
            &[("cluster-vars.yaml", CLUSTER_VARS), ("sops-vars.yaml", SOPS_SECRET)],
            &[("apps/app.yaml", APP)],
        );
        let r = run(&f);
        assert_eq!(found(&r), ["apps/app.yaml:11 celll_name"]);
        assert!(
            r.findings[0].message.contains("did you mean `cell_name`?"),
            "{}",
            r.findings[0].message
        );
        // `blob` is binaryData, which Flux does not read: only the in-cluster Secret could
        // supply it, as it could `ext_token`.
        assert_eq!(
            unverified(&r),
            [
                "apps/app.yaml:10 ext_token <- Secret/external-vars",
                "apps/app.yaml:12 blob <- Secret/external-vars"
            ]
        );
        assert!(r.unused_keys.is_empty());
    }

    #[test]
    fn declared_in_cluster_keys_count_as_set_and_the_rest_fails() {
        let mut f = fleet(
            &layer("apps", "./apps", SOURCES),
            &[("cluster-vars.yaml", CLUSTER_VARS), ("sops-vars.yaml", SOPS_SECRET)],
            &[("apps/app.yaml", APP)],
        );
        f.insert(
            IN_CLUSTER_SOURCES,
            "sources:\n  - kind: Secret\n    name: external-vars\n    namespace: flux-system\n    keys: [ext_token]\n",
        );
        let r = run(&f);
        assert!(r.unverified.is_empty(), "{:?}", r.unverified);
        assert_eq!(found(&r), ["apps/app.yaml:11 celll_name", "apps/app.yaml:12 blob"]);
        assert!(
            r.findings[1].message.contains("variable not set"),
            "{}",
            r.findings[1].message
        );
        // Declared for another namespace: not the layer's source.
        f.insert(
            IN_CLUSTER_SOURCES,
            "sources:\n  - kind: Secret\n    name: external-vars\n    namespace: other\n    keys: [ext_token]\n",
        );
        assert_eq!(run(&f).unverified.len(), 2);
    }

    #[test]
    fn a_missing_required_source_fails_where_the_layer_names_it() {
        let post = "    substituteFrom:\n      - kind: ConfigMap\n        name: cell-metadata\n      - kind: Secret\n        name: vault-vars\n";
        let f = fleet(
            &layer("apps", "./apps", post),
            &[],
            &[("apps/a.yaml", "kind: A\nmetadata:\n  name: ${vault_token}\n")],
        );
        let r = run(&f);
        assert_eq!(found(&r), [format!("clusters/{CELL}/layers.yaml:18 ")]);
        assert!(
            r.findings[0]
                .message
                .contains("applies no Secret `vault-vars` in namespace `flux-system`")
                && r.findings[0].message.contains(IN_CLUSTER_SOURCES),
            "{}",
            r.findings[0].message
        );
        assert_eq!(unverified(&r), ["apps/a.yaml:3 vault_token <- Secret/vault-vars"]);
    }

    #[test]
    fn generated_sources_count_only_without_a_hash_suffix() {
        let post = "    substituteFrom:\n      - kind: ConfigMap\n        name: gen-vars\n";
        let kust = |options: &str| {
            format!(
                "resources:\n  - a.yaml\nconfigMapGenerator:\n  - name: gen-vars\n    namespace: flux-system\n{options}    literals:\n      - from_literal=1\n    envs:\n      - vars.env\n    files:\n      - script.sh\n      - renamed=other.txt\n"
            )
        };
        let use_all = "kind: A\nmetadata:\n  name: x\ndata:\n  a: ${from_literal}${from_env}${script.sh}${renamed}\n";
        let mut f = fleet(
            &layer("apps", "./apps", post),
            &[],
            &[
                ("apps/kustomization.yaml", kust("").as_str()),
                ("apps/a.yaml", use_all),
                ("apps/vars.env", "# comment\nfrom_env=2\n"),
                ("apps/script.sh", "#!/bin/sh\n"),
                ("apps/other.txt", "x\n"),
            ],
        );
        let r = run(&f);
        // Hashed: Flux finds no ConfigMap `gen-vars`; each variable is then not set.
        assert!(
            r.findings
                .iter()
                .any(|f| f.file == "apps/kustomization.yaml" && f.message.contains("disableNameSuffixHash")),
            "{:?}",
            r.findings
        );
        f.insert(
            "apps/kustomization.yaml",
            kust("    options:\n      disableNameSuffixHash: true\n"),
        );
        let r = run(&f);
        // `script.sh` is a key, but no valid variable name: Flux fails the layer on it (and
        // `${script.sh}` is no expression its parser accepts).
        assert_eq!(found(&r), ["apps/a.yaml:5 ", "apps/kustomization.yaml:13 script.sh"]);
        assert!(
            r.findings[1].message.contains("var name is invalid"),
            "{}",
            r.findings[1].message
        );
        // generatorOptions does the same for every generator of the file.
        f.insert(
            "apps/kustomization.yaml",
            format!("generatorOptions:\n  disableNameSuffixHash: true\n{}", kust("")),
        );
        assert_eq!(run(&f).findings.len(), 2);
    }

    #[test]
    fn sources_are_looked_up_in_the_layers_namespace_after_transformers() {
        let post = "    substituteFrom:\n      - kind: ConfigMap\n        name: prefix-vars\n";
        let mut f = fleet(
            &layer("apps", "./apps", post),
            &[],
            &[("apps/a.yaml", "kind: A\nmetadata:\n  name: ${region}\n")],
        );
        f.insert(
            format!("clusters/{CELL}/kustomization.yaml"),
            "resources:\n  - cell-metadata.yaml\n  - layers.yaml\n  - vars\n",
        );
        // The cell directory applies `vars/`, whose kustomization moves and renames the ConfigMap.
        let cm =
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: vars\n  namespace: somewhere\ndata:\n  region: x\n";
        f.insert(format!("clusters/{CELL}/vars/cm.yaml"), cm);
        f.insert(
            format!("clusters/{CELL}/vars/kustomization.yaml"),
            "namespace: flux-system\nnamePrefix: prefix-\nresources:\n  - cm.yaml\n",
        );
        assert!(run(&f).passed(), "{:?}", run(&f).findings);
        f.insert(
            format!("clusters/{CELL}/vars/kustomization.yaml"),
            "namespace: apps\nnamePrefix: prefix-\nresources:\n  - cm.yaml\n",
        );
        let r = run(&f);
        assert_eq!(found(&r), [format!("clusters/{CELL}/layers.yaml:16 ")]);
    }

    #[test]
    fn layers_without_cell_metadata_are_checked_too() {
        let post = "    substitute:\n      team: platform\n      bad-key: x\n";
        let f = fleet(
            &layer("plain", "./plain", post),
            &[],
            &[("plain/a.yaml", "kind: A\nmetadata:\n  name: ${team}-${teem}-${zone}\n")],
        );
        let r = run(&f);
        assert_eq!(
            found(&r),
            [
                format!("clusters/{CELL}/layers.yaml:17 bad-key"),
                "plain/a.yaml:3 teem".to_owned(),
                "plain/a.yaml:3 zone".to_owned()
            ]
        );
        assert!(r.findings[1].message.contains("did you mean `team`?"));
        // Its keys are not cell-metadata's: `cell_name` is unused.
        assert_eq!(r.unused_keys, ["cell_name"]);
    }
}
