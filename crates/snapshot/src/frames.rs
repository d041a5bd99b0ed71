//! What a stack frame's file says of it: Python source or native code, PyTorch's own (or the
//! standard library's) or the user's, and its path as the reports print it. Shared by the
//! analysis ([`super::analyze`]) and the owners ([`super::owner`]), which read stacks alike.

/// Whether a frame is Python source (else it is native code: a library, the interpreter).
pub fn is_python(filename: &str) -> bool {
    filename.ends_with(".py") || filename.starts_with("<frozen")
}

/// Whether a frame belongs to PyTorch, native code or the Python standard library.
pub fn is_internal(filename: &str) -> bool {
    !is_python(filename)
        || filename.starts_with("<frozen")
        || filename.starts_with("torch/")
        || filename.contains("/torch/")
        || (filename.contains("/lib/python3") && !filename.contains("-packages/"))
}

/// `filename` shortened to start at `pithtrain/` or after `site-packages/`.
pub fn short_path(filename: &str) -> &str {
    if let Some(i) = filename.rfind("pithtrain/") {
        return &filename[i..];
    }
    for marker in ["site-packages/", "dist-packages/"] {
        if let Some(i) = filename.rfind(marker) {
            return &filename[i + marker.len()..];
        }
    }
    filename
}
