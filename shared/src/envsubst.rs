//! Flux's variable substitution (fluxcd/pkg envsubst, as kustomize-controller runs it in
//! post-build). Filled in by the envsubst/check work.
