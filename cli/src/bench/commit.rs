//! The commit a checkout holds, marked when its tracked files have changes
//! not committed. Shared by the build script (the commit the binary is built
//! from) and run_info (the commit of the checkout a run starts in).

/// `git` runs git with the given arguments in the checkout and returns its
/// trimmed output, or `None` when git fails (no checkout, no git).
pub(crate) fn describe(git: impl Fn(&[&str]) -> Option<String>) -> Option<String> {
    let head = git(&["rev-parse", "HEAD"]).filter(|h| !h.is_empty())?;
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head} (uncommitted changes)") } else { head })
}
