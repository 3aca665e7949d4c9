//! The module graph of a crate, drawn from its own source: each file a node, each path it names
//! (in `use` statements and in code) an arrow to the file that defines the item — through
//! `pub use` re-exports to where the item lives. Then the circles (strongly connected files)
//! and the arrows that go up the crate's floors ([`Floors`]).
//!
//! `cargo xtask deps` checks `server` and `app` against `xtask/deps-known.txt`, the circles and
//! upward arrows that exist and are being taken apart: a new one (a circle not inside a known
//! one, an upward arrow not listed) fails the check; `--write` rewrites the list (its diff is
//! what a reviewer reads). Pure but for [`read_crate`].

mod check;
mod parse;
#[cfg(test)]
mod tests;

pub use check::{check, print};

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A crate's files: path relative to its `src/` (`agent/run.rs`) and text.
pub type Files = Vec<(String, String)>;

/// The module path of a file (`agent/run.rs` → `agent::run`, `agent/mod.rs` → `agent`,
/// `lib.rs` → the crate root, empty). `None` for a file that is not a module of the library
/// (`main.rs`, a binary).
pub fn module_of(file: &str) -> Option<Vec<String>> {
    let stem = file.strip_suffix(".rs")?;
    if stem == "main" || stem.starts_with("bin/") {
        return None;
    }
    if stem == "lib" {
        return Some(Vec::new());
    }
    let mut segments: Vec<String> = stem.split('/').map(str::to_owned).collect();
    if segments.last().is_some_and(|last| last == "mod") {
        segments.pop();
    }
    Some(segments)
}

/// The graph: nodes are files, arrows from a file to the files whose items it names.
#[derive(Debug, Default)]
pub struct Graph {
    pub arrows: BTreeMap<String, BTreeSet<String>>,
}

/// The graph of `files` (one crate's library).
pub fn graph(files: &Files) -> Graph {
    let mut modules: BTreeMap<Vec<String>, String> = BTreeMap::new();
    for (file, _) in files {
        if let Some(module) = module_of(file) {
            modules.insert(module, file.clone());
        }
    }
    let mut uses: BTreeMap<String, Vec<parse::UsePath>> = BTreeMap::new();
    let mut codes: BTreeMap<String, String> = BTreeMap::new();
    for (file, text) in files {
        let code = parse::code_only(text);
        uses.insert(file.clone(), parse::use_paths(&code));
        codes.insert(file.clone(), code);
    }
    let resolver = Resolver { modules: &modules, uses: &uses };
    let mut graph = Graph::default();
    for (file, _) in files {
        let Some(here) = module_of(file) else {
            continue;
        };
        let targets = graph.arrows.entry(file.clone()).or_default();
        let used = &uses[file];
        let code = &codes[file];
        let inline = parse::inline_modules(code);
        let depth = |at: usize| inline.iter().filter(|range| range.contains(&at)).count();
        let mut named: Vec<Vec<String>> =
            used.iter().map(|u| parse::out_of_inline(&u.segments, depth(u.at))).collect();
        // Paths in code: absolute (`crate::`), relative (`super::`, `self::`, a child module), or
        // through a name a `use` bound (`store::open` after `use crate::store;`).
        for (at, path) in parse::code_paths(code) {
            let path = parse::out_of_inline(&path, depth(at));
            let first = &path[0];
            if matches!(first.as_str(), "crate" | "super" | "self")
                || modules.contains_key(&[here.clone(), vec![first.clone()]].concat())
            {
                named.push(path);
            } else if let Some(bound) = used.iter().find(|u| &u.bound == first) {
                let mut expanded = parse::out_of_inline(&bound.segments, depth(bound.at));
                expanded.extend(path[1..].iter().cloned());
                named.push(expanded);
            }
        }
        for path in named {
            let Some(absolute) = absolute(&here, &path, &modules) else {
                continue;
            };
            if let Some(target) = resolver.resolve(&absolute, 0) {
                if target != *file {
                    targets.insert(target);
                }
            }
        }
    }
    graph
}

/// `path` as named in the module `here`, made absolute (without `crate`); `None` for another
/// crate's path.
fn absolute(
    here: &[String],
    path: &[String],
    modules: &BTreeMap<Vec<String>, String>,
) -> Option<Vec<String>> {
    let mut base: Vec<String> = here.to_vec();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        Some(first) => {
            // A child module of this one (2018 paths), else another crate's.
            let child = [here.to_vec(), vec![first.to_owned()]].concat();
            if !modules.contains_key(&child) {
                return None;
            }
        }
        None => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

struct Resolver<'a> {
    modules: &'a BTreeMap<Vec<String>, String>,
    uses: &'a BTreeMap<String, Vec<parse::UsePath>>,
}

