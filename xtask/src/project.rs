//! What to build and where it goes, read from the workspace's `[workspace.metadata.leptos]`
//! section (the same section cargo-leptos reads, so the two tools build the same site).
//!
//! Parsing is pure: [`Project::from_metadata`] takes the JSON of `cargo metadata` and is tested
//! with data; running `cargo metadata` is the caller's business.

use serde_json::Value;
use std::path::{Path, PathBuf};

/// Pages whose islands are a bundle of their own: the lib package's feature of that name
/// builds it (only that page's islands), served from `<pkg>/<feature>/<pkg>/` — the run
/// inspector's lanes are 16 KB of brotli the live view never runs (app/src/pages/mod.rs
/// points the page's hydration script there).
pub const PAGE_BUNDLES: [&str; 1] = ["inspector"];

/// One wasm bundle of the site: which feature of the lib package builds it, and where its
/// `<name>.js` and `<name>.wasm` go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    pub feature: Option<&'static str>,
    pub pkg_dir: PathBuf,
}

/// The parts of the leptos section this tool uses, with paths made absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// The workspace's root directory.
    pub root: PathBuf,
    /// Cargo's target directory (`CARGO_TARGET_DIR` when set).
    pub target_dir: PathBuf,
    /// The base name of the bundle's files (`pkg/<name>.js`, `.wasm`, `.css`); the server is
    /// compiled with the same `LEPTOS_OUTPUT_NAME` so its pages load them.
    pub output_name: String,
    /// The server package and its binary (`bin-package`).
    pub bin_package: String,
    /// The package compiled to wasm32 (`lib-package`).
    pub lib_package: String,
    /// Where the site is written (`site-root`, relative to the workspace root).
    pub site_root: PathBuf,
    /// The directory of the bundle inside the site (`site-pkg-dir`).
    pub site_pkg_dir: String,
    /// The stylesheet copied to `pkg/<name>.css` (`style-file`).
    pub style_file: Option<PathBuf>,
    /// Files copied as they are to the site's root (`assets-dir`).
    pub assets_dir: Option<PathBuf>,
    /// The cargo profile of the release wasm build (`lib-profile-release`).
    pub lib_profile_release: String,
}

