//! The site beside the server: the wasm bundle (wasm-bindgen, then wasm-opt for a release), the
//! stylesheet and the static assets, written where the server serves them
//! (`<site-root>/<site-pkg-dir>/<name>.{js,wasm,css}` and the assets at the site's root), exactly
//! the files cargo-leptos writes.

use crate::project::{Bundle, Project};
use crate::step::{self, StepError};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The oldest binaryen whose `wasm-opt` is known to keep the bundle working: Debian's 108 makes
/// a bundle that fails at load ("WebAssembly.Table.set(): Argument 1 is invalid for table");
/// npm's 132 (end2end/package.json) works.
const WASM_OPT_VERSION_MIN: u32 = 116;

/// Writes `bundle`'s JavaScript and module from the compiled lib package.
pub fn bindgen(project: &Project, bundle: &Bundle, release: bool) -> Result<(), StepError> {
    let step = "generate the bundle's JavaScript (wasm-bindgen)";
    step::announce(step);
    let started = Instant::now();
    let input = project.wasm_artifact(release);
    if !input.is_file() {
        return Err(StepError::new(
            step,
            format!("{} does not exist", input.display()),
            "build the wasm module first (`cargo xtask build` does both)",
        ));
    }
    let pkg_dir = &bundle.pkg_dir;
    let fail = |error: String| {
        StepError::new(
            step,
            error,
            "check that Cargo.lock's wasm-bindgen is the version xtask/Cargo.toml pins",
        )
    };
    let mut bindgen = wasm_bindgen_cli_support::Bindgen::new();
    bindgen.input_path(&input).out_name(&project.output_name).debug(!release).keep_debug(!release);
    let mut output = bindgen
        .web(true)
        .and_then(|bindgen| bindgen.generate_output())
        .map_err(|error| fail(format!("{error:#}")))?;
    drop_uncreated_classes(&mut output);
    fs::create_dir_all(pkg_dir)
        .map_err(|error| fail(format!("cannot create {}: {error}", pkg_dir.display())))?;
    output
        .emit(pkg_dir)
        .map_err(|error| fail(format!("cannot write to {}: {error:#}", pkg_dir.display())))?;
    // leptos's hydration script loads `<name>.wasm`, not wasm-bindgen's `<name>_bg.wasm`.
    let emitted = pkg_dir.join(format!("{}_bg.wasm", project.output_name));
    let wasm = wasm_file(project, bundle);
    fs::rename(&emitted, &wasm).map_err(|error| {
        fail(format!("cannot rename {} to {}: {error}", emitted.display(), wasm.display()))
    })?;
    eprintln!("==> {step} done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Classes of wasm-streams that leptos's server functions hand to JavaScript for streaming
/// bodies. Leptos always builds the browser side of server functions; this app has none, so its
/// module never makes one of these objects, yet wasm-bindgen exports their methods, and the
/// exports kept their code (and what it calls) in the module: 5 KB, 1.6 KB brotli as served.
const UNCREATED_CLASSES: [&str; 3] =
    ["IntoUnderlyingSource", "IntoUnderlyingByteSource", "IntoUnderlyingSink"];

/// Removes the exports of [`UNCREATED_CLASSES`] from the module (`wasm-opt` then drops their
/// code), unless the JavaScript makes one of them out of a Rust value (`Class.__wrap(`): then
/// the module does create them and they stay. The JavaScript classes stay too; their methods
/// would fail, but nothing constructs them.
fn drop_uncreated_classes(output: &mut wasm_bindgen_cli_support::Output) {
    let classes: Vec<String> = UNCREATED_CLASSES
        .iter()
        .filter(|class| !output.js().contains(&format!("{class}.__wrap(")))
        .map(|class| class.to_lowercase())
        .collect();
    let module = output.wasm_mut();
    let dropped: Vec<_> = module
        .exports
        .iter()
        .filter(|export| classes.iter().any(|class| exported_by(&export.name, class)))
        .map(|export| export.id())
        .collect();
    for id in dropped {
        module.exports.delete(id);
    }
}

/// True when `name` is an export wasm-bindgen makes for the class `class` (lowercase): its
/// methods (`class_method`) and its destructor (`__wbg_class_free`).
fn exported_by(name: &str, class: &str) -> bool {
    let unprefixed = name.strip_prefix("__wbg_").unwrap_or(name);
    unprefixed.strip_prefix(class).is_some_and(|rest| rest.starts_with('_'))
}

/// A bundle's module as the server serves it.
pub fn wasm_file(project: &Project, bundle: &Bundle) -> PathBuf {
    bundle.pkg_dir.join(format!("{}.wasm", project.output_name))
}

/// Shrinks the release module with binaryen's `wasm-opt -Oz`, as cargo-leptos does.
pub fn optimize(project: &Project, bundle: &Bundle) -> Result<(), StepError> {
    let step = "optimise the wasm module (wasm-opt -Oz)";
    let wasm_opt = find_wasm_opt(project).map_err(|cause| {
        StepError::new(
            step,
            cause,
            "install npm's binaryen: `npm ci` in end2end/ (./scripts/run.sh does it)",
        )
    })?;
    let wasm = wasm_file(project, bundle);
    let mut command = Command::new(&wasm_opt);
    command.args(["-Oz", "--enable-bulk-memory"]).arg(&wasm).arg("-o").arg(&wasm);
    step::run(
        step,
        command,
        "the wasm module may be malformed: rebuild it (`cargo xtask build --release`)",
    )
}

/// `wasm-opt` from end2end/'s npm packages, else from PATH, refused if too old.
fn find_wasm_opt(project: &Project) -> Result<PathBuf, String> {
    let local = project.root.join("end2end/node_modules/.bin/wasm-opt");
    let program = if local.is_file() { local } else { PathBuf::from("wasm-opt") };
    let output = Command::new(&program)
        .arg("--version")
        .output()
        .map_err(|error| format!("cannot run {}: {error}", program.display()))?;
    let text = String::from_utf8_lossy(&output.stdout);
    match parse_wasm_opt_version(&text) {
        Some(version) if version >= WASM_OPT_VERSION_MIN => Ok(program),
        Some(version) => Err(format!(
            "{} is binaryen {version}; versions before {WASM_OPT_VERSION_MIN} break the bundle",
            program.display()
        )),
        None => Err(format!("{} printed no version ({:?})", program.display(), text.trim())),
    }
}

/// `wasm-opt version 132 (version_132)` → 132.
fn parse_wasm_opt_version(text: &str) -> Option<u32> {
    let rest = text.trim().strip_prefix("wasm-opt version ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The bundle's files that are sent compressed.
const COMPRESSED_EXTENSIONS: [&str; 3] = ["wasm", "js", "css"];

/// Writes `<file>.br` and `<file>.gz` beside each of the bundle's files (release), which the
/// server's static handler sends to a browser that accepts them; a development build removes
/// them instead, so a stale compressed copy is never served in place of a fresh file.
pub fn precompress(project: &Project, release: bool) -> Result<(), StepError> {
    let step = "compress the bundle (brotli, gzip)";
    let fail = |cause: String| StepError::new(step, cause, "check the disk has room and retry");
    let started = std::time::Instant::now();
    let mut files = Vec::new();
    for bundle in project.bundles() {
        // A page's bundle directory is missing before its first build: nothing to compress.
        let Ok(entries) = fs::read_dir(&bundle.pkg_dir) else { continue };
        for entry in entries {
            files.push(entry.map_err(|error| fail(error.to_string()))?.path());
        }
    }
    for path in files {
        let wanted = path
            .extension()
            .and_then(|extension| extension.to_str())
            .is_some_and(|extension| COMPRESSED_EXTENSIONS.contains(&extension));
        if !wanted {
            continue;
        }
        for suffix in ["br", "gz"] {
            let _ = fs::remove_file(sibling(&path, suffix));
        }
        if !release {
            continue;
        }
        let bytes =
            fs::read(&path).map_err(|error| fail(format!("{}: {error}", path.display())))?;
        for (suffix, compressed) in [("br", brotli_bytes(&bytes)), ("gz", gzip_bytes(&bytes))] {
            let target = sibling(&path, suffix);
            let compressed =
                compressed.map_err(|error| fail(format!("{}: {error}", target.display())))?;
            fs::write(&target, compressed)
                .map_err(|error| fail(format!("cannot write {}: {error}", target.display())))?;
        }
    }
    if release {
        println!("==> {step} done in {:.1} s", started.elapsed().as_secs_f64());
    }
    Ok(())
}

/// `file.wasm` → `file.wasm.br`.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}

fn brotli_bytes(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let params = brotli::enc::BrotliEncoderParams { quality: 11, lgwin: 22, ..Default::default() };
    brotli::BrotliCompress(&mut &bytes[..], &mut out, &params)?;
    Ok(out)
}

fn gzip_bytes(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes)?;
    encoder.finish()
}

/// Copies the stylesheet to `pkg/<name>.css` and the assets to the site's root.
pub fn style_and_assets(project: &Project) -> Result<(), StepError> {
    let step = "copy the stylesheet and the assets";
    let hint = "check the paths in [workspace.metadata.leptos] of Cargo.toml";
    let fail = |error: String| StepError::new(step, error, hint);
    fs::create_dir_all(project.pkg_dir())
        .map_err(|error| fail(format!("cannot create {}: {error}", project.pkg_dir().display())))?;
    if let Some(style) = &project.style_file {
        let destination = project.pkg_dir().join(format!("{}.css", project.output_name));
        fs::copy(style, &destination).map_err(|error| {
            fail(format!("cannot copy {} to {}: {error}", style.display(), destination.display()))
        })?;
    }
    if let Some(assets) = &project.assets_dir {
        copy_tree(assets, &project.site_root).map_err(fail)?;
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    let entries =
        fs::read_dir(from).map_err(|error| format!("cannot read {}: {error}", from.display()))?;
    fs::create_dir_all(to).map_err(|error| format!("cannot create {}: {error}", to.display()))?;
    for entry in entries {
        let entry = entry.map_err(|error| format!("cannot read {}: {error}", from.display()))?;
        let source = entry.path();
        let destination = to.join(entry.file_name());
        if source.is_dir() {
            copy_tree(&source, &destination)?;
        } else {
            fs::copy(&source, &destination)
                .map_err(|error| format!("cannot copy {}: {error}", source.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_classes_own_exports_are_its_own() {
        let cases = [
            ("intounderlyingsource_pull", "intounderlyingsource", true),
            ("__wbg_intounderlyingsource_free", "intounderlyingsource", true),
            ("intounderlyingbytesource_pull", "intounderlyingsource", false),
            ("intounderlyingbytesource_pull", "intounderlyingbytesource", true),
            ("intounderlyingsourcex_pull", "intounderlyingsource", false),
            ("intounderlyingsource", "intounderlyingsource", false),
            ("LiveLines_456350af280a577b", "intounderlyingsource", false),
            ("__wbindgen_malloc", "intounderlyingsink", false),
        ];
        for (name, class, expected) in cases {
            assert_eq!(exported_by(name, class), expected, "{name} of {class}");
        }
    }

    #[test]
    fn compressed_copies_decompress_to_the_file() {
        use std::io::Read;
        let text = "(module (func $f (result i32) i32.const 42))".repeat(200);
        let bytes = text.as_bytes();
        let mut unbrotli = Vec::new();
        let compressed = brotli_bytes(bytes).unwrap();
        assert!(compressed.len() < bytes.len() / 10);
        brotli::BrotliDecompress(&mut &compressed[..], &mut unbrotli).unwrap();
        assert_eq!(unbrotli, bytes);
        let mut ungzip = Vec::new();
        flate2::read::GzDecoder::new(&gzip_bytes(bytes).unwrap()[..])
            .read_to_end(&mut ungzip)
            .unwrap();
        assert_eq!(ungzip, bytes);
        assert_eq!(sibling(Path::new("pkg/app.wasm"), "br"), PathBuf::from("pkg/app.wasm.br"));
    }

    #[test]
    fn reads_wasm_opt_versions() {
        let cases = [
            ("wasm-opt version 132 (version_132)\n", Some(132)),
            ("wasm-opt version 108", Some(108)),
            ("wasm-opt version 116-beta", Some(116)),
            ("binaryen 132", None),
            ("", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_wasm_opt_version(text), expected, "{text:?}");
        }
    }

    #[test]
    fn copies_nested_assets() {
        let root = std::env::temp_dir().join(format!("xtask-assets-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("from/icons")).unwrap();
        fs::write(root.join("from/favicon.svg"), "<svg/>").unwrap();
        fs::write(root.join("from/icons/a.png"), [1, 2, 3]).unwrap();
        copy_tree(&root.join("from"), &root.join("to")).unwrap();
        assert_eq!(fs::read(root.join("to/favicon.svg")).unwrap(), b"<svg/>");
        assert_eq!(fs::read(root.join("to/icons/a.png")).unwrap(), [1, 2, 3]);
        let missing = copy_tree(&root.join("nowhere"), &root.join("to")).unwrap_err();
        assert!(missing.contains("cannot read"), "{missing}");
        fs::remove_dir_all(&root).unwrap();
    }
}
