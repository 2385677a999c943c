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

use std::path::{Path, PathBuf};

use leptos::config::LeptosOptions;

/// The linked files of one build, named as the pages link them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteFiles {
    pkg_dir: String,
    stylesheet: String,
    script: String,
    bundle: String,
    /// A split build's loader and manifest, when `hash.txt` names them.
    split: Option<(String, String)>,
}

impl SiteFiles {
    /// The names of the build `options` describe, with the hashes of its `hash.txt` when
    /// names are hashed. A hashed build whose `hash.txt` cannot be read gets the plain names,
    /// as Leptos does; the start-up check then reports them missing.
    pub fn of(options: &LeptosOptions) -> Self {
        let hashes = if options.hash_files {
            hash_file(options)
                .and_then(|path| std::fs::read_to_string(path).ok())
                .unwrap_or_default()
        } else {
            String::new()
        };
        Self::named(options, &hashes)
    }

    fn named(options: &LeptosOptions, hashes: &str) -> Self {
        let hash = |kind: &str| {
            hashes.lines().find_map(|line| {
                let (file, hash) = line.trim().split_once(':')?;
                (file.trim() == kind).then(|| hash.trim().to_owned())
            })
        };
        let output = &*options.output_name;
        let with = |kind: &str, ext: &str| match hash(kind) {
            Some(hash) => format!("{output}.{hash}.{ext}"),
            None => format!("{output}.{ext}"),
        };
        let bundle = match hash("wasm") {
            Some(hash) => format!("{output}.{hash}.wasm"),
            // Leptos adds `_bg` to the bundle's name unless cargo-leptos built the server.
            None if option_env!("LEPTOS_OUTPUT_NAME").is_none() => format!("{output}_bg.wasm"),
            None => format!("{output}.wasm"),
        };
        let split = hash("split")
            .zip(hash("manifest"))
            .map(|(split, manifest)| {
                (
                    format!("__wasm_split.{split}.js"),
                    format!("__wasm_split_manifest.{manifest}.json"),
                )
            });
        Self {
            pkg_dir: options.site_pkg_dir.to_string(),
            stylesheet: with("css", "css"),
            script: with("js", "js"),
            bundle,
            split,
        }
    }

    /// The stylesheet's address, as a page's `<link rel="stylesheet">` names it.
    pub fn stylesheet_href(&self) -> String {
        format!("/{}/{}", self.pkg_dir, self.stylesheet)
    }

    /// Every file a page may link, by its name in the site's `pkg` directory.
    pub fn linked(&self) -> Vec<&str> {
        let mut names = vec![&*self.stylesheet, &*self.script, &*self.bundle];
        if let Some((loader, manifest)) = &self.split {
            names.extend([&**loader, &**manifest]);
        }
        names
    }

    /// The linked files that `options`' site directory lacks: every page would come without
    /// its stylesheet, or nothing on it would hydrate.
    pub fn missing(&self, options: &LeptosOptions) -> Vec<PathBuf> {
        let dir = Path::new(&*options.site_root).join(&*options.site_pkg_dir);
        self.linked()
            .into_iter()
            .map(|name| dir.join(name))
            .filter(|path| !path.exists())
            .collect()
    }
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

    #[test]
    fn hashed_names_carry_the_hashes_of_hash_txt() {
        let files = SiteFiles::named(&options(true), HASHES);
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
    fn plain_names_without_hashes() {
        let files = SiteFiles::named(&options(false), "");
        assert_eq!(files.stylesheet_href(), "/pkg/once.css");
        assert_eq!(files.linked()[..2], ["once.css", "once.js"]);
        assert_eq!(files.linked().len(), 3, "no split build named");
    }

    #[test]
    fn a_missing_hash_file_gives_the_plain_names() {
        let mut options = options(true);
        options.hash_file = "no-such-hash-file.txt".into();
        assert_eq!(SiteFiles::of(&options).stylesheet_href(), "/pkg/once.css");
    }

    #[test]
    fn missing_names_only_the_linked_files_the_site_lacks() {
        let root = std::env::temp_dir().join(format!("once_site_files_{}", std::process::id()));
        std::fs::create_dir_all(root.join("pkg")).unwrap();
        std::fs::write(root.join("pkg/once.C.css"), "").unwrap();
        std::fs::write(root.join("pkg/once.J.js"), "").unwrap();
        let mut options = options(true);
        options.site_root = root.to_string_lossy().into();
        let files = SiteFiles::named(&options, HASHES);
        let missing: Vec<String> = files
            .missing(&options)
            .iter()
            .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            missing,
            [
                "once.W.wasm",
                "__wasm_split.S.js",
                "__wasm_split_manifest.M.json"
            ]
        );
        std::fs::remove_dir_all(root).ok();
    }
}