impl Project {
    /// Reads the project from `cargo metadata --format-version 1 --no-deps` output.
    pub fn from_metadata(metadata: &Value) -> Result<Project, String> {
        let text = |value: &Value, what: &str| -> Result<String, String> {
            value
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("cargo metadata has no `{what}` text"))
        };
        let root = PathBuf::from(text(&metadata["workspace_root"], "workspace_root")?);
        let target_dir = PathBuf::from(text(&metadata["target_directory"], "target_directory")?);
        let section = match &metadata["metadata"]["leptos"] {
            Value::Array(projects) if projects.len() == 1 => &projects[0],
            Value::Array(projects) => {
                return Err(format!(
                    "[workspace.metadata.leptos] lists {} projects; this tool builds exactly one",
                    projects.len()
                ))
            }
            Value::Object(_) => &metadata["metadata"]["leptos"],
            _ => return Err("Cargo.toml has no [workspace.metadata.leptos] section".to_owned()),
        };
        let field = |key: &str| -> Result<String, String> {
            section[key]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("[workspace.metadata.leptos] needs `{key}` (a string)"))
        };
        let optional_path = |key: &str| section[key].as_str().map(|path| root.join(path));
        let output_name = match section["output-name"].as_str() {
            Some(name) => name.to_owned(),
            None => field("name")?,
        };
        if output_name.is_empty() || output_name.contains(['/', '\\']) {
            return Err(format!("the output name {output_name:?} is not a file name"));
        }
        Ok(Project {
            output_name,
            bin_package: field("bin-package")?,
            lib_package: field("lib-package")?,
            site_root: root.join(section["site-root"].as_str().unwrap_or("target/site")),
            site_pkg_dir: section["site-pkg-dir"].as_str().unwrap_or("pkg").to_owned(),
            style_file: optional_path("style-file"),
            assets_dir: optional_path("assets-dir"),
            lib_profile_release: section["lib-profile-release"]
                .as_str()
                .unwrap_or("release")
                .to_owned(),
            root,
            target_dir,
        })
    }

    /// The site's bundle directory, `<site-root>/<site-pkg-dir>`.
    pub fn pkg_dir(&self) -> PathBuf {
        self.site_root.join(&self.site_pkg_dir)
    }

    /// The site's wasm bundles: the lib package as is (every page but one), then one per page
    /// whose islands build apart ([`PAGE_BUNDLES`]), each under the main bundle's directory.
    pub fn bundles(&self) -> Vec<Bundle> {
        let main = Bundle { feature: None, pkg_dir: self.pkg_dir() };
        let pages = PAGE_BUNDLES.iter().map(|&feature| Bundle {
            feature: Some(feature),
            pkg_dir: self.pkg_dir().join(feature).join(&self.site_pkg_dir),
        });
        std::iter::once(main).chain(pages).collect()
    }

    /// The cargo profile of the wasm build.
    pub fn lib_profile(&self, release: bool) -> &str {
        if release {
            &self.lib_profile_release
        } else {
            "dev"
        }
    }

    /// Where cargo leaves the wasm module of the lib package.
    pub fn wasm_artifact(&self, release: bool) -> PathBuf {
        let directory = match self.lib_profile(release) {
            "dev" => "debug",
            profile => profile,
        };
        self.target_dir
            .join("wasm32-unknown-unknown")
            .join(directory)
            .join(format!("{}.wasm", self.lib_package.replace('-', "_")))
    }

    /// Where cargo leaves the server binary.
    pub fn server_binary(&self, release: bool) -> PathBuf {
        self.target_dir.join(if release { "release" } else { "debug" }).join(&self.bin_package)
    }

    /// The environment the server is compiled and run with, as cargo-leptos sets it: leptos
    /// reads `LEPTOS_OUTPUT_NAME` at compile time and the rest when the server starts.
    pub fn leptos_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("LEPTOS_OUTPUT_NAME", self.output_name.clone()),
            ("LEPTOS_SITE_ROOT", path_text(&self.site_root)),
            ("LEPTOS_SITE_PKG_DIR", self.site_pkg_dir.clone()),
        ]
    }
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn metadata(leptos: Value) -> Value {
        json!({
            "workspace_root": "/w",
            "target_directory": "/t",
            "metadata": { "leptos": leptos },
        })
    }

    #[test]
    fn reads_the_workspace_section() {
        let project = Project::from_metadata(&metadata(json!([{
            "name": "agentstream", "bin-package": "server", "lib-package": "front-end",
            "site-root": "target/site", "site-pkg-dir": "pkg", "style-file": "style/main.css",
            "assets-dir": "public", "lib-profile-release": "wasm-release",
        }])))
        .unwrap();
        assert_eq!(project.output_name, "agentstream");
        assert_eq!(project.site_root, PathBuf::from("/w/target/site"));
        assert_eq!(project.pkg_dir(), PathBuf::from("/w/target/site/pkg"));
        let bundles = project.bundles();
        let places: Vec<_> =
            bundles.iter().map(|bundle| (bundle.feature, bundle.pkg_dir.clone())).collect();
        assert_eq!(
            places,
            [
                (None, PathBuf::from("/w/target/site/pkg")),
                (Some("inspector"), PathBuf::from("/w/target/site/pkg/inspector/pkg")),
            ]
        );
        assert_eq!(project.style_file, Some(PathBuf::from("/w/style/main.css")));
        assert_eq!(
            project.wasm_artifact(true),
            PathBuf::from("/t/wasm32-unknown-unknown/wasm-release/front_end.wasm")
        );
        assert_eq!(
            project.wasm_artifact(false),
            PathBuf::from("/t/wasm32-unknown-unknown/debug/front_end.wasm")
        );
        assert_eq!(project.server_binary(true), PathBuf::from("/t/release/server"));
    }

    #[test]
    fn defaults_and_errors() {
        let cases: &[(Value, Result<&str, &str>)] = &[
            // Defaults: site root, pkg dir and profile as cargo-leptos has them.
            (json!({"name": "a", "bin-package": "s", "lib-package": "f"}), Ok("a")),
            // output-name wins over name.
            (
                json!({"name": "a", "output-name": "b", "bin-package": "s", "lib-package": "f"}),
                Ok("b"),
            ),
            (json!({"name": "a", "lib-package": "f"}), Err("`bin-package`")),
            (json!([]), Err("lists 0 projects")),
            (json!(null), Err("no [workspace.metadata.leptos]")),
            (
                json!({"name": "../a", "bin-package": "s", "lib-package": "f"}),
                Err("not a file name"),
            ),
        ];
        for (section, expected) in cases {
            let got = Project::from_metadata(&metadata(section.clone()));
            match (expected, got) {
                (Ok(name), Ok(project)) => {
                    assert_eq!(project.output_name, *name);
                    assert_eq!(project.pkg_dir(), PathBuf::from("/w/target/site/pkg"));
                    assert_eq!(project.lib_profile(true), "release");
                }
                (Err(needle), Err(message)) => {
                    assert!(message.contains(needle), "{message:?} lacks {needle:?}")
                }
                (expected, got) => panic!("{section}: expected {expected:?}, got {got:?}"),
            }
        }
    }
}
