//! The names of the built site's files that pages link to under `/pkg`: the stylesheet, the
//! script and its bundle, and a split build's loader and manifest. One source for every page
//! that links them: the shop's shell and the operator console's template both take their
//! stylesheet from here, and the server's start-up check asks here what must exist
//! (docs/operations.md, "Building").
//!
//! The build decides the names. With `hash-files` (the release build and `cargo leptos
//! watch` alike), cargo-leptos writes each file's content hash into its name and the hashes
//! into `hash.txt` beside the server binary; without it the names are plain. The rules are
//! Leptos's own (`HydrationScripts` links the script and bundle by them), read once at start.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use leptos::config::LeptosOptions;

/// The split loader's and manifest's names when no hash names them (Leptos's own).
const PLAIN_LOADER: &str = "__wasm_split.______________________.js";
const PLAIN_MANIFEST: &str = "__wasm_split_manifest.json";

/// The linked files of one build, named as the pages link them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteFiles {
    pkg_dir: String,
    stylesheet: String,
    script: String,
    bundle: String,
    /// A split build's loader, manifest and the chunks it lists, when the site has one.
    split: Option<Split>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Split {
    loader: String,
    manifest: String,
    /// The chunk files the manifest names, or why it could not be read (every page that
    /// hydrates would then fail as it renders).
    chunks: Result<Vec<String>, String>,
}

impl SiteFiles {
    /// The names of the build `options` describe: the hashes of its `hash.txt` when names
    /// are hashed, and the chunks of its split manifest when the site has one. Read once:
    /// a site rebuilt under a running server (whose binary is rebuilt with it) is linked by
    /// the next start.
    pub fn of(options: &LeptosOptions) -> Self {
        let hashes = if options.hash_files {
            hash_file(options).and_then(|path| std::fs::read_to_string(path).ok())
        } else {
            None
        };
        let mut files = Self::named(options, hashes.as_deref());
        if let Some(split) = &mut files.split {
            let manifest = pkg_dir(options).join(&split.manifest);
            match std::fs::read_to_string(manifest) {
                Ok(text) => split.chunks = chunks_of(&text),
                Err(_) => files.split = None,
            }
        }
        files
    }

    /// The names by Leptos's rules (`HashedStylesheet`, `HydrationScripts`), before the
    /// split manifest is read: `hashes` is the text of `hash.txt`, `None` when names are
    /// not hashed or the file is missing.
    fn named(options: &LeptosOptions, hashes: Option<&str>) -> Self {
        let hash = |kind: &str| {
            hashes?.lines().find_map(|line| {
                let (file, hash) = line.trim().split_once(':')?;
                (file.trim() == kind).then(|| hash.trim().to_owned())
            })
        };
        let output = &*options.output_name;
        let named = |kind: &str, ext: &str| match hash(kind) {
            Some(hash) => format!("{output}.{hash}.{ext}"),
            None => format!("{output}.{ext}"),
        };
        // Leptos adds `_bg` to the bundle's name unless cargo-leptos built the server or
        // names are hashed.
        let bundle = match hash("wasm") {
            None if !options.hash_files && option_env!("LEPTOS_OUTPUT_NAME").is_none() => {
                format!("{output}_bg.wasm")
            }
            _ => named("wasm", "wasm"),
        };
        let split = Split {
            loader: hash("split").map_or(PLAIN_LOADER.into(), |h| format!("__wasm_split.{h}.js")),
            manifest: hash("manifest").map_or(PLAIN_MANIFEST.into(), |h| {
                format!("__wasm_split_manifest.{h}.json")
            }),
            chunks: Ok(vec![]),
        };
        Self {
            pkg_dir: options.site_pkg_dir.to_string(),
            stylesheet: named("css", "css"),
            script: named("js", "js"),
            bundle,
            split: Some(split),
        }
    }

    /// The stylesheet's address, as a page's `<link rel="stylesheet">` names it.
    pub fn stylesheet_href(&self) -> String {
        format!("/{}/{}", self.pkg_dir, self.stylesheet)
    }

    /// Every file a page may link, by its name in the site's `pkg` directory.
    pub fn linked(&self) -> Vec<&str> {
        let mut names = vec![&*self.stylesheet, &*self.script, &*self.bundle];
        if let Some(split) = &self.split {
            names.extend([&*split.loader, &*split.manifest]);
            names.extend(split.chunks.iter().flatten().map(String::as_str));
        }
        names
    }

    /// What is wrong with `options`' site for the pages that link it: each linked file it
    /// lacks, and a split manifest that cannot be read. Empty when the pages will find all.
    pub fn problems(&self, options: &LeptosOptions) -> Vec<String> {
        let dir = pkg_dir(options);
        let mut problems: Vec<String> = self
            .linked()
            .into_iter()
            .map(|name| dir.join(name))
            .filter(|path| !path.exists())
            .map(|path| format!("missing {}", path.display()))
            .collect();
        if let Some(Split {
            manifest,
            chunks: Err(error),
            ..
        }) = &self.split
        {
            problems.push(format!("unreadable {manifest}: {error}"));
        }
        problems
    }
}