impl Resolver<'_> {
    /// The file that defines the item at `path`: the deepest module on the path, or — when the
    /// next name is one that module re-exports — where the re-export leads. `None` for a path
    /// that names a module and nothing in it.
    fn resolve(&self, path: &[String], depth: usize) -> Option<String> {
        let (length, file) = (0..=path.len())
            .rev()
            .find_map(|length| self.modules.get(&path[..length]).map(|file| (length, file)))?;
        let Some(name) = path.get(length) else {
            // A path that names a module (`use crate::store;`) is no arrow: what the file then
            // names through it (`store::open`) is. Unless the parent re-exports an item of the
            // same name (a function `open` beside a module `open`): then it is that item.
            let (last, parent) = path.split_last()?;
            let parent_file = self.modules.get(parent)?;
            let exported = self.uses[parent_file]
                .iter()
                .find(|u| u.public && &u.bound == last && u.segments.last() == Some(last))?;
            let target = absolute(parent, &exported.segments, self.modules)?;
            return (target != path && depth < 8)
                .then(|| self.resolve(&target, depth + 1))
                .flatten();
        };
        if depth < 8 {
            let module = &path[..length];
            let exported = self.uses[file].iter().find(|u| u.public && &u.bound == name);
            if let Some(exported) = exported {
                if let Some(mut target) = absolute(module, &exported.segments, self.modules) {
                    target.extend(path[length + 1..].iter().cloned());
                    return self.resolve(&target, depth + 1);
                }
            }
        }
        Some(file.clone())
    }
}

/// The circles: sets of two or more files each reachable from the others (Tarjan's strongly
/// connected components), each sorted, in order.
pub fn circles(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a str) {
        let next = state.index.len();
        state.index.insert(node, next);
        state.low.insert(node, next);
        state.stack.push(node);
        state.on_stack.insert(node);
        let targets = state.graph.arrows.get(node).into_iter().flatten();
        for target in targets {
            let target = target.as_str();
            if !state.index.contains_key(target) {
                visit(state, target);
                let low = state.low[node].min(state.low[target]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(target) {
                let low = state.low[node].min(state.index[target]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(member) = state.stack.pop() {
                state.on_stack.remove(member);
                component.push(member.to_owned());
                if member == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.arrows.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.found.sort();
    state.found
}

/// A crate's floors, top first: each a list of top-level modules (`http`, `state` …; the crate
/// root `lib.rs` is ""). A file may name files on its own floor or below, never above.
pub struct Floors(pub &'static [&'static [&'static str]]);

impl Floors {
    fn floor_of(&self, file: &str) -> Option<usize> {
        let top = module_of(file)?.first().cloned().unwrap_or_default();
        self.0.iter().position(|floor| floor.contains(&top.as_str()))
    }

    /// The arrows of `graph` that go up a floor, as `from -> to`.
    pub fn upward(&self, graph: &Graph) -> Vec<String> {
        let mut found = Vec::new();
        for (from, targets) in &graph.arrows {
            for to in targets {
                if let (Some(a), Some(b)) = (self.floor_of(from), self.floor_of(to)) {
                    if b < a {
                        found.push(format!("{from} -> {to}"));
                    }
                }
            }
        }
        found
    }

    /// Top-level modules of `graph` no floor names (each must have one).
    pub fn unplaced(&self, graph: &Graph) -> BTreeSet<String> {
        graph
            .arrows
            .keys()
            .filter(|file| self.floor_of(file).is_none())
            .filter_map(|file| module_of(file)?.first().cloned())
            .collect()
    }
}

/// What a check found, as the lines of `deps-known.txt`: `circle <crate>: a.rs b.rs …` and
/// `up <crate>: from.rs -> to.rs`.
pub fn report(crate_name: &str, graph: &Graph, floors: &Floors) -> Vec<String> {
    let mut lines: Vec<String> = circles(graph)
        .into_iter()
        .map(|circle| format!("circle {crate_name}: {}", circle.join(" ")))
        .collect();
    lines.extend(floors.upward(graph).into_iter().map(|arrow| format!("up {crate_name}: {arrow}")));
    lines
}

/// The lines of `found` that `known` does not allow: a circle must lie within a known circle of
/// the same crate, an upward arrow must be listed.
pub fn new_findings(found: &[String], known: &[String]) -> Vec<String> {
    let members = |line: &str| -> Option<(String, BTreeSet<String>)> {
        let (head, files) = line.split_once(": ")?;
        let crate_name = head.strip_prefix("circle ")?;
        Some((crate_name.to_owned(), files.split(' ').map(str::to_owned).collect()))
    };
    found
        .iter()
        .filter(|line| {
            if let Some((crate_name, files)) = members(line) {
                !known.iter().filter_map(|k| members(k)).any(|(known_crate, known_files)| {
                    known_crate == crate_name && files.is_subset(&known_files)
                })
            } else {
                !known.contains(line)
            }
        })
        .cloned()
        .collect()
}

/// A crate's `.rs` files under `src`, relative paths with `/`.
pub fn read_crate(src: &Path) -> std::io::Result<Files> {
    fn walk(root: &Path, dir: &Path, out: &mut Files) -> std::io::Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|entry| entry.path());
        for entry in entries {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out)?;
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let relative = path
                    .strip_prefix(root)
                    .map_err(std::io::Error::other)?
                    .to_string_lossy()
                    .replace('\\', "/");
                out.push((relative, std::fs::read_to_string(&path)?));
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(src, src, &mut files)?;
    Ok(files)
}
