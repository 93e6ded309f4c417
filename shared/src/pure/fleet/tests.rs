use crate::pure::fleet::*;

#[test]
fn a_keep_reads_past_only_other_cells_directories() {
    let keep = Keep::cells(["a"]);
    for kept in [
        "README.md",
        "infrastructure/base/kustomization.yaml",
        ".cellbridge/settings.yaml",
        "clusters/_template/layers.yaml",
        "clusters/_shared/x.yaml",
        "clusters/README.md",
        "clusters/b",
        "clusters/a/flux-system/gotk-components.yaml",
    ] {
        assert_eq!(keep.read_past(kept), None, "{kept}");
    }
    assert_eq!(keep.read_past("clusters/b/cell-metadata.yaml"), Some("clusters/b"));
    assert_eq!(keep.read_past("clusters/b/apps/x.yaml"), Some("clusters/b"));
    let index = keep.clone().with_index();
    assert_eq!(index.read_past("clusters/b/cell-metadata.yaml"), None);
    assert_eq!(index.read_past("clusters/b/apps/x.yaml"), Some("clusters/b"));
    assert!(index.covers(&keep) && !keep.covers(&index));
    assert!(Keep::all().covers(&index) && !index.covers(&Keep::all()));
    assert!(!keep.covers(&Keep::cells(["a", "b"])));
}

#[test]
fn a_read_past_directory_is_listed_and_unknown_never_empty() {
    let keep = Keep::cells(["a"]).with_index();
    let mut f = MemFleet::kept(&keep);
    f.insert("clusters/a/kustomization.yaml", "a");
    f.insert("clusters/b/cell-metadata.yaml", "b");
    f.insert_read_past("clusters/b");
    f.insert_read_past("clusters/c");
    let names: Vec<String> = f
        .list("clusters")
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(
        f.read_text("clusters/b/cell-metadata.yaml").unwrap().as_deref(),
        Some("b")
    );
    // Kept by the index, so absent for real.
    assert_eq!(f.read("clusters/c/cell-metadata.yaml").unwrap(), None);
    // A cell that is not in the repo at all is simply absent.
    assert_eq!(f.read("clusters/d/kustomization.yaml").unwrap(), None);
    assert!(f.not_kept().is_empty());
    assert!(matches!(
        f.read("clusters/b/apps/x.yaml"),
        Err(FleetError::NotKept { .. })
    ));
    assert!(matches!(f.list("clusters/c"), Err(FleetError::NotKept { .. })));
    assert!(matches!(f.mode("clusters/c/x"), Err(FleetError::NotKept { .. })));
    assert_eq!(f.not_kept(), ["b", "c"]);
}

#[test]
fn normalize_resolves_and_refuses_escapes() {
    assert_eq!(
        normalize("clusters/a", "../../infrastructure/x").unwrap(),
        "infrastructure/x"
    );
    assert_eq!(normalize("", "./clusters/a").unwrap(), "clusters/a");
    assert_eq!(
        normalize("clusters/a", "./layers.yaml").unwrap(),
        "clusters/a/layers.yaml"
    );
    assert!(matches!(
        normalize("clusters/a", "../../../etc"),
        Err(FleetError::OutsideRepo { .. })
    ));
    assert!(normalize("", "/etc/passwd").is_err());
}

#[test]
fn mem_fleet_lists_dirs_and_files() {
    let mut m = MemFleet::new();
    m.insert("clusters/a/x.yaml", "x");
    m.insert("clusters/a/flux-system/y.yaml", "y");
    let l = m.list("clusters/a").unwrap().unwrap();
    assert_eq!(
        l,
        vec![
            DirEntry {
                name: "flux-system".into(),
                kind: EntryKind::Dir
            },
            DirEntry {
                name: "x.yaml".into(),
                kind: EntryKind::File
            }
        ]
    );
    assert_eq!(m.list("nope").unwrap(), None);
    assert_eq!(
        m.walk_files("clusters").unwrap(),
        vec!["clusters/a/flux-system/y.yaml", "clusters/a/x.yaml"]
    );
}

/// One small repo with every kind of link, as each view must show it.
const TREE: &[(&str, FileMode, &str)] = &[
    (
        "apps/base/kustomization.yaml",
        FileMode::Regular,
        "resources: [a.yaml]\n",
    ),
    ("apps/base/a.yaml", FileMode::Regular, "kind: A\n"),
    ("apps/base/alias.yaml", FileMode::Symlink, "a.yaml"),
    ("apps/prod", FileMode::Symlink, "base"),
    ("apps/loop", FileMode::Symlink, ".."),
    ("apps/passwd", FileMode::Symlink, "/etc/passwd"),
    ("apps/dangling", FileMode::Symlink, "nowhere"),
    ("bin/run.sh", FileMode::Executable, "#!/bin/sh\n"),
];