fn pkg_dir(options: &LeptosOptions) -> PathBuf {
    Path::new(&*options.site_root).join(&*options.site_pkg_dir)
}

/// The chunk files a split manifest names: for each lazy function, the modules to load.
fn chunks_of(manifest: &str) -> Result<Vec<String>, String> {
    let preloads: HashMap<String, Vec<String>> =
        serde_json::from_str(manifest).map_err(|e| e.to_string())?;
    let mut chunks: Vec<String> = preloads
        .into_values()
        .flatten()
        .map(|module| format!("{module}.wasm"))
        .collect();
    chunks.sort();
    chunks.dedup();
    Ok(chunks)
}

/// Where the build wrote its hashed names: `hash.txt` (or the name the options give) beside
/// the server binary, as Leptos looks for it.
pub fn hash_file(options: &LeptosOptions) -> Option<PathBuf> {
    beside_binary(&options.hash_file)
}

/// `name` in the directory of the running binary; an absolute name is taken as it is.
pub fn beside_binary(name: &str) -> Option<PathBuf> {
    Some(std::env::current_exe().ok()?.parent()?.join(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(hash_files: bool) -> LeptosOptions {
        LeptosOptions::builder()
            .output_name("once")
            .site_pkg_dir("pkg")
            .hash_files(hash_files)
            .build()
    }

    const HASHES: &str = "js: J\nwasm: W\ncss: C\nsplit: S\nmanifest: M\n";

    /// A site directory of its own, with `files` (name, content) in its `pkg`.
    fn site(files: &[(&str, &str)]) -> PathBuf {
        let root = std::env::temp_dir().join(format!(
            "once_site_files_{}_{}",
            std::process::id(),
            files.len()
        ));
        std::fs::create_dir_all(root.join("pkg")).unwrap();
        for (name, content) in files {
            std::fs::write(root.join("pkg").join(name), content).unwrap();
        }
        root
    }

    #[test]
    fn hashed_names_carry_the_hashes_of_hash_txt() {
        let files = SiteFiles::named(&options(true), Some(HASHES));
        assert_eq!(files.stylesheet_href(), "/pkg/once.C.css");
        assert_eq!(
            files.linked(),
            [
                "once.C.css",
                "once.J.js",
                "once.W.wasm",
                "__wasm_split.S.js",
                "__wasm_split_manifest.M.json"
            ]
        );
    }

    #[test]
    fn plain_names_without_hashes_as_leptos_names_them() {
        let files = SiteFiles::named(&options(false), None);
        assert_eq!(files.stylesheet_href(), "/pkg/once.css");
        let bundle = match option_env!("LEPTOS_OUTPUT_NAME") {
            Some(_) => "once.wasm",
            None => "once_bg.wasm",
        };
        assert_eq!(
            files.linked(),
            ["once.css", "once.js", bundle, PLAIN_LOADER, PLAIN_MANIFEST]
        );
        // Hashed names with no hash for the bundle: never `_bg` (Leptos's rule).
        let files = SiteFiles::named(&options(true), Some("css: C"));
        assert_eq!(files.linked()[..3], ["once.C.css", "once.js", "once.wasm"]);
    }

    #[test]
    fn a_missing_hash_file_gives_the_plain_names() {
        let mut options = options(true);
        options.hash_file = "no-such-hash-file.txt".into();
        assert_eq!(SiteFiles::of(&options).stylesheet_href(), "/pkg/once.css");
    }

    #[test]
    fn a_split_site_links_its_loader_manifest_and_every_chunk_its_manifest_names() {
        let manifest =
            r#"{"checkout_panel_abc": ["split_a", "split_b"], "order_live_def": ["split_a"]}"#;
        let root = site(&[
            (PLAIN_MANIFEST, manifest),
            ("once.css", ""),
            ("split_a.wasm", ""),
        ]);
        let mut options = options(false);
        options.site_root = root.to_string_lossy().into();
        let files = SiteFiles::of(&options);
        assert!(files.linked().ends_with(&[
            PLAIN_LOADER,
            PLAIN_MANIFEST,
            "split_a.wasm",
            "split_b.wasm"
        ]));
        let problems = files.problems(&options);
        for lacking in ["once.js", PLAIN_LOADER, "split_b.wasm"] {
            assert!(
                problems.iter().any(|p| p.ends_with(lacking)),
                "{problems:?}"
            );
        }
        assert!(!problems
            .iter()
            .any(|p| p.ends_with("split_a.wasm") || p.ends_with(".css")));
        std::fs::remove_dir_all(root).ok();
    }

    #[test]
    fn a_site_without_a_manifest_is_not_split_and_a_broken_manifest_is_a_problem() {
        let root = site(&[]);
        let mut options = options(false);
        options.site_root = root.to_string_lossy().into();
        assert_eq!(SiteFiles::of(&options).linked().len(), 3);
        std::fs::write(root.join("pkg").join(PLAIN_MANIFEST), "{not json").unwrap();
        let problems = SiteFiles::of(&options).problems(&options);
        assert!(
            problems.iter().any(|p| p.starts_with("unreadable")),
            "{problems:?}"
        );
        std::fs::remove_dir_all(root).ok();
    }
}
