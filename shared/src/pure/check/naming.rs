//! What kustomize's transformers do to the name and namespace of a ConfigMap or Secret before
//! Flux looks a `substituteFrom` source up: only what finding the source needs.
//!
//! Within one kustomization kustomize runs `patches` first, then `namespace`, `namePrefix` and
//! `nameSuffix`, then `patchesJson6902`, and `replacements` last (the order of
//! `api/internal/target/kusttarget_configplugin.go`); an outer kustomization's steps follow an
//! inner one's. A JSON6902 operation that replaces `/metadata/name` or `/metadata/namespace`
//! with a written value renames or re-namespaces the object; a replacement's value comes from
//! another object's field, which the check does not evaluate, so it is said not checked.

use super::yaml;

/// The steps that apply to the objects of one file, innermost kustomization first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Naming {
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// A kustomization's `namespace`, `namePrefix` and `nameSuffix`.
    Transform {
        namespace: Option<String>,
        prefix: String,
        suffix: String,
    },
    /// A JSON6902 patch writing the name or namespace of the objects its target selects.
    Rename {
        kind: Option<String>,
        /// kustomize anchors a target's name as a regular expression.
        name: Option<String>,
        to_name: Option<String>,
        to_namespace: Option<String>,
    },
}

impl Naming {
    /// The steps of one kustomization, in kustomize's order.
    pub(super) fn of_kustomization(
        root: &yaml::Node,
        patches: &[(Option<&yaml::Node>, String)],
        json6902: &[(Option<&yaml::Node>, String)],
    ) -> Naming {
        let text_of = |key: &str| root.get(key).and_then(yaml::Node::str).map(str::to_owned);
        let mut steps: Vec<Step> = patches.iter().filter_map(|(t, body)| rename(*t, body)).collect();
        let transform = Step::Transform {
            namespace: text_of("namespace").filter(|s| !s.is_empty()),
            prefix: text_of("namePrefix").unwrap_or_default(),
            suffix: text_of("nameSuffix").unwrap_or_default(),
        };
        if transform
            != (Step::Transform {
                namespace: None,
                prefix: String::new(),
                suffix: String::new(),
            })
        {
            steps.push(transform);
        }
        steps.extend(json6902.iter().filter_map(|(t, body)| rename(*t, body)));
        Naming { steps }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Adds the steps of an enclosing kustomization, which run after these.
    pub(super) fn wrap(&mut self, outer: &Naming) {
        self.steps.extend(outer.steps.iter().cloned());
    }

    /// The name and namespace kustomize gives an object of `kind` written as `name` in
    /// `namespace`.
    pub(super) fn apply(&self, kind: &str, name: &str, namespace: Option<&str>) -> (String, Option<String>) {
        let mut current = (name.to_owned(), namespace.map(str::to_owned));
        for step in &self.steps {
            match step {
                Step::Transform {
                    namespace,
                    prefix,
                    suffix,
                } => {
                    current.0 = format!("{prefix}{}{suffix}", current.0);
                    if namespace.is_some() {
                        current.1.clone_from(namespace);
                    }
                }
                Step::Rename {
                    kind: k,
                    name: n,
                    to_name,
                    to_namespace,
                } => {
                    let kind_ok = k.as_deref().is_none_or(|k| k == kind);
                    // A target matches the object's current or original name.
                    let name_ok = n.as_deref().is_none_or(|n| {
                        regex::Regex::new(&format!("^(?:{n})$"))
                            .is_ok_and(|re| re.is_match(&current.0) || re.is_match(name))
                    });
                    if kind_ok && name_ok {
                        if let Some(to) = to_name {
                            current.0.clone_from(to);
                        }
                        if to_namespace.is_some() {
                            current.1.clone_from(to_namespace);
                        }
                    }
                }
            }
        }
        current
    }
}

/// The rename a JSON6902 patch `body` makes, when it replaces or adds `/metadata/name` or
/// `/metadata/namespace` with a written value.
fn rename(target: Option<&yaml::Node>, body: &str) -> Option<Step> {
    let target = target?;
    let ops = yaml::documents(body).ok()?.into_iter().next()?;
    let (mut to_name, mut to_namespace) = (None, None);
    for op in ops.items() {
        if !matches!(op.get("op").and_then(yaml::Node::str), Some("replace" | "add")) {
            continue;
        }
        let value = op.get("value").and_then(yaml::Node::str).map(str::to_owned);
        match op.get("path").and_then(yaml::Node::str) {
            Some("/metadata/name") => to_name = value,
            Some("/metadata/namespace") => to_namespace = value,
            _ => {}
        }
    }
    (to_name.is_some() || to_namespace.is_some()).then(|| Step::Rename {
        kind: target.get("kind").and_then(yaml::Node::str).map(str::to_owned),
        name: target.get("name").and_then(yaml::Node::str).map(str::to_owned),
        to_name,
        to_namespace,
    })
}

/// The `replacements` of a kustomization that write a ConfigMap's or Secret's name or
/// namespace: (line, what) for each, to say the check did not follow them.
pub(super) fn renaming_replacements(root: &yaml::Node) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for r in root.get("replacements").map(yaml::Node::items).unwrap_or_default() {
        for t in r.get("targets").map(yaml::Node::items).unwrap_or_default() {
            let select = t.get("select");
            let kind = select.and_then(|s| s.get("kind")).and_then(yaml::Node::str);
            if kind.is_some_and(|k| k != "ConfigMap" && k != "Secret") {
                continue;
            }
            let renames = t
                .get("fieldPaths")
                .map(yaml::Node::items)
                .unwrap_or_default()
                .into_iter()
                .filter_map(yaml::Node::str)
                .any(|p| p == "metadata.name" || p == "metadata.namespace");
            if renames {
                let name = select
                    .and_then(|s| s.get("name"))
                    .and_then(yaml::Node::str)
                    .unwrap_or("*");
                out.push((t.line(), format!("{}/{name}", kind.unwrap_or("*"))));
            }
        }
    }
    out
}