fn assert_flux_view(f: &dyn FleetRead) {
    let names = |d: &str| -> Vec<(String, EntryKind)> {
        f.list(d)
            .unwrap()
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.kind))
            .collect()
    };
    assert_eq!(
        names("apps"),
        vec![
            ("base".into(), EntryKind::Dir),
            ("dangling".into(), EntryKind::Symlink),
            ("loop".into(), EntryKind::Symlink),
            ("passwd".into(), EntryKind::Symlink),
            ("prod".into(), EntryKind::Symlink),
        ]
    );
    // Nothing is behind a link, whatever it points at: no error either.
    for p in [
        "apps/prod",
        "apps/prod/a.yaml",
        "apps/base/alias.yaml",
        "apps/passwd",
        "apps/loop/apps",
    ] {
        assert_eq!(f.read(p).unwrap(), None, "{p}");
        assert!(!f.is_dir(p).unwrap(), "{p}");
    }
    assert_eq!(f.read_text("apps/base/a.yaml").unwrap().as_deref(), Some("kind: A\n"));
    assert_eq!(
        f.symlink_on("apps/prod/kustomization.yaml").unwrap(),
        Some(Symlink {
            path: "apps/prod".into(),
            target: "base".into()
        })
    );
    assert_eq!(f.symlink_on("apps/base/a.yaml").unwrap(), None);
    assert_eq!(f.symlink_on("apps/nothing/x").unwrap(), None);
    assert_eq!(f.read_link("apps/passwd").unwrap().as_deref(), Some("/etc/passwd"));
    assert_eq!(f.read_link("apps/base/a.yaml").unwrap(), None);
    assert_eq!(f.mode("bin/run.sh").unwrap(), Some(FileMode::Executable));
    assert_eq!(f.mode("apps/base/a.yaml").unwrap(), Some(FileMode::Regular));
    assert_eq!(f.mode("apps/prod").unwrap(), Some(FileMode::Symlink));
    assert_eq!(f.mode("apps/prod/a.yaml").unwrap(), None);
    assert_eq!(f.mode("apps").unwrap(), None);
    assert_eq!(
        f.walk_files("").unwrap(),
        vec!["apps/base/a.yaml", "apps/base/kustomization.yaml", "bin/run.sh"]
    );
    let mut all: Vec<(String, FileMode)> = TREE.iter().map(|(p, m, _)| (p.to_string(), *m)).collect();
    all.sort();
    assert_eq!(f.walk("").unwrap(), all);
    assert_eq!(
        Symlink {
            path: "apps/base/alias.yaml".into(),
            target: "../../apps/base/a.yaml".into()
        }
        .resolved()
        .as_deref(),
        Some("apps/base/a.yaml")
    );
}

#[test]
fn every_view_shows_symlinks_as_flux_artifacts_do() {
    let dir = tempfile::tempdir().unwrap();
    for (p, mode, content) in TREE {
        let f = FileWrite {
            path: (*p).to_owned(),
            mode: *mode,
            content: (*content).to_owned(),
        };
        f.write_at(&dir.path().join(p)).unwrap();
    }
    // A checkout's own .git is no part of the fleet.
    std::fs::create_dir_all(dir.path().join(".git")).unwrap();
    std::fs::write(dir.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let local = LocalFleet::open(dir.path()).unwrap();
    assert_flux_view(&local);
    assert_eq!(local.read(".git/HEAD").unwrap(), None);
    assert!(matches!(local.read("apps/../x"), Err(FleetError::OutsideRepo { .. })));

    let mem: MemFleet = TREE
        .iter()
        .map(|(p, m, c)| (p.to_string(), *m, c.as_bytes().to_vec()))
        .collect();
    assert_flux_view(&mem);

    // The same files proposed over an empty base, and over a base they replace.
    let empty = MemFleet::new();
    assert_flux_view(&Overlay::with_modes(
        &empty,
        TREE.iter().map(|(p, m, c)| (p.to_string(), *m, c.as_bytes().to_vec())),
    ));
    let mut base = MemFleet::new();
    base.insert("apps/prod/old.yaml", "kind: Old\n");
    base.insert("bin/run.sh", "old\n");
    base.insert("apps/base/a.yaml", "kind: A\n");
    let over = Overlay::with_modes(
        &base,
        TREE.iter().map(|(p, m, c)| (p.to_string(), *m, c.as_bytes().to_vec())),
    );
    assert_flux_view(&over);
}

#[test]
fn git_modes_round_trip() {
    for m in [FileMode::Regular, FileMode::Executable, FileMode::Symlink] {
        assert_eq!(FileMode::from_git_mode(m.git_mode()), Some(m));
    }
    assert_eq!(FileMode::from_git_mode("040000"), None);
}
